"""Bit-exact float conversions and arithmetic with the rounding the PTX ISA prescribes.

numpy's float32/float64 arithmetic and its casts to float16 are IEEE round-to-nearest-even; the
helpers here add what numpy lacks: bf16 and tf32 rounding, canonical NaNs, single-rounding fma
(via round-to-odd in float64) and PTX's min/max rules.
"""
from __future__ import annotations

import numpy as np

F16_CANONICAL_NAN = 0x7FFF
BF16_CANONICAL_NAN = 0x7FFF
F32_CANONICAL_NAN = 0x7FFFFFFF
F16_MAX_BITS = 0x7BFF
BF16_MAX_BITS = 0x7F7F


def f16_bits_to_f64(bits: np.ndarray) -> np.ndarray:
    return bits.view(np.float16).astype(np.float64)


def bf16_bits_to_f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def f64_to_f16_bits(x: np.ndarray) -> np.ndarray:
    """Round float64 to f16 with RNE (numpy rounds directly, not via float32); NaN -> canonical."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = x.astype(np.float16).view(np.uint16)
    return np.where(np.isnan(x), np.uint16(F16_CANONICAL_NAN), out)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 with RNE by integer arithmetic on the bits; NaN -> canonical."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = ((bits + np.uint64(0x7FFF) + lsb) >> np.uint64(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(BF16_CANONICAL_NAN), rounded)


def f64_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float64 to bf16 with one rounding: round-to-odd to float32 first, then RNE."""
    return f32_to_bf16_bits(f64_to_f32_round_odd(x))


def f64_to_f32_round_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd (sticky); a later RNE to <= 22 bits is then exact-once."""
    with np.errstate(over="ignore", invalid="ignore"):
        near = x.astype(np.float32)
    back = near.astype(np.float64)
    inexact = (back != x) & np.isfinite(x) & np.isfinite(near)
    bits = near.view(np.uint32)
    even = (bits & np.uint32(1)) == 0
    fix = inexact & even
    if not fix.any():
        return near
    toward = np.where(back < x, np.float32(np.inf), np.float32(-np.inf))
    return np.where(fix, np.nextafter(near, toward), near)


def tf32_rna_bits(x: np.ndarray) -> np.ndarray:
    """cvt.rna.tf32.f32: keep 10 mantissa bits, round to nearest with ties away from zero."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + np.uint64(0x1000)) & np.uint64(0xFFFFE000)).astype(np.uint32)
    return np.where(np.isnan(x), np.uint32(F32_CANONICAL_NAN),
                    np.where(np.isinf(x), bits.astype(np.uint32), rounded))


def round_to_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """p + c in float64 rounded to odd, for p and c float64 values (p exact).

    Rounding the result to any format with at most 51 significant bits then equals rounding the
    exact sum once, which is what fma requires.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        s = p + c
        bp = s - c
        err = (p - bp) + (c - (s - bp))  # two-sum: exact error of s
    bits = s.view(np.uint64)
    fix = (err != 0) & np.isfinite(s) & ((bits & np.uint64(1)) == 0)
    if not fix.any():
        return s
    toward = np.where(err > 0, np.inf, -np.inf)
    return np.where(fix, np.nextafter(s, toward), s)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fma.rn.f32: a*b+c with a single rounding (the float64 product of floats is exact)."""
    p = a.astype(np.float64) * b.astype(np.float64)
    s = round_to_odd_sum(p, c.astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        out = s.astype(np.float32)
    return canonical_nan_f32(out)


def canonical_nan_f32(x: np.ndarray) -> np.ndarray:
    nan = np.isnan(x)
    if nan.any():
        return np.where(nan, np.uint32(F32_CANONICAL_NAN).view(np.float32), x)
    return x


def ptx_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """max: NaN loses to a number; +0 is greater than -0."""
    out = np.fmax(a, b)
    both_zero = (a == 0) & (b == 0)
    if both_zero.any():
        uint = np.uint32 if a.dtype == np.float32 else np.uint64
        out = np.where(both_zero, (a.view(uint) & b.view(uint)).view(a.dtype), out)
    return out


def ptx_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min: NaN loses to a number; -0 is smaller than +0."""
    out = np.fmin(a, b)
    both_zero = (a == 0) & (b == 0)
    if both_zero.any():
        uint = np.uint32 if a.dtype == np.float32 else np.uint64
        out = np.where(both_zero, (a.view(uint) | b.view(uint)).view(a.dtype), out)
    return out
