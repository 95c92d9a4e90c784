"""The CTA pair of the sm_100a kernel (cta_group=2, cluster (2, 1)): two CTAs share each
tcgen05.mma of the pair's BM x BN tile, in the manner of CUTLASS's 2SM kernels and Triton/Gluon's
two-CTA matmul (tests/sim/blackwell_corpus/gluon_2cta_*; docs/ptx_facts/tcgen05.md §12i).

Roles. CTA v = %cluster_ctarank & 1 of the pair holds rows [v*BM/2, (v+1)*BM/2) of the tile's A
and columns [v*BN/2, (v+1)*BN/2) of its B, at the same shared-memory offsets in both CTAs, and its
own BM/2 rows of D (all BN columns) in its own tensor memory at the same TMEM address. The leader
(v = 0) issues every MMA from its own descriptors with the pair's M and N in the instruction
descriptor; the peer's MMA warp only allocates and frees (tcgen05.alloc/dealloc.cta_group::2 need
the same warp of both CTAs, §12i), and every tcgen05 instruction of the kernel is .cta_group::2.

Barriers.
* full[s]: only the leader's is waited on. The leader's producer arms it for both CTAs' bytes
  (one arrive.expect_tx); both producers' copies name it (`cp.async.bulk.tensor .cta_group::2`,
  whose mbarrier may be in the destination's peer; its shared::cluster address by mapa), so the
  phase completes once both halves landed. A peer's bytes arriving before the leader's expect_tx
  leave the tx-count negative with the arrival still pending: no early completion.
* empty[s]: in each CTA, one arrival: the leader's `tcgen05.commit.cta_group::2 ...
  .multicast::cluster` with ctaMask 0b11 once the MMAs reading the stage completed, so each
  producer refills its own half only after the pair's MMAs read it.
* acc_full[b]: in each CTA, one arrival: the leader's multicast commit after a tile's last MMA.
* acc_empty[b]: the leader's, 2 * 4 arrivals: every epilogue warp of both CTAs, after its last
  tcgen05.ld of the buffer (tcgen05.wait::ld, fence::before_thread_sync), arrives on the leader's
  (mapa, `mbarrier_isa.arrive_remote`); the leader's MMA warp waits with the default
  `mbarrier.try_wait.parity.shared::cta.b64`, as CUTLASS's ClusterBarrier does (on Hopper the
  `.acquire.cluster` form halved a cluster kernel's speed).

Block scaling (scales.py): each CTA also loads its own rows' A scales and the B scales of the
whole pair tile (counted in the bytes the leader arms), and the leader's tcgen05.cp.cta_group::2
copies each CTA's stage into that CTA's TMEM before the pair's block-scaled MMAs (§12g, §12h).

Tiles: the pair walks pair tiles %clusterid.x, + %nclusterid.x, ... in the schedule's raster
(the shared TileScheduler over BM x BN tiles); CTA v's rows of C start at bm0 + v*BM/2.

Start and exit: a cluster barrier before the alloc (the peer must be running) and after the
inits (published with fence.mbarrier_init.release.cluster); the MMA warp frees TMEM once its CTA's
epilogue read every accumulator, then every running thread arrives and waits on a cluster barrier,
so neither CTA exits while the other may still copy into, commit onto or allocate with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...emit import mbarrier_isa as mb
from ...emit.mbarrier_ring import MbarrierRing, PipelineState
from ...emit.tiles import Tile, TileScheduler
from ...ir import Addr, Builder, Imm, Instr, TensorRef, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U16, U32
from ...schedule.problem import K_PACK
from . import tcgen05_isa as tc
from .cluster import first_cluster_tile, sync_cluster
from .plan import EPILOGUE_WARPS

if TYPE_CHECKING:
    from .kernel import Sm100Lowering

#: ctaMask of the pair's commits: both CTAs of the (2, 1) cluster.
PAIR_MASK = 0b11


def load_to_pair_barrier(b: Builder, dst: Addr, tmap: VReg, coords: tuple[VReg, ...], mbar: Addr,
                         comment: str | None = None) -> Instr:
    """A TMA load into this CTA's shared memory completing on `mbar`, a shared::cluster address in
    this CTA or its pair peer (`.cta_group::2`, PTX 8.6; the qualifier order CUTLASS emits, §12i)."""
    op = f"cp.async.bulk.tensor.{len(coords)}d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
    return b.emit(op, dst, TensorRef(tmap, tuple(coords)), mbar, comment=comment)


@dataclass(eq=False)
class CtaPair:
    """The pair's registers (set by `setup` before the roles split) and its part of each role."""

    lw: "Sm100Lowering"
    rank: VReg | None = None
    leader: VReg | None = None        # predicate: this CTA is the pair's even CTA, which issues the MMAs
    full_leader: VReg | None = None   # shared::cluster address of the leader's full[0]
    acc_empty_leader: VReg | None = None
    mask: VReg | None = None
    a_half: VReg | None = None        # v * BM/2: this CTA's first row of the pair's tile
    b_half: VReg | None = None        # v * BN/2: its first column of B

    group = 2
    size = 2
    empty_arrivals = 1                     # the leader's multicast commit
    acc_empty_arrivals = 2 * EPILOGUE_WARPS  # both CTAs' epilogue warps, on the leader's barrier
    acquire_scope = "cta"     # default-scope waits (module docstring)
    acc_empty_scope = "cta"

    @property
    def issues_mma(self) -> VReg | None:
        return self.leader

    def setup(self) -> None:
        lw, b = self.lw, self.lw.b
        bm, bn, _ = lw.plan.mma
        b.comment("CTA pair (cta_group::2): rank v = %cluster_ctarank & 1 holds A rows v*BM/2.., B columns "
                  "v*BN/2.., its D rows in its own TMEM; the even CTA issues the MMAs")
        self.rank = mb.cluster_ctarank(b)
        v = ptx.and_(b, B32, self.rank, Imm("1"))
        self.leader = ptx.setp(b, "eq", U32, v, Imm("0"), comment="the even CTA of the pair: it issues the MMAs")
        lead = ptx.and_(b, B32, self.rank, Imm("-2"), comment="the leader's rank")
        self.full_leader = mb.mapa(b, lw.ring.full, lead, comment="the leader's full[0]: both CTAs' copies complete there")
        self.acc_empty_leader = mb.mapa(b, lw.acc_empty, lead, comment="the leader's acc_empty[0]")
        self.mask = ptx.cvt(b, U16, U32, ptx.mov(b, U32, Imm(str(PAIR_MASK))), comment="ctaMask of the pair's commits")
        self.a_half = ptx.mul(b, U32, v, Imm(str(bm // 2)))
        self.b_half = ptx.mul(b, U32, v, Imm(str(bn // 2)))

    def sync_before_alloc(self) -> None:
        sync_cluster(self.lw, "both CTAs running before the pair allocates tensor memory together")

    def sync_after_init(self) -> None:
        sync_cluster(self.lw, "both CTAs' barriers initialised and TMEM allocated before either uses the other's")

    def sync_before_exit(self, aligned: bool = True) -> None:
        sync_cluster(self.lw, "neither CTA leaves while the other may still copy, commit or free with it", aligned)

    # -- the walk ------------------------------------------------------------------------------
    def walk_start(self, role: str) -> tuple[VReg, VReg]:
        """(first pair tile, pair tiles): the pair is the cluster, its tile BM x BN."""
        return first_cluster_tile(self.lw, role), TileScheduler(self.lw).tile_count()

    def tile(self, index: VReg) -> Tile:
        """This CTA's part of pair tile `index`: the tile's n origin, and bm0 of its own rows."""
        t = TileScheduler(self.lw).tile(index)
        assert self.a_half is not None
        return Tile(t.tm, t.tn, ptx.add(self.lw.b, U32, t.bm0, self.a_half, comment="my rows of the pair's tile"), t.bn0)

    # -- the producer ----------------------------------------------------------------------------
    def issue_stage(self, state: PipelineState, tile: Tile, batch: VReg | None = None) -> None:
        """The leader arms its full[stage] for both CTAs' bytes; each CTA copies its half of A and
        of B into its own stage, completing on the leader's full[stage]."""
        lw, plan = self.lw, self.lw.plan
        b = lw.b
        assert state.count is not None and plan.swizzle is not None and self.full_leader is not None
        pair_bytes = 2 * plan.stage_tx_bytes
        lw.ring.producer_commit(state.index, pair_bytes, guard=self.leader,
                                comment=f"the leader expects the pair's {pair_bytes} B (both CTAs' halves)")
        bar = Addr(ptx.add(b, U32, self.full_leader, lw.ring.stage_offset(state.index)))
        base = ptx.add(b, U32, lw.smem, ptx.mul(b, U32, state.index, Imm(str(plan.stage_bytes))))
        k0 = ptx.mul(b, U32, state.count, Imm(str(lw.s.bk // K_PACK.get(lw.g.dtype, 1))))  # fp4: bytes of K
        assert self.b_half is not None
        b_origin = ptx.add(b, U32, tile.bn0, self.b_half, comment="my columns of the pair's B")
        for name, box, origin, offset in (("A", plan.a_box, tile.bm0, 0), ("B", plan.b_box, b_origin, plan.a_stage)):
            assert box is not None
            for j in range(box.count):
                dst = ptx.add(b, U32, base, Imm(str(offset + j * box.outer * plan.swizzle)))
                if box.k_major:
                    inner, outer = (ptx.add(b, U32, k0, Imm(str(j * box.inner))) if j else k0), origin
                else:
                    inner, outer = (ptx.add(b, U32, origin, Imm(str(j * box.inner))) if j else origin), k0
                coords = (inner, outer) + ((batch,) if batch is not None else ())
                load_to_pair_barrier(b, Addr(dst), lw.tmaps[name], coords, bar,
                                     comment=f"my half of {name}: box {box.outer}x{box.inner}, block {j}, "
                                     "on the leader's full barrier")
        if lw.scales is not None:   # my rows' A scales, the whole pair's B scales (scales.py)
            lw.scales.issue_loads(base, state.count, bar, tile, load=load_to_pair_barrier)

    # -- the MMA warp ----------------------------------------------------------------------------
    def release(self, ring: MbarrierRing, index: VReg, guard: VReg | None, comment: str) -> None:
        """The stage's release in both CTAs: one multicast commit (a `StageRelease`)."""
        tc.commit(ring.ops.b, ring.empty_barrier(index), guard=guard, comment=comment + " (in both CTAs)",
                  group=2, cta_mask=self.mask)

    def commit_accumulator(self, bar: Addr, guard: VReg, comment: str) -> None:
        tc.commit(self.lw.b, bar, guard=guard, comment=comment + " (both CTAs' acc_full)", group=2, cta_mask=self.mask)

    def arrive_accumulator_empty(self, offset: VReg, guard: VReg, comment: str) -> None:
        """Arrive on the leader's acc_empty at byte `offset` (a remote arrival, mbarrier_isa.arrive_remote)."""
        assert self.acc_empty_leader is not None
        addr = ptx.add(self.lw.b, U32, self.acc_empty_leader, offset)
        mb.arrive_remote(self.lw.b, Addr(addr), guard=guard, comment=comment + " (the leader's barrier)")
