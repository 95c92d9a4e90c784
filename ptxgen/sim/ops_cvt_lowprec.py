"""The packed low-precision cvt forms of sm_100a (docs/ptx_facts/sm100_formats.md §3):

    cvt.rn.satfinite{.relu}.e2m1x2.f32              d(.b8),  a, b
    cvt.rn.satfinite{.relu}.{e2m3x2,e3m2x2}.f32     d(.b16), a, b
    cvt.rn{.relu}.f16x2.{e2m1x2}                    d(.b32), a(.b8)
    cvt.rn{.relu}.f16x2.{e2m3x2,e3m2x2}             d(.b32), a(.b16)
    cvt.{rz,rp}{.satfinite}.ue8m0x2.f32             d(.b16), a, b
    cvt.{rz,rp}{.satfinite}.ue8m0x2.bf16x2          d(.b16), a(.b32)
    cvt.rn.bf16x2.ue8m0x2                           d(.b32), a(.b16)
    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32     d(.b16), a, b      (sm_89+: Triton's nvfp4 scales)
    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2   d(.b16), a(.b32)   (sm_89+)

As for every paired cvt, the value from `a` (or a's upper half) goes to d's upper half and `b`'s
to the lower half: for e2m1x2 a → bits 7:4, b → bits 3:0. An fp6 value sits in the low 6 bits of
its byte. The numbers come from ptxgen.sim.lowprec (table-driven, exact).
"""
from __future__ import annotations

import numpy as np

from . import lowprec
from . import numerics as nx
from .parse import Instr
from .ptxtypes import STORAGE_DTYPE, TYPE_BITS, widen
from .state import store

#: packed type -> (lowprec format, bits per element slot in the container)
PACKED = {"e2m1x2": ("e2m1", 4), "e2m3x2": ("e2m3", 8), "e3m2x2": ("e3m2", 8), "ue8m0x2": ("ue8m0", 8),
          "e4m3x2": ("e4m3", 8), "e5m2x2": ("e5m2", 8)}
CONTAINER = {"e2m1x2": "b8", "e2m3x2": "b16", "e3m2x2": "b16", "ue8m0x2": "b16", "e4m3x2": "b16", "e5m2x2": "b16"}
FP8X2 = ("e4m3x2", "e5m2x2")     # as sources these stay in ops_cvt (cvt.rn.f16x2.e4m3x2)


def handles(dtyp: str, atyp: str) -> bool:
    """Whether this module owns cvt.<...>.dtyp.atyp."""
    return dtyp in PACKED or (atyp in PACKED and atyp not in FP8X2)


#: Targets that run these cvt forms (PTX ISA cvt, "Target ISA notes": sm_100a, sm_101a, sm_120a and
#: their family variants; the simulator knows sm_100a and sm_120a of them).
TARGETS = ("sm_100a", "sm_120a")


def compile_cvt_lowprec(ins: Instr, ctx, dtyp: str, atyp: str, mods: set[str]):
    if dtyp in FP8X2:
        return _compile_to_fp8x2(ins, ctx, dtyp, atyp, mods)
    target = (getattr(ctx, "target", "") or "").replace(",", " ").split()
    if not target or target[0] not in TARGETS:
        raise ctx.fail(f"cvt.{'.'.join(ins.mods)} needs `.target sm_100a` or `.target sm_120a` (PTX ISA cvt: "
                       f"the fp4/fp6/ue8m0 pairs are architecture-specific); the module targets "
                       f"{target[0] if target else 'nothing'}")
    if dtyp in ("e2m1x2", "e2m3x2", "e3m2x2") and atyp == "f32":
        _require(ctx, ins, mods, {"rn", "satfinite"}, {"relu"})
        return _to_packed_from_f32(ins, ctx, dtyp, "rn", True, "relu" in mods)
    if dtyp == "f16x2" and atyp in ("e2m1x2", "e2m3x2", "e3m2x2"):
        _require(ctx, ins, mods, {"rn"}, {"relu"})
        return _packed_to_half(ins, ctx, atyp, "f16", "relu" in mods)
    if dtyp == "ue8m0x2" and atyp in ("f32", "bf16x2"):
        rounding = mods & {"rz", "rp"}
        if len(rounding) != 1:
            raise ctx.fail(f"cvt.ue8m0x2.{atyp} needs exactly one of .rz/.rp (PTX ISA cvt)")
        _require(ctx, ins, mods, rounding, {"satfinite"})
        if atyp == "f32":
            return _to_packed_from_f32(ins, ctx, dtyp, rounding.pop(), "satfinite" in mods, False)
        return _ue8m0_from_bf16x2(ins, ctx, rounding.pop(), "satfinite" in mods)
    if dtyp == "bf16x2" and atyp == "ue8m0x2":
        _require(ctx, ins, mods, {"rn"}, set())
        return _packed_to_half(ins, ctx, atyp, "bf16", False)
    raise ctx.fail(f"cvt.{'.'.join(ins.mods)} is not a form the PTX ISA defines for these packed types")


