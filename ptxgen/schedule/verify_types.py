"""Type checks of every Gemm, Epilogue and Schedule field, run before any other rule.

Python would take `frag_double_buffer="no"` as true and `lda=0` as dense; these checks make every
field say what it is: ints are ints (numpy integers are turned into ints on construction; bool
is not a size), bools are bools, strings come from their choice lists. Each failure names the
field, the value, the expected type and a fix.
"""
from __future__ import annotations

from .problem import ACTIVATIONS, INPUT_DTYPES, LAYOUTS, OUTPUT_DTYPES, VECTOR_KINDS, Epilogue, Gemm
from .schedule import DECOMPOSITIONS, INSTRUCTIONS, RASTERS, SMEM_LAYOUTS, SPLIT_K_MODES, Schedule
from .targets import TARGETS
from ..errors import ScheduleError, ScheduleTypeError

ACC_DTYPES = ("f32", "f16", "s32")


def _type_name(value: object) -> str:
    return type(value).__name__


def choice(field: str, value: object, options: tuple[str, ...], optional: bool = False) -> None:
    """A string from `options` (or None where `optional`)."""
    if value is None and optional:
        return
    listed = ", ".join(map(repr, options)) + (" or None" if optional else "")
    if not isinstance(value, str):
        raise ScheduleTypeError(field, value, f"must be a string, one of {listed}, not {_type_name(value)}",
                                f"set {field} to one of them")
    if value not in options:
        raise ScheduleError(field, value, f"must be one of {listed}", f"set {field} to one of them")


def integer(field: str, value: object, optional: bool = False, example: int = 64, fix: str = "") -> None:
    """A Python int >= 1 (numpy integers became ints on construction), or None where `optional`."""
    if value is None and optional:
        return
    short = field.split(".")[-1]
    if isinstance(value, bool) or not isinstance(value, int):
        why = " (bool is not a number here)" if isinstance(value, bool) else ""
        raise ScheduleTypeError(field, value, f"must be an int{' or None' if optional else ''}, not "
                                f"{_type_name(value)}{why}", fix or f"write {short}={example} (a Python or numpy "
                                "integer)" + (", or None" if optional else ""))
    if value < 1:
        dense = " (None, not 0, means dense)" if short in ("lda", "ldb", "ldc") else ""
        raise ScheduleError(field, value, f"must be a positive integer{dense}", f"give {short} a value >= 1"
                            + (", or None for a dense matrix" if dense else ""))


def boolean(field: str, value: object, optional: bool = False) -> None:
    """True or False (numpy bools became bools), or None where `optional`: "no" or 0 is not a bool."""
    if isinstance(value, bool) or (value is None and optional):
        return
    raise ScheduleTypeError(field, value, f"must be {'True, False or None' if optional else 'True or False'}, not "
                            f"{_type_name(value)}", f"write {field.split('.')[-1]}=True or False"
                            + (" (None lets ptxgen choose)" if optional else ""))


def int_tuple(field: str, value: object, names: tuple[str, ...], example: tuple[int, ...]) -> None:
    """A tuple (list or array on construction) of len(names) positive ints."""
    short = field.split(".")[-1]
    if not isinstance(value, tuple):
        raise ScheduleTypeError(field, value, f"must be a tuple ({', '.join(names)}) of ints, not "
                                f"{_type_name(value)}", f"write e.g. {short}={example}")
    if len(value) != len(names):
        raise ScheduleError(field, value, f"must be a tuple ({', '.join(names)})", f"write e.g. {short}={example}")
    for name, v in zip(names, value):
        integer(f"{field}.{name}", v, fix=f"write {short} as ints, e.g. {short}={example}")


