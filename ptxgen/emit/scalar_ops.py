"""Scalar instruction helpers shared by the lowerings (sm_80/wmma `GemmLowering`, sm_90a
`Sm90Lowering` and its `Sm90Context`).

A lowering that mixes these in provides `self.b` (its Builder) and `self.dims` (the .u32 size
parameters loaded so far); each helper emits one instruction into a fresh virtual register."""
from __future__ import annotations

from ..ir import Builder, Imm, VReg
from ..ir import ops as ptx
from ..ir.ops import U32, PtxType
from .memory import load_param


class ScalarOps:
    """u32/u64/pred results of one instruction, wide multiplies, ceil-division and size parameters."""

    b: Builder
    dims: dict[str, VReg]

    def u32(self, op: str, *srcs, comment: str | None = None) -> VReg:
        """One instruction spelled by hand into a fresh b32, for hand-written test kernels (the code
        generator spells every typed instruction through `ptxgen.ir.ops`)."""
        d = self.b.reg("b32")
        self.b.emit(op, d, *srcs, ndefs=1, comment=comment)
        return d

    def u64(self, op: str, *srcs, comment: str | None = None) -> VReg:
        d = self.b.reg("b64")
        self.b.emit(op, d, *srcs, ndefs=1, comment=comment)
        return d

    def pred(self, op: str, *srcs) -> VReg:
        p = self.b.reg("pred")
        self.b.emit(op, p, *srcs, ndefs=1)
        return p

    def wide_mul(self, a: VReg | Imm, bb: VReg | Imm, ty: PtxType = U32) -> VReg:
        return ptx.mul_wide(self.b, ty, a, bb)

    def ceil_div(self, x: VReg, d: int) -> VReg:
        """ceil(x / d) of a u32 for a constant d: a shift when d is a power of two."""
        up = ptx.add(self.b, U32, x, d - 1) if d > 1 else x
        if d & (d - 1) == 0:
            return ptx.shr(self.b, U32, up, d.bit_length() - 1)
        return ptx.div(self.b, U32, up, d)

    def dim(self, name: str) -> VReg:
        """A .u32 size parameter, loaded on first use."""
        if name not in self.dims:
            self.dims[name] = load_param(self.b, U32, name)
        return self.dims[name]