def _compile_to_fp8x2(ins: Instr, ctx, dtyp: str, atyp: str, mods: set[str]):
    """f32 pairs or f16x2 to e4m3x2/e5m2x2 (PTX ISA cvt: PTX 7.8, sm_89+; .satfinite required)."""
    target = (getattr(ctx, "target", "") or "").replace(",", " ").split()
    arch = int("".join(ch for ch in target[0][3:] if ch.isdigit()) or 0) if target else 0
    if arch < 89:
        raise ctx.fail(f"cvt.{'.'.join(ins.mods)} needs .target sm_89 or newer; the module targets "
                       f"{target[0] if target else 'nothing'}")
    _require(ctx, ins, mods, {"rn", "satfinite"}, {"relu"})
    if atyp == "f32":
        return _to_packed_from_f32(ins, ctx, dtyp, "rn", True, "relu" in mods)
    if atyp == "f16x2":
        return _fp8x2_from_f16x2(ins, ctx, dtyp, "relu" in mods)
    raise ctx.fail(f"cvt.{'.'.join(ins.mods)}: {dtyp} converts from .f32 pairs or .f16x2 only")


def _fp8x2_from_f16x2(ins: Instr, ctx, dtyp: str, relu: bool):
    if len(ins.operands) != 2:
        raise ctx.fail(f"cvt.{dtyp}.f16x2 takes d, a")
    fmt = PACKED[dtyp][0]
    slot, reg_bits = ctx.dst(ins.operands[0], "b16", relaxed=True)
    get = ctx.src(ins.operands[1], "b32")

    def run(cta, mask):
        a = np.asarray(get(cta.R)).astype(np.uint32)
        hi = _encode(fmt, nx.f16_bits_to_f64((a >> 16).astype(np.uint16)), "rn", True, relu)
        lo = _encode(fmt, nx.f16_bits_to_f64((a & 0xFFFF).astype(np.uint16)), "rn", True, relu)
        _put(cta, slot, reg_bits, "b16", (hi << np.uint32(8)) | lo, mask)
    return run


def _put(cta, slot: int, reg_bits: int, container: str, values: np.ndarray, mask) -> None:
    """Store `container`-typed bits into a register of `reg_bits` (zero-extended if wider)."""
    bits = np.broadcast_to(values, (cta.n,)).astype(STORAGE_DTYPE[TYPE_BITS[container]])
    store(cta, slot, widen(bits, container, reg_bits), mask)


def _require(ctx, ins: Instr, mods: set[str], required: set[str], optional: set[str]) -> None:
    if required - mods:
        raise ctx.fail(f"cvt.{'.'.join(ins.mods)} needs .{sorted(required - mods)[0]}")
    if mods - required - optional:
        raise ctx.fail(f"cvt modifier .{sorted(mods - required - optional)[0]} is not allowed here")


