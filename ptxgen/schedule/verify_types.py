"""Type checks of every Gemm, Epilogue and Schedule field, run before any other rule.

Python would take `frag_double_buffer="no"` as true and `lda=0` as dense; these checks make every
field say what it is: ints are ints (numpy integers are turned into ints on construction; bool
is not a size), bools are bools, strings come from their choice lists. Each failure names the
field, the value, the expected type and a fix.
"""
from __future__ import annotations

from ..errors import ScheduleTypeError
from .field_checks import boolean, choice, int_tuple, integer, type_name as _type_name  # noqa: F401
from .problem import ACC_DTYPES, Gemm, check_epilogue, check_gemm  # noqa: F401
from .schedule import Schedule, check_schedule
from .targets import TARGETS


def check_arguments(caller: str, gemm: object, schedule: object, arch: object) -> None:
    """compile/verify(gemm, schedule, arch): each argument of its type, swapped ones named as such."""
    swapped = isinstance(gemm, Schedule) and isinstance(schedule, Gemm)
    hint = f"; did you swap them? write {caller}(gemm, schedule)" if swapped else ""
    if not isinstance(gemm, Gemm):
        raise TypeError(f"{caller}(gemm, schedule, arch): the first argument must be a ptxgen.Gemm, got "
                        f"{_type_name(gemm)}{hint}")
    if isinstance(schedule, str) and not isinstance(gemm, Schedule):
        arch_hint = (f"; to name the arch, write {caller}(gemm, arch={schedule!r})" if caller == "compile"
                     else f"; to name the arch, write {caller}(gemm, schedule, arch={schedule!r})")
        raise TypeError(f"{caller}(gemm, schedule, arch): the second argument must be a ptxgen.Schedule"
                        f"{' or None' if caller == 'compile' else ''}, got the string {schedule!r}{arch_hint}")
    if not isinstance(schedule, Schedule):
        raise TypeError(f"{caller}(gemm, schedule, arch): the second argument must be a ptxgen.Schedule, got "
                        f"{_type_name(schedule)}{hint}")
    if not isinstance(arch, str):
        raise TypeError(f"{caller}(gemm, schedule, arch): arch must be a string, one of {', '.join(TARGETS)}, "
                        f"got {_type_name(arch)}")


def verify_types(g: Gemm, s: Schedule) -> None:
    """Every field's type (and each string's choice list), as on construction (an object changed
    since, with object.__setattr__, is caught here too); ranges are the verifier's other rules."""
    check_gemm(g)
    check_epilogue(g.epi)
    check_schedule(s)
    if s.options is not None:  # the target's own fields (whether they may be set is its pairing check's)
        check = getattr(s.options, "verify_types", None)
        if check is None:
            raise ScheduleTypeError("schedule.options", s.options, "must be a target's options object "
                                    f"(e.g. targets.sm90.options.Sm90Options), not {_type_name(s.options)}",
                                    "leave options None and give the target's fields by name (consumers=2)")
        check()
