"""Bounds checks for edge tiles: zero-filled copies and predicated stores.

A dimension that divides its block tile gets no checks at all, so aligned problems lower to
exactly the unchecked kernel. Otherwise:
* copies pass cp.async a `src-size`: the bytes of the unit inside the matrix, the rest zero-filled
  (zeros contribute nothing to the dot products), and never touch memory past the matrix;
* 2- and 1-byte copies (operands aligned below 4 bytes) load through a predicated `ld.global.b16`
  or `ld.global.u8` (a 2-byte unit of int8 straddling the edge: its first byte only, `gemm.copy_narrow`);
* stores are predicated on row < M and column < N.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..schedule.geometry import edges
from .ir import Imm, Operand, VReg

if TYPE_CHECKING:
    from .gemm import GemmLowering


class EdgeChecks:
    """Emits the bounds logic for one GemmLowering (explicitly handed in, no shared state)."""

    def __init__(self, lw: "GemmLowering"):
        self.lw = lw
        self.m_edge, self.n_edge, self.k_edge = edges(lw.g, lw.s)
        self.fixed: dict[str, list[Operand | None]] = {}

    @property
    def any(self) -> bool:
        return self.m_edge or self.n_edge or self.k_edge

    def _limit(self, name: str) -> tuple[bool, str]:
        """(edge?, dimension) of the operand's non-K dimension: M for A, N for B."""
        return (self.m_edge, "M") if name == "A" else (self.n_edge, "N")

    def prepare(self) -> None:
        """Loop-invariant byte counts of each copy along the operand's M or N dimension."""
        lw = self.lw
        for name in ("A", "B"):
            cp = lw.copy[name]
            tile = cp.tile
            cb, eb = tile.copy_bytes, tile.elem_bytes
            edge, dim = self._limit(name)
            sizes: list[Operand | None] = []
            if edge:
                lw.b.comment(f"{name}: bytes of each copy inside the matrix along {dim} (edge tile)")
                limit = lw.dim(dim)
                origin = lw.bm0 if name == "A" else lw.bn0
            for it in range(tile.copies_per_thread):
                if not edge:
                    sizes.append(None)
                elif not tile.k_along_rows:  # tile rows run along M/N: the whole unit is in or out
                    row = lw.u32("add.u32", lw.u32("add.u32", lw.ex.reg(cp.row0), origin), Imm(str(cp.rows[it])))
                    inside = lw.pred("setp.lt.u32", row, limit)
                    sizes.append(lw.u32("selp.b32", Imm(str(cb)), Imm("0"), inside))
                else:  # units run along M/N: a unit may straddle the edge
                    first = lw.u32("mad.lo.u32", lw.ex.reg(cp.col0), Imm(str(cb // eb)), origin)
                    first = lw.u32("add.u32", first, Imm(str(cp.cols[it] * cb // eb)))
                    sizes.append(self._clamp_bytes(lw.u32("sub.s32", limit, first), eb, cb))
            self.fixed[name] = sizes

    def _clamp_bytes(self, elems: VReg, eb: int, cb: int) -> VReg:
        lw = self.lw
        bytes_ = lw.u32("mul.lo.s32", elems, Imm(str(eb)))
        return lw.u32("min.s32", lw.u32("max.s32", bytes_, Imm("0")), Imm(str(cb)))

    def k_remaining(self, k_tile: VReg | int) -> VReg | None:
        """K - k_tile*BK: elements of K left from this k-tile's start (only with a K edge)."""
        if not self.k_edge:
            return None
        lw = self.lw
        k = lw.k_left if lw.k_left is not None else lw.dim("K")  # split-K: K past this split's start
        if isinstance(k_tile, int):
            return lw.u32("sub.s32", k, Imm(str(k_tile * lw.s.bk)))
        return lw.u32("mad.lo.s32", k_tile, Imm(str(-lw.s.bk)), k)

    def src_sizes(self, name: str, k_rem: VReg | None) -> list[Operand | None]:
        """Per copy: the src-size operand, or None for a full copy."""
        lw = self.lw
        cp = lw.copy[name]
        tile = cp.tile
        cb, eb = tile.copy_bytes, tile.elem_bytes
        if k_rem is None:
            return list(self.fixed[name])
        out: list[Operand | None] = []
        for it, fixed in enumerate(self.fixed[name]):
            if tile.k_along_rows:  # tile row = k: the whole unit is in or out
                k = lw.u32("add.u32", lw.ex.reg(cp.row0), Imm(str(cp.rows[it])))
                inside = lw.pred("setp.lt.s32", k, k_rem)
                out.append(lw.u32("selp.b32", fixed if fixed is not None else Imm(str(cb)), Imm("0"), inside))
            else:  # units run along k
                first = lw.u32("mad.lo.u32", lw.ex.reg(cp.col0), Imm(str(cb // eb)), Imm(str(cp.cols[it] * cb // eb)))
                size = self._clamp_bytes(lw.u32("sub.s32", k_rem, first), eb, cb)
                out.append(size if fixed is None else lw.u32("min.s32", size, fixed))
        return out

    # -- stores -------------------------------------------------------------------------------
    def store_guards(self, row: VReg, col: VReg, sites) -> "StoreGuards":
        """Row and column predicates (row < M, column < N) for the given (row, column) deltas."""
        lw = self.lw
        rows: dict[int, VReg] = {}
        cols: dict[int, VReg] = {}
        for dr, dc in sites:
            if self.m_edge and dr not in rows:
                rows[dr] = lw.pred("setp.lt.u32", lw.u32("add.u32", row, Imm(str(dr))), lw.dim("M"))
            if self.n_edge and dc not in cols:
                cols[dc] = lw.pred("setp.lt.u32", lw.u32("add.u32", col, Imm(str(dc))), lw.dim("N"))
        return StoreGuards(lw, rows, cols)


class StoreGuards:
    """Per store site guard: combined from the row and column predicates at the point of use,
    so only one combined predicate is live at a time."""

    def __init__(self, lw: "GemmLowering", rows: dict[int, VReg], cols: dict[int, VReg]):
        self.lw, self.rows, self.cols = lw, rows, cols

    def __getitem__(self, site: tuple[int, int]) -> VReg | None:
        r, c = self.rows.get(site[0]), self.cols.get(site[1])
        if r is not None and c is not None:
            return self.lw.pred("and.pred", r, c)
        return r or c
