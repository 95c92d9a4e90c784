"""cvt: integer widths (wrapping or .sat), int <-> float (int8 and epilogue paths), f32 -> f16/bf16/tf32.

Rounding follows the PTX ISA: int -> float needs .rn (the only float rounding simulated), float ->
int needs one of .rni/.rzi/.rmi/.rpi and always saturates to the destination range (NaN -> 0), so
.sat is redundant there; int -> int wraps unless .sat clamps. A destination register wider than the
destination type gets the value sign-extended for signed types, zero-extended otherwise.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nx
from .ops_cvt_lowprec import compile_cvt_lowprec, handles as lowprec_handles
from .parse import Instr
from .ptxtypes import SIGNED, TYPE_BITS, UNSIGNED, VIEW_DTYPE, widen
from .state import store

INT_TYPES = SIGNED | UNSIGNED
HALF_OUT = ("f16", "bf16", "f16x2", "bf16x2")
INT_ROUNDING = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
F32_SMALLEST_NORMAL = 2.0 ** -126


def compile_cvt(ins: Instr, ctx):
    if len(ins.mods) < 2:
        raise ctx.fail("cvt needs destination and source types")
    dtyp, atyp = ins.mods[-2], ins.mods[-1]
    mods = set(ins.mods[:-2])
    if lowprec_handles(dtyp, atyp):     # sm_100a's fp4/fp6/ue8m0 pairs (ops_cvt_lowprec.py)
        return compile_cvt_lowprec(ins, ctx, dtyp, atyp, mods)
    if dtyp in INT_TYPES and atyp in INT_TYPES:
        _require(ctx, mods, set(), {"sat"})
        return _cvt_int(ins, ctx, dtyp, atyp, "sat" in mods)
    if dtyp in INT_TYPES and atyp in ("f32", "f64", "f16", "bf16"):
        rounding = mods & set(INT_ROUNDING)
        if len(rounding) != 1:
            raise ctx.fail("float-to-integer cvt needs exactly one of .rni/.rzi/.rmi/.rpi")
        _require(ctx, mods, rounding, {"sat"} | ({"ftz"} if atyp == "f32" else set()))
        return _cvt_float_to_int(ins, ctx, dtyp, atyp, rounding.pop(), "ftz" in mods)
    if dtyp in ("f32", "f64", "f16", "bf16") and atyp in INT_TYPES:
        _require(ctx, mods, {"rn"}, set())
        if dtyp in ("f16", "bf16") and TYPE_BITS[atyp] > 32:
            raise ctx.fail(f"cvt.rn.{dtyp}.{atyp} is not supported (64-bit integers to 16-bit floats)")
        return _unary(ins, ctx, dtyp, atyp, _int_to_float(dtyp, atyp))
    if dtyp in HALF_OUT and atyp == "f32":
        _require(ctx, mods, {"rn"}, {"relu", "satfinite"})
        return _cvt_to_half(ins, ctx, dtyp, mods)
    if dtyp == "tf32" and atyp == "f32":
        _require(ctx, mods, {"rna"}, {"satfinite"})
        return _unary(ins, ctx, "b32", "f32", lambda x: _tf32(x, "satfinite" in mods))
    if dtyp in ("f32", "f64") and atyp in ("f16", "bf16"):
        _require(ctx, mods, set(), set())
        dec = nx.bf16_bits_to_f64 if atyp == "bf16" else nx.f16_bits_to_f64
        view = VIEW_DTYPE[dtyp]
        return _unary(ins, ctx, dtyp, atyp, lambda x: dec(x).astype(view))
    if dtyp == "f64" and atyp == "f32":
        _require(ctx, mods, set(), set())
        return _unary(ins, ctx, "f64", "f32", lambda x: x.astype(np.float64))
    if dtyp == "f32" and atyp == "f64":
        _require(ctx, mods, {"rn"}, set())
        return _unary(ins, ctx, "f32", "f64", lambda x: nx.canonical_nan_f32(x.astype(np.float32)))
    if dtyp == "f16x2" and atyp in FP8X2:
        _require(ctx, mods, {"rn"}, {"relu"})
        return _cvt_fp8x2_to_f16x2(ins, ctx, atyp, "relu" in mods)
    raise ctx.fail(f"cvt.{'.'.join(ins.mods)} is not supported")


#: fp8 pair formats -> ml_dtypes type name. e4m3 is the "fn" variant (no inf, NaN = S.1111.111).
FP8X2 = {"e4m3x2": "float8_e4m3fn", "e5m2x2": "float8_e5m2"}


def fp8_to_f16_table(atyp: str) -> np.ndarray:
    """f16 bits of each of the 256 fp8 bytes: exact (every e4m3/e5m2 value is an f16), NaN as
    the canonical f16 NaN 0x7FFF."""
    import ml_dtypes

    values = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, FP8X2[atyp])).astype(np.float32)
    bits = values.astype(np.float16).view(np.uint16).copy()
    bits[np.isnan(values)] = 0x7FFF
    return bits


def _cvt_fp8x2_to_f16x2(ins: Instr, ctx, atyp: str, relu: bool):
    """cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a: a .b16 holds two fp8 values; the one in a's upper
    8 bits lands in d's upper 16 bits (PTX ISA, cvt). .relu clamps negatives (not NaN) to +0."""
    if len(ins.operands) != 2:
        raise ctx.fail("cvt.f16x2 from an fp8 pair takes d, a")
    slot = ctx.dst(ins.operands[0], "b32")[0]
    get = ctx.src(ins.operands[1], "b16")
    table = fp8_to_f16_table(atyp)
    if relu:
        negative = (table & 0x8000).astype(bool) & (table != 0x7FFF)
        table = np.where(negative, np.uint16(0), table).astype(np.uint16)

    def run(cta, mask):
        a = np.asarray(get(cta.R)).astype(np.uint32)
        lo, hi = table[a & 0xFF].astype(np.uint32), table[(a >> 8) & 0xFF].astype(np.uint32)
        store(cta, slot, np.broadcast_to((hi << 16) | lo, (cta.n,)).astype(np.uint32), mask)
    return run


