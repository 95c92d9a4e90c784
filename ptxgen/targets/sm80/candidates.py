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

from ...errors import ScheduleError
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...schedule.cost import Prediction, time_bucket
from ...schedule.geometry import register_estimate, register_limit
from ...schedule.targets import target
from ...schedule.verify import verify, verify_fields, without_fix_search
from .cost import predict

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


def fits_registers(g: Gemm, s: Schedule, arch: str) -> bool:
    """Whether the full register estimate (the copies' share included) is within the limit."""
    t = target(arch)
    return register_estimate(g, s)["total"] <= register_limit(s, t.regs_per_sm, t.max_regs_per_thread)


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
            with without_fix_search():  # refused ones are dropped unread
                verify(g, s, arch)
        except ScheduleError:
            continue
        yield s


#: Base schedules whose variants (grouped raster, split-K, Stream-K) are tried.
VARIANT_BASES = 12


def order_key(s: Schedule, p: Prediction) -> tuple:
    """Time in TIE-wide buckets, then the simpler and more robust schedule: no split-K or Stream-K,
    row raster, four warps (latency hidden by other warps, not only by other CTAs), larger BK
    (fewer barriers per flop), three stages (latency hidden without the most shared memory), the
    larger tile."""
    return (time_bucket(p), s.split_k, s.stream_k, s.raster != "row", abs(s.num_warps - 4), -s.bk,
            abs(s.stages - 3), -s.bm * s.bn, s.block, s.warps)


def rank(g: Gemm, arch: str) -> list[tuple[Schedule, Prediction]]:
    """Every legal candidate with its prediction, best first: the base space whole, then the
    variants of the VARIANT_BASES best."""
    verify_fields(g, Schedule(block=(128, 128, 32)), arch)  # a bad problem fails here, named
    candidates = list(legal(g, base_schedules(g), arch))
    # the register estimate with the copies' share: over the limit, a schedule is likely to spill
    # (bench/register_sample.py), so it is ranked only when nothing else is legal
    within = [s for s in candidates if fits_registers(g, s, arch)]
    base = sorted(((s, predict(g, s, arch)) for s in within or candidates), key=lambda r: order_key(*r))
    extra = [(v, predict(g, v, arch)) for s, _ in base[:VARIANT_BASES] for v in legal(g, variants(g, s), arch)
             if fits_registers(g, v, arch) or not within]
    ranked = sorted(base + extra, key=lambda r: order_key(*r))
    if not ranked:
        # a problem no schedule fits: its own error (a small tile, so no resource limit speaks first)
        verify(g, Schedule(block=(64, 64, 32), warps=(2, 2)), arch)
        raise ScheduleError("schedule", None, f"no candidate schedule passes the verifier for this "
                            f"{g.dtype} problem on {arch}", "give a schedule explicitly")
    return ranked


def describe_schedule(s: Schedule) -> str:
    """The schedule as the CLI flags that give it."""
    text = f"--block {s.bm}x{s.bn}x{s.bk} --warps {s.warps[0]}x{s.warps[1]} --stages {s.stages}"
    if s.raster == "grouped":
        text += f" --raster grouped --group-m {s.group_m}"
    if s.split_k > 1:
        text += f" --split-k {s.split_k}"
    if s.stream_k:
        text += " --stream-k" + (" pure" if s.decomposition == "stream-k-pure" else "")
    return text
