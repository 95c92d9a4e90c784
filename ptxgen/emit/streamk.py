"""Stream-K lowering: a persistent loop over work units (ptxgen/schedule/streamk.py has the model).

Every CTA computes the decomposition from %nctaid.x, M, N, K and then loops:
  select     the next unit: a whole data-parallel tile (tiles c, c+G, ...), else the next
             stretch of its Stream-K iteration range [start, end), clipped to one tile
  tile       origin, batch pointers, global pointers advanced to the unit's first k-tile
  main loop  the ordinary cp.async pipeline over the unit's k-tiles
  finish     a unit that does not hold k-tile 0 publishes its f32 partial (workspace slot = its
             rank, then a released flag); the owner of a split tile acquires the later ranks'
             flags in K order (thread 0 polls each, a bar.sync passes the acquire to the CTA),
             adds their partials, resets the flags and runs the epilogue
The owner waits only for CTAs with lower %ctaid.x (ranks run backwards), which started first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..ir import Addr, Function, Imm, Sym, VReg, ops as ptx, Builder
from ..ir.ops import B32, U32, S32, U64, S64
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from .memory import bar_sync
from .tiles import KRange, Tile, TileOperands

if TYPE_CHECKING:
    from ..targets.sm80.lowering import GemmLowering
    from .index import ExprEmitter
    from .pipeline import Pipeline


class StreamKOps(Protocol):
    """What the shared Stream-K protocol needs of a lowering (sm_80/wmma `GemmLowering`, sm_90a
    `Sm90Context`): builder, problem, schedule, %tid.x expressions, the workspace and counters
    pointers and scalar helpers."""

    @property
    def b(self) -> Builder: ...

    @property
    def g(self) -> Gemm: ...

    @property
    def s(self) -> Schedule: ...

    @property
    def ex(self) -> "ExprEmitter": ...

    @property
    def ptr(self) -> dict[str, VReg]: ...

    def wide_mul(self, a: VReg | Imm, bb: VReg | Imm) -> VReg: ...

    def ceil_div(self, x: VReg, d: int) -> VReg: ...

    def dim(self, name: str) -> VReg: ...


@dataclass(frozen=True)
class Decomposition:
    """The registers of this CTA's share of the work (`StreamK.decompose`): KT per tile, the G
    persistent CTAs, tiles per batch, the dp data-parallel tiles, q and extra (iterations per rank
    and the ranks with one more), this CTA's rank, its next iteration `it` and range end, and its
    next data-parallel tile. `it` and `next_dp` advance in place as units are taken."""

    kt_tile: VReg
    G: VReg
    per_batch: VReg
    dp: VReg
    q: VReg
    extra: VReg
    rank: VReg
    it: VReg
    end: VReg
    next_dp: VReg


@dataclass(frozen=True)
class UnitRegs:
    """The current unit, rewritten each trip: its linear tile index (over all batches), its first
    k-tile within the tile and its k-tile count."""

    index: VReg
    k0: VReg
    kc: VReg


class StreamKUnits:
    """The target-independent Stream-K protocol: the decomposition, the unit selection, the
    partial hand-off and the owner's fix-up, over any lowering (`StreamKOps`) and any pipeline
    (`io`: how its accumulators reach a partial tile, and its epilogue)."""

    def __init__(self, lw: StreamKOps, io: "Pipeline[Any, Any]"):
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s
        self.tile_bytes = self.s.bm * self.s.bn * 4  # one f32 partial tile per workspace slot
        self.io = io

    # -- small helpers ------------------------------------------------------------------------
    def mov(self, dst: VReg, src) -> None:
        ptx.mov(self.b, U32, src, into=dst)

    def branch(self, pred: VReg | None, label: str, negate: bool = False, comment: str | None = None) -> None:
        """A CTA-uniform branch (every value it tests is the same in all threads)."""
        ptx.bra(self.b, label, guard=pred, negate=negate, comment=comment)

    def decompose(self, kt_tile: VReg) -> Decomposition:
        """The hybrid split of T tiles over G CTAs, and this CTA's Stream-K range [start, end)."""
        lw, b, s = self.lw, self.b, self.s
        b.comment(f"decomposition ({s.decomposition}): G persistent CTAs, T tiles of KT k-tiles each")
        G = ptx.mov(lw.b, U32, Sym("%nctaid.x"))
        cta = ptx.mov(lw.b, U32, Sym("%ctaid.x"))
        num_m, num_n = lw.ceil_div(lw.dim("M"), s.bm), lw.ceil_div(lw.dim("N"), s.bn)
        per_batch = ptx.mul(lw.b, U32, num_m, num_n)
        tiles = ptx.mul(lw.b, U32, per_batch, Imm(str(self.g.batch))) if self.g.batch > 1 else per_batch
        if s.decomposition == "stream-k-pure":
            b.comment("every tile is shared out as MAC iterations")
            sk = tiles
        else:
            b.comment("T = full * G + rem: rem > 0 sends the last rem + G tiles (all, if full = 0) to Stream-K")
            full = ptx.div(lw.b, U32, tiles, G)
            rem = ptx.rem(lw.b, U32, tiles, G)
            sk = ptx.add(lw.b, U32, rem, G)
            sk = ptx.selp(lw.b, B32, tiles, sk, ptx.setp(lw.b, "eq", U32, full, 0))
            sk = ptx.selp(lw.b, B32, 0, sk, ptx.setp(lw.b, "eq", U32, rem, 0))
        dp = ptx.sub(lw.b, U32, tiles, sk, comment="dp: data-parallel tiles (the first ones)")
        iters = ptx.mul(lw.b, U32, sk, kt_tile, comment="I: Stream-K iterations")
        sk_ctas = ptx.min_(lw.b, U32, G, iters, comment="Gs: CTAs sharing them (each gets >= 1)")
        q = ptx.div(lw.b, U32, iters, ptx.max_(lw.b, U32, sk_ctas, 1))
        extra = ptx.mad(lw.b, S32, q, ptx.neg(lw.b, S32, sk_ctas), iters,
                        comment="I % Gs ranks get one more iteration")
        b.comment("rank = Gs - 1 - ctaid.x: owners (who wait) have higher ctaid.x than the CTAs they wait for")
        last_rank = ptx.sub(lw.b, U32, sk_ctas, 1)
        rank = ptx.sub(lw.b, U32, last_rank, cta)
        start = self.range_start(rank, q, extra)
        count = ptx.add(lw.b, U32, q, ptx.selp(lw.b, B32, 1, 0, ptx.setp(lw.b, "lt", U32, rank, extra)))
        count = ptx.selp(lw.b, B32, count, 0, ptx.setp(lw.b, "lt", U32, cta, sk_ctas))
        it = ptx.mov(lw.b, U32, start, comment="it: next Stream-K iteration of this CTA")
        end = ptx.add(lw.b, U32, start, count)
        next_dp = ptx.mov(lw.b, U32, cta, comment="next data-parallel tile: ctaid.x, + G per trip")
        return Decomposition(kt_tile, G, per_batch, dp, q, extra, rank, it, end, next_dp)

    def range_start(self, rank: VReg, q: VReg, extra: VReg) -> VReg:
        """First Stream-K iteration of `rank`: rank * q + min(rank, I % Gs)."""
        lw = self.lw
        return ptx.mad(lw.b, U32, rank, q, ptx.min_(lw.b, U32, rank, extra))

    def select_unit(self, d: Decomposition, u: UnitRegs, finish: str) -> None:
        lw, b = self.lw, self.b
        dp_unit, have = b.label("data_parallel_unit"), b.label("have_unit")
        is_dp = ptx.setp(lw.b, "lt", U32, d.next_dp, d.dp)
        self.branch(is_dp, dp_unit, comment="whole tiles first")
        b.comment("Stream-K unit: iterations [it, min(end, end of it's tile))")
        done = ptx.setp(lw.b, "ge", U32, d.it, d.end)
        self.branch(done, finish, comment="this CTA's range is used up")
        t = ptx.div(lw.b, U32, d.it, d.kt_tile)
        ptx.mad(b, S32, t, ptx.neg(lw.b, S32, d.kt_tile), d.it, into=u.k0, comment="k0: first k-tile within the tile")
        ptx.min_(b, U32, ptx.sub(lw.b, U32, d.kt_tile, u.k0), ptx.sub(lw.b, U32, d.end, d.it), into=u.kc,
                 comment="kc: k-tiles this unit runs")
        ptx.add(b, U32, d.dp, t, into=u.index)
        ptx.add(b, U32, d.it, u.kc, into=d.it)
        self.branch(None, have)
        b.place(dp_unit)
        self.mov(u.index, d.next_dp)
        self.mov(u.k0, Imm("0"))
        self.mov(u.kc, d.kt_tile)
        ptx.add(b, U32, d.next_dp, d.G, into=d.next_dp)
        b.place(have)

    def finish_unit(self, acc, d: Decomposition, u: UnitRegs, tile: Tile, ops: Any, loop: str,
                    t0: VReg) -> None:
        """After a unit's main loop: publish its partial, or (the tile's owner) add the later
        ranks' partials, and store a finished tile (`ops`: the pipeline's operands of the tile)."""
        lw, b = self.lw, self.b
        publish, store = b.label("publish_partial"), b.label("tile_epilogue")
        sites_base = self.slot_offset()
        self.branch(ptx.setp(lw.b, "ne", U32, u.k0, 0), publish,
                    comment="not the tile's first k-tiles: hand the partial to the owner")
        whole = ptx.setp(lw.b, "eq", U32, ptx.add(lw.b, U32, u.k0, u.kc), d.kt_tile)
        self.branch(whole, store, comment="the whole tile was ours")
        with lw.ex.scoped():
            self.fixup(acc, d, u, sites_base, t0)
        b.place(store)
        with lw.ex.scoped():
            self.store_tile(acc, tile, ops)
        self.branch(None, loop)
        b.place(publish)
        with lw.ex.scoped():
            self.publish(acc, d, sites_base, t0)
        self.branch(None, loop)

    def store_tile(self, acc, tile: Tile, ops: Any) -> None:
        """The tile's epilogue (the pipeline's store path)."""
        self.io.epilogue(tile, ops).emit(acc)

    def wait_flag(self, flag: VReg, t0: VReg, spin: str, seen_label: str) -> None:
        """Thread 0 alone spins on the rank's flag with ld.acquire.gpu, then a bar.sync hands what it
        acquired to every thread before any of them reads the partial (CUTLASS's GenericBarrier::
        wait_eq: one poller, then the CTA barrier). Polling with one thread keeps 255 threads off
        the memory system while the owner waits; the barrier is what orders the others' plain loads
        of the partial after the publisher's release (docs/ptx_facts/cp_async.md §6)."""
        b = self.b
        seen = b.reg("b32")
        ptx.bra(b, seen_label, uniform=False, guard=t0, negate=True,
                comment="only thread 0 polls; the others wait at the barrier")
        b.place(spin)
        ptx.load(b, "global", U32, Addr(flag), sem="acquire.gpu", into=seen, comment="acquire the partial")
        waiting = ptx.setp(self.lw.b, "eq", U32, seen, 0)
        b.emit("bra", Sym(spin), guard=waiting, comment="thread 0 spins until the partial is released")
        b.place(seen_label)
        bar_sync(b, comment="thread 0 has acquired the partial: the barrier orders it before every thread's reads")

    # -- partials -------------------------------------------------------------------------------
    def slot_offset(self) -> VReg:
        """This thread's (warp's, for wmma) byte offset of its first element in a partial tile."""
        return self.lw.ex.reg(self.io.partial_origin(self.s.bn) * 4)

    def slot(self, rank: VReg, thread_off: VReg) -> VReg:
        lw = self.lw
        off = ptx.add(lw.b, S64, lw.wide_mul(rank, Imm(str(self.tile_bytes))), ptx.cvt(lw.b, U64, U32, thread_off))
        return ptx.add(lw.b, S64, lw.ptr["workspace"], off)

    def flag(self, rank: VReg) -> VReg:
        return ptx.add(self.lw.b, S64, self.lw.ptr["counters"], self.lw.wide_mul(rank, Imm("4")))

    def publish(self, acc, d: Decomposition, thread_off: VReg, t0: VReg) -> None:
        b = self.b
        b.banner("Stream-K: publish this unit's partial tile (workspace slot = rank), then release the flag")
        self.io.store_partial(acc, self.slot(d.rank, thread_off), self.s.bn)
        bar_sync(b, comment="every thread's part of the partial is written")
        ptx.store(b, "global", U32, Addr(self.flag(d.rank)), 1, sem="release.gpu", guard=t0,
                  comment="release: the partial is complete")

    def fixup(self, acc, d: Decomposition, u: UnitRegs, thread_off: VReg, t0: VReg) -> None:
        """Owner: add the partials of ranks rank+1, rank+2, ... that start inside this tile, in order."""
        lw, b = self.lw, self.b
        b.banner("Stream-K fix-up: add the later ranks' partials of this tile, in K order")
        tile_end = ptx.mul(lw.b, U32, ptx.add(lw.b, U32, ptx.sub(lw.b, U32, u.index, d.dp), 1), d.kt_tile,
                           comment="Stream-K iteration where this tile ends")
        other = ptx.add(lw.b, U32, d.rank, 1)
        loop, spin, done = b.label("fixup_next_rank"), b.label("fixup_wait_flag"), b.label("fixup_done")
        b.place(loop)
        inside = ptx.setp(lw.b, "lt", U32, self.range_start(other, d.q, d.extra), tile_end)
        self.branch(inside, done, negate=True, comment="next rank starts past this tile: all added")
        flag = self.flag(other)
        self.wait_flag(flag, t0, spin, b.label("fixup_flag_seen"))
        ptx.store(b, "global", U32, Addr(flag), 0, sem="relaxed.gpu", guard=t0,
                  comment="reset the flag for the next launch")
        self.io.add_partial(acc, self.slot(other, thread_off), self.s.bn)
        ptx.add(b, U32, other, 1, into=other)
        self.branch(None, loop)
        b.place(done)


