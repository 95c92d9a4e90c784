"""Low-precision number formats of sm_100a, decoded and encoded exactly as the PTX ISA defines them
(docs/ptx_facts/sm100_formats.md §1-§3): e2m1 (fp4), e2m3/e3m2 (fp6), e4m3/e5m2 (fp8) and the
scale formats ue8m0 and ue4m3.

Table-driven and vectorised: `decode(name, codes)` maps integer codes to float64 through a table
of every code's value, `encode(name, x)` rounds float64 to the nearest code (ties to even,
.satfinite clamping), and `unpack_fp4`/`pack_fp4` split or join two e2m1 codes per byte, the
element with the lower index in bits 3:0 (sm100_formats.md §2). The simulator's packed cvt forms
and the block-scaled tcgen05 MMA use these; the simulator never imports the code generator.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Format:
    """A sign/exponent/mantissa format (sm100_formats.md §1). `nan_codes` are the magnitude codes
    (sign bit clear) that encode NaN; `inf_code` the magnitude code of infinity, if any."""
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool = True
    inf_code: int | None = None
    nan_codes: tuple[int, ...] = ()

    @property
    def bits(self) -> int:
        """Bits of one code (the container may be wider: an fp6 code sits in a byte)."""
        return int(self.signed) + self.exp_bits + self.man_bits


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("e2m1", 2, 1, 1),                                      # fp4: no inf, no NaN, max 6
    Format("e2m3", 2, 3, 1),                                      # fp6: no inf, no NaN, max 7.5
    Format("e3m2", 3, 2, 3),                                      # fp6: no inf, no NaN, max 28
    Format("e4m3", 4, 3, 7, nan_codes=(0x7F,)),                   # fp8 "fn": NaN = S.1111.111, max 448
    Format("e5m2", 5, 2, 15, inf_code=0x7C, nan_codes=(0x7D, 0x7E, 0x7F)),   # IEEE-like, max 57344
    Format("ue8m0", 8, 0, 127, signed=False, nan_codes=(0xFF,)),  # scale: 2^(E-127), NaN 0xFF
    Format("ue4m3", 4, 3, 7, signed=False, nan_codes=(0x7F,)),    # scale: e4m3 without sign
)}


def format_of(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown low-precision format {name!r}: expected one of {', '.join(FORMATS)}") from None


@lru_cache(maxsize=None)
def value_table(name: str) -> np.ndarray:
    """float64 value of every code 0 .. 2^bits - 1 (read-only)."""
    f = format_of(name)
    codes = np.arange(1 << f.bits, dtype=np.int64)
    mag = codes & ((1 << (f.exp_bits + f.man_bits)) - 1)
    e = mag >> f.man_bits
    m = (mag & ((1 << f.man_bits) - 1)).astype(np.float64)
    if f.man_bits == 0:            # ue8m0: every code is a power of two, no subnormals, no zero
        value = np.ldexp(1.0, (e - f.bias).astype(np.int64))
    else:
        frac = m / (1 << f.man_bits)
        value = np.where(e == 0, np.ldexp(frac, 1 - f.bias), np.ldexp(1.0 + frac, (e - f.bias).astype(np.int64)))
    if f.inf_code is not None:
        value = np.where(mag == f.inf_code, np.inf, value)
    value = np.where(np.isin(mag, f.nan_codes), np.nan, value)
    if f.signed:
        value = np.where(codes >> (f.bits - 1), -value, value)
    value.setflags(write=False)
    return value


def decode(name: str, codes) -> np.ndarray:
    """float64 values of integer `codes` (any shape); bits above the format's width must be 0."""
    codes = np.asarray(codes)
    f = format_of(name)
    if codes.size and (codes.min() < 0 or codes.max() >= (1 << f.bits)):
        raise ValueError(f"{name} codes must lie in 0..{(1 << f.bits) - 1}")
    return value_table(name)[codes.astype(np.int64)]


def max_finite(name: str) -> float:
    table = value_table(name)
    return float(np.nanmax(np.where(np.isinf(table), np.nan, table)))


