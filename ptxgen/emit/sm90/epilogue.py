"""The sm_90a direct epilogue: each f32 accumulator element, cast to the output dtype, stored to C
with st.global, guarded by row < M and column < N (the tile may overhang both).

Element i of an m64 block sits at row 16w + g + 8*((i>>1)&1), column 8*(i>>2) + 2t + (i&1)
(wgmma_layouts.accumulator_coord), so a thread needs two row pointers per block and its column
offsets are immediates from one per-thread column base.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, VReg
from .wgmma_layouts import accumulator_coord

if TYPE_CHECKING:
    from .pipeline import Sm90Lowering

#: Output dtypes the direct store writes, with the f32 -> out conversion (None: no conversion).
STORE = {"f32": (None, "st.global.f32"), "f16": ("cvt.rn.f16.f32", "st.global.b16"),
         "bf16": ("cvt.rn.bf16.f32", "st.global.b16")}


class DirectStores:
    def __init__(self, lw: "Sm90Lowering"):
        self.lw, self.b = lw, lw.b

    def emit(self, acc: list[tuple[VReg, ...]]) -> None:
        lw, b, g = self.lw, self.b, self.lw.g
        cvt, store = STORE[g.out_dtype]
        eb = g.out_bytes
        b.banner(f"Epilogue: accumulators -> {g.out_dtype} -> C, direct stores guarded by M and N")
        row_expr, col_expr = accumulator_coord(0)
        row0 = lw.u32("add.u32", lw.tile_m0, lw.ex.emit(row_expr), comment="16w + g: this thread's first row")
        col0 = lw.u32("add.u32", lw.tile_n0, lw.ex.emit(col_expr), comment="2t: this thread's first column")
        room = lw.u32("sub.u32", lw.dim("N"), col0, comment="columns left from col0 (negative: none)")
        cols = sorted({8 * (i >> 2) + (i & 1) for i in range(len(acc[0]))})
        col_ok = {c: lw.pred("setp.gt.s32", room, Imm(str(c))) for c in cols}
        wide_col = lw.u64("cvt.u64.u32", col0)
        for m, frag in enumerate(acc):
            for half in (0, 1):
                row = lw.u32("add.u32", row0, Imm(str(64 * m + 8 * half)))
                row_ok = lw.pred("setp.lt.u32", row, lw.dim("M"))
                off = lw.u64("mad.wide.u32", row, lw.dim("ldc"), wide_col)
                if eb > 1:
                    off = lw.u64("shl.b64", off, Imm(str(eb.bit_length() - 1)))
                ptr = lw.u64("add.s64", lw.c_ptr, off)
                b.comment(f"m64 block {m}, rows +{8 * half}")
                for i, r in enumerate(frag):
                    if (i >> 1) & 1 != half:
                        continue
                    c = 8 * (i >> 2) + (i & 1)
                    ok = lw.pred("and.pred", row_ok, col_ok[c])
                    value = r
                    if cvt is not None:
                        value = b.reg("b16")
                        b.emit(cvt, value, r, ndefs=1)
                    b.emit(store, Addr(ptr, c * eb), value, guard=ok)
