"""Thread-block clusters on the sm_100a kernel (cta_group=1): which tiles a cluster's CTAs walk,
TMA multicast of the operand they share, and the barrier protocol that makes it safe. The design
is the Hopper one (targets/sm90/cluster.py, docs/ptx_facts/clusters.md, tma.md §9d), with the
stage release done by the tensor core's commit (tcgen05.md §12j):

Launch and tiles. The entry declares `.reqnctapercluster CM*CN, 1, 1`; rank r of a cluster is
(dm, dn) = (r % CM, r / CM) of the cluster's CM x CN block of output tiles. Cluster c walks cluster
tiles c, c + %nclusterid.x, ... (the tile grid rounded up to whole clusters, the schedule's
raster over cluster tiles: sm90's `ClusterRoles.tile_count` / `tile`), so every CTA of a cluster
walks the same tiles and k-tiles in lockstep; a CTA whose tile lies past M or N loads TMA's
zeros and stores nothing.

Multicast. The CM CTAs of a cluster column share B, the CN CTAs of a cluster row share A: each
loads 1/CM of the B box (1/CN of A) and multicasts it to its column (row), its full[stage]
expecting the whole stage's bytes, its own and its peers'.

Releasing a stage. Stage s of CTA x may be refilled once the MMAs of every CTA that x's copies
land in have read it: the MMA thread's release is one `tcgen05.commit ... .multicast::cluster`
whose ctaMask is its cluster row and column (itself included), so empty[s] of every CTA counts
`receivers` = 1 + (CM-1) + (CN-1) arrivals, each one commit. The producer's acquire is the default
`mbarrier.try_wait.parity.shared::cta.b64`, as CUTLASS's ClusterBarrier waits: the commits' arrivals
order the tensor core's reads, not generic memory (on Hopper the `.acquire.cluster` form halved a
cluster kernel's speed). The commit tracks all of the MMA thread's earlier MMAs, so the arrival on
a peer comes once this CTA's MMAs reading the stage completed.

Start and exit: the inits are published with fence.mbarrier_init.release.cluster and a cluster
barrier (also a CTA barrier) before any peer multicasts or commits into this CTA; every thread
still running arrives and waits on a cluster barrier before it exits, so no CTA leaves while a peer
may still multicast into it or commit onto its barriers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...emit import mbarrier_isa as mb
from ...emit.mbarrier_ring import MbarrierRing, PipelineState
from ...emit.tiles import Tile
from ...ir import Addr, Imm, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U16, U32
from ...schedule.problem import K_PACK
from ..sm90 import tma_isa as tma
from ..sm90.cluster import ClusterRoles, ClusterShape, ClusterTiles, cluster_roles
from . import tcgen05_isa as tc
from .plan import EPILOGUE_WARPS

if TYPE_CHECKING:
    from .kernel import Sm100Lowering


def first_cluster_tile(lw: "Sm100Lowering", role: str) -> VReg:
    """%clusterid.x: the first tile (cluster tile, or pair tile) of this cluster's walk."""
    return ptx.mov(lw.b, U32, Sym("%clusterid.x"), comment=f"{role}: first cluster tile, then += %nclusterid.x")


def sync_cluster(lw: "Sm100Lowering", comment: str, aligned: bool = True) -> None:
    """barrier.cluster arrive + wait: every running thread of every CTA of the cluster."""
    mb.cluster_arrive(lw.b, comment=comment, aligned=aligned)
    mb.cluster_wait(lw.b, aligned=aligned)


