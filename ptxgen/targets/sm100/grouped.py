"""Grouped GEMMs (schedule/grouping.py) in the sm_100a warp-specialised persistent kernel: every
role walks the groups' tiles exactly as the sm_90a grouped kernel's roles do (the walk itself is
targets/sm90/grouped.py's `GroupedTileWalk`: m-tiles summed over `offs` / `masked_m` on the
device, the group search resumed tile to tile, the same clamps), wrapped in the sm_100a walk's
interface (tile_scheduler.TileWalk: `begin` returns a `WalkTile`, `end` goes to the next tile).

The operands. B is a 3-D tensor map (G, ...) with the group as its third TMA coordinate; masked,
A is 3-D too (G, max_m, K), its rows counted within the slot, and C moves to the group's matrix
(+ group * batch_stride_c); a masked MXFP8 GEMM's scale blocks are found by the group too
(scales.py `issue_loads`). Contiguous: A and C are (M_total, ...) matrices and a tile's first row
is its group's first row + its m-tile * BM.

Rows of another group. TMA clips at the tensor's edge, not at a group's (tma.md §9d): a tile that
straddles its group's end loads the next group's rows of A (masked: the slot's rows past
masked_m[g]) and the MMA computes them with this group's B into TMEM lanes of their own (row r of
D reads only row r of A), but the epilogue's stores are guarded by row < the group's end
(`WalkTile.rows_end`), so they never reach C. The TMA-store epilogue would clip at M_total (or
max_m) instead, so grouped kernels store directly (the verifier refuses epilogue_via_smem=True).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Param
from ..sm90.batch import BATCH_PARAM
from ..sm90.grouped import GroupedTileWalk, counts_params
from .tile_scheduler import TileWalk, WalkTile

if TYPE_CHECKING:
    from ...schedule.problem import Gemm
    from .kernel import Sm100Lowering


class Sm100GroupedWalk(GroupedTileWalk):
    """The grouped walk with tile_scheduler.TileWalk's interface (static persistent grid, one CTA
    per cluster: the verifier refuses clusters, CTA pairs and cluster launch control). Built from
    the Sm100Lowering as the sm_90a walk is from its context: it reads lw.b, g, s, dim, ceil_div
    and ptr."""

    def begin(self) -> WalkTile:
        tile, group, end, c, self.step = self.walk()
        self.done = self.step.done
        return WalkTile(tile, group if self.masked else None, c, b_batch=group, rows_end=end)

    def end(self) -> None:
        super().end(self.step)


def tile_walk(lw: "Sm100Lowering", role: str, moves_c: bool = False, cancels: bool = False):
    """One role's walk: over the groups' tiles for a grouped GEMM, else tile_scheduler.TileWalk."""
    if lw.g.grouped:
        return Sm100GroupedWalk(lw, role, moves_c)
    return TileWalk(lw, role, moves_c, cancels)


def grouped_kernel_params(g: "Gemm") -> tuple[list[Param], list[Param]]:
    """(after ldc, last) parameters of a grouped kernel, in the sm_90a grouped kernel's order:
    batch_stride_c (.u64) for a masked one, and offs / masked_m (.u64) last."""
    if not g.grouped:
        return [], []
    return ([BATCH_PARAM] if g.grouping == "masked" else []), counts_params(g)
