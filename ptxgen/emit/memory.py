"""Memory instructions every pipeline uses: parameters, global stores, the CTA barrier.

Every store takes an optional guard predicate, so edge tiles need no new emitters. (cp.async is
sm_80's: sm80/isa.py.)
"""
from __future__ import annotations

from ..ir import Builder
from ..ir import Addr, Imm, Operand, Sym, Vec, VReg


def ld_param(b: Builder, cls: str, ptx_type: str, name: str) -> VReg:
    r = b.reg(cls)
    b.emit(f"ld.param{ptx_type}", r, Addr(Sym(name)), ndefs=1)
    return r


def st_global(b: Builder, ptx_type: str, addr: Addr, values: tuple[VReg, ...],
              guard: VReg | None = None) -> None:
    """A 1/2/4-wide global store (`st.global.v2.f32` ...) from registers."""
    vec = {1: "", 2: ".v2", 4: ".v4"}[len(values)]
    src: Operand = values[0] if len(values) == 1 else Vec(values)
    b.emit(f"st.global{vec}{ptx_type}", addr, src, guard=guard)


def bar_sync(b: Builder, comment: str | None = None) -> None:
    b.emit("bar.sync", Imm("0"), comment=comment)
