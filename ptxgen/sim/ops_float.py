"""Floating-point arithmetic (f32, f64, f16/bf16 scalar and x2); cvt lives in ops_cvt.py.

16-bit floats are computed in float64 and rounded once to the 16-bit format; fma uses
round-to-odd so the result is rounded exactly once (numerics.py). NaN results are canonical.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nx
from .parse import Instr
from .ptxtypes import TYPE_BITS, storage_dtype
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


OPS = {"fma": compile_float}
