"""numpy scalars -> Python scalars for the Gemm, Epilogue and Schedule fields.

Shapes and factors often come from numpy (`a.shape[0]` of a computed size, `np.float32(2)`), so
the dataclasses accept numpy integers, floats, bools and strings and keep the Python value: fields
then compare, hash, print and reach the PTX exactly as if written by hand. Nothing else is
converted: a wrong type stays as given, for the verifier to name (`verify_types`).
"""
from __future__ import annotations

import numpy as np


def plain(value: object) -> object:
    """The Python int/float/bool/str of a numpy scalar; any other value unchanged."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.str_):
        return str(value)
    return value


def plain_tuple(value: object) -> object:
    """A list, tuple or 1-D array as a tuple of plain scalars (block=[128, 128, 32] is fine too);
    any other value unchanged."""
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1):
        return tuple(plain(v) for v in value)
    return value


def normalise(obj: object, scalars: tuple[str, ...] = (), tuples: tuple[str, ...] = ()) -> None:
    """Replace the named fields of a frozen dataclass by their plain values (in __post_init__)."""
    for name in scalars:
        object.__setattr__(obj, name, plain(getattr(obj, name)))
    for name in tuples:
        object.__setattr__(obj, name, plain_tuple(getattr(obj, name)))
