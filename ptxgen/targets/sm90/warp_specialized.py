"""The warp-specialised sm_90a kernel: a producer warpgroup feeding one or two consumer warpgroups
through a full/empty mbarrier ring (docs/ptx_facts/warp_specialisation.md §9g, mbarrier.md §9e,
tma.md §9d, wgmma.md §9b).

Roles. Warpgroups 0 .. consumers-1 are the consumers (warpgroup w owns rows w * BM/consumers of
each tile, as without specialisation, so the descriptors and the epilogue are shared); the LAST
warpgroup is the producer. Putting the producer last keeps `tid >> 7` the consumer index with no
subtraction. The producer's warps `setmaxnreg.dec` to `producer_regs`, then every thread but one
(the lane elect.sync picks in its warp 0) exits; the consumers `setmaxnreg.inc` to `consumer_regs`.

The ring (mbarrier_ring.py: S stages, per stage a full and an empty barrier; each role keeps its
own PipelineState, index and parity, and carries it from tile to tile):
    producer, per k-tile:  wait empty[stage] (parity ^ 1: a fresh barrier's "previous phase" is
                           complete, so the first S waits pass); arrive.expect_tx full[stage] with
                           the stage's bytes; TMA boxes of A and B into the stage
    consumer, per k-tile:  wait full[stage] (parity); wgmma.fence; wgmmas; commit;
                           wait_group 1 (the previous k-tile's group has retired: its stage is no
                           longer read); lane 0 of each warp arrives on the previous stage's empty
                           barrier (init count 4 * consumers, one arrival per consumer warp)
With one stage the consumers wait_group 0 and release the stage they just read. No bar.sync runs
after the roles split, so a consumer's epilogue overlaps the producer's loads of its next tile.
With beta != 0 and the TMA epilogue, an elected lane of the producer's warp 1 loads C's boxes for
the epilogue on their own full/free barriers (epilogue_c_load.py), apart from the A/B producer.

In a cluster with multicast (cluster.py) the empty barriers count the consumer warps of every CTA
the producer's copies land in, each consumer warp releases a stage on all of those CTAs (lane j on
receiver j, by mapa), the inits are published with a cluster barrier and every CTA waits at a
cluster barrier before it exits.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, PRED, U32
from ...emit.memory import bar_sync
from ...emit import mbarrier_isa as mb
from . import tma_isa as tma
from . import wgmma_isa as wi
from .cluster import ClusterRelease, ClusterRoles
from .epilogue_c_load import emit_c_loader
from .epilogue_tma import TmaStores
from .grouped import tile_walk
from .persistent import zero_accumulators

if TYPE_CHECKING:
    from .context import Sm90Context
    from .mainloop import TmaWgmmaLoop
    from .pipeline import Sm90Pipeline

WARPS_PER_WARPGROUP = 4


def empty_arrivals(consumers: int, cluster: ClusterRoles | None) -> int:
    """Arrivals per phase of an empty barrier: one per consumer warp (of every CTA reading this
    CTA's copies, with multicast)."""
    warps = WARPS_PER_WARPGROUP * consumers
    return cluster.barrier_counts(warps) if cluster is not None and cluster.shape.remote else warps


def remote_roles(ctx: "Sm90Context") -> ClusterRoles | None:
    """The cluster roles when CTAs touch each other's barriers (multicast), else None."""
    c = ctx.cluster
    return c if c is not None and c.shape.remote else None


def init_barriers(ctx: "Sm90Context") -> None:
    """Thread 0 initialises the ring's full and empty barriers, published to every role (and,
    with multicast, to the cluster)."""
    b, ring, remote = ctx.b, ctx.ring, remote_roles(ctx)
    who = (f"one per consumer warp of the {remote.shape.receivers} CTAs reading this CTA's copies"
           if remote else "one per consumer warp")
    b.comment(f"thread 0 initialises {ring.stages} full barriers (1 arrival: the producer's expect_tx) and "
              f"{ring.stages} empty barriers ({ring.empty_arrivals} arrivals: {who})")
    ring.init(ctx.leader)
    if remote:
        remote.sync_after_init()
    else:
        bar_sync(b, comment="the barriers are initialised before any role uses them")



def consumer_warpgroups(count: int, verb: bool = True) -> str:
    """"warpgroup 0 consumes" / "warpgroups 0..1 consume" (never "0..0")."""
    if count == 1:
        return "warpgroup 0" + (" consumes" if verb else "")
    return f"warpgroups 0..{count - 1}" + (" consume" if verb else "")

class WarpSpecializedKernel:
    """The producer's and the consumers' halves of the kernel, around the tile walk, on the
    pipeline's pieces (its `TmaWgmmaLoop`) and its epilogue."""

    def __init__(self, ctx: "Sm90Context", pipeline: "Sm90Pipeline"):
        self.ctx, self.b, self.plan = ctx, ctx.b, ctx.plan
        self.pipeline = pipeline
        self.loop: TmaWgmmaLoop = pipeline.loop
        self.ring = ctx.ring
        self.remote = remote_roles(ctx)

    def emit(self, acc: list[tuple[VReg, ...]], kt_count: VReg) -> None:
        ctx, b = self.ctx, self.b
        # tid >> 7 is the same in every lane, but ptxas cannot prove it; lane 0's copy, broadcast
        # by shfl, it can. Branching on it makes the role split warp-uniform, so each role's values
        # (ring state, descriptors) live in uniform registers that HGMMA reads directly: without,
        # the relocatable build (nvJitLink, `ptxas -c`, which drops setmaxnreg's `.aligned`
        # convergence point) moves every descriptor with R2UR each k-tile; as CUTLASS's
        # warp-group index (canonical_warp_group_idx) does.
        uniform = b.reg("b32")
        b.emit("shfl.sync.idx.b32", uniform, ctx.warpgroup, Imm("0"), Imm("31"), Imm("-1"), ndefs=1,
               comment="warpgroup index, warp-uniform for ptxas")
        consumer = b.label("consumer_start")
        is_consumer = ptx.setp(ctx.b, "lt", U32, uniform, Imm(str(self.plan.consumers)))
        b.emit("bra", Sym(consumer), guard=is_consumer)
        self.producer(kt_count)
        b.place(consumer)
        self.consumer(acc, kt_count, uniform)

    # -- the producer warpgroup ---------------------------------------------------------------
    def producer(self, kt_count: VReg) -> None:
        ctx, b, plan, ring = self.ctx, self.b, self.plan, self.ring
        b.banner(f"Producer warpgroup {plan.consumers}: registers down to {plan.producer_regs}; its elected "
                 "thread fills the ring with TMA for every tile of the CTA, the other threads exit")
        assert plan.producer_regs is not None
        mb.setmaxnreg(b, plan.producer_regs, increase=False,
                      comment="every warp of the warpgroup: registers go to the consumers")
        c_loader = self.c_loader()
        warps = 2 if c_loader else 1   # warp 0 issues A and B; warp 1 loads C (beta != 0)
        first = 128 * plan.consumers
        kept = ptx.setp(ctx.b, "lt", U32, ctx.tid, Imm(str(first + 32 * warps)))
        b.emit("ret", guard=kept, negate=True,
               comment=f"warps {warps}..3 of the producer exit")
        # elect.sync rather than a tid test: ptxas then knows one lane issues, and does not wrap
        # each UTMALDG in a loop electing the lanes one by one (warp_specialisation.md §9h)
        elected, _ = mb.elect_sync(b, comment="one lane of warp 0 issues A and B, one of warp 1 loads C" if c_loader
                                   else "one lane of the producer's warp 0 issues the copies")
        b.emit("ret", guard=elected, negate=True, comment="the other lanes exit")
        if c_loader:
            loads_c = b.label("c_loader")
            b.emit("bra", Sym(loads_c), guard=ptx.setp(ctx.b, "ge", U32, ctx.tid, Imm(str(first + 32))))
        for t in ctx.tmaps.values():
            tma.prefetch_tensormap(b, Addr(t), comment="tensor map into the descriptor cache")
        position = ring.start(1, ("producer's ring position, carried across tiles",
                                  "empty-barrier parity the producer waits for (starts 1)"))
        walk = tile_walk(ctx, "producer")
        ops, step = walk.begin()
        kt = ptx.mov(ctx.b, U32, Imm("0"))
        state = position.counting(kt)
        top = b.label("producer_k_loop")
        b.place(top)
        remote = self.remote
        ring.producer_acquire(state, comment="the consumers released this stage (their wgmma reading it retired)"
                              + (", in every CTA my copies land in" if remote else ""))
        if remote:
            remote.issue_stage(self.loop, state.index, kt, ops)
        else:
            self.loop.issue_stage(state.index, kt, None, ops)
        ring.advance(state)
        b.emit("bra", Sym(top), guard=ptx.setp(ctx.b, "lt", U32, kt, kt_count))
        walk.end(step)
        if remote:
            remote.sync_before_exit(aligned=False)   # one thread of its warp is left: not .aligned
        b.emit("ret")
        if c_loader:
            b.place(loads_c)
            emit_c_loader(ctx, self.pipeline.stores)
            b.emit("ret")   # its barriers are this CTA's: no cluster barrier needed before it exits

    def c_loader(self) -> bool:
        """Whether the producer warpgroup loads C for the epilogue (beta != 0, TMA epilogue)."""
        stores = self.pipeline.stores
        return isinstance(stores, TmaStores) and stores.producer_loads_c

    # -- the consumer warpgroups --------------------------------------------------------------
    def consumer(self, acc: list[tuple[VReg, ...]], kt_count: VReg, uniform: VReg) -> None:
        """The consumer warpgroups' loop and epilogue; `uniform` is the warp-uniform warpgroup index."""
        ctx, b, plan, loop = self.ctx, self.b, self.plan, self.loop
        flight = (f"no group in flight (fp8 promotion: each k-tile's temporary is added into the f32 accumulator)"
                  if loop.promotion is not None else f"{loop.in_flight} group in flight")
        b.banner(f"Consumer {consumer_warpgroups(plan.consumers, verb=False)}: registers up to {plan.consumer_regs}; wait full, "
                 f"{plan.wgmmas_per_k_tile} wgmma per k-tile with {flight}, release the "
                 "retired stage, epilogue per tile")
        mb.setmaxnreg(b, plan.consumer_regs, increase=True, comment="the producer's registers")
        desc = loop.descriptors(uniform)
        lane = ptx.and_(ctx.b, B32, ctx.tid, Imm("31"))
        remote = self.remote
        ring = self.ring
        if remote:
            assert ring.empty is not None
            releaser, remote_empty = remote.release_targets(lane, ring.empty)
            ring = ring.with_release(ClusterRelease(remote, remote_empty))
        else:
            releaser = ptx.setp(ctx.b, "eq", U32, lane, Imm("0"))
        position = ring.start(0, ("consumer's ring position, carried across tiles",
                                  "full-barrier parity the consumers wait for"))
        prev = ptx.mov(ctx.b, U32, Imm("0"), comment="the previous k-tile's stage")
        walk = tile_walk(ctx, "consumer", moves_c=True)
        ops, step = walk.begin()
        ops = replace(ops, warpgroup=uniform)
        zero_accumulators(ctx, acc)
        if loop.promotion is not None:
            loop.promotion.begin_tile(ops)
        kt = ptx.mov(ctx.b, U32, Imm("0"))
        state = position.counting(kt)
        top = b.label("main_loop")
        done = b.label("main_loop_done")
        if loop.in_flight:
            # The tile's first k-tile, peeled (as CUTLASS's consumer mainloop does): it has no
            # earlier stage to release, so the loop below releases without a `kt != 0` test
            # (one SASS instruction of the k-tile's budget, bench/sass.py).
            b.banner("First k-tile of the tile: wait full[stage], wgmma; nothing to release yet")
            ring.consumer_wait(state, comment="the stage's bytes landed")
            loop.compute_stage(acc, *loop.stage_descriptors(desc, state.index))
            ptx.mov(b, U32, state.index, into=prev)
            ring.advance(state)
            b.emit("bra", Sym(done), guard=ptx.setp(ctx.b, "ge", U32, kt, kt_count))
        b.banner(f"Main loop: wait full[stage], {plan.wgmmas_per_k_tile} wgmma, "
                 + ("release this stage, promote the temporary (fp8)" if loop.promotion is not None
                    else f"release stage kt-{loop.in_flight}"))
        b.place(top)
        if loop.promotion is not None:
            loop.promotion.begin_k_tile(kt)
        ring.consumer_wait(state, comment="the stage's bytes landed")
        loop.compute_stage(acc, *loop.stage_descriptors(desc, state.index))
        if loop.in_flight:
            wi.wait_group(b, 1, comment="k-tile kt-1's wgmma group has retired")
            ring.consumer_release(prev, releaser, "release k-tile kt-1's stage to the producer")
            ptx.mov(b, U32, state.index, into=prev)
        else:
            wi.wait_group(b, 0, comment="this k-tile's wgmma group has retired")
            ring.consumer_release(state.index, releaser, "release this stage to the producer")
            if loop.promotion is not None:
                loop.promotion.promote(acc, "end of the k-tile, after its wait_group 0", loop.last_chunk)
        ring.advance(state)
        b.emit("bra", Sym(top), guard=ptx.setp(ctx.b, "lt", U32, kt, kt_count))
        b.place(done)
        wi.wait_group(b, 0, comment="all wgmma retired: the accumulators may be read")
        if loop.in_flight:
            ring.consumer_release(prev, releaser, "release the tile's last stage")
        self.pipeline.epilogue(ops.tile, ops).emit(acc)
        walk.end(step)
        self.pipeline.drain()
        if remote:
            remote.sync_before_exit(aligned=True)