def _require(ctx, mods: set[str], required: set[str], optional: set[str]) -> None:
    missing = required - mods
    if missing:
        raise ctx.fail(f"cvt needs the rounding modifier .{sorted(missing)[0]}")
    extra = mods - required - optional
    if extra:
        raise ctx.fail(f"cvt modifier .{sorted(extra)[0]} is not supported here")


def _unary(ins: Instr, ctx, dtyp: str, atyp: str, func):
    if len(ins.operands) != 2:
        raise ctx.fail("cvt takes 2 operands here")
    slot, reg_bits = ctx.dst(ins.operands[0], dtyp, relaxed=True)
    get = ctx.src(ins.operands[1], atyp, relaxed=True)

    def run(cta, mask):
        with np.errstate(invalid="ignore", over="ignore"):
            out = func(get(cta.R))
        store(cta, slot, widen(out, dtyp, reg_bits), mask)
    return run


# ------------------------------------------------------------------ integers
def int_range(typ: str) -> tuple[int, int]:
    bits = TYPE_BITS[typ]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if typ in SIGNED else (0, (1 << bits) - 1)


def _saturate(x: np.ndarray, atyp: str, dtyp: str) -> np.ndarray:
    """Clamp integers of type atyp to dtyp's range (exactly, also for 64-bit types)."""
    lo, hi = int_range(dtyp)
    view = VIEW_DTYPE[dtyp]
    if atyp == "u64":
        return np.minimum(x, np.uint64(min(hi, (1 << 64) - 1))).astype(view)
    wide = x.astype(np.int64)
    if dtyp == "u64":
        return np.maximum(wide, 0).astype(np.uint64)
    return np.clip(wide, max(lo, -(1 << 63)), min(hi, (1 << 63) - 1)).astype(view)


def _cvt_int(ins: Instr, ctx, dtyp: str, atyp: str, sat: bool):
    view = VIEW_DTYPE[dtyp]
    if sat:
        return _unary(ins, ctx, dtyp, atyp, lambda x: _saturate(x, atyp, dtyp))
    return _unary(ins, ctx, dtyp, atyp, lambda x: x.astype(view))


