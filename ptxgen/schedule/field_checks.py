"""The checks one field of a Gemm, Epilogue or Schedule must pass on its own, run when the object
is built (so `Gemm(m=-1)` fails on that line, not at `compile`) and again by the verifier.

Each failure is a ScheduleError (a ScheduleTypeError for a wrong type) naming the field, the
value, the rule and a fix written for the value given: `m=256.0` is told to write `m=256`.
This module imports no problem or schedule type, so both can call it from `__post_init__`.
"""
from __future__ import annotations

from ..errors import ScheduleError, ScheduleTypeError


def type_name(value: object) -> str:
    return type(value).__name__


def choice(field: str, value: object, options: tuple[str, ...], optional: bool = False, fix: str = "") -> None:
    """A string from `options` (or None where `optional`)."""
    if value is None and optional:
        return
    listed = ", ".join(map(repr, options)) + (" or None" if optional else "")
    short = field.split(".")[-1]
    fix = fix or (f"set {field} to one of them, e.g. {short}={options[0]!r}" + (", or leave it None" if optional else ""))
    if not isinstance(value, str):
        raise ScheduleTypeError(field, value, f"must be a string, one of {listed}, not {type_name(value)}", fix)
    if value not in options:
        raise ScheduleError(field, value, f"must be one of {listed}", fix)


def _integer_fix(short: str, value: object, example: int, optional: bool) -> str:
    """The fix for a non-int: the same number written as an int where the value is one."""
    if _is_whole(value):
        return f"write {short}={int(value)}"
    if isinstance(value, float) and value > 1 and value == value and value != float("inf"):
        return f"write a whole number, {short}={int(value)} or {short}={int(value) + 1}"
    return f"write {short}={example} (a Python or numpy integer)" + (", or None" if optional else "")


def integer(field: str, value: object, optional: bool = False, example: int = 64, fix: str = "") -> None:
    """A Python int >= 1 (numpy integers became ints on construction), or None where `optional`."""
    if value is None and optional:
        return
    short = field.split(".")[-1]
    if isinstance(value, bool) or not isinstance(value, int):
        why = " (bool is not a number here)" if isinstance(value, bool) else ""
        raise ScheduleTypeError(field, value, f"must be an int{' or None' if optional else ''}, not "
                                f"{type_name(value)}{why}", fix or _integer_fix(short, value, example, optional))
    if value < 1:
        dense = " (None, not 0, means dense)" if short in ("lda", "ldb", "ldc") else ""
        raise ScheduleError(field, value, f"must be a positive integer{dense}", f"give {short} a value >= 1, e.g. "
                            f"{short}={example}" + (", or None for a dense matrix" if dense else ""))


def boolean(field: str, value: object, optional: bool = False) -> None:
    """True or False (numpy bools became bools), or None where `optional`: "no" or 0 is not a bool."""
    if isinstance(value, bool) or (value is None and optional):
        return
    raise ScheduleTypeError(field, value, f"must be {'True, False or None' if optional else 'True or False'}, not "
                            f"{type_name(value)}", f"write {field.split('.')[-1]}=True or False"
                            + (" (None lets ptxgen choose)" if optional else ""))


def int_tuple(field: str, value: object, names: tuple[str, ...], example: tuple[int, ...]) -> None:
    """A tuple (list or array on construction) of len(names) positive ints."""
    short = field.split(".")[-1]
    if not isinstance(value, tuple):
        raise ScheduleTypeError(field, value, f"must be a tuple ({', '.join(names)}) of ints, not "
                                f"{type_name(value)}", f"write e.g. {short}={example}")
    if len(value) != len(names):
        given = [v for v in value if isinstance(v, int) and not isinstance(v, bool)][:len(names)]
        # keep what was given and complete it from the example: block=(128, 128) -> (128, 128, 32)
        suggestion = tuple(given) + tuple(example[len(given):]) if len(given) == len(value) else example
        raise ScheduleError(field, value, f"must be a tuple of {len(names)} ints ({', '.join(names)}), not "
                            f"{len(value)}", f"write e.g. {short}={suggestion}")
    as_ints = tuple(int(v) if _is_whole(v) else v for v in value)
    fixed = as_ints if all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in as_ints) else example
    for name, v in zip(names, value):
        integer(f"{field}.{name}", v, fix=f"write {short} as ints, e.g. {short}={fixed}")


def _is_whole(v: object) -> bool:
    """A float or digit string that names a positive int (256.0, "256")."""
    return ((isinstance(v, float) and v.is_integer() and v >= 1)
            or (isinstance(v, str) and v.strip().isdigit() and int(v) >= 1))


def number(field: str, value: object, example: float = 1.0) -> None:
    """An int or float (numpy floats became floats on construction); not bool, str or complex."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        short = field.split(".")[-1]
        try:
            fix = f"write {short}={float(value)}" if isinstance(value, str) else ""
        except ValueError:
            fix = ""
        raise ScheduleTypeError(field, value, f"must be a number (int or float), not {type_name(value)}",
                                fix or f"write {short}={example} (a Python or numpy float)")
