"""Edge flags and the epilogue's store guards, shared by every pipeline.

A dimension that divides its block tile gets no checks at all, so aligned problems lower to
exactly the unchecked kernel; otherwise stores are predicated on row < M and column < N. (The
load side is per pipeline: sm80/load_edges.py zero-fills cp.async copies.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..schedule.geometry import edges
from ..ir import Imm, VReg
from ..ir import ops as ptx
from ..ir.ops import PRED, U32

if TYPE_CHECKING:
    from ..targets.sm80.lowering import GemmLowering


class StoreEdges:
    """Which of M, N, K end inside a block tile, and the store guards that follow."""

    def __init__(self, lw: "GemmLowering"):
        self.lw = lw
        self.m_edge, self.n_edge, self.k_edge = edges(lw.g, lw.s)

    # -- stores -------------------------------------------------------------------------------
    def store_guards(self, row: VReg, col: VReg, sites) -> "StoreGuards":
        """Row and column predicates (row < M, column < N) for the given (row, column) deltas."""
        lw = self.lw
        rows: dict[int, VReg] = {}
        cols: dict[int, VReg] = {}
        for dr, dc in sites:
            if self.m_edge and dr not in rows:
                rows[dr] = ptx.setp(lw.b, "lt", U32, ptx.add(lw.b, U32, row, Imm(str(dr))), lw.dim("M"))
            if self.n_edge and dc not in cols:
                cols[dc] = ptx.setp(lw.b, "lt", U32, ptx.add(lw.b, U32, col, Imm(str(dc))), lw.dim("N"))
        return StoreGuards(lw, rows, cols)


class StoreGuards:
    """Per store site guard: combined from the row and column predicates at the point of use,
    so only one combined predicate is live at a time."""

    def __init__(self, lw: "GemmLowering", rows: dict[int, VReg], cols: dict[int, VReg]):
        self.lw, self.rows, self.cols = lw, rows, cols

    def __getitem__(self, site: tuple[int, int]) -> VReg | None:
        r, c = self.rows.get(site[0]), self.cols.get(site[1])
        if r is not None and c is not None:
            return ptx.and_(self.lw.b, PRED, r, c)
        return r or c
