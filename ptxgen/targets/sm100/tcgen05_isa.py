"""The tcgen05 instructions the sm_100a kernel emits, one wrapper each (its opcode strings are this
target's ISA table; docs/ptx_facts/tcgen05.md). `group` is the `.cta_group` (1 unless given): every
tcgen05 instruction of a kernel must use one (§12b); a CTA pair's kernel passes 2 (§12i)."""
from __future__ import annotations

from ...ir import Addr, Builder, Imm, Instr, Vec, VReg

GROUP = "cta_group::1"


def _group(group: int) -> str:
    if group not in (1, 2):
        raise ValueError(f"tcgen05 runs on one CTA or a CTA pair: .cta_group::1 or ::2, not {group}")
    return f"cta_group::{group}"


def alloc(b: Builder, slot: Addr, columns: int, comment: str | None = None, group: int = 1) -> Instr:
    """Whole warp: allocate `columns` TMEM columns (a power of two, 32..512) and write their address
    to the shared word at `slot` (§12b)."""
    if columns < 32 or columns > 512 or columns & (columns - 1):
        raise ValueError(f"tcgen05.alloc takes a power of two from 32 to 512 columns, not {columns}")
    return b.emit(f"tcgen05.alloc.{_group(group)}.sync.aligned.shared::cta.b32", slot, Imm(str(columns)), comment=comment)


def relinquish_alloc_permit(b: Builder, comment: str | None = None, group: int = 1) -> Instr:
    """Whole warp: this CTA allocates no more, so a CTA waiting to allocate on the SM may go (§12b)."""
    return b.emit(f"tcgen05.relinquish_alloc_permit.{_group(group)}.sync.aligned", comment=comment)


def dealloc(b: Builder, taddr: VReg, columns: int, comment: str | None = None, group: int = 1) -> Instr:
    """Whole warp: free the allocation at `taddr` (every column before the kernel exits, §12b)."""
    return b.emit(f"tcgen05.dealloc.{_group(group)}.sync.aligned.b32", taddr, Imm(str(columns)), comment=comment)


def mma(b: Builder, kind: str, d: Addr, a_desc: VReg, b_desc: VReg, idesc: VReg, accumulate: VReg | int,
        guard: VReg | None = None, comment: str | None = None, group: int = 1) -> Instr:
    """One thread: D (TMEM) = A * B (+ D when `accumulate`) from shared-memory descriptors (§12c);
    with group 2 the pair's MMA, each CTA's halves of A, B and D at the same addresses (§12i)."""
    acc = Imm(str(accumulate)) if isinstance(accumulate, int) else accumulate
    return b.emit(f"tcgen05.mma.{_group(group)}.kind::{kind}", d, a_desc, b_desc, idesc, acc, guard=guard, comment=comment)


def commit(b: Builder, bar: Addr, guard: VReg | None = None, comment: str | None = None, group: int = 1,
           cta_mask: VReg | None = None) -> Instr:
    """One arrival on `bar` once this thread's earlier tcgen05 operations have completed (§12j);
    with `cta_mask` (a .b16 register) one arrival on `bar`'s offset in every CTA of the mask."""
    op = f"tcgen05.commit.{_group(group)}.mbarrier::arrive::one.shared::cluster"
    if cta_mask is None:
        return b.emit(op + ".b64", bar, guard=guard, comment=comment)
    if cta_mask.cls != "b16":
        raise ValueError("the commit's ctaMask is a 16-bit operand: pass a .b16 register")
    return b.emit(op + ".multicast::cluster.b64", bar, cta_mask, guard=guard, comment=comment)


def load_32x32b(b: Builder, regs: tuple[VReg, ...], taddr: Addr, comment: str | None = None) -> Instr:
    """Whole warp: thread t reads lane L0 + t, columns C0 .. C0 + len(regs) - 1 (§12f, 32x32b)."""
    n = len(regs)
    if n not in (1, 2, 4, 8, 16, 32, 64, 128):
        raise ValueError(f"tcgen05.ld.32x32b takes .x1 .. .x128 (powers of two), not {n} registers")
    return b.emit(f"tcgen05.ld.sync.aligned.32x32b.x{n}.b32", Vec(regs), taddr, ndefs=1, comment=comment)


def wait_ld(b: Builder, comment: str | None = None) -> Instr:
    """Whole warp: this warp's tcgen05.ld have completed (§12j)."""
    return b.emit("tcgen05.wait::ld.sync.aligned", comment=comment)


def fence_after_thread_sync(b: Builder, comment: str | None = None) -> Instr:
    """Order the tcgen05 operations after a thread synchronisation (an mbarrier wait, bar.sync) after it."""
    return b.emit("tcgen05.fence::after_thread_sync", comment=comment)


def fence_before_thread_sync(b: Builder, comment: str | None = None) -> Instr:
    """Order this thread's earlier tcgen05 operations before the thread synchronisation that follows."""
    return b.emit("tcgen05.fence::before_thread_sync", comment=comment)
