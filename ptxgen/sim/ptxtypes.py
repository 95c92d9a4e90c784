"""PTX scalar types: their widths, the numpy dtype each is viewed as, and immediate encoding.

Registers are stored as unsigned bit containers of their declared width (bool for .pred); an
instruction views them through the dtype of its own type, which costs nothing in numpy.
"""
from __future__ import annotations

import numpy as np

from .errors import Fault

TYPE_BITS: dict[str, int] = {
    "pred": 1,
    "b8": 8, "u8": 8, "s8": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64,
}

# dtype an instruction of this type computes in (16-bit floats stay as raw bits)
VIEW_DTYPE: dict[str, type] = {
    "pred": np.bool_,
    "b8": np.uint8, "u8": np.uint8, "s8": np.int8,
    "b16": np.uint16, "u16": np.uint16, "s16": np.int16, "f16": np.uint16, "bf16": np.uint16,
    "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32,
    "f16x2": np.uint32, "bf16x2": np.uint32, "tf32": np.uint32,
    "b64": np.uint64, "u64": np.uint64, "s64": np.int64, "f64": np.float64,
}

STORAGE_DTYPE: dict[int, type] = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

SIGNED = frozenset({"s8", "s16", "s32", "s64"})
UNSIGNED = frozenset({"u8", "u16", "u32", "u64"})
BITS = frozenset({"b8", "b16", "b32", "b64"})
INTEGER = SIGNED | UNSIGNED | BITS


def type_bytes(typ: str) -> int:
    """Size in bytes of one element of a memory type."""
    return TYPE_BITS[typ] // 8


def storage_dtype(typ: str) -> type:
    """Unsigned container dtype a register declared with `typ` is kept in."""
    return STORAGE_DTYPE[TYPE_BITS[typ]]


def immediate_array(kind: str, value: int | float, typ: str) -> np.ndarray:
    """Encode an immediate operand as a 1-element array of the instruction type's view dtype.

    kind is "int" (decimal/hex/octal/binary literal), "float" (decimal float literal),
    "fbits32" (0fXXXXXXXX) or "fbits64" (0dXXXXXXXXXXXXXXXX). Integers wrap to the type width;
    for a float type an integer means its value, a 0f/0d literal of the type's own width means
    its bits, and of the other width its value (rounded to nearest even).
    """
    view = VIEW_DTYPE[typ]
    bits = TYPE_BITS[typ]
    if typ == "pred":
        if kind != "int":
            raise Fault("unsupported", "floating-point literal used as a predicate")
        return np.array([bool(value)])
    if typ in ("f32", "f64"):
        if kind == "int" or kind == "float":
            return np.array([float(value)], dtype=view)
        lit_bits = 32 if kind == "fbits32" else 64
        lit_float = np.array([value], dtype=STORAGE_DTYPE[lit_bits]).view(VIEW_DTYPE[f"f{lit_bits}"])
        if lit_bits == bits:
            return lit_float.copy()
        with np.errstate(over="ignore"):
            return lit_float.astype(view)
    if kind == "float":
        raise Fault("unsupported", f"decimal floating-point literal {value!r} used with .{typ}")
    wrapped = int(value) & ((1 << bits) - 1)
    return np.array([wrapped], dtype=STORAGE_DTYPE[bits]).view(view)


_SIGNED_OF_BITS = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def widen(values: np.ndarray, typ: str, reg_bits: int) -> np.ndarray:
    """Values of type `typ` -> storage of a `reg_bits` register (sign-extending .s types, else zero)."""
    type_bits = TYPE_BITS[typ]
    if reg_bits == type_bits:
        return values.view(STORAGE_DTYPE[type_bits])
    if typ in SIGNED:
        return values.astype(_SIGNED_OF_BITS[reg_bits]).view(STORAGE_DTYPE[reg_bits])
    return values.view(STORAGE_DTYPE[type_bits]).astype(STORAGE_DTYPE[reg_bits])
