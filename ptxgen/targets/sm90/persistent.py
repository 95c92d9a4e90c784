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
role takes the batch as its TMA copies' third coordinate (TmaOperands.batch); the consumers also
move C to the batch's matrix (base + batch * batch_stride_c elements). Not persistent: %ctaid.z is the
batch (sm90/batch.py, from the setup).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...ir import Imm, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import S32, U32, U64
from ...emit.memory import ld_param
from ...emit.tiles import TileScheduler
from .batch import BATCH_PARAM
from .context import TmaOperands

if TYPE_CHECKING:
    from .context import Sm90Context


@dataclass(frozen=True)
class WalkStep:
    """The loop registers and labels of a persistent walk (`TileWalk.begin`), for `TileWalk.end`:
    the current tile (or cluster tile) index, how many there are, the loop's top and exit.
    None for a kernel with one tile per CTA (no loop)."""

    index: VReg
    count: VReg
    top: str
    done: str


class TileWalk:
    """Emits the loop over a CTA's output tiles around one role's body: `begin` returns the
    current tile's operands (registers defined afresh each iteration) and the loop's step, which
    `end` takes to go to the next tile."""

    def __init__(self, ctx: "Sm90Context", role: str, moves_c: bool = False):
        """`moves_c`: this role stores C, so each tile's operands point C at its batch's matrix."""
        self.ctx, self.b, self.role, self.moves_c = ctx, ctx.b, role, moves_c
        self.cluster = ctx.cluster
        self.persistent = bool(ctx.s.persistent)

    def begin(self) -> tuple[TmaOperands, WalkStep | None]:
        ctx, b = self.ctx, self.b
        sched = TileScheduler(ctx)
        if not self.persistent:  # one tile per CTA, its batch from the setup
            return TmaOperands(sched.tile(), ctx.batch, ctx.ptr["C"], ctx.warpgroup), None
        cluster_tiles = self.cluster.tile_count() if self.cluster is not None else None
        per_batch = cluster_tiles.count if cluster_tiles is not None else sched.tile_count()
        count = per_batch
        batched = ctx.g.batch > 1
        if batched:
            count = ptx.mul(ctx.b, U32, per_batch, Imm(str(ctx.g.batch)),
                            comment=f"x {ctx.g.batch} batches: the walk covers every matrix, batch outermost")
            if self.moves_c:
                base_c, stride_c = ctx.ptr["C"], ld_param(b, "b64", ".u64", BATCH_PARAM.name)
        if self.cluster is not None:
            index = ptx.mov(ctx.b, U32, Sym("%clusterid.x"),
                            comment=f"{self.role}: first cluster tile, then += %nclusterid.x")
        else:
            index = ptx.mov(ctx.b, U32, Sym("%ctaid.x"), comment=f"{self.role}: first tile, then += %nctaid.x")
        top, done = b.label(f"{self.role}_tile_loop"), b.label(f"{self.role}_tiles_done")
        b.emit("bra", Sym(done), guard=ptx.setp(ctx.b, "ge", U32, index, count))
        b.place(top)
        pid, batch, c = index, ctx.batch, ctx.ptr["C"]
        if batched:
            b.comment(f"{self.role}: tile index -> (batch, tile of the batch); the batch is the TMA copies' "
                      "third coordinate" + (" and C's matrix" if self.moves_c else ""))
            which = ptx.div(ctx.b, U32, index, per_batch)
            pid = ptx.mad(ctx.b, S32, which, ptx.neg(ctx.b, S32, per_batch), index)
            batch = (which,)
            if self.moves_c:
                step = ptx.mul(ctx.b, U64, ptx.cvt(ctx.b, U64, U32, which), stride_c)
                c = ptx.mad(ctx.b, U64, step, Imm(str(ctx.g.out_bytes)), base_c)
        if self.cluster is not None:
            assert cluster_tiles is not None
            tile = self.cluster.tile(pid, cluster_tiles)
        else:
            tile = sched.tile(pid)
        return TmaOperands(tile, batch, c, ctx.warpgroup), WalkStep(index, count, top, done)

    def end(self, step: WalkStep | None) -> None:
        """The next tile of this CTA (+= the grid's CTAs or clusters), back to `begin`'s top."""
        if step is None:
            return
        ctx, b = self.ctx, self.b
        grid = "%nclusterid.x" if self.cluster is not None else "%nctaid.x"
        b.comment(f"{self.role}: next {'cluster ' if self.cluster is not None else ''}tile of this CTA (+= {grid})")
        ptx.add(b, U32, step.index, ptx.mov(ctx.b, U32, Sym(grid)), into=step.index)
        b.emit("bra", Sym(step.top), guard=ptx.setp(ctx.b, "lt", U32, step.index, step.count))
        b.place(step.done)


def zero_accumulators(ctx: "Sm90Context", acc: list[tuple[VReg, ...]]) -> None:
    """mov 0 into every accumulator: once per kernel, or per tile of a persistent walk."""
    from .operand_types import accumulator_dtype, zero_accumulator

    ctx.b.comment(f"zero {sum(len(a) for a in acc)} {accumulator_dtype(ctx.g)} accumulators")
    op, zero = zero_accumulator(ctx.g)
    for frag in acc:
        for r in frag:
            ctx.b.emit(op, r, zero, ndefs=1)