def float_to_int(x: np.ndarray, rounding: str, dtyp: str) -> np.ndarray:
    """Round float64 values to integers and saturate to dtyp's range; NaN becomes 0."""
    r = INT_ROUNDING[rounding](x)
    lo, hi = int_range(dtyp)
    view = VIEW_DTYPE[dtyp]
    over = r >= float(hi) + 1.0          # exact powers of two, so the comparisons are exact
    under = r < float(lo)
    safe = np.where(over | under | np.isnan(r), 0.0, r)
    out = safe.astype(view)
    return np.where(over, view(hi), np.where(under, view(lo), out))


def _cvt_float_to_int(ins: Instr, ctx, dtyp: str, atyp: str, rounding: str, ftz: bool):
    def convert(x: np.ndarray) -> np.ndarray:
        if atyp in ("f16", "bf16"):
            v = (nx.f16_bits_to_f64 if atyp == "f16" else nx.bf16_bits_to_f64)(x)
        else:
            v = x.astype(np.float64)
        if ftz:
            v = np.where(np.abs(v) < F32_SMALLEST_NORMAL, 0.0, v)
        return float_to_int(v, rounding, dtyp)
    return _unary(ins, ctx, dtyp, atyp, convert)


def _int_to_float(dtyp: str, atyp: str):
    """Round-to-nearest-even integer -> float: exact via float64 for <= 32-bit integers (one
    rounding), numpy's direct (correctly rounded) cast for 64-bit integers."""
    if dtyp == "f16":
        return lambda x: nx.f64_to_f16_bits(x.astype(np.float64))
    if dtyp == "bf16":
        return lambda x: nx.f64_to_bf16_bits(x.astype(np.float64))
    view = VIEW_DTYPE[dtyp]
    if TYPE_BITS[atyp] <= 32:
        return lambda x: x.astype(np.float64).astype(view)
    return lambda x: x.astype(view)


# ------------------------------------------------------------------ f32 -> 16-bit and tf32
def _tf32(x: np.ndarray, satfinite: bool) -> np.ndarray:
    bits = nx.tf32_rna_bits(x)
    if satfinite:
        inf = (bits & np.uint32(0x7FFFFFFF)) == np.uint32(0x7F800000)
        bits = np.where(inf, (bits & np.uint32(0x80000000)) | np.uint32(0x7F7FE000), bits)
    return bits


def _cvt_to_half(ins: Instr, ctx, dtyp: str, mods: set[str]):
    is_bf = dtyp.startswith("bf")
    max_bits = np.uint16(nx.BF16_MAX_BITS if is_bf else nx.F16_MAX_BITS)
    relu, satfinite = "relu" in mods, "satfinite" in mods

    def convert(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        bits = nx.f32_to_bf16_bits(x) if is_bf else nx.f64_to_f16_bits(x.astype(np.float64))
        if relu:
            bits = np.where((x < 0) | ((bits & np.uint16(0x7FFF)) == 0), np.uint16(0), bits)
            bits = np.where(np.isnan(x), np.uint16(0x7FFF), bits)
        if satfinite:
            inf = (bits & np.uint16(0x7FFF)) == np.uint16(0x7F80 if is_bf else 0x7C00)
            bits = np.where(inf, (bits & np.uint16(0x8000)) | max_bits, bits)
        return bits

    if dtyp.endswith("x2"):
        if len(ins.operands) != 3:
            raise ctx.fail(f"cvt.{dtyp}.f32 takes d, a, b")
        slot, _ = ctx.dst(ins.operands[0], "b32")
        ga, gb = ctx.src(ins.operands[1], "f32"), ctx.src(ins.operands[2], "f32")

        def run(cta, mask):
            with np.errstate(invalid="ignore", over="ignore"):
                hi, lo = np.broadcast_arrays(convert(ga(cta.R)), convert(gb(cta.R)))
            packed = (hi.astype(np.uint32) << np.uint32(16)) | lo.astype(np.uint32)  # a -> high half
            store(cta, slot, packed, mask)
        return run
    return _unary(ins, ctx, "b16", "f32", convert)


OPS = {"cvt": compile_cvt}
