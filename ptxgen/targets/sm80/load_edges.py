"""Bounds checks of the cp.async copies of edge tiles: zero-filled copies (stores: ../edges.py).

A dimension that divides its block tile gets no checks at all, so aligned problems lower to
exactly the unchecked kernel. Otherwise:
* copies pass cp.async a `src-size`: the bytes of the unit inside the matrix, the rest zero-filled
  (zeros contribute nothing to the dot products), and never touch memory past the matrix. Where
  a unit cannot straddle the edge (it lies along M/N rows, or K ends on a unit boundary) it is
  wholly in or out, so no clamp: along K a `setp` feeds cp.async's ignore-src predicate (the check
  runs every k-tile of the main loop), along M/N a `selp` of the full width or 0 is fixed up front;
* 2- and 1-byte copies (operands aligned below 4 bytes) load through a predicated `ld.global.b16`
  or `ld.global.u8` (a 2-byte unit of int8 straddling the edge: its first byte only,
  `copies.CpAsyncCopies.copy_narrow`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...emit.edges import StoreEdges
from ...ir import Imm, Operand, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U32, S32
from ...emit.tiles import KRange, Tile

#: A k limit no k-tile reaches: marks a copy whose row is outside the matrix.
INT32_MAX = 2**31 - 1

if TYPE_CHECKING:
    from .lowering import GemmLowering
    from .plans import CopyPlan


class EdgeChecks(StoreEdges):
    """The copies' bounds logic for one tile (and, inherited, the epilogue's store guards)."""

    def __init__(self, lw: "GemmLowering", tile: Tile, plans: "dict[str, CopyPlan]"):
        super().__init__(lw)
        self.tile, self.plans = tile, plans
        self.fixed: dict[str, list[Operand | None]] = {}
        self.k_limits: dict[str, list[VReg]] = {}  # zero_fill_by_predicate: per copy, k offset of its unit

    def _limit(self, name: str) -> tuple[bool, str]:
        """(edge?, dimension) of the operand's non-K dimension: M for A, N for B."""
        return (self.m_edge, "M") if name == "A" else (self.n_edge, "N")

    def prepare(self) -> None:
        """Loop-invariant per-copy bounds along the operand's M or N dimension: byte counts, or
        (`zero_fill_by_predicate`) the k offset below which the copy's unit is inside."""
        lw = self.lw
        for name in ("A", "B"):
            cp = self.plans[name]
            tile = cp.tile
            cb, eb = tile.copy_bytes, tile.elem_bytes
            edge, dim = self._limit(name)
            by_pred = self.zero_fill_by_predicate(name)
            sizes: list[Operand | None] = []
            limits: list[VReg] = []
            firsts: dict[int, VReg] = {}
            if by_pred:
                lw.b.comment(f"{name}: k offset of each copy's unit; past the end of K (or {dim} when the row is "
                             f"outside) the copy zero-fills" if edge else f"{name}: k offset of each copy's unit")
            elif edge:
                lw.b.comment(f"{name}: bytes of each copy inside the matrix along {dim} (edge tile)")
            if edge:
                limit = lw.dim(dim)
                origin = self.tile.bm0 if name == "A" else self.tile.bn0
            for it in range(tile.copies_per_thread):
                if by_pred:  # units run along k, rows along M/N: one k limit per copy
                    key = cp.cols[it]
                    if key not in firsts:
                        firsts[key] = lw.ex.reg(cp.col0 * (cb // eb) + key * cb // eb)
                    if edge:  # a row outside M/N is past the end of K everywhere
                        inside = self._row_inside(name, it, origin, limit)
                        limits.append(ptx.selp(lw.b, B32, firsts[key], Imm(str(INT32_MAX)), inside))
                    else:
                        limits.append(firsts[key])
                    sizes.append(None)
                elif not edge:
                    sizes.append(None)
                elif not tile.k_along_rows:  # tile rows run along M/N: the whole unit is in or out
                    inside = self._row_inside(name, it, origin, limit)
                    sizes.append(ptx.selp(lw.b, B32, Imm(str(cb)), 0, inside))
                else:  # units run along M/N: a unit may straddle the edge
                    first = ptx.mad(lw.b, U32, lw.ex.reg(cp.col0), Imm(str(cb // eb)), origin)
                    first = ptx.add(lw.b, U32, first, Imm(str(cp.cols[it] * cb // eb)))
                    sizes.append(self._clamp_bytes(ptx.sub(lw.b, S32, limit, first), eb, cb))
            self.fixed[name] = sizes
            self.k_limits[name] = limits

    def zero_fill_by_predicate(self, name: str) -> bool:
        """Whether `name`'s copies take cp.async's ignore-src predicate, one setp per copy and k-tile
        (CUTLASS's zfill predicate): with a K edge, units along k (rows along M/N) and K ending
        on a unit boundary, so every unit is wholly inside or wholly outside the matrix."""
        tile = self.plans[name].tile
        cb, eb = tile.copy_bytes, tile.elem_bytes
        return self.k_edge and not tile.k_along_rows and cb >= 4 and self.lw.g.k % (cb // eb) == 0

    def _row_inside(self, name: str, it: int, origin: VReg, limit: VReg) -> VReg:
        """row < M (A) or N (B) for copy `it`, whose tile row runs along M/N."""
        lw = self.lw
        cp = self.plans[name]
        row = ptx.add(lw.b, U32, ptx.add(lw.b, U32, lw.ex.reg(cp.row0), origin), Imm(str(cp.rows[it])))
        return ptx.setp(lw.b, "lt", U32, row, limit)

    def _clamp_bytes(self, elems: VReg, eb: int, cb: int) -> VReg:
        """clamp(elems, 0, cb / eb) * eb: clamped in elements first, since elems * eb overflows
        32 bits once 2^31 / eb elements remain (2^29 tf32 elements of M, N or K)."""
        lw = self.lw
        clamped = ptx.min_(lw.b, S32, ptx.max_(lw.b, S32, elems, 0), Imm(str(cb // eb)))
        return clamped if eb == 1 else ptx.shl(lw.b, U32, clamped, Imm(str(eb.bit_length() - 1)))

    def k_remaining(self, k_tile: VReg | int, k_range: KRange) -> VReg | None:
        """K - k_tile*BK: elements of K left from this k-tile's start (only with a K edge); k-tiles
        count from the range's first (split-K, Stream-K: K left past it)."""
        if not self.k_edge:
            return None
        lw = self.lw
        k = k_range.k_left if k_range.k_left is not None else lw.dim("K")
        if isinstance(k_tile, int):
            return ptx.sub(lw.b, S32, k, Imm(str(k_tile * lw.s.bk)))
        return ptx.mad(lw.b, S32, k_tile, Imm(str(-lw.s.bk)), k)

    def src_sizes(self, name: str, k_rem: VReg | None) -> list[Operand | None]:
        """Per copy: None for a full copy, a .u32 src-size (bytes copied, the rest zero-filled), or
        a predicate for cp.async's ignore-src (zero-fill the whole copy)."""
        lw = self.lw
        cp = self.plans[name]
        tile = cp.tile
        cb, eb = tile.copy_bytes, tile.elem_bytes
        if k_rem is None:
            return list(self.fixed[name])
        if self.zero_fill_by_predicate(name):  # one setp per distinct limit, no byte arithmetic
            outside: dict[VReg, VReg] = {}
            for lim in self.k_limits[name]:
                if lim not in outside:
                    outside[lim] = ptx.setp(lw.b, "ge", S32, lim, k_rem)
            return [outside[lim] for lim in self.k_limits[name]]
        out: list[Operand | None] = []
        past_k: dict[int, VReg] = {}  # tile row = k: per distinct row, k >= K left
        clamped: dict[int, VReg] = {}  # units along k that may straddle K's end: bytes inside
        for it, fixed in enumerate(self.fixed[name]):
            if tile.k_along_rows:  # tile row = k: the whole unit is in or out
                row = cp.rows[it]
                if row not in past_k:
                    k = ptx.add(lw.b, U32, lw.ex.reg(cp.row0), Imm(str(row)))
                    past_k[row] = ptx.setp(lw.b, "ge", S32, k, k_rem)
                if fixed is None and cb >= 4:  # ignore-src: no size register
                    out.append(past_k[row])
                else:
                    full = fixed if fixed is not None else Imm(str(cb))
                    out.append(ptx.selp(lw.b, B32, 0, full, past_k[row]))
                continue
            col = cp.cols[it]
            if col not in clamped:
                first = ptx.mad(lw.b, U32, lw.ex.reg(cp.col0), Imm(str(cb // eb)), Imm(str(col * cb // eb)))
                clamped[col] = self._clamp_bytes(ptx.sub(lw.b, S32, k_rem, first), eb, cb)
            size = clamped[col]
            out.append(size if fixed is None else ptx.min_(lw.b, S32, size, fixed))
        return out