@lru_cache(maxsize=None)
def _finite_magnitudes(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite non-negative values and their magnitude codes (for rounding)."""
    f = format_of(name)
    n_mag = 1 << (f.exp_bits + f.man_bits)
    table = value_table(name)[:n_mag]
    codes = np.arange(n_mag)
    keep = np.isfinite(table)
    return table[keep], codes[keep]


def encode(name: str, x, *, rounding: str = "rn", satfinite: bool = True) -> np.ndarray:
    """Codes (uint8) of float64 `x`, rounded to nearest, ties to the even code (`rn`), or for the
    ue8m0 scale toward zero (`rz`) or toward +inf (`rp`), the roundings cvt.ue8m0x2 takes.
    .satfinite clamps beyond-range magnitudes (and inf) to the largest finite value; NaN becomes
    the format's NaN, or for a format without NaN (fp4/fp6) the largest finite value (the
    satfinite rule of the ISA's cvt, sm100_formats.md §3). Without satfinite, overflow gives the
    format's inf, else its NaN. Unsigned formats take non-negative values only."""
    f = format_of(name)
    x = np.asarray(x, dtype=np.float64)
    if not f.signed and np.any(x < 0):
        raise ValueError(f"{name} is unsigned: negative values have no encoding here")
    if f.signed and rounding != "rn":
        raise ValueError(f"{name}: only round-to-nearest (rn) is defined for signed formats here")
    values, codes = _finite_magnitudes(name)
    mag = np.abs(x)
    top = len(values) - 1
    if rounding == "rn":
        hi = np.clip(np.searchsorted(values, mag, side="left"), 0, top)
        lo = np.clip(hi - 1, 0, top)
        d_lo, d_hi = np.abs(mag - values[lo]), np.abs(values[hi] - mag)
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0))
        idx = np.where(pick_hi, hi, lo)
        # Overflow as IEEE rounding does it: at or past max + half a step (the value the next
        # code would have), so values just above max still round down to max.
        over = mag >= values[top] + (values[top] - values[top - 1]) / 2
    elif rounding in ("rz", "rp"):
        side = "right" if rounding == "rz" else "left"
        idx = np.clip(np.searchsorted(values, mag, side=side) - (1 if rounding == "rz" else 0), 0, top)
        over = mag > values[top]
    else:
        raise ValueError(f"rounding {rounding!r} is not one of rn, rz, rp")
    out = codes[idx].astype(np.int64)
    if satfinite:
        out = np.where(over, codes[top], out)
    elif f.inf_code is not None:
        out = np.where(over, f.inf_code, out)
    elif f.nan_codes:
        out = np.where(over, f.nan_codes[-1], out)
    else:
        raise ValueError(f"{name} has neither inf nor NaN: encoding needs satfinite")
    nan = np.isnan(x)
    out = np.where(nan, f.nan_codes[-1] if f.nan_codes else codes[top], out)
    if f.signed:
        out = np.where(np.signbit(x) & ~nan, out | (1 << (f.bits - 1)), out)
    return out.astype(np.uint8)


def unpack_fp4(packed) -> np.ndarray:
    """Two e2m1 codes per byte, the lower-index element in bits 3:0: shape (..., n) -> (..., 2n)."""
    b = np.asarray(packed, dtype=np.uint8)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], 2 * b.shape[-1])


def pack_fp4(codes) -> np.ndarray:
    """Inverse of unpack_fp4: (..., 2n) e2m1 codes -> (..., n) bytes."""
    c = np.asarray(codes, dtype=np.uint8)
    if c.shape[-1] % 2:
        raise ValueError("pack_fp4 needs an even number of codes along the last axis")
    if c.size and c.max() > 0xF:
        raise ValueError("e2m1 codes must lie in 0..15")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def scale_values(name: str, codes) -> np.ndarray:
    """float64 multipliers of scale codes (ue8m0: 2^(E-127); ue4m3: the unsigned e4m3 value)."""
    if name not in ("ue8m0", "ue4m3"):
        raise ValueError(f"{name!r} is not a scale format (ue8m0, ue4m3)")
    return decode(name, codes)
