"""The sm_80 instruction families as tables and thin wrappers: mma.sync, ldmatrix and the
cp.async group protocol (docs/ptx_facts/mma_sync.md §1, shared_memory.md §4,
cp_async.md §5). Every copy takes an optional guard predicate
and cp.async an optional zero-fill src-size, so edge tiles need no new emitters."""
from __future__ import annotations

from ...ir import Builder
from ...ir import Addr, Imm, Operand, Vec, VReg

#: mma.sync opcode per (shape, input dtype, accumulator dtype).
MMA_OPCODES = {
    ("m16n8k16", "f16", "f32"): "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    ("m16n8k16", "bf16", "f32"): "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    ("m16n8k16", "f16", "f16"): "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    ("m16n8k8", "tf32", "f32"): "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    ("m16n8k32", "s8", "s32"): "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
    ("m16n8k32", "u8", "s32"): "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32",
}
#: Registers per lane of each mma operand: (A .b32, B .b32, C/D accumulators).
MMA_REGS = {"m16n8k16": (4, 2, 4)}


def ldmatrix(b: Builder, count: int, addr: Addr, trans: bool, comment: str | None = None,
             into: tuple[VReg, ...] | None = None) -> tuple[VReg, ...]:
    """`ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16`: `count` 8x8 b16 matrices, into
    fresh registers or into `into` (loop-carried fragments)."""
    dst = b.regs("b32", count) if into is None else tuple(into)
    assert len(dst) == count, (len(dst), count)
    op = f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16"
    b.emit(op, Vec(dst), addr, ndefs=1, comment=comment)
    return dst


def mma(b: Builder, shape: str, dtype: str, acc_dtype: str, acc: tuple[VReg, ...], a: tuple[VReg, ...],
        bfrag: tuple[VReg, ...]) -> None:
    """Accumulate in place: acc = a @ b + acc (f32 accumulators, or f16x2 pairs)."""
    op = MMA_OPCODES[(shape, dtype, acc_dtype)]
    b.emit(op, Vec(acc), Vec(a), Vec(bfrag), Vec(acc), ndefs=1)


# --- cp.async: asynchronous global -> shared copies, in commit groups ------------------------------
#: cp.async cache operator per copy width: .cg (L2 only) allows only 16 bytes.
CP_ASYNC_OPCODE = {16: "cp.async.cg.shared.global", 8: "cp.async.ca.shared.global",
                   4: "cp.async.ca.shared.global"}


def cp_async(b: Builder, dst: Addr, src: Addr, size: int = 16, src_size: Operand | None = None,
             guard: VReg | None = None, comment: str | None = None) -> None:
    """One asynchronous global->shared copy of `size` bytes, zero-filled past `src_size`: a .u32
    byte count, or a predicate (cp.async's ignore-src, PTX 7.5) that zero-fills the whole copy."""
    ops: tuple[Operand, ...] = (dst, src, Imm(str(size)))
    if src_size is not None:
        ops += (src_size,)
    b.emit(CP_ASYNC_OPCODE[size], *ops, guard=guard, comment=comment)


def commit_group(b: Builder, comment: str | None = None) -> None:
    b.emit("cp.async.commit_group", comment=comment)


def wait_group(b: Builder, pending: int, comment: str | None = None) -> None:
    """Wait until at most `pending` of this thread's most recent groups are still in flight."""
    b.emit("cp.async.wait_group", Imm(str(pending)), comment=comment)
