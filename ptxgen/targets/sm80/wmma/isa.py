"""The wmma instruction family (m16n16k16) as tables and thin wrappers
(docs/ptx_facts/mma_sync.md §3).

Fragments are opaque: these wrappers only move whole fragments, never look inside one.
"""
from __future__ import annotations

from ....ir import Addr, Builder, Imm, Vec, VReg

SHAPE = "m16n16k16"
#: Registers per lane of an A or B fragment, by input dtype (f16 holds each element twice).
FRAGMENT_REGS = {"f16": 8, "bf16": 4}
#: Registers per lane of a 16x16 accumulator fragment: 8 f32, or 4 packed f16x2.
ACC_REGS = {"f32": 8, "f16": 4}
ACC_BYTES = {"f32": 4, "f16": 2}
#: The .dtype.ctype (f16 inputs) or .atype.btype (bf16, f32 accumulation only) part of wmma.mma,
#: by (input dtype, accumulator dtype).
MMA_TYPES = {("f16", "f32"): "f32.f32", ("f16", "f16"): "f16.f16", ("bf16", "f32"): "f32.bf16.bf16.f32"}


def load_ab(b: Builder, operand: str, layout: str, dtype: str, addr: Addr, stride: int) -> tuple[VReg, ...]:
    """`wmma.load.{a,b}` of one operand fragment from shared memory, rows `stride` elements apart."""
    regs = b.regs("b32", FRAGMENT_REGS[dtype])
    op = f"wmma.load.{operand.lower()}.sync.aligned.{layout}.{SHAPE}.shared.{dtype}"
    b.emit(op, Vec(regs), addr, Imm(str(stride)), ndefs=1)
    return regs


def mma_opcode(a_layout: str, b_layout: str, dtype: str, acc: str) -> str:
    return f"wmma.mma.sync.aligned.{a_layout}.{b_layout}.{SHAPE}.{MMA_TYPES[(dtype, acc)]}"


def mma(b: Builder, op: str, acc: tuple[VReg, ...], a: tuple[VReg, ...], bfrag: tuple[VReg, ...]) -> None:
    """Accumulate in place: acc = a @ b + acc (`op` from `mma_opcode`)."""
    b.emit(op, Vec(acc), Vec(a), Vec(bfrag), Vec(acc), ndefs=1)


def store_d(b: Builder, space: str, acc_dtype: str, addr: Addr, acc: tuple[VReg, ...], stride: int) -> None:
    """`wmma.store.d` of an accumulator fragment, row-major, rows `stride` elements apart."""
    b.emit(f"wmma.store.d.sync.aligned.row.{SHAPE}.{space}.{acc_dtype}", addr, Vec(acc), Imm(str(stride)))


def load_c(b: Builder, space: str, acc_dtype: str, addr: Addr, stride: int) -> tuple[VReg, ...]:
    """`wmma.load.c` of an accumulator fragment, row-major (the layout `store_d` wrote)."""
    regs = b.regs("f32" if acc_dtype == "f32" else "b32", ACC_REGS[acc_dtype])
    b.emit(f"wmma.load.c.sync.aligned.row.{SHAPE}.{space}.{acc_dtype}", Vec(regs), addr, Imm(str(stride)), ndefs=1)
    return regs