class StreamK(StreamKUnits):
    """Emits the persistent Stream-K kernel for one GemmLowering (handed in explicitly) and its
    cp.async pipeline."""

    lw: "GemmLowering"

    def __init__(self, lw: "GemmLowering"):
        super().__init__(lw, lw.pipeline)

    def lower(self) -> Function:
        lw, b = self.lw, self.b
        base_ptr = dict(lw.ptr)  # the lowering's setup has loaded the parameters (sm80/context.py)
        lw.dim("M"), lw.dim("N")
        strides = lw.batch_strides() if self.g.batch > 1 else None
        b.comment(f"KT = ceil(K / {self.s.bk}): MAC iterations (k-tiles) per output tile")
        kt_tile = lw.ceil_div(lw.dim("K"), self.s.bk)
        lw.pipeline.prepare_loop()
        lw.pipeline.setup()
        t0 = ptx.setp(lw.b, "eq", U32, lw.tid, Imm("0"))
        d = self.decompose(kt_tile)
        acc = lw.accumulators()
        u = UnitRegs(b.reg("b32"), b.reg("b32"), b.reg("b32"))
        loop, finish = b.label("unit_loop"), b.label("all_units_done")
        b.banner("Persistent loop: one work unit (a tile, or a stretch of one tile's k-tiles) per trip")
        b.place(loop)
        self.select_unit(d, u, finish)
        tile, ops = self.run_unit(acc, d, u, base_ptr, strides)
        self.finish_unit(acc, d, u, tile, ops, loop, t0)
        b.place(finish)
        b.emit("ret")
        return b.function

    def run_unit(self, acc, d: Decomposition, u: UnitRegs, base_ptr: dict[str, VReg],
                 strides: dict[str, VReg] | None) -> tuple[Tile, TileOperands]:
        """Point the pipeline at the unit's tile and k-tiles, and run it; returns the tile and its operands."""
        lw, b, g = self.lw, self.b, self.g
        bar_sync(b, comment="the previous unit is done with the shared buffers")
        if g.batch > 1:
            batch = ptx.div(lw.b, U32, u.index, d.per_batch)
            pid = ptx.mad(lw.b, S32, batch, ptx.neg(lw.b, S32, d.per_batch), u.index)
            lw.batch_offsets(batch, base_ptr, strides)
        else:
            pid = u.index
        tile = lw.scheduler.tile(pid)
        k = KRange(u.kc, ptx.mad(lw.b, S32, u.k0, Imm(str(-self.s.bk)), lw.dim("K"), comment="K left from k0"))
        ops = lw.pipeline.operands(tile)
        lw.pipeline.skip_k_tiles(ops.gptr, u.k0, "the unit's first k-tile (k0)")
        lw.zero_accumulators(acc)
        lw.mainloop(acc, ops, k)
        return tile, ops
