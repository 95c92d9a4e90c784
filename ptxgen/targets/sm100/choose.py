"""The sm_100a chooser's candidates: every tcgen05 schedule worth pricing for a problem, legal or
not; the verifier prunes what the rules or the built lowering refuse, and cost.py prices the rest.

Why a generator open to fields it does not know: the 2-CTA (`cta_group=2`), cluster and epilogue
designs land in the same backend at different times. Each base schedule is offered as it is and
through every function of VARIANTS (CTA pairs, clusters with multicast); a variant the lowering
does not build yet is refused by the verifier (LoweringNotBuilt) and simply not ranked, so the
day it is built it is priced with no change here (cost.py reads `cta_group` and `cluster`).

The bases: BM 128 (64 as well while M fits in 64-row tiles better; block-scaled kinds 128 only),
BN from 64 to 256 up to the first that covers N, BK one 128-byte swizzle row (64 f16/bf16, 32 tf32
elements), 2-6 stages and the deepest ring (at most MAX_STAGES) that fits the 227 KB a CTA may
use; row and, with more tile rows than a group, grouped raster.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

from ...schedule.cost import ceil_div
from ...schedule.problem import K_PACK, Gemm
from ...schedule.schedule import Schedule
from ...schedule.targets import target
from .plan import MBARRIER_BYTES, TMEM_SLOT_BYTES

BLOCK_ROWS = (128, 64)
BLOCK_COLS = (64, 128, 192, 256)
BK_BYTES = 128
STAGES = (2, 3, 4, 5, 6)
MAX_STAGES = 8
GROUP_M = 8
ARCH = "sm_100a"


def _up_to_cover(sides: tuple[int, ...], extent: int) -> list[int]:
    """The sides up to (and including) the first that covers `extent`, all when none does."""
    cover = next((x for x in sorted(sides) if x >= extent), None)
    return [x for x in sides if cover is None or x <= cover]


def stage_counts(g: Gemm, rows: int, cols: int, bk: int) -> list[int]:
    """STAGES, plus the deepest ring up to MAX_STAGES whose stages, barriers and the 1 KB of
    alignment slack fit the block's shared memory (the verifier checks the exact plan)."""
    stage = (rows + cols) * bk * g.in_bytes // K_PACK.get(g.dtype, 1)   # fp4: two values per byte
    room = target(ARCH).smem_per_block - 1024 - TMEM_SLOT_BYTES - 4 * MBARRIER_BYTES
    deepest = min(MAX_STAGES, room // (stage + 2 * MBARRIER_BYTES))
    return sorted(set(STAGES) | ({deepest} if deepest > STAGES[-1] else set()))


def with_fields(s: Schedule, **fields: object) -> Schedule | None:
    """`s` with `fields` set, its tcgen05 fields given by name (so a field the sm_100a options do
    not have yet, e.g. `cluster` before the cluster design lands, gives None: not offered)."""
    opts: Any = s.options
    own = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)} if opts is not None else {}
    given = dict(block=s.block, instruction=s.instruction, stages=s.stages, raster=s.raster, group_m=s.group_m)
    try:
        return Schedule(**{**given, **own, **fields})
    except TypeError:
        return None


def cta_pairs(g: Gemm, s: Schedule) -> Iterator[Schedule]:
    """The CTA-pair form of `s` (cta_group=2: BM is the pair's M, so twice the base's), in a
    (2, 1) cluster, where M has two base tiles to pair."""
    if ceil_div(g.m, s.bm) >= 2 and s.bm == 128:
        pair = (with_fields(s, block=(2 * s.bm, s.bn, s.bk), cta_group=2, cluster=(2, 1))
                or with_fields(s, block=(2 * s.bm, s.bn, s.bk), cta_group=2))
        if pair is not None:
            yield pair


def clusters(g: Gemm, s: Schedule) -> Iterator[Schedule]:
    """`s` in a 2x1 or 1x2 cluster with TMA multicast of the shared operand, where the tile grid
    has two tiles along the cluster's long side."""
    for cm, cn in ((2, 1), (1, 2)):
        if ceil_div(g.m, s.bm) >= cm and ceil_div(g.n, s.bn) >= cn:
            clustered = with_fields(s, cluster=(cm, cn))
            if clustered is not None:
                yield clustered


#: Functions (gemm, base schedule) -> further schedules to offer; a design adds its own here.
VARIANTS: list[Callable[[Gemm, Schedule], Iterator[Schedule]]] = [cta_pairs, clusters]


def blackwell_candidates(g: Gemm) -> Iterator[Schedule]:
    """Every base tcgen05 schedule for `g` and its VARIANTS (see the module docstring)."""
    from .options import Sm100Options

    bk = BK_BYTES // g.in_bytes * K_PACK.get(g.dtype, 1)   # 128 bytes of K (fp4: 256 values)
    rows = _up_to_cover(BLOCK_ROWS, g.m) if g.m <= 64 else [128, 64]
    if g.block_scale is not None:  # the block-scaled kinds have M = 128 at cta_group::1 (tcgen05.md §12h)
        rows = [128]
    for bm in rows:
        for bn in _up_to_cover(BLOCK_COLS, g.n):
            rasters: list[dict] = [{}]
            if ceil_div(g.m, bm) > GROUP_M and ceil_div(g.n, bn) > 1:
                rasters.append({"raster": "grouped", "group_m": GROUP_M})
            for stages in stage_counts(g, bm, bn, bk):
                for raster in rasters:
                    base = Schedule(block=(bm, bn, bk), instruction="tcgen05", stages=stages,
                                    options=Sm100Options(cta_group=1), **raster)
                    yield base
                    for variant in VARIANTS:
                        yield from variant(g, base)
