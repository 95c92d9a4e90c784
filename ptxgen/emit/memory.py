"""Memory instruction family: params, global/shared ld/st, and the cp.async group protocol.

Every copy and store takes an optional guard predicate (and cp.async an optional zero-fill
src-size), so edge tiles need no new emitters.
"""
from __future__ import annotations

from .builder import Builder
from .ir import Addr, Imm, Operand, Sym, Vec, VReg

#: cp.async cache operator per copy width: .cg (L2 only) allows only 16 bytes.
CP_ASYNC_OPCODE = {16: "cp.async.cg.shared.global", 8: "cp.async.ca.shared.global",
                   4: "cp.async.ca.shared.global"}


def ld_param(b: Builder, cls: str, ptx_type: str, name: str) -> VReg:
    r = b.reg(cls)
    b.emit(f"ld.param{ptx_type}", r, Addr(Sym(name)), ndefs=1)
    return r


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


def st_global(b: Builder, ptx_type: str, addr: Addr, values: tuple[VReg, ...],
              guard: VReg | None = None) -> None:
    """A 1/2/4-wide global store (`st.global.v2.f32` ...) from registers."""
    vec = {1: "", 2: ".v2", 4: ".v4"}[len(values)]
    src: Operand = values[0] if len(values) == 1 else Vec(values)
    b.emit(f"st.global{vec}{ptx_type}", addr, src, guard=guard)


def bar_sync(b: Builder, comment: str | None = None) -> None:
    b.emit("bar.sync", Imm("0"), comment=comment)
