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

from typing import TYPE_CHECKING

from ...ir import Addr, Function, Imm, VReg
from ...emit.memory import bar_sync, ld_param
from ...emit.streamk import Decomposition, StreamK, UnitRegs
from ...emit.tiles import TileScheduler
from . import mbarrier_isa as mb
from .batch import BATCH_PARAM
from .epilogue import DirectStores
from .splitk import SPLIT_K_PARAMS, WgmmaPartials

if TYPE_CHECKING:
    from .pipeline import Sm90Lowering


class Sm90StreamK(StreamK):
    """StreamK's persistent loop over work units, each run by the sm_90a pipeline."""

    def __init__(self, lw: "Sm90Lowering"):  # noqa: D107 - StreamK's fields, with the wgmma partial I/O
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s  # type: ignore[assignment]
        self.tile_bytes = self.s.bm * self.s.bn * 4
        self.io = WgmmaPartials(lw)  # type: ignore[assignment]

    def lower(self) -> Function:
        lw, b = self.lw, self.b
        kt_tile = lw.setup(per_cta_tile=False)
        for p in SPLIT_K_PARAMS:
            lw.ptr[p.name] = lw.u64("cvta.to.global.u64", ld_param(b, "b64", ".u64", p.name))
        base_c = lw.ptr["C"]
        stride_c = ld_param(b, "b64", ".u64", BATCH_PARAM.name) if self.g.batch > 1 else None
        lw.pipeline.setup()
        d = self.decompose(kt_tile)
        acc = lw.pipeline.accumulators()
        u = UnitRegs(b.reg("b32"), b.reg("b32"), b.reg("b32"))
        loop, finish = b.label("unit_loop"), b.label("all_units_done")
        b.banner("Persistent loop: one work unit (a tile, or a stretch of one tile's k-tiles) per trip")
        b.place(loop)
        self.select_unit(d, u, finish)
        self.run_sm90_unit(acc, d, u, base_c, stride_c)
        self.finish_unit(acc, d, u, None, None, loop, lw.leader)  # type: ignore[arg-type]
        b.place(finish)
        b.emit("ret")
        return b.function

    def run_sm90_unit(self, acc, d: Decomposition, u: UnitRegs, base_c: VReg, stride_c: VReg | None) -> None:
        """Point the pipeline at the unit's tile (and batch) and run its k-tiles."""
        lw, b, g = self.lw, self.b, self.g
        bar_sync(b, comment="the previous unit is done with the ring; its barriers are initialised again")
        if g.batch > 1:
            assert stride_c is not None
            batch = lw.u32("div.u32", u.index, d.per_batch)
            pid = lw.u32("mad.lo.s32", batch, lw.u32("neg.s32", d.per_batch), u.index)
            b.comment("batch: the TMA copies' third coordinate, and C's matrix")
            step = lw.u64("mul.lo.u64", lw.u64("cvt.u64.u32", batch), stride_c)
            lw.ptr["C"] = lw.u64("mad.lo.u64", step, Imm(str(g.out_bytes)), base_c)
            lw.tma_batch = (batch,)
        else:
            pid = u.index
        tile = TileScheduler(lw).tile(pid)  # type: ignore[arg-type]  # uses b, s, g, u32, dim, ceil_div
        lw.tile_m0, lw.tile_n0 = tile.bm0, tile.bn0
        b.comment(f"zero {sum(len(a) for a in acc)} f32 accumulators")
        for frag in acc:
            for r in frag:
                b.emit("mov.f32", r, Imm("0f00000000"), ndefs=1)
        lw.pipeline.mainloop(acc, u.kc, u.k0)
        self.reinit_barriers()

    def reinit_barriers(self) -> None:
        """Thread 0 puts the ring's full barriers back to phase 0 for the next unit; every thread's
        wait on them is past (the main loop's last bar.sync), and the next unit's first bar.sync
        orders the new barriers before any use."""
        lw, b = self.lw, self.b
        b.comment("thread 0: the ring's barriers back to phase 0 for the next unit (every wait on them is past)")
        for st in range(lw.ring.stages):
            bar = Addr(lw.bars, 8 * st)
            b.emit("mbarrier.inval.shared::cta.b64", bar, guard=lw.leader)
            mb.init(b, bar, 1, guard=lw.leader)

    def store_tile(self, acc, tile, ops) -> None:
        DirectStores(self.lw).emit(acc)  # type: ignore[arg-type]
