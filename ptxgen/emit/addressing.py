"""Row pointers for strided global accesses: base + r * ld * elem_bytes for ascending row deltas r."""
from __future__ import annotations

from ..ir import Builder
from ..ir import Imm, VReg


class RowPointers:
    """Each new row's pointer adds (r - previous row) * stride to the previous row's pointer,
    so a tile's rows cost one 64-bit add each, with one step register per distinct gap.

    `steps` may be precomputed (e.g. loop-invariant before a main loop); missing gaps are
    computed from the leading dimension `ld` (elements) where they are first needed, as one
    `mul.wide.u32 ld, gap * elem_bytes`: 64-bit, since ld * elem_bytes may reach 2^32 bytes.
    """

    def __init__(self, b: Builder, base: VReg, ld: VReg | None = None, elem_bytes: int = 1,
                 steps: dict[int, VReg] | None = None):
        self.b, self.ld, self.elem_bytes = b, ld, elem_bytes
        self.steps = steps if steps is not None else {}
        self.ptr: dict[int, VReg] = {0: base}
        self.prev = 0

    def __getitem__(self, row: int) -> VReg:
        if row not in self.ptr:
            gap = row - self.prev
            if gap not in self.steps:
                assert self.ld is not None, f"no step for a gap of {gap} rows"
                step = self.b.reg("b64")
                self.b.emit("mul.wide.u32", step, self.ld, Imm(str(gap * self.elem_bytes)), ndefs=1)
                self.steps[gap] = step
            nxt = self.b.reg("b64")
            self.b.emit("add.s64", nxt, self.ptr[self.prev], self.steps[gap], ndefs=1)
            self.ptr[row] = nxt
        self.prev = row
        return self.ptr[row]
