"""Row pointers for strided global accesses: base + r * ld * elem_bytes for ascending row deltas r."""
from __future__ import annotations

from ..ir import Builder
from ..ir import VReg
from ..ir import ops as ptx
from ..ir.ops import S64, U32


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
                self.steps[gap] = ptx.mul_wide(self.b, U32, self.ld, gap * self.elem_bytes)
            self.ptr[row] = ptx.add(self.b, S64, self.ptr[self.prev], self.steps[gap])
        self.prev = row
        return self.ptr[row]
