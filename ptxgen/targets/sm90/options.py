"""The sm_90a schedule fields: what only a wgmma schedule sets, kept with the target that reads it.

`Schedule` holds a target's own fields in one options object (`Schedule.options`); this is
sm_90a's, registered through `schedule/rules.py` by the backend (`Sm90Backend.options`). The
fields are still written and read flat, as before: `Schedule(..., instruction="wgmma",
consumers=2, cluster=(2, 1))` routes them here, `s.consumers` reads them back, and
`dataclasses.replace(s, consumers=1)` replaces them; a schedule of another instruction that
names one keeps it here for `verify.verify_target` to refuse (field named, fix given).

None picks the sm_90a default (`backend.fill_defaults`), so
`Schedule(block=(128, 128, 64), instruction="wgmma", stages=4)` is a complete schedule:

* `consumers`: consumer warpgroups (1 or 2), splitting BM: each owns BM/consumers rows (a
  multiple of 64). Default 2 when BM is a multiple of 128, else 1.
* `warp_specialized`: a producer warpgroup (one elected thread) issues the TMA copies while
  the consumers only wait, multiply and release stages (default True); False: the consumers
  issue the copies themselves, ahead by `stages - 1` k-tiles.
* `producer_regs` / `consumer_regs`: `setmaxnreg.dec` / `.inc` register counts (warp
  specialised only): multiples of 8 in 24..256. Default 40 for the producer and the most the
  CTA's registers leave each consumer (232 with two consumers, 256 with one).
* `persistent`: one CTA per SM walks the output tiles (default True); False: one CTA per tile.
* `cluster`: (CM, CN) CTAs per thread-block cluster, CM * CN <= 8 (default (1, 1)).
* `multicast`: the CTAs of a cluster that share an operand tile load it once with TMA
  multicast (B along CM, A along CN); default True when the cluster has more than one CTA.
* `swizzle`: 128, 64 or 32 bytes, the TMA box and wgmma descriptor swizzle; None (default)
  takes the widest the operand tiles' contiguous extents allow (`plan.hopper_plan`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ...schedule.scalars import normalise
from ...schedule.verify_types import boolean, int_tuple, integer


@dataclass(frozen=True)
class Sm90Options:
    """The wgmma-only fields of a `Schedule` (see the module docstring); field order is the
    order they print in `repr(schedule)` and the tuning cache's entries."""

    consumers: int | None = None
    warp_specialized: bool | None = None
    producer_regs: int | None = None
    consumer_regs: int | None = None
    persistent: bool | None = None
    cluster: tuple[int, int] | None = None
    multicast: bool | None = None
    swizzle: int | None = None

    def __post_init__(self) -> None:
        normalise(self, tuple(f.name for f in fields(self) if f.name != "cluster"), ("cluster",))

    @property
    def producer_warpgroups(self) -> int:
        """1 for a warp-specialised schedule (the TMA producer), else 0."""
        return 1 if self.warp_specialized else 0

    def verify_types(self) -> None:
        """Raise ScheduleTypeError for a field of the wrong type (whether it may be set at all is
        `verify.verify_target`'s question)."""
        integer("schedule.consumers", self.consumers, optional=True, example=2)
        for name in ("warp_specialized", "persistent", "multicast"):
            boolean(f"schedule.{name}", getattr(self, name), optional=True)
        integer("schedule.producer_regs", self.producer_regs, optional=True, example=40)
        integer("schedule.consumer_regs", self.consumer_regs, optional=True, example=232)
        if self.cluster is not None:
            int_tuple("schedule.cluster", self.cluster, ("CM", "CN"), (2, 1))
        integer("schedule.swizzle", self.swizzle, optional=True, example=128)


#: The fields only wgmma schedules use (None on every other schedule).
HOPPER_FIELDS = tuple(f.name for f in fields(Sm90Options))
