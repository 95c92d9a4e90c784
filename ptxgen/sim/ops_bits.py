"""Bit manipulation for packing int8 results: prmt (byte permute), shf (funnel shift), bfe (bit field).

Semantics follow the PTX ISA pseudo-code. prmt's specialised modes (.f4e, .b4e, .rc8, .ecl, .ecr,
.rc16) are not simulated; the generic form with a 16-bit selector is.
"""
from __future__ import annotations

import numpy as np

from .parse import Instr
from .ptxtypes import VIEW_DTYPE, storage_dtype
from .state import store


def _operands(ins: Instr, ctx, types: list[str]):
    if len(ins.operands) != len(types):
        raise ctx.fail(f"{ins.opcode} takes {len(types)} operands")
    slot, _ = ctx.dst(ins.operands[0], types[0])
    return slot, [ctx.src(o, t) for o, t in zip(ins.operands[1:], types[1:])]


def compile_prmt(ins: Instr, ctx):
    """prmt.b32 d, a, b, c: byte i of d is byte (c >> 4i) & 7 of {b, a}; selector bit 3 replicates
    that byte's sign bit instead."""
    if ins.mods != ("b32",):
        raise ctx.fail(f"prmt.{'.'.join(ins.mods)} is not supported (only the generic prmt.b32)")
    slot, (ga, gb, gc) = _operands(ins, ctx, ["b32", "b32", "b32", "b32"])

    def run(cta, mask):
        a, b, c = np.broadcast_arrays(ga(cta.R), gb(cta.R), gc(cta.R))
        source = np.stack([a, b], axis=1).astype(np.uint32).view(np.uint8).reshape(-1, 8)  # bytes 0..7
        sel = (c[:, None] >> (np.arange(4, dtype=np.uint32) * np.uint32(4))) & np.uint32(0xF)
        picked = np.take_along_axis(source, (sel & 7).astype(np.int64), axis=1)
        signs = np.where(picked & 0x80, np.uint8(0xFF), np.uint8(0))
        out = np.where(sel & 8, signs, picked).astype(np.uint8)
        store(cta, slot, np.ascontiguousarray(out).view(np.uint32).reshape(-1), mask)
    return run


def compile_shf(ins: Instr, ctx):
    """shf.{l,r}.{wrap,clamp}.b32 d, a, b, c: shift the 64-bit {b, a} by c (c & 31, or min(c, 32))."""
    mods = ins.mods
    if len(mods) != 3 or mods[0] not in ("l", "r") or mods[1] not in ("wrap", "clamp") or mods[2] not in (
            "b32", "u32", "s32"):
        raise ctx.fail(f"shf.{'.'.join(mods)} is not supported (shf.{{l,r}}.{{wrap,clamp}}.b32)")
    left, clamp = mods[0] == "l", mods[1] == "clamp"
    slot, (ga, gb, gc) = _operands(ins, ctx, ["b32", "b32", "b32", "u32"])

    def run(cta, mask):
        a, b = ga(cta.R).astype(np.uint64), gb(cta.R).astype(np.uint64)
        c = gc(cta.R).astype(np.uint64)
        n = np.minimum(c, np.uint64(32)) if clamp else c & np.uint64(31)
        joined = (b << np.uint64(32)) | a
        if left:
            out = ((joined << n) >> np.uint64(32)) & np.uint64(0xFFFFFFFF)
        else:
            out = (joined >> n) & np.uint64(0xFFFFFFFF)
        store(cta, slot, out.astype(np.uint32), mask)
    return run


def compile_bfe(ins: Instr, ctx):
    """bfe.{u32,s32,u64,s64} d, a, pos, len: extract len bits from pos, zero- or sign-extended."""
    if len(ins.mods) != 1 or ins.mods[0] not in ("u32", "s32", "u64", "s64"):
        raise ctx.fail(f"bfe.{'.'.join(ins.mods)} is not supported")
    typ = ins.mods[0]
    bits = 64 if typ.endswith("64") else 32
    signed = typ.startswith("s")
    slot, (ga, gb, gc) = _operands(ins, ctx, [typ, typ, "u32", "u32"])
    udt = storage_dtype(typ)
    view = VIEW_DTYPE[typ]

    def run(cta, mask):
        a = ga(cta.R).view(udt)
        pos = (gb(cta.R) & np.uint32(0xFF)).astype(np.int64)
        length = (gc(cta.R) & np.uint32(0xFF)).astype(np.int64)
        a, pos, length = np.broadcast_arrays(a, pos, length)
        idx = np.arange(bits, dtype=np.int64)
        source_bit = pos[:, None] + idx                                       # bit of a feeding bit i
        bit_vals = (a[:, None] >> np.minimum(source_bit, bits - 1).astype(udt)) & udt(1)
        take = (idx < length[:, None]) & (source_bit <= bits - 1)
        top = np.minimum(pos + length - 1, bits - 1)
        sbit = (a >> np.maximum(top, 0).astype(udt)) & udt(1) if signed else np.zeros_like(a)
        sbit = np.where(length == 0, udt(0), sbit)
        out_bits = np.where(take, bit_vals, sbit[:, None])
        out = (out_bits << idx.astype(udt)).sum(axis=1, dtype=udt)
        store(cta, slot, out.astype(udt).view(view).view(udt), mask)
    return run


OPS = {"prmt": compile_prmt, "shf": compile_shf, "bfe": compile_bfe}
