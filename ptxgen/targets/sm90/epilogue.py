"""The sm_90a direct epilogue: each f32 accumulator element goes through the shared epilogue math
(epilogue/math.py: alpha, beta * C, bias, scale vectors, ReLU/GELU/SiLU, the cast) and is stored
to C with st.global, guarded by row < M and column < N (the tile may overhang both); the two
adjacent columns a fragment holds go in one vector store where N and C's alignment allow. s32
accumulators (s8/u8 inputs) are stored as they are for an s32 output, else converted to f32 first
(cvt.rn.f32.s32) and go the same way, to f32/f16/bf16 or quantised to s8/u8, as on sm_80.

Element i of an m64 block sits at row 16w + g + 8*((i>>1)&1), column 8*(i>>2) + 2t + (i&1)
(wgmma_layouts.accumulator_coord), so a thread needs two row pointers per block and its column
offsets are immediates from one per-thread column base.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import B64, F32, PRED, S32, S64, U32, U64
from ...emit.epilogue.math import LOG2_E, EpilogueMath, f32
from .wgmma_layouts import accumulator_coord

if TYPE_CHECKING:
    from .context import Sm90Context, TmaOperands

#: Output dtypes the direct store writes: floats from every input, s32 and quantised s8/u8 from s8/u8.
OUTPUTS = ("f32", "f16", "bf16", "s32", "s8", "u8")


class DirectStores(EpilogueMath):
    """EpilogueMath with the wgmma accumulator layout's store path; `emit` takes the tile's
    operands (its origin, C matrix and warpgroup), the guards are built from the accumulator
    coordinates."""

    lw: "Sm90Context"

    def __init__(self, ctx: "Sm90Context"):
        super().__init__(ctx)

    def times_sigmoid(self, v: VReg, z: VReg) -> VReg:
        """v / (1 + e^-z) as EpilogueMath's, but with rcp.approx (1 ulp): ptxas lowers rcp.rn.f32 to
        a subroutine call, and a call anywhere in the function serialises every wgmma in it (C7509)."""
        e = ptx.ex2(self.b, F32, ptx.mul(self.b, F32, z, f32(-LOG2_E)))
        return ptx.mul(self.b, F32, v, ptx.rcp_approx(self.b, F32, ptx.add(self.b, F32, e, f32(1.0))))

    def emit(self, acc: list[tuple[VReg, ...]], ops: "TmaOperands") -> None:
        lw, b, g, e = self.lw, self.b, self.g, self.e
        eb = self.ob
        b.banner(f"Epilogue: accumulators -> {g.out_dtype} -> C, direct stores guarded by M and N")
        self.describe()
        row_expr, col_expr = accumulator_coord(0)
        row0 = ptx.add(lw.b, U32, ops.tile.bm0, lw.ex.emit(row_expr), comment="16w + g: this thread's first row")
        if lw.plan.consumers > 1:
            first = ptx.mul(lw.b, U32, ops.warpgroup, Imm(str(lw.plan.rows_per_consumer)))
            row0 = ptx.add(lw.b, U32, row0, first, comment="the warpgroup's first row")
        col0 = ptx.add(lw.b, U32, ops.tile.bn0, lw.ex.emit(col_expr), comment="2t: this thread's first column")
        room = ptx.sub(lw.b, U32, lw.dim("N"), col0, comment="columns left from col0 (negative: none)")
        cols = sorted({8 * (i >> 2) + (i & 1) for i in range(len(acc[0]))})
        col_ok = {c: ptx.setp(lw.b, "gt", S32, room, Imm(str(c))) for c in cols}
        col_vec = {name: dict(zip(cols, self.vector_values(name, col0, cols, [col_ok[c] for c in cols])))
                   for name in ("bias", "scale") if getattr(e, name) == "col"}
        wide_col = ptx.cvt(lw.b, U64, U32, col0)
        # Elements i and i + 1 of a fragment are columns c and c + 1 of one row: one st.global.v2
        # (f32 / s32; a packed b32 for f16/bf16; two bytes quantised) where the pair never straddles
        # N (N even) and C's rows keep a pair aligned, as the sm_80 epilogue decides (128 -> 64
        # predicated stores per thread per 128x256 tile of f32); else one by one.
        pair = g.n % 2 == 0 and g.out_alignment() >= 2 * eb and not self.atomic
        transposed = lw.s.swap_ab is True
        if transposed:  # swap-AB: this kernel's C' = Cᵀ goes to the caller's row-major C
            b.comment("swap-AB: element (row, col) of C' = C^T goes to C + (col * ldc + row), one scalar store "
                      "each (the pair a fragment holds is two rows of C)")
            pair = False
            steps = {c: ptx.mul_wide(lw.b, U32, lw.dim("ldc"), c * eb) for c in cols if c}
        for m, frag in enumerate(acc):
            for half in (0, 1):
                row = ptx.add(lw.b, U32, row0, Imm(str(64 * m + 8 * half)))
                # a grouped tile's rows end at its group's end (targets/sm90/grouped.py), not at M
                row_ok = ptx.setp(lw.b, "lt", U32, row, lw.dim("M") if ops.rows_end is None else ops.rows_end)
                row_vec = {name: self.vector_values(name, row, [0], [row_ok])[0]
                           for name in ("bias", "scale") if getattr(e, name) == "row"}
                if transposed:
                    off = ptx.mad_wide(lw.b, U32, col0, lw.dim("ldc"), ptx.cvt(lw.b, U64, U32, row))
                else:
                    off = ptx.mad_wide(lw.b, U32, row, lw.dim("ldc"), wide_col)
                if eb > 1:
                    off = ptx.shl(lw.b, B64, off, Imm(str(eb.bit_length() - 1)))
                ptr = ptx.add(lw.b, S64, ops.c, off)
                b.comment(f"m64 block {m}, rows +{8 * half}")
                for i, r in enumerate(frag):
                    if (i >> 1) & 1 != half or (pair and i & 1):
                        continue
                    c = 8 * (i >> 2) + (i & 1)
                    regs = [r, frag[i + 1]] if pair else [r]
                    ok = ptx.and_(lw.b, PRED, row_ok, col_ok[c])   # N even: c < N covers c + 1
                    addr = (Addr(ptx.add(lw.b, S64, ptr, steps[c]) if c else ptr, 0) if transposed
                            else Addr(ptr, c * eb))
                    old = self.load_old(addr, len(regs), ok) if e.beta else [None] * len(regs)
                    if g.out_dtype == "s32":          # the exact accumulator bits (no epilogue: verify.py)
                        self.store(addr, regs, ok)
                        continue
                    outs = []
                    for j, (v, prev) in enumerate(zip(regs, old)):
                        vec = {name: (row_vec[name] if name in row_vec else col_vec[name][c + j])
                               for name in ("bias", "scale") if name in row_vec or name in col_vec}
                        v = ptx.cvt(self.b, F32, S32, v, rounding="rn") if self.int_to_float else v
                        outs.append(self.apply(v, prev, vec.get("bias"), vec.get("scale")))
                    self.store(addr, outs, ok)
