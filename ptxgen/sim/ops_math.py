"""Epilogue math on f32 (and f64 where PTX has it): ex2, lg2, tanh, rcp, sqrt, div, copysign.

.rn forms (rcp.rn, sqrt.rn, div.rn) are IEEE-754 correctly rounded, computed with numpy's float32
/ float64 arithmetic, so they are bit-exact.

.approx forms: the simulator computes the exact function in float64 and rounds once to f32, i.e. it
returns (nearly) the correctly rounded value, while the hardware is less accurate. Error bounds the
PTX ISA states for the hardware, which tests comparing with a GPU must allow (quoted from the ISA
text as remembered; not re-checked against a GPU here):
    ex2.approx.f32    relative error about 2^-22 (2 ulp)
    lg2.approx.f32    absolute error about 2^-22 for arguments near 1, relative about 2^-22 elsewhere
    tanh.approx.f32   relative error about 2^-11 (measured on sm_75+: about 1.1e-5)
    rcp.approx.f32    1 ulp
    sqrt.approx.f32   relative error about 2^-23
    div.approx.f32    2 ulp for |b| in [2^-126, 2^126]; for 2^126 < |b| < 2^128 the hardware computes
                      a * rcp(b) and returns 0 (NaN if a is infinite), which is simulated
    div.full.f32      2 ulp
.ftz flushes subnormal inputs and results to sign-preserving zero; without it subnormals are kept.
NaN results are the canonical NaN 0x7FFFFFFF.
"""
from __future__ import annotations

import numpy as np

from . import numerics as nx
from .parse import Instr
from .ptxtypes import storage_dtype
from .state import store

SMALLEST_NORMAL = {"f32": 2.0 ** -126, "f64": 2.0 ** -1022}


def _ftz(x: np.ndarray) -> np.ndarray:
    tiny = np.abs(x) < x.dtype.type(SMALLEST_NORMAL["f32"])
    return np.where(tiny, np.copysign(x.dtype.type(0), x), x) if tiny.any() else x


def _exact_f32(fn):
    """f32 -> f32 through fn evaluated in float64, rounded once."""
    return lambda x: fn(x.astype(np.float64)).astype(np.float32)


UNARY = {  # opcode -> {rounding: (types, function on the view dtype)}
    "ex2": {"approx": ({"f32"}, _exact_f32(np.exp2))},
    "lg2": {"approx": ({"f32"}, _exact_f32(np.log2))},
    "tanh": {"approx": ({"f32"}, _exact_f32(np.tanh))},
    "rcp": {"approx": ({"f32"}, lambda x: x.dtype.type(1) / x),
            "rn": ({"f32", "f64"}, lambda x: x.dtype.type(1) / x)},
    "sqrt": {"approx": ({"f32"}, np.sqrt), "rn": ({"f32", "f64"}, np.sqrt)},
}
FTZ_OK = {"ex2", "lg2", "rcp", "sqrt"}


def _mods(ins: Instr, ctx, table: dict) -> tuple[str, str, bool]:
    if not ins.mods:
        raise ctx.fail(f"{ins.opcode} needs a type")
    typ, mods = ins.mods[-1], list(ins.mods[:-1])
    ftz = "ftz" in mods
    if ftz:
        mods.remove("ftz")
    if len(mods) != 1 or mods[0] not in table:
        raise ctx.fail(f"{ins.opcode}.{'.'.join(ins.mods)} is not supported "
                       f"(needs one of {', '.join('.' + r for r in table)})")
    rounding = mods[0]
    types = table[rounding][0]
    if typ not in types:
        raise ctx.fail(f"{ins.opcode}.{rounding}.{typ} is not supported (types: {', '.join(sorted(types))})")
    if ftz and (typ != "f32" or ins.opcode not in FTZ_OK | {"div"}):
        raise ctx.fail(f"{ins.opcode}: .ftz is not valid here")
    return typ, rounding, ftz


def _operands(ins: Instr, ctx, typ: str, nsrc: int):
    if len(ins.operands) != nsrc + 1:
        raise ctx.fail(f"{ins.opcode} takes {nsrc + 1} operands")
    slot, _ = ctx.dst(ins.operands[0], typ)
    return slot, [ctx.src(o, typ) for o in ins.operands[1:]]


def compile_unary(ins: Instr, ctx):
    table = UNARY[ins.opcode]
    typ, rounding, ftz = _mods(ins, ctx, table)
    fn = table[rounding][1]
    slot, (get,) = _operands(ins, ctx, typ, 1)
    storage = storage_dtype(typ)
    canon = nx.canonical_nan_f32 if typ == "f32" else (lambda x: x)

    def run(cta, mask):
        x = get(cta.R)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
            out = fn(_ftz(x) if ftz else x)
        if ftz:
            out = _ftz(out)
        store(cta, slot, canon(out).view(storage), mask)
    return run


DIV = {"rn": {"f32", "f64"}, "full": {"f32"}, "approx": {"f32"}}


def compile_div(ins: Instr, ctx):
    """Floating-point div (integer div is in ops_alu)."""
    typ, rounding, ftz = _mods(ins, ctx, {r: (t, None) for r, t in DIV.items()})
    slot, (ga, gb) = _operands(ins, ctx, typ, 2)
    storage = storage_dtype(typ)
    canon = nx.canonical_nan_f32 if typ == "f32" else (lambda x: x)
    big = np.float32(2.0 ** 126)

    def run(cta, mask):
        a, b = ga(cta.R), gb(cta.R)
        if ftz:
            a, b = _ftz(a), _ftz(b)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
            out = a / b
            if rounding == "approx":
                huge = (np.abs(b) > big) & np.isfinite(b)
                if huge.any():
                    zero = np.where(np.isinf(a), np.float32(np.nan), np.copysign(np.float32(0), a * b))
                    out = np.where(huge, zero, out)
        if ftz:
            out = _ftz(out)
        store(cta, slot, canon(np.asarray(out, dtype=a.dtype)).view(storage), mask)
    return run


def compile_copysign(ins: Instr, ctx):
    """copysign.type d, a, b: |b| with the sign of a."""
    if ins.mods not in (("f32",), ("f64",)):
        raise ctx.fail(f"copysign.{'.'.join(ins.mods)} is not supported (.f32 or .f64)")
    typ = ins.mods[0]
    slot, (ga, gb) = _operands(ins, ctx, typ, 2)
    storage = storage_dtype(typ)
    sign = storage(1 << (63 if typ == "f64" else 31))

    def run(cta, mask):
        a, b = ga(cta.R).view(storage), gb(cta.R).view(storage)
        store(cta, slot, (a & sign) | (b & ~sign), mask)
    return run


OPS = {"ex2": compile_unary, "lg2": compile_unary, "tanh": compile_unary, "rcp": compile_unary,
       "sqrt": compile_unary, "copysign": compile_copysign}
