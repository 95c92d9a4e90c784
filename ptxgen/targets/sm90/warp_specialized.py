"""The warp-specialised sm_90a kernel: a producer warpgroup feeding one or two consumer warpgroups
through a full/empty mbarrier ring (docs/ptx_facts/warp_specialisation.md §9g, mbarrier.md §9e,
tma.md §9d, wgmma.md §9b).

Roles. Warpgroups 0 .. consumers-1 are the consumers (warpgroup w owns rows w * BM/consumers of
each tile, as without specialisation, so the descriptors and the epilogue are shared); the LAST
warpgroup is the producer. Putting the producer last keeps `tid >> 7` the consumer index with no
subtraction. The producer's warps `setmaxnreg.dec` to `producer_regs`, then every thread but one
(lane 0 of its warp 0, the elected thread) exits; the consumers `setmaxnreg.inc` to `consumer_regs`.

The ring (S stages, per stage a full and an empty barrier, `stage`/`parity` counters that each role
keeps for itself and carries from tile to tile):
    producer, per k-tile:  wait empty[stage] (parity ^ 1: a fresh barrier's "previous phase" is
                           complete, so the first S waits pass); arrive.expect_tx full[stage] with
                           the stage's bytes; TMA boxes of A and B into the stage
    consumer, per k-tile:  wait full[stage] (parity); wgmma.fence; wgmmas; commit;
                           wait_group 1 (the previous k-tile's group has retired: its stage is no
                           longer read); lane 0 of each warp arrives on the previous stage's empty
                           barrier (init count 4 * consumers, one arrival per consumer warp)
With one stage the consumers wait_group 0 and release the stage they just read. No bar.sync runs
after the roles split, so a consumer's epilogue overlaps the producer's loads of its next tile.

In a cluster with multicast (cluster.py) the empty barriers count the consumer warps of every CTA
the producer's copies land in, each consumer warp releases a stage on all of those CTAs (lane j on
receiver j, by mapa), the inits are published with a cluster barrier and every CTA waits at a
cluster barrier before it exits.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Sym, VReg
from . import mbarrier_isa as mb
from . import tma_isa as tma
from . import wgmma_isa as wi
from .mainloop import TmaWgmmaLoop
from .persistent import TileWalk, zero_accumulators

if TYPE_CHECKING:
    from .pipeline import Sm90Lowering

WARPS_PER_WARPGROUP = 4


class WarpSpecializedLoop(TmaWgmmaLoop):
    """The producer's and the consumers' halves of the kernel, around the tile walk."""

    def __init__(self, lw: "Sm90Lowering"):
        super().__init__(lw)
        self.consumer_warps = WARPS_PER_WARPGROUP * self.plan.consumers

    @property
    def remote(self):
        """The cluster roles when CTAs touch each other's barriers (multicast), else None."""
        c = self.lw.cluster
        return c if c is not None and c.shape.remote else None

    def init_barriers(self) -> None:
        lw, b, stages = self.lw, self.b, self.ring.stages
        empty = self.remote.barrier_counts(self.consumer_warps) if self.remote else self.consumer_warps
        who = (f"one per consumer warp of the {self.remote.shape.receivers} CTAs reading this CTA's copies"
               if self.remote else "one per consumer warp")
        b.comment(f"thread 0 initialises {stages} full barriers (1 arrival: the producer's expect_tx) and "
                  f"{stages} empty barriers ({empty} arrivals: {who})")
        for st in range(stages):
            mb.init(b, Addr(lw.bars, 8 * st), 1, guard=lw.leader)
        for st in range(stages):
            mb.init(b, Addr(lw.empty_bars, 8 * st), empty, guard=lw.leader)
        if self.remote:
            self.remote.sync_after_init()
        else:
            b.emit("bar.sync", Imm("0"), comment="the barriers are initialised before any role uses them")

    def emit(self, acc: list[tuple[VReg, ...]], kt_count: VReg) -> None:
        lw, b = self.lw, self.b
        consumer = b.label("consumer_start")
        is_consumer = lw.pred("setp.lt.u32", lw.warpgroup, Imm(str(self.plan.consumers)))
        b.emit("bra", Sym(consumer), guard=is_consumer)
        self.producer(kt_count)
        b.place(consumer)
        self.consumer(acc, kt_count)

    # -- the producer warpgroup ---------------------------------------------------------------
    def producer(self, kt_count: VReg) -> None:
        lw, b, plan = self.lw, self.b, self.plan
        b.banner(f"Producer warpgroup {plan.consumers}: registers down to {plan.producer_regs}; its elected "
                 "thread fills the ring with TMA for every tile of the CTA, the other threads exit")
        assert plan.producer_regs is not None
        mb.setmaxnreg(b, plan.producer_regs, increase=False,
                      comment="every warp of the warpgroup: registers go to the consumers")
        elected = lw.pred("setp.eq.u32", lw.tid, Imm(str(128 * plan.consumers)))
        b.emit("ret", guard=elected, negate=True, comment="only lane 0 of the producer's warp 0 issues copies")
        for t in lw.tmaps.values():
            tma.prefetch_tensormap(b, Addr(t), comment="tensor map into the descriptor cache")
        stage = lw.u32("mov.u32", Imm("0"), comment="producer's ring position, carried across tiles")
        parity = lw.u32("mov.u32", Imm("1"), comment="empty-barrier parity the producer waits for (starts 1)")
        walk = TileWalk(lw, "producer")
        tile = walk.begin()
        kt = lw.u32("mov.u32", Imm("0"))
        top = b.label("producer_k_loop")
        b.place(top)
        remote = self.remote
        mb.wait_parity(b, Addr(self.barrier(stage, empty=True)), parity, "wait_empty",
                       comment="the consumers released this stage (their wgmma reading it retired)"
                       + (", in every CTA my copies land in" if remote else ""),
                       scope="cluster" if remote else "cta")
        if remote:
            remote.issue_stage(self, stage, kt, (tile.bm0, tile.bn0))
        else:
            self.issue_stage(stage, kt, None, (tile.bm0, tile.bn0))
        b.emit("add.u32", kt, kt, Imm("1"), ndefs=1)
        self.advance(stage, parity)
        b.emit("bra", Sym(top), guard=lw.pred("setp.lt.u32", kt, kt_count))
        walk.end()
        if remote:
            remote.sync_before_exit(aligned=False)   # one thread of its warp is left: not .aligned
        b.emit("ret")

    # -- the consumer warpgroups --------------------------------------------------------------
    def consumer(self, acc: list[tuple[VReg, ...]], kt_count: VReg) -> None:
        lw, b, plan = self.lw, self.b, self.plan
        b.banner(f"Consumer warpgroups 0..{plan.consumers - 1}: registers up to {plan.consumer_regs}; wait full, "
                 f"{plan.wgmmas_per_k_tile} wgmma per k-tile with {self.in_flight} group in flight, release the "
                 "retired stage, epilogue per tile")
        mb.setmaxnreg(b, plan.consumer_regs, increase=True, comment="the producer's registers")
        # tid >> 7 is the same in every lane, but ptxas cannot prove it; lane 0's copy, broadcast
        # by shfl, it can: the descriptors then live in uniform registers that HGMMA reads directly
        # (without, each k-tile moves every descriptor with R2UR), as CUTLASS's warp-group index does.
        uniform = b.reg("b32")
        b.emit("shfl.sync.idx.b32", uniform, lw.warpgroup, Imm("0"), Imm("31"), Imm("-1"), ndefs=1,
               comment="consumer warpgroup index, warp-uniform for ptxas")
        lw.warpgroup = uniform
        desc = self.descriptors()
        lane = lw.u32("and.b32", lw.tid, Imm("31"))
        remote = self.remote
        if remote:
            releaser, self._remote_empty = remote.release_targets(lane)
        else:
            releaser = lw.pred("setp.eq.u32", lane, Imm("0"))
        stage = lw.u32("mov.u32", Imm("0"), comment="consumer's ring position, carried across tiles")
        parity = lw.u32("mov.u32", Imm("0"), comment="full-barrier parity the consumers wait for")
        prev = lw.u32("mov.u32", Imm("0"), comment="the previous k-tile's stage")
        walk = TileWalk(lw, "consumer", moves_c=True)
        tile = walk.begin()
        zero_accumulators(lw, acc)
        kt = lw.u32("mov.u32", Imm("0"))
        top = b.label("main_loop")
        b.banner(f"Main loop: wait full[stage], {plan.wgmmas_per_k_tile} wgmma, release stage kt-{self.in_flight}")
        b.place(top)
        mb.wait_parity(b, Addr(self.barrier(stage)), parity, "wait_full", comment="the stage's bytes landed")
        self.compute_stage(acc, *self.stage_descriptors(desc, stage))
        if self.in_flight:
            wi.wait_group(b, 1, comment="k-tile kt-1's wgmma group has retired")
            go = lw.pred("and.pred", releaser, lw.pred("setp.ne.u32", kt, Imm("0")))
            self.release(prev, go, "release k-tile kt-1's stage to the producer")
            b.emit("mov.u32", prev, stage, ndefs=1)
        else:
            wi.wait_group(b, 0, comment="this k-tile's wgmma group has retired")
            self.release(stage, releaser, "release this stage to the producer")
        b.emit("add.u32", kt, kt, Imm("1"), ndefs=1)
        self.advance(stage, parity)
        b.emit("bra", Sym(top), guard=lw.pred("setp.lt.u32", kt, kt_count))
        wi.wait_group(b, 0, comment="all wgmma retired: the accumulators may be read")
        if self.in_flight:
            self.release(prev, releaser, "release the tile's last stage")
        lw.tile_m0, lw.tile_n0 = tile.bm0, tile.bn0
        lw.pipeline.epilogue(acc)
        walk.end()
        if remote:
            remote.sync_before_exit(aligned=True)

    def release(self, stage: VReg, guard: VReg, comment: str) -> None:
        """The consumers' arrival on empty[stage]: this CTA's (one lane per warp), or with multicast
        every receiving CTA's (lane j on receiver j's, through the mapa'd address)."""
        if self.remote:
            self.remote.release(self._remote_empty, stage, guard, comment + " (every CTA my stage came from)")
        else:
            mb.arrive(self.b, Addr(self.barrier(stage, empty=True)), guard=guard, comment=comment)
