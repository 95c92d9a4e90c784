"""Memory instructions every pipeline uses: parameters, global stores, the CTA barrier.

Every store takes an optional guard predicate, so edge tiles need no new emitters. (cp.async is
sm_80's: sm80/isa.py.)
"""
from __future__ import annotations

from ..ir import Builder
from ..ir import Addr, Imm, Operand, Sym, Vec, VReg
from ..ir import ops as ptx
from ..ir.ops import PtxType


def load_param(b: Builder, ty: PtxType, name: str) -> VReg:
    """Kernel parameter `name` of type `ty`, in a fresh register of its class."""
    r = ptx.load(b, "param", ty, Addr(Sym(name)))
    assert isinstance(r, VReg)
    return r


def ld_param(b: Builder, cls: str, ptx_type: str, name: str) -> VReg:
    """`load_param` with the type spelled by hand (".u32"), as the sm_90a lowering calls it."""
    r = b.reg(cls)
    b.emit(f"ld.param{ptx_type}", r, Addr(Sym(name)), ndefs=1)
    return r


def st_global(b: Builder, ty: PtxType, addr: Addr, values: tuple[VReg, ...],
              guard: VReg | None = None) -> None:
    """A 1/2/4-wide global store (`st.global.v2.f32` ...) of `ty` values from registers."""
    src: Operand = values[0] if len(values) == 1 else Vec(values)
    ptx.store(b, "global", ty, addr, src, width=len(values), guard=guard)


def bar_sync(b: Builder, comment: str | None = None, barrier: int = 0, threads: int | None = None) -> None:
    """`bar.sync barrier[, threads]`: the whole CTA at barrier 0 by default, or `threads` (a
    multiple of 32) at a named barrier."""
    counts = () if threads is None else (Imm(str(threads)),)
    b.emit("bar.sync", Imm(str(barrier)), *counts, comment=comment)
