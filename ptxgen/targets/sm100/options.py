"""The sm_100a schedule fields: what only a tcgen05 schedule sets, kept with the target that reads it.

`Schedule(block=(128, 256, 64), instruction="tcgen05", cta_group=1)` routes `cta_group` here
(docs/architecture.md, "A new target"); `s.cta_group` reads it back (None on other targets'
schedules). None picks the default (`backend.fill_defaults`): 1.

* `cta_group`: CTAs that share one tcgen05.mma: 1, or 2 for a CTA pair (BM is then the pair's M,
  each CTA holding BM/2 rows of A and C and BN/2 columns of B; cta_pair.py).
* `cluster`: (CM, CN) CTAs per thread-block cluster (default (1, 1), and (2, 1) with cta_group=2:
  the pair is the cluster). With more than one CTA per cluster and cta_group=1, A is shared along
  CN and B along CM by TMA multicast (cluster.py).
* `tile_scheduler`: how the persistent CTAs get their output tiles (tile_scheduler.py). "static"
  (the default): min(tiles, SMs) CTAs, CTA x walks tiles x, x + %nctaid.x, ... "clc": one CTA per
  tile, and each running CTA takes its next tile by cancelling a not-yet-launched CTA with
  `clusterlaunchcontrol.try_cancel` (sm_100a cluster launch control), so the hardware balances
  the tiles over whatever SMs are free. (sm_90a's persistence is its `persistent` flag; sm_100a
  is always persistent, so its choice is which scheduler walks the tiles.) Cluster launch control
  is built for single-CTA clusters: with a cluster or a CTA pair the verifier refuses "clc".
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ...schedule.scalars import normalise
from ...schedule.verify_types import choice, int_tuple, integer

#: The tile schedulers of a tcgen05 schedule (see the module docstring).
TILE_SCHEDULERS = ("static", "clc")


@dataclass(frozen=True)
class Sm100Options:
    """The tcgen05-only fields of a `Schedule` (see the module docstring)."""

    cta_group: int | None = None
    tile_scheduler: str | None = None
    cluster: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        normalise(self, tuple(f.name for f in fields(self) if f.name != "cluster"), ("cluster",))

    @property
    def producer_warpgroups(self) -> int:
        """1: the warpgroup after the four epilogue warps holds the TMA warp and the MMA warp
        (its other two warps exit at once)."""
        return 1

    def verify_types(self) -> None:
        """Raise ScheduleTypeError for a field of the wrong type."""
        integer("schedule.cta_group", self.cta_group, optional=True, example=1)
        choice("schedule.tile_scheduler", self.tile_scheduler, TILE_SCHEDULERS, optional=True)
        if self.cluster is not None:
            int_tuple("schedule.cluster", self.cluster, ("CM", "CN"), (2, 1))


#: The fields only tcgen05 schedules use (None on every other schedule).
BLACKWELL_FIELDS = tuple(f.name for f in fields(Sm100Options))