def _encode(fmt: str, x: np.ndarray, rounding: str, satfinite: bool, relu: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if relu:                                   # negatives (and -0) become +0; NaN stays NaN
        x = np.where(np.signbit(x) & ~np.isnan(x), 0.0, x)
    if fmt == "ue8m0":     # unsigned: the ISA gives no encoding for negatives; refuse loudly
        if np.any(x < 0):
            raise ValueError("cvt to ue8m0x2 of a negative value: the PTX ISA defines no result")
        return lowprec.encode(fmt, x, rounding=rounding, satfinite=satfinite).astype(np.uint32)
    return lowprec.encode(fmt, x, rounding=rounding, satfinite=satfinite).astype(np.uint32)


def _to_packed_from_f32(ins: Instr, ctx, dtyp: str, rounding: str, satfinite: bool, relu: bool):
    if len(ins.operands) != 3:
        raise ctx.fail(f"cvt.{dtyp}.f32 takes d, a, b")
    fmt, width = PACKED[dtyp]
    slot, reg_bits = ctx.dst(ins.operands[0], CONTAINER[dtyp], relaxed=True)
    ga, gb = ctx.src(ins.operands[1], "f32"), ctx.src(ins.operands[2], "f32")

    def run(cta, mask):
        try:
            hi, lo = np.broadcast_arrays(_encode(fmt, ga(cta.R), rounding, satfinite, relu),
                                         _encode(fmt, gb(cta.R), rounding, satfinite, relu))
        except ValueError as err:
            raise ctx.fail(str(err)) from None
        packed = (hi << np.uint32(width)) | lo                  # a -> upper half, b -> lower half
        _put(cta, slot, reg_bits, CONTAINER[dtyp], packed, mask)
    return run


def _half_bits(values: np.ndarray, half: str) -> np.ndarray:
    """f16/bf16 bits of exactly representable values (every fp4/fp6 value is an f16; every ue8m0
    value is a bf16, 2^-127 as a subnormal); NaN as the canonical 0x7FFF."""
    bits = nx.f64_to_bf16_bits(values) if half == "bf16" else nx.f64_to_f16_bits(values)
    return np.where(np.isnan(values), np.uint16(0x7FFF), bits).astype(np.uint32)


def _packed_to_half(ins: Instr, ctx, atyp: str, half: str, relu: bool):
    if len(ins.operands) != 2:
        raise ctx.fail(f"cvt.{half}x2.{atyp} takes d, a")
    fmt, width = PACKED[atyp]
    slot, _ = ctx.dst(ins.operands[0], "b32")
    get = ctx.src(ins.operands[1], CONTAINER[atyp], relaxed=True)
    field = (1 << width) - 1
    code_mask = (1 << lowprec.format_of(fmt).bits) - 1
    table = lowprec.value_table(fmt)

    def run(cta, mask):
        a = np.asarray(get(cta.R)).astype(np.int64)
        hi, lo = table[(a >> width) & field & code_mask], table[a & field & code_mask]
        if relu:
            hi, lo = np.where(hi < 0, 0.0, hi), np.where(lo < 0, 0.0, lo)
        out = (_half_bits(hi, half) << np.uint32(16)) | _half_bits(lo, half)
        _put(cta, slot, 32, "b32", out, mask)
    return run


def _ue8m0_from_bf16x2(ins: Instr, ctx, rounding: str, satfinite: bool):
    if len(ins.operands) != 2:
        raise ctx.fail("cvt.ue8m0x2.bf16x2 takes d, a")
    slot, reg_bits = ctx.dst(ins.operands[0], "b16", relaxed=True)
    get = ctx.src(ins.operands[1], "b32")

    def run(cta, mask):
        a = np.asarray(get(cta.R)).astype(np.uint32)
        try:
            hi = _encode("ue8m0", nx.bf16_bits_to_f64((a >> 16).astype(np.uint16)), rounding, satfinite, False)
            lo = _encode("ue8m0", nx.bf16_bits_to_f64((a & 0xFFFF).astype(np.uint16)), rounding, satfinite, False)
        except ValueError as err:
            raise ctx.fail(str(err)) from None
        _put(cta, slot, reg_bits, "b16", (hi << np.uint32(8)) | lo, mask)
    return run
