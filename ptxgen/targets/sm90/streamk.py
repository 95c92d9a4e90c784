"""Stream-K on sm_90a (decomposition 'stream-k' / 'stream-k-pure', a persistent grid of %nctaid.x
CTAs, not warp-specialised): emit/streamk.py's kernel with the TMA/wgmma pipeline in each unit.

The decomposition, the unit selection, the partial hand-off (workspace slot = rank, a released
flag) and the owner's in-order fix-up are emit/streamk.py's (`StreamK`), reused as they are; what
differs here is how a unit runs and how partials and the tile reach memory:
  unit       its tile from the linear index (batch = index / tiles per batch: the TMA copies'
             batch coordinate and C's matrix), the main loop over k-tiles [k0, k0 + kc) of the
             tile (TmaWgmmaLoop.emit's k-range), then thread 0 invalidates and re-initialises the
             ring's full barriers, so the next unit's loop starts at stage 0 with phase 0
             (mbarrier.md §9e: re-initialising a valid mbarrier needs mbarrier.inval first)
  partials   the wgmma accumulator layout (splitk.WgmmaPartials), one BM x BN f32 tile per rank
  epilogue   the direct stores (sm90/epilogue.py), once per tile, by its owner
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...ir import Function, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import F32, S32, U32, U64
from ...emit.memory import bar_sync, ld_param
from ...emit.streamk import Decomposition, StreamKUnits, UnitRegs
from ...emit.tiles import KRange, Tile, TileScheduler
from .batch import BATCH_PARAM
from .context import TmaOperands
from .splitk import SPLIT_K_PARAMS

if TYPE_CHECKING:
    from .context import Sm90Context
    from .pipeline import Sm90Pipeline


def with_scratch_pointers(ctx: "Sm90Context") -> "Sm90Context":
    """The context with the workspace and counters pointers (the last two parameters) loaded."""
    ptr = dict(ctx.ptr)
    for p in SPLIT_K_PARAMS:
        ptr[p.name] = ptx.to_global(ctx.b, U64, ld_param(ctx.b, "b64", ".u64", p.name))
    return replace(ctx, ptr=ptr)


class Sm90StreamK(StreamKUnits):
    """StreamK's persistent loop over work units, each run by the sm_90a pipeline."""

    lw: "Sm90Context"
    io: "Sm90Pipeline"

    def __init__(self, ctx: "Sm90Context", pipeline: "Sm90Pipeline"):
        super().__init__(ctx, pipeline)

    def lower(self, kt_tile: VReg) -> Function:
        """The kernel after the setup (which counted `kt_tile` k-tiles per output tile)."""
        ctx, b, pipeline = self.lw, self.b, self.io
        base_c = ctx.ptr["C"]
        stride_c = ld_param(b, "b64", ".u64", BATCH_PARAM.name) if self.g.batch > 1 else None
        pipeline.setup()
        d = self.decompose(kt_tile)
        acc = pipeline.accumulators()
        u = UnitRegs(b.reg("b32"), b.reg("b32"), b.reg("b32"))
        loop, finish = b.label("unit_loop"), b.label("all_units_done")
        b.banner("Persistent loop: one work unit (a tile, or a stretch of one tile's k-tiles) per trip")
        b.place(loop)
        self.select_unit(d, u, finish)
        tile, ops = self.run_sm90_unit(acc, d, u, base_c, stride_c)
        self.finish_unit(acc, d, u, tile, ops, loop, ctx.leader)
        b.place(finish)
        b.emit("ret")
        return b.function

    def run_sm90_unit(self, acc, d: Decomposition, u: UnitRegs, base_c: VReg,
                      stride_c: VReg | None) -> tuple[Tile, TmaOperands]:
        """Point the pipeline at the unit's tile (and batch) and run its k-tiles; returns the tile
        and its operands."""
        ctx, b, g = self.lw, self.b, self.g
        bar_sync(b, comment="the previous unit is done with the ring; its barriers are initialised again")
        c, batch = base_c, ctx.batch
        if g.batch > 1:
            assert stride_c is not None
            which = ptx.div(ctx.b, U32, u.index, d.per_batch)
            pid = ptx.mad(ctx.b, S32, which, ptx.neg(ctx.b, S32, d.per_batch), u.index)
            b.comment("batch: the TMA copies' third coordinate, and C's matrix")
            step = ptx.mul(ctx.b, U64, ptx.cvt(ctx.b, U64, U32, which), stride_c)
            c = ptx.mad(ctx.b, U64, step, Imm(str(g.out_bytes)), base_c)
            batch = (which,)
        else:
            pid = u.index
        tile = TileScheduler(ctx).tile(pid)
        ops = TmaOperands(tile, batch, c, ctx.warpgroup)
        b.comment(f"zero {sum(len(a) for a in acc)} f32 accumulators")
        for frag in acc:
            for r in frag:
                ptx.mov(b, F32, Imm("0f00000000"), into=r)
        self.io.mainloop(acc, ops, KRange(u.kc, first=u.k0))
        self.reinit_barriers()
        return tile, ops

    def reinit_barriers(self) -> None:
        """Thread 0 puts the ring's barriers back to phase 0 for the next unit; every thread's
        wait on them is past (the main loop's last bar.sync), and the next unit's first bar.sync
        orders the new barriers before any use."""
        ctx = self.lw
        ctx.b.comment("thread 0: the ring's barriers back to phase 0 for the next unit (every wait on them is past)")
        ctx.ring.reinit(ctx.leader)
