"""The sm80 epilogue store path: straight from the mma.sync fragment registers to C.

Each thread holds column pairs (2t, 2t+1) of rows g and g+8 of every mma tile, so a pair becomes
one `.v2.f32`, one packed f16x2/bf16x2 `.b32` or one packed 2 x 8-bit `.b16` store. Odd N, or C
aligned below a pair's width, fall back to scalar stores. s32 accumulators are stored as they are
(s32 output) or converted to f32 first. The element math is epilogue/math.py's.
"""
from __future__ import annotations

from ...emit.addressing import RowPointers
from ...emit.epilogue.math import EpilogueMath, TileEpilogueMath
from ...ir import Addr, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U32, S32, F32
from ...emit.memory import st_global
from .plans import StorePlan, store_plan


def fragment_pair(epi: EpilogueMath, frag: tuple[VReg, ...], h: int) -> list[VReg]:
    """The two values (columns 2t, 2t+1) of row half h of one mma tile's accumulators: f32, or s32
    bits when the output is s32 (f16 accumulators: one packed f16x2 register, widened)."""
    if epi.g.acc_dtype == "f16":
        return list(epi.unpack(frag[h], "f16"))
    vals = [frag[2 * h], frag[2 * h + 1]]
    return [ptx.cvt(epi.b, F32, S32, v, rounding="rn") for v in vals] if epi.int_to_float else vals


def site_vectors(epi: TileEpilogueMath, sp: StorePlan, row: VReg, col: VReg, name: str) -> dict[tuple[int, int], VReg]:
    """The value of the row or column vector `name` (bias, or alpha * scale) at each (row delta,
    column delta) site, loaded once per distinct row or column of this thread."""
    lw, kind = epi.lw, getattr(epi.e, name)
    if kind is None:
        return {}
    by_col = kind == "col"
    what = "alpha * scale" if name == "scale" else name
    epi.b.comment(f"{what} ({kind}): one load per distinct {'column' if by_col else 'row'} of this thread")
    keys = sorted({dc + j if by_col else dr for *_, dr, dc in sp.sites for j in range(2)})
    base, dim, edge = (col, "N", epi.edge.n_edge) if by_col else (row, "M", epi.edge.m_edge)
    guards = [ptx.setp(lw.b, "lt", U32, ptx.add(lw.b, U32, base, Imm(str(key))), lw.dim(dim)) if edge else None
              for key in keys]
    value = dict(zip(keys, epi.vector_values(name, base, keys, guards)))
    return {(dr, dc + j): value[dc + j if by_col else dr] for *_, dr, dc in sp.sites for j in range(2)}


class DirectEpilogue(TileEpilogueMath):
    """Stores the tile straight from the fragment registers (no staging tile)."""

    def emit(self, acc) -> None:
        if self.lw.s.swap_ab is True:
            self.emit_transposed(acc)
            return
        lw, b, g, ob = self.lw, self.b, self.g, self.ob
        sp = store_plan(lw.s)
        b.comment(f"C pointer of this thread's first fragment element ({g.out_dtype})")
        row = ptx.add(lw.b, U32, lw.ex.reg(sp.row0), self.tile.bm0)
        col = ptx.add(lw.b, U32, lw.ex.reg(sp.col0), self.tile.bn0)
        base = lw.element_pointer(lw.ptr["C"], "ldc", row, col, ob)
        # Pair stores need an even N (so a pair never straddles the edge) and pair-aligned rows.
        pair = g.n % 2 == 0 and g.out_alignment() >= 2 * ob and not self.atomic
        widths = [0] if pair else [0, 1]
        guards = self.edge.store_guards(row, col, sorted({(dr, dc + j) for *_, dr, dc in sp.sites for j in widths}))
        self.describe()
        bias = site_vectors(self, sp, row, col, "bias")
        factor = site_vectors(self, sp, row, col, "scale")
        row_ptr = RowPointers(b, base, lw.dim("ldc"), ob)
        for m, n, h, dr, dc in sp.sites:
            if n == 0:
                b.comment(f"epilogue rows m-tile {m} {'g+8' if h else 'g'}")
            if g.acc_dtype == "f16" and self.e.is_identity and pair:  # already packed f16x2
                st_global(b, B32, Addr(row_ptr[dr], dc * ob), (acc[m][n][h],), guard=guards[dr, dc])
                continue
            vals = fragment_pair(self, acc[m][n], h)
            for j0 in (range(0, 2, 2) if pair else range(2)):
                count = 2 if pair else 1
                addr = Addr(row_ptr[dr], (dc + j0) * ob)
                guard = guards[dr, dc + j0]  # one combined predicate, used by the load and the store
                olds = self.load_old(addr, count, guard) if self.e.beta != 0.0 else [None] * count
                outs = [self.apply(vals[j0 + j], olds[j], bias.get((dr, dc + j0 + j)), factor.get((dr, dc + j0 + j)))
                        for j in range(count)]
                self.store(addr, outs, guard)

    def emit_transposed(self, acc) -> None:
        """Swap-AB (schedule/swap_ab.py): this kernel's C' = Cᵀ, so its element (r, c) goes to the
        caller's row-major C at (c * ldc + r): one pointer per distinct column c of this thread, the
        rows r as immediate offsets (C's consecutive elements), one scalar store per element (the
        pair a fragment holds is two rows of the caller's C)."""
        lw, b, ob = self.lw, self.b, self.ob
        sp = store_plan(lw.s)
        b.comment(f"swap-AB: C' = C^T stored transposed into row-major C ({self.g.out_dtype}), element by element")
        row = ptx.add(lw.b, U32, lw.ex.reg(sp.row0), self.tile.bm0)
        col = ptx.add(lw.b, U32, lw.ex.reg(sp.col0), self.tile.bn0)
        guards = self.edge.store_guards(row, col, sorted({(dr, dc + j) for *_, dr, dc in sp.sites for j in range(2)}))
        self.describe()
        bias = site_vectors(self, sp, row, col, "bias")
        factor = site_vectors(self, sp, row, col, "scale")
        column_ptr: dict[int, VReg] = {}
        for m, n, h, dr, dc in sp.sites:
            if n == 0:
                b.comment(f"epilogue rows m-tile {m} {'g+8' if h else 'g'} (columns of C)")
            vals = fragment_pair(self, acc[m][n], h)
            for j in range(2):
                if dc + j not in column_ptr:
                    c = ptx.add(lw.b, U32, col, Imm(str(dc + j))) if dc + j else col
                    column_ptr[dc + j] = lw.element_pointer(lw.ptr["C"], "ldc", c, row, ob)
                addr = Addr(column_ptr[dc + j], dr * ob)
                guard = guards[dr, dc + j]
                old = self.load_old(addr, 1, guard)[0] if self.e.beta != 0.0 else None
                self.store(addr, [self.apply(vals[j], old, bias.get((dr, dc + j)), factor.get((dr, dc + j)))], guard)

    def accumulators(self, tile: tuple[VReg, ...], h: int) -> list[VReg]:
        """The two values (columns 2t, 2t+1) of row half h of one mma tile's accumulators: f32,
        or s32 bits when the output is s32."""
        if self.g.acc_dtype == "f16":
            return list(self.unpack(tile[h], "f16"))
        vals = [tile[2 * h], tile[2 * h + 1]]
        return [ptx.cvt(self.b, F32, S32, v, rounding="rn") for v in vals] if self.int_to_float else vals
