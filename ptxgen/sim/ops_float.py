"""Floating-point arithmetic (f32, f64, f16/bf16 scalar and x2) and cvt.

16-bit floats are computed in float64 and rounded once to the 16-bit format; fma uses
round-to-odd so the result is rounded exactly once (numerics.py). NaN results are canonical.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nx
from .parse import Instr
from .ptxtypes import SIGNED, TYPE_BITS, UNSIGNED, VIEW_DTYPE, storage_dtype, widen
from .state import store

HALF_TYPES = {"f16", "bf16", "f16x2", "bf16x2"}
_ROUNDING_UNSUPPORTED = {"rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi"}


def _check_mods(ins: Instr, ctx, allowed: set[str]) -> set[str]:
    mods = set(ins.mods[:-1])
    for m in mods:
        if m in _ROUNDING_UNSUPPORTED:
            raise ctx.fail(f"rounding mode .{m} is not supported for {ins.opcode} (only .rn)")
        if m not in allowed:
            raise ctx.fail(f"{ins.opcode}: modifier .{m} is not supported")
    return mods


# ------------------------------------------------------------------ 16-bit float codecs
def _half_codec(typ: str):
    """(decode bits -> float64 array of shape (m, lanes), encode float64 -> bits) for a half type."""
    is_bf = typ.startswith("bf")
    dec16 = nx.bf16_bits_to_f64 if is_bf else nx.f16_bits_to_f64
    enc16 = nx.f64_to_bf16_bits if is_bf else nx.f64_to_f16_bits
    if typ.endswith("x2"):
        def decode(bits):
            return dec16(np.ascontiguousarray(bits).view(np.uint16)).reshape(-1, 2)

        def encode(values):
            return np.ascontiguousarray(enc16(values)).view(np.uint32).reshape(-1)
    else:
        def decode(bits):
            return dec16(bits).reshape(-1, 1)

        def encode(values):
            return enc16(values).reshape(-1)
    return decode, encode


def _relu(x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, 0.0, x)


def _compile_half(ins: Instr, ctx, typ: str):
    op = ins.opcode
    nsrc = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "min": 2, "max": 2, "neg": 1, "abs": 1}.get(op)
    if nsrc is None:
        raise ctx.fail(f"{op}.{typ} is not supported")
    allowed = {"rn"} if op in ("add", "sub", "mul") else set()
    if op == "fma":
        allowed = {"rn", "relu"}
    if op in ("min", "max"):
        allowed = {"NaN"}
    mods = _check_mods(ins, ctx, allowed)
    if op == "fma" and "rn" not in mods:
        raise ctx.fail("fma needs the rounding modifier .rn")
    if len(ins.operands) != nsrc + 1:
        raise ctx.fail(f"{op} takes {nsrc + 1} operands")
    slot, _ = ctx.dst(ins.operands[0], typ)
    getters = [ctx.src(o, typ) for o in ins.operands[1:]]
    storage = storage_dtype(typ)
    if op in ("neg", "abs"):
        sign = np.array([0x80008000 if typ.endswith("x2") else 0x8000], dtype=storage)
        g, = getters
        if op == "neg":
            return lambda cta, mask: store(cta, slot, g(cta.R) ^ sign, mask)
        return lambda cta, mask: store(cta, slot, g(cta.R) & ~sign, mask)
    decode, encode = _half_codec(typ)
    relu = "relu" in mods
    propagate_nan = "NaN" in mods

    def compute(vals):
        if op == "add":
            return vals[0] + vals[1]
        if op == "sub":
            return vals[0] - vals[1]
        if op == "mul":
            return vals[0] * vals[1]
        if op == "fma":
            p, c = np.broadcast_arrays(vals[0] * vals[1], vals[2])
            return nx.round_to_odd_sum(np.ascontiguousarray(p), np.ascontiguousarray(c))
        out = nx.ptx_max(*vals) if op == "max" else nx.ptx_min(*vals)
        if propagate_nan:
            out = np.where(np.isnan(vals[0]) | np.isnan(vals[1]), np.nan, out)
        return out

    def run(cta, mask):
        vals = [decode(g(cta.R)) for g in getters]
        with np.errstate(invalid="ignore", over="ignore"):
            out = compute(vals)
        if relu:
            out = _relu(out)
        store(cta, slot, encode(np.ascontiguousarray(out)), mask)
    return run


# ------------------------------------------------------------------ f32 / f64
def compile_float(ins: Instr, ctx):
    typ = ins.mods[-1]
    op = ins.opcode
    if typ in HALF_TYPES:
        return _compile_half(ins, ctx, typ)
    if op == "mad":
        if "rn" not in ins.mods:
            raise ctx.fail("mad.f32 needs .rn (it is fma)")
        op = "fma"
    nsrc = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "min": 2, "max": 2, "neg": 1, "abs": 1}.get(op)
    if nsrc is None:
        raise ctx.fail(f"{ins.opcode}.{typ} is not supported")
    allowed = {"rn"} if op in ("add", "sub", "mul", "fma") else ({"NaN"} if op in ("min", "max") else set())
    mods = _check_mods(ins, ctx, allowed)
    if op == "fma" and "rn" not in mods:
        raise ctx.fail("fma needs a rounding modifier (.rn)")
    if op == "fma" and typ == "f64":
        raise ctx.fail("fma.f64 is not supported")
    if len(ins.operands) != nsrc + 1:
        raise ctx.fail(f"{ins.opcode} takes {nsrc + 1} operands")
    slot, _ = ctx.dst(ins.operands[0], typ)
    getters = [ctx.src(o, typ) for o in ins.operands[1:]]
    storage = storage_dtype(typ)
    if op in ("neg", "abs"):
        g, = getters
        sign = np.array([1 << (TYPE_BITS[typ] - 1)], dtype=storage)
        if op == "neg":
            return lambda cta, mask: store(cta, slot, g(cta.R).view(storage) ^ sign, mask)
        return lambda cta, mask: store(cta, slot, g(cta.R).view(storage) & ~sign, mask)
    propagate_nan = "NaN" in mods
    canon = nx.canonical_nan_f32 if typ == "f32" else (lambda x: x)

    def compute(v):
        if op == "add":
            return canon(v[0] + v[1])
        if op == "sub":
            return canon(v[0] - v[1])
        if op == "mul":
            return canon(v[0] * v[1])
        if op == "fma":
            a, b, c = np.broadcast_arrays(*v)
            return nx.fma_f32(a, b, c)
        out = nx.ptx_max(v[0], v[1]) if op == "max" else nx.ptx_min(v[0], v[1])
        if propagate_nan:
            out = np.where(np.isnan(v[0]) | np.isnan(v[1]), np.array(np.nan, dtype=out.dtype), out)
            out = canon(out)
        return out

    def run(cta, mask):
        vals = [g(cta.R) for g in getters]
        with np.errstate(invalid="ignore", over="ignore"):
            out = compute(vals)
        store(cta, slot, out.view(storage), mask)
    return run


# ------------------------------------------------------------------ cvt
_INT_TYPES = {t for t in SIGNED | UNSIGNED}


def compile_cvt(ins: Instr, ctx):
    if len(ins.mods) < 2:
        raise ctx.fail("cvt needs destination and source types")
    dtyp, atyp = ins.mods[-2], ins.mods[-1]
    mods = set(ins.mods[:-2])
    if dtyp in _INT_TYPES and atyp in _INT_TYPES:
        if mods:
            raise ctx.fail(f"cvt modifier .{sorted(mods)[0]} is not supported for integer conversion")
        return _cvt_int(ins, ctx, dtyp, atyp)
    if dtyp in ("f16", "bf16", "f16x2", "bf16x2") and atyp == "f32":
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
    raise ctx.fail(f"cvt.{'.'.join(ins.mods)} is not supported")


def _require(ctx, mods: set[str], required: set[str], optional: set[str]) -> None:
    missing = required - mods
    if missing:
        raise ctx.fail(f"cvt needs the rounding modifier .{sorted(missing)[0]}")
    extra = mods - required - optional
    if extra:
        raise ctx.fail(f"cvt modifier .{sorted(extra)[0]} is not supported here")


def _tf32(x: np.ndarray, satfinite: bool) -> np.ndarray:
    bits = nx.tf32_rna_bits(x)
    if satfinite:
        inf = (bits & np.uint32(0x7FFFFFFF)) == np.uint32(0x7F800000)
        bits = np.where(inf, (bits & np.uint32(0x80000000)) | np.uint32(0x7F7FE000), bits)
    return bits


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


def _cvt_int(ins: Instr, ctx, dtyp: str, atyp: str):
    view = VIEW_DTYPE[dtyp]
    return _unary(ins, ctx, dtyp, atyp, lambda x: x.astype(view))


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


OPS = {"cvt": compile_cvt, "fma": compile_float}
