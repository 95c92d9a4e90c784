"""The output tiles one sm_90a CTA walks (docs/ptx_facts/warp_specialisation.md §9g).

Persistent grid: the launch has min(#tiles, SMs) CTAs (`hopper.persistent_ctas`; the device's SM
count on a GPU, the schedule's `sms` or the target's flagship count in the simulator) and CTA x
walks tiles x, x + %nctaid.x, ... in the schedule's raster (`TileScheduler.tile(index)`, the
same map Stream-K uses). Each role of a warp-specialised CTA (the producer thread, every consumer
warp) walks the same sequence with its own counters, so no role waits for another to pick a tile.

Not persistent: one CTA per tile, from the launch grid (`TileScheduler.tile()`), no loop.

Clusters (cluster.py): cluster %clusterid.x walks cluster tiles %clusterid.x, + %nclusterid.x, ...
and each CTA takes its own tile of each, so the CTAs of a cluster walk in lockstep.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Imm, Sym, VReg
from ..tiles import Tile, TileScheduler

if TYPE_CHECKING:
    from .pipeline import Sm90Lowering


class TileWalk:
    """Emits the loop over a CTA's output tiles around one role's body: `begin` returns the
    current tile (registers defined afresh each iteration), `end` steps to the next one."""

    def __init__(self, lw: "Sm90Lowering", role: str):
        self.lw, self.b, self.role = lw, lw.b, role
        self.cluster = lw.cluster
        self.persistent = bool(lw.s.persistent)
        self.index: VReg | None = None
        self.count: VReg | None = None
        self.top = self.done = ""

    def begin(self) -> Tile:
        lw, b = self.lw, self.b
        sched = TileScheduler(lw)  # type: ignore[arg-type]  # uses b, s, g, u32, dim, ceil_div
        if not self.persistent:
            return sched.tile()
        if self.cluster is not None:
            self.count = self.cluster.tile_count()
            self.index = lw.u32("mov.u32", Sym("%clusterid.x"),
                                comment=f"{self.role}: first cluster tile, then += %nclusterid.x")
        else:
            self.count = sched.tile_count()
            self.index = lw.u32("mov.u32", Sym("%ctaid.x"), comment=f"{self.role}: first tile, then += %nctaid.x")
        self.top, self.done = b.label(f"{self.role}_tile_loop"), b.label(f"{self.role}_tiles_done")
        b.emit("bra", Sym(self.done), guard=lw.pred("setp.ge.u32", self.index, self.count))
        b.place(self.top)
        return self.cluster.tile(self.index) if self.cluster is not None else sched.tile(self.index)

    def end(self) -> None:
        if not self.persistent:
            return
        lw, b = self.lw, self.b
        assert self.index is not None and self.count is not None
        step = "%nclusterid.x" if self.cluster is not None else "%nctaid.x"
        b.comment(f"{self.role}: next {'cluster ' if self.cluster is not None else ''}tile of this CTA (+= {step})")
        b.emit("add.u32", self.index, self.index, lw.u32("mov.u32", Sym(step)), ndefs=1)
        b.emit("bra", Sym(self.top), guard=lw.pred("setp.lt.u32", self.index, self.count))
        b.place(self.done)


def zero_accumulators(lw: "Sm90Lowering", acc: list[tuple[VReg, ...]]) -> None:
    """mov 0 into every accumulator: once per kernel, or per tile of a persistent walk."""
    from .operand_types import accumulator_dtype, zero_accumulator

    lw.b.comment(f"zero {sum(len(a) for a in acc)} {accumulator_dtype(lw.g)} accumulators")
    op, zero = zero_accumulator(lw.g)
    for frag in acc:
        for r in frag:
            lw.b.emit(op, r, zero, ndefs=1)