def check_arguments(caller: str, gemm: object, schedule: object, arch: object) -> None:
    """compile/verify(gemm, schedule, arch): each argument of its type, swapped ones named as such."""
    swapped = isinstance(gemm, Schedule) and isinstance(schedule, Gemm)
    hint = f"; did you swap them? write {caller}(gemm, schedule)" if swapped else ""
    if not isinstance(gemm, Gemm):
        raise TypeError(f"{caller}(gemm, schedule, arch): the first argument must be a ptxgen.Gemm, got "
                        f"{_type_name(gemm)}{hint}")
    if not isinstance(schedule, Schedule):
        raise TypeError(f"{caller}(gemm, schedule, arch): the second argument must be a ptxgen.Schedule, got "
                        f"{_type_name(schedule)}{hint}")
    if not isinstance(arch, str):
        raise TypeError(f"{caller}(gemm, schedule, arch): arch must be a string, one of {', '.join(TARGETS)}, "
                        f"got {_type_name(arch)}")


def verify_types(g: Gemm, s: Schedule) -> None:
    """Every field's type (and each string's choice list); ranges are the verifier's other rules."""
    for f in ("m", "n", "k", "batch"):
        integer(f"gemm.{f}", getattr(g, f), example=1 if f == "batch" else 64)
    choice("gemm.dtype", g.dtype, INPUT_DTYPES)
    choice("gemm.out_dtype", g.out_dtype, OUTPUT_DTYPES)
    choice("gemm.a_layout", g.a_layout, LAYOUTS)
    choice("gemm.b_layout", g.b_layout, LAYOUTS)
    choice("gemm.acc_dtype", g.acc_dtype, ACC_DTYPES)
    for f in ("lda", "ldb", "ldc"):
        integer(f"gemm.{f}", getattr(g, f), optional=True, example=72)
    integer("gemm.align", g.align, optional=True, example=16)
    if g.epilogue is not None and not isinstance(g.epilogue, Epilogue):
        raise ScheduleTypeError("gemm.epilogue", g.epilogue, f"must be a ptxgen.Epilogue or None, not "
                                f"{_type_name(g.epilogue)}", "pass epilogue=Epilogue(alpha=..., bias=..., ...)")
    e = g.epi
    for name in ("alpha", "beta"):
        v = getattr(e, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ScheduleTypeError(f"epilogue.{name}", v, f"must be a number (int or float), not {_type_name(v)}",
                                    f"write {name}=1.0 (a Python or numpy float)")
    choice("epilogue.bias", e.bias, VECTOR_KINDS, optional=True)
    choice("epilogue.scale", e.scale, VECTOR_KINDS, optional=True)
    choice("epilogue.activation", e.activation, ACTIVATIONS, optional=True)
    int_tuple("schedule.block", s.block, ("BM", "BN", "BK"), (128, 128, 32))
    int_tuple("schedule.warps", s.warps, ("WM", "WN"), (2, 2))
    choice("schedule.instruction", s.instruction, tuple(INSTRUCTIONS))
    for f in ("stages", "group_m", "split_k"):
        integer(f"schedule.{f}", getattr(s, f), example={"stages": 3, "group_m": 8, "split_k": 2}[f])
    choice("schedule.smem_layout", s.smem_layout, SMEM_LAYOUTS)
    choice("schedule.raster", s.raster, RASTERS)
    boolean("schedule.frag_double_buffer", s.frag_double_buffer)
    choice("schedule.split_k_mode", s.split_k_mode, SPLIT_K_MODES)
    boolean("schedule.epilogue_via_smem", s.epilogue_via_smem, optional=True)
    choice("schedule.decomposition", s.decomposition, DECOMPOSITIONS)
    integer("schedule.sms", s.sms, optional=True, example=108)
    if s.options is not None:  # the target's own fields (whether they may be set is its pairing check's)
        check = getattr(s.options, "verify_types", None)
        if check is None:
            raise ScheduleTypeError("schedule.options", s.options, "must be a target's options object "
                                    f"(e.g. targets.sm90.options.Sm90Options), not {_type_name(s.options)}",
                                    "leave options None and give the target's fields by name (consumers=2)")
        check()
