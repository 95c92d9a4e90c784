"""The schedules the chooser considers for a problem: a grid of tile shapes the verifier prunes.

Why two phases: every field multiplies the space (blocks x BK x warps x stages x raster x
split-K x Stream-K is tens of thousands), and the verifier takes about half a millisecond per
schedule. The base space (block, BK, warps, stages) is enumerated whole; the variants that only
change how tiles are ordered or shared (grouped raster, split-K, Stream-K) are tried on the best
base schedules only, where they can change the ranking.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Iterator

from ..errors import ScheduleError
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from ..schedule.verify import verify

TILE_SIDES = (16, 32, 64, 128, 256)
#: BK in units of the 32 bytes of K one mma k-step covers.
BK_STEPS = (1, 2, 4)
WARP_GRIDS = ((1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (4, 1), (2, 4), (4, 2))
STAGES = (2, 3, 4)
SPLITS = (2, 3, 4, 6, 8, 12, 16)
GROUP_M = 8


def _sides(extent: int) -> list[int]:
    """Tile sides worth trying along a dimension of `extent`: up to the first that covers it."""
    out = []
    for side in TILE_SIDES:
        out.append(side)
        if side >= extent:
            break
    return out


def base_schedules(g: Gemm) -> Iterator[Schedule]:
    """Every (block, BK, warps, stages) of the base space, legal or not (`legal` filters)."""
    k_step = g.k_step
    bks = [k_step * s for s in BK_STEPS]
    bks = [bk for i, bk in enumerate(bks) if i == 0 or bks[i - 1] < g.k]  # no BK past the first to cover K
    for bm in _sides(g.m):
        for bn in _sides(g.n):
            for bk in bks:
                for warps in WARP_GRIDS:
                    for stages in STAGES:
                        yield Schedule(block=(bm, bn, bk), warps=warps, stages=stages)


def variants(g: Gemm, s: Schedule) -> Iterator[Schedule]:
    """The ordering and sharing variants of a base schedule: grouped raster (when there are more
    tile rows than a group), split-K (when K spans at least two k-tiles per split) and Stream-K."""
    tiles_m = -(-g.m // s.bm)
    if tiles_m > GROUP_M and -(-g.n // s.bn) > 1:
        yield replace(s, raster="grouped", group_m=GROUP_M)
    if g.accumulator != "f32":
        return
    k_tiles = -(-g.k // s.bk)
    for split in SPLITS:
        if k_tiles >= 2 * split:
            yield replace(s, split_k=split)
    if k_tiles >= 4:
        yield replace(s, decomposition="stream-k")


def legal(g: Gemm, schedules: Iterable[Schedule], arch: str) -> Iterator[Schedule]:
    """The schedules the verifier accepts for (g, arch)."""
    for s in schedules:
        try:
            verify(g, s, arch)
        except ScheduleError:
            continue
        yield s