@dataclass(eq=False)
class ClusterMulticast:
    """The cta_group=1 cluster of the sm_100a kernel (module docstring): `setup` emits the rank,
    position and masks before the roles split; the kernel calls the rest from its roles."""

    lw: "Sm100Lowering"
    roles: ClusterRoles | None = None
    commit_mask: VReg | None = None
    tiles: ClusterTiles | None = None

    group = 1
    acc_empty_arrivals = EPILOGUE_WARPS  # this CTA's epilogue warps (the accumulator stays in the CTA)
    acquire_scope = "cta"                # the producer's empty waits (peers' commits arrive): default scope
    acc_empty_scope = "cta"

    @property
    def issues_mma(self) -> VReg | None:
        """Every CTA of a cta_group=1 cluster issues its own MMAs (None: no predicate)."""
        return None

    @property
    def shape(self) -> ClusterShape:
        cm, cn = self.lw.plan.cluster
        return ClusterShape(cm, cn, self.lw.plan.multicast)

    @property
    def size(self) -> int:
        return self.shape.size

    @property
    def empty_arrivals(self) -> int:
        """One commit from each CTA that reads what this CTA's producer writes."""
        return self.shape.receivers

    def setup(self) -> None:
        """The rank, (dm, dn), the multicast masks, and the MMA thread's commit mask (its cluster
        row and column: the CTAs whose copies land in its stages)."""
        lw, sh = self.lw, self.shape
        self.roles = cluster_roles(lw, sh)
        parts = []
        if "B" in sh.multicast:
            parts.append(ptx.shl(lw.b, B32, Imm(str((1 << sh.cm) - 1)), ptx.mul(lw.b, U32, self.roles.dn, Imm(str(sh.cm)))))
        if "A" in sh.multicast:
            pattern = sum(1 << (sh.cm * j) for j in range(sh.cn))
            parts.append(ptx.shl(lw.b, B32, Imm(str(pattern)), self.roles.dm))
        mask = parts[0] if len(parts) == 1 else ptx.or_(lw.b, B32, parts[0], parts[1])
        self.commit_mask = ptx.cvt(lw.b, U16, U32, mask, comment="the MMA's stage commits: my cluster row and "
                                   "column (every CTA whose copies land in my stages)")

    def sync_after_init(self) -> None:
        sync_cluster(self.lw, "every CTA's barriers initialised and TMEM allocated before any peer uses them")

    def sync_before_exit(self, aligned: bool = True) -> None:
        sync_cluster(self.lw, "no CTA leaves while a peer may still multicast into it or commit onto its "
                     "barriers", aligned)

    # -- the walk ------------------------------------------------------------------------------
    def walk_start(self, role: str) -> tuple[VReg, VReg]:
        """(first index, count) of the cluster tiles this cluster walks (`tile` reads the counts)."""
        assert self.roles is not None
        self.tiles = self.roles.tile_count()
        return first_cluster_tile(self.lw, role), self.tiles.count

    def tile(self, index: VReg) -> Tile:
        assert self.roles is not None and self.tiles is not None
        return self.roles.tile(index, self.tiles)

    # -- the producer ----------------------------------------------------------------------------
    def issue_stage(self, state: PipelineState, tile: Tile, batch: VReg | None = None) -> None:
        """full[stage] armed for the whole stage; my slice of each shared operand multicast to the
        CTAs sharing it, the rest (an operand not shared) loaded for myself."""
        lw, plan, roles = self.lw, self.lw.plan, self.roles
        assert roles is not None and state.count is not None and plan.swizzle is not None
        b = lw.b
        bar = lw.ring.producer_commit(state.index, plan.stage_tx_bytes,
                                      comment=f"expect all {plan.stage_tx_bytes} B of the stage: mine and my "
                                      "peers' multicast")
        base = ptx.add(b, U32, lw.smem, ptx.mul(b, U32, state.index, Imm(str(plan.stage_bytes))))
        k0 = ptx.mul(b, U32, state.count, Imm(str(lw.s.bk // K_PACK.get(lw.g.dtype, 1))))  # fp4: bytes of K
        for name, box, origin, offset in (("A", plan.a_box, tile.bm0, 0), ("B", plan.b_box, tile.bn0, plan.a_stage)):
            assert box is not None
            parts = self.shape.parts(name)
            rows = box.outer // parts
            mask = roles.masks.get(name)
            first = sub = None
            if mask is not None:
                first = ptx.mul(b, U32, roles.slice_rows[name], Imm(str(rows)), comment=f"my slice of {name}: {rows} rows")
                sub = ptx.mul(b, U32, first, Imm(str(plan.swizzle)))
            for j in range(box.count):
                dst = ptx.add(b, U32, base, Imm(str(offset + j * box.outer * plan.swizzle)))
                if sub is not None:
                    dst = ptx.add(b, U32, dst, sub)
                contiguous = k0 if box.k_major else origin
                if j:
                    contiguous = ptx.add(b, U32, contiguous, Imm(str(j * box.inner)))
                strided = origin if box.k_major else k0
                if first is not None:
                    strided = ptx.add(b, U32, strided, first)
                what = (f"{name} box {rows}x{box.inner} ({'K' if box.k_major else 'MN'}-major), block {j}"
                        + (f", my 1/{parts}, multicast" if mask is not None else ""))
                coords = (contiguous, strided) + ((batch,) if batch is not None else ())
                tma.load(b, Addr(dst), lw.tmaps[name], coords, bar, comment=what, cta_mask=mask)
        if lw.scales is not None:   # block scales: each CTA loads its own rows' (no multicast)
            lw.scales.issue_loads(base, state.count, bar, tile)

    # -- the MMA warp ----------------------------------------------------------------------------
    def release(self, ring: MbarrierRing, index: VReg, guard: VReg | None, comment: str) -> None:
        """The ring's stage release (a `StageRelease`): one commit onto empty[index] of every CTA
        whose copies land in this stage."""
        tc.commit(ring.ops.b, ring.empty_barrier(index), guard=guard, comment=comment + " (every CTA my stage came from)",
                  cta_mask=self.commit_mask)

    def commit_accumulator(self, bar: Addr, guard: VReg, comment: str) -> None:
        tc.commit(self.lw.b, bar, guard=guard, comment=comment)

    def arrive_accumulator_empty(self, offset: VReg, guard: VReg, comment: str) -> None:
        mb.arrive(self.lw.b, Addr(ptx.add(self.lw.b, U32, self.lw.acc_empty, offset)), guard=guard, comment=comment)
