"""The output tiles one sm_90a CTA walks (docs/ptx_facts/warp_specialisation.md §9g).

Persistent grid: the launch has min(#tiles, SMs) CTAs (`hopper.persistent_ctas`; the device's SM
count on a GPU, the schedule's `sms` or the target's flagship count in the simulator) and CTA x
walks tiles x, x + %nctaid.x, ... in the schedule's raster (`TileScheduler.tile(index)`, the
same map Stream-K uses). Each role of a warp-specialised CTA (the producer thread, every consumer
warp) walks the same sequence with its own counters, so no role waits for another to pick a tile.

Not persistent: one CTA per tile, from the launch grid (`TileScheduler.tile()`), no loop.

Clusters (cluster.py): cluster %clusterid.x walks cluster tiles %clusterid.x, + %nclusterid.x, ...
and each CTA takes its own tile of each, so the CTAs of a cluster walk in lockstep.

Batched GEMMs (Gemm(batch=B)): the persistent walk covers B x the tiles (or cluster tiles) of one
matrix, the batch outermost: index i is batch i / per_batch, tile i % per_batch in the raster, so
the grouped raster stays within a batch and a CTA may cross from one batch into the next. Each
role takes the batch as its TMA copies' third coordinate (lw.tma_batch); the consumers also move
C to the batch's matrix (base + batch * batch_stride_c elements). Not persistent: %ctaid.z is the
batch (sm90/batch.py, from the setup).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Imm, Sym, VReg
from ...emit.memory import ld_param
from ...emit.tiles import Tile, TileScheduler
from .batch import BATCH_PARAM

if TYPE_CHECKING:
    from .pipeline import Sm90Lowering


class TileWalk:
    """Emits the loop over a CTA's output tiles around one role's body: `begin` returns the
    current tile (registers defined afresh each iteration), `end` steps to the next one."""

    def __init__(self, lw: "Sm90Lowering", role: str, moves_c: bool = False):
        """`moves_c`: this role stores C, so each tile points lw.ptr["C"] at its batch's matrix."""
        self.lw, self.b, self.role, self.moves_c = lw, lw.b, role, moves_c
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
        per_batch = self.cluster.tile_count() if self.cluster is not None else sched.tile_count()
        self.count = per_batch
        batched = lw.g.batch > 1
        if batched:
            self.count = lw.u32("mul.lo.u32", per_batch, Imm(str(lw.g.batch)),
                                comment=f"x {lw.g.batch} batches: the walk covers every matrix, batch outermost")
            if self.moves_c:
                base_c, stride_c = lw.ptr["C"], ld_param(b, "b64", ".u64", BATCH_PARAM.name)
        if self.cluster is not None:
            self.index = lw.u32("mov.u32", Sym("%clusterid.x"),
                                comment=f"{self.role}: first cluster tile, then += %nclusterid.x")
        else:
            self.index = lw.u32("mov.u32", Sym("%ctaid.x"), comment=f"{self.role}: first tile, then += %nctaid.x")
        self.top, self.done = b.label(f"{self.role}_tile_loop"), b.label(f"{self.role}_tiles_done")
        b.emit("bra", Sym(self.done), guard=lw.pred("setp.ge.u32", self.index, self.count))
        b.place(self.top)
        pid = self.index
        if batched:
            b.comment(f"{self.role}: tile index -> (batch, tile of the batch); the batch is the TMA copies' "
                      "third coordinate" + (" and C's matrix" if self.moves_c else ""))
            batch = lw.u32("div.u32", self.index, per_batch)
            pid = lw.u32("mad.lo.s32", batch, lw.u32("neg.s32", per_batch), self.index)
            lw.tma_batch = (batch,)
            if self.moves_c:
                step = lw.u64("mul.lo.u64", lw.u64("cvt.u64.u32", batch), stride_c)
                lw.ptr["C"] = lw.u64("mad.lo.u64", step, Imm(str(lw.g.out_bytes)), base_c)
        return self.cluster.tile(pid) if self.cluster is not None else sched.tile(pid)

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
