"""Thread-block clusters on the warp-specialised persistent sm_90a kernel: which tiles a cluster's
CTAs walk, TMA multicast of the operand they share, and the barrier protocol that makes it safe
(docs/ptx_facts/clusters.md, tma.md §9d, mbarrier.md §9e).

Launch. The entry declares `.reqnctapercluster CM*CN, 1, 1`: a cluster is CM*CN consecutive CTAs
of the 1-D persistent grid (whose size `hopper.persistent_ctas` rounds to whole clusters), and
the runtime also passes the same dimensions to cuLaunchKernelEx. CTA rank r of a cluster sits at
(dm, dn) = (r % CM, r / CM) in the cluster's CM x CN block of output tiles.

Tiles. The output tiles are grouped into cluster tiles of CM x CN tiles (the tile grid rounded UP
to whole cluster tiles, as CUTLASS does); cluster c walks cluster tiles c, c + %nclusterid.x, ...
in the schedule's raster (grouped: group_m / CM cluster rows per group), and its CTA (dm, dn)
computes tile (CM * ctm + dm, CN * ctn + dn). Every CTA of a cluster therefore walks the same
number of tiles and k-tiles in lockstep; a CTA whose tile lies past M or N (an odd tile count)
loads boxes that TMA fills with zeros (their bytes still count) and stores nothing, so it takes
part in the multicast and barrier protocol like its peers.

Multicast. Along M the CM CTAs of a cluster column (same dn) need the same B block, along N the
CN CTAs of a cluster row (same dm) the same A block. With multicast, each CTA's producer loads
1/CM of the B box (rows dm * outer/CM .. of every swizzle-wide box: the tensor map's box has
outer/CM rows) and multicasts it to its column (ctaMask), likewise 1/CN of A to its row, and
loads the rest itself. Each CTA's full[stage] still expects the whole stage's bytes from its own
producer's arrive.expect_tx: the peers' complete-tx lands on the same barrier offset.

Releasing a stage. A producer may refill stage s only when the consumers of EVERY CTA its copies
land in have finished reading s: its own and those of its multicast peers ("receivers": 1 +
(CM-1 if B is shared) + (CN-1 if A is shared); 2 for (2, 1) and (1, 2)). So empty[s] is
initialised to consumer_warps * receivers, and lane j < receivers of every consumer warp arrives
on empty[s] of receiver j (mapa + mbarrier.arrive.shared::cluster, itself included), after wgmma
wait_group has retired the reads; the producer waits on empty[s] at CTA scope. Both at the default
semantics, as CUTLASS's ClusterBarrier does: the .release.cluster / .acquire.cluster forms halved
the kernel's speed on an H200 (docs/ptx_facts/clusters.md §9f).

Start and exit. Barrier init must be visible cluster-wide before a peer multicasts into this CTA
or arrives on its empty barriers: thread 0 inits, fence.mbarrier_init.release.cluster, then every
thread barrier.cluster.arrive + wait. No CTA may exit while a peer may still arrive on its
barriers (a consumer's last release of its last tile) or multicast into it: every remaining
thread (consumers and the producer's elected thread) arrives and waits on the cluster barrier
once its walk is done. Multicast lands only in stages the receiver itself consumes, so once its
consumers are done no copy is still coming. Without multicast (clusters for scheduling only) no
CTA touches another's memory: empty counts one CTA's warps and no cluster barrier is needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ...ir import Addr, Builder, Imm, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U16, U32
from .plan import HopperPlan
from ...schedule.schedule import Schedule
from ...emit.tiles import Tile
from ...emit import mbarrier_isa as mb
from . import tma_isa as tma

if TYPE_CHECKING:
    from ..mbarrier_ring import MbarrierRing
    from .context import TmaOperands
    from .mainloop import TmaWgmmaLoop


@dataclass(frozen=True)
class ClusterShape:
    """The numbers of a (CM, CN) cluster: which operands are multicast and how many CTAs read
    what one CTA's producer writes."""

    cm: int
    cn: int
    multicast: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.cm * self.cn

    def parts(self, operand: str) -> int:
        """Into how many slices `operand`'s box is cut (one per CTA sharing it), 1 if not shared."""
        if operand not in self.multicast:
            return 1
        return self.cm if operand == "B" else self.cn

    @property
    def receivers(self) -> int:
        """CTAs (this one included) whose consumers read what this CTA's producer writes."""
        return 1 + (self.cm - 1 if "B" in self.multicast else 0) + (self.cn - 1 if "A" in self.multicast else 0)

    @property
    def remote(self) -> bool:
        """Whether CTAs touch each other's shared memory (multicast, remote arrivals)."""
        return bool(self.multicast)


def cluster_shape(plan: HopperPlan) -> ClusterShape | None:
    """The cluster of a plan, None for (1, 1)."""
    cm, cn = plan.cluster
    return None if cm * cn == 1 else ClusterShape(cm, cn, plan.multicast)


def split_box_rows(outer: int, parts: int) -> int:
    """Rows of one CTA's slice of a multicast box (the tensor map's box outer extent)."""
    return outer // parts


class ClusterOps(Protocol):
    """What the cluster protocol needs of its lowering: the builder, schedule and size helpers."""

    @property
    def b(self) -> Builder: ...

    @property
    def s(self) -> Schedule: ...

    def dim(self, name: str) -> VReg: ...

    def ceil_div(self, x: VReg, d: int) -> VReg: ...


@dataclass(frozen=True)
class ClusterTiles:
    """Cluster tiles along M and N, and their product (what a cluster's walk covers per batch)."""

    num_m: VReg
    num_n: VReg
    count: VReg


@dataclass(frozen=True, eq=False)
class ClusterRoles:
    """The cluster registers (rank, position, masks, slices), set once before the roles split
    (`cluster_roles` emits and returns them), and the pieces of the protocol the
    warp-specialised kernel calls."""

    ops: ClusterOps
    shape: ClusterShape
    rank: VReg                  # %cluster_ctarank
    dm: VReg                    # this CTA's (dm, dn) in the cluster's CM x CN block of tiles
    dn: VReg
    masks: dict[str, VReg]      # per multicast operand: its .b16 ctaMask
    slice_rows: dict[str, VReg]  # per multicast operand: which slice this CTA loads

    @property
    def b(self) -> Builder:
        return self.ops.b

    def barrier_counts(self, consumer_warps: int) -> int:
        """Arrivals per phase of an empty barrier: one per consumer warp of every receiving CTA."""
        return consumer_warps * self.shape.receivers

    def sync_after_init(self) -> None:
        """Barrier inits visible to the whole cluster before any peer multicasts or arrives (the
        ring's init has already run fence.mbarrier_init: MbarrierRing.publish)."""
        b = self.b
        mb.cluster_arrive(b, comment="every thread of every CTA: the cluster's barriers are initialised")
        mb.cluster_wait(b, comment="(also a CTA barrier: the inits are visible to this CTA's threads)")

    def sync_before_exit(self, aligned: bool) -> None:
        """No CTA leaves while a peer may still arrive on its barriers or multicast into it."""
        b = self.b
        mb.cluster_arrive(b, comment="done with the cluster: my releases and copies are issued", aligned=aligned)
        mb.cluster_wait(b, comment="every peer is done too: nobody will touch this CTA's shared memory again",
                        aligned=aligned)

    # -- the consumer's release of a stage -------------------------------------------------------
    def release_targets(self, lane: VReg, empty: VReg) -> tuple[VReg, VReg]:
        """(predicate: this lane arrives, shared::cluster address of empty[0] of its receiver),
        from this CTA's empty[0] at `empty`. Lane j < receivers serves receiver j: the cluster
        column (B shared) first, then the cluster row (A shared) without this CTA."""
        lw, sh = self.ops, self.shape
        col = sh.cm if "B" in sh.multicast else 1
        if "B" in sh.multicast:
            target = ptx.add(lw.b, U32, lane, ptx.mul(lw.b, U32, self.dn, Imm(str(sh.cm))),
                            comment="lane j -> rank j of this cluster column")
        else:
            target = self.rank
        if "A" in sh.multicast:
            k = ptx.sub(lw.b, U32, lane, Imm(str(col)))
            skip_me = ptx.selp(lw.b, U32, Imm("1"), Imm("0"), ptx.setp(lw.b, "ge", U32, k, self.dn))
            dn2 = ptx.add(lw.b, U32, k, skip_me)
            row_rank = ptx.add(lw.b, U32, self.dm, ptx.mul(lw.b, U32, dn2, Imm(str(sh.cm))),
                              comment="lane col + k -> the k-th other CTA of this cluster row")
            in_row = ptx.setp(lw.b, "ge", U32, lane, Imm(str(col)))
            target = ptx.selp(lw.b, U32, row_rank, target, in_row)
        target = ptx.min_(lw.b, U32, target, Imm(str(sh.size - 1)), comment="lanes that do not arrive: any valid rank")
        go = ptx.setp(lw.b, "lt", U32, lane, Imm(str(sh.receivers)))
        remote = mb.mapa(self.b, empty, target, comment="empty[0] of this lane's receiver CTA")
        return go, remote

    # -- the producer's copies of one stage ------------------------------------------------------
    def issue_stage(self, loop: "TmaWgmmaLoop", stage: VReg, kt: VReg, ops: "TmaOperands") -> None:
        """arrive.expect_tx the whole stage on this CTA's full[stage]; this CTA's slice of each
        shared operand multicast to the CTAs sharing it, the rest loaded for itself."""
        lw, b, plan, ctx = self.ops, self.b, loop.plan, loop.ctx
        bar = loop.ring.producer_commit(stage, plan.stage_tx_bytes,
                                        comment=f"expect all {plan.stage_tx_bytes} B of the stage: mine and my "
                                        "peers' multicast")
        base = loop.stage_base(stage)
        k0 = ptx.mul(lw.b, U32, kt, Imm(str(lw.s.bk)))
        m0, n0 = ops.tile.bm0, ops.tile.bn0
        for name, box, mn0, offset in (("A", plan.a_box, m0, 0), ("B", plan.b_box, n0, loop.layout.a_bytes)):
            assert box is not None
            parts = self.shape.parts(name)
            rows = split_box_rows(box.outer, parts)
            mask = self.masks.get(name)
            if mask is not None:
                first = ptx.mul(lw.b, U32, self.slice_rows[name], Imm(str(rows)),
                               comment=f"my slice of {name}: rows {rows} x part")
                sub = ptx.mul(lw.b, U32, first, Imm(str(plan.swizzle)))
            for j in range(box.count):
                at = offset + j * box.outer * plan.swizzle
                dst = ptx.add(lw.b, U32, base, Imm(str(at)))
                if mask is not None:
                    dst = ptx.add(lw.b, U32, dst, sub)
                contiguous = (ptx.add(lw.b, U32, k0 if box.k_major else mn0, Imm(str(j * box.inner)))
                              if j else (k0 if box.k_major else mn0))
                strided = mn0 if box.k_major else k0
                if mask is not None:
                    strided = ptx.add(lw.b, U32, strided, first)
                what = (f"{name} box {rows}x{box.inner} ({'K' if box.k_major else 'MN'}-major), block {j}"
                        + (f", my 1/{parts}, multicast" if mask is not None else ""))
                tma.load(b, Addr(dst), ctx.tmaps[name], (contiguous, strided, *ops.batch), bar, comment=what,
                         cta_mask=mask)

    # -- tiles -------------------------------------------------------------------------------------
    def tile_count(self) -> ClusterTiles:
        """Cluster tiles: ceil(tiles_m / CM) * ceil(tiles_n / CN)."""
        lw, sh = self.ops, self.shape
        num_m = lw.ceil_div(lw.ceil_div(lw.dim("M"), lw.s.bm), sh.cm)
        num_n = lw.ceil_div(lw.ceil_div(lw.dim("N"), lw.s.bn), sh.cn)
        return ClusterTiles(num_m, num_n,
                            ptx.mul(lw.b, U32, num_m, num_n, comment="cluster tiles this grid of clusters walks"))

    def tile(self, index: VReg, tiles: ClusterTiles) -> Tile:
        """This CTA's tile of cluster tile `index` (the schedule's raster over cluster tiles)."""
        lw, b, s, sh = self.ops, self.b, self.ops.s, self.shape
        if s.raster == "row":
            b.comment("raster row over cluster tiles: index -> (index / cluster tiles_n, index % cluster tiles_n)")
            ctm = ptx.div(lw.b, U32, index, tiles.num_n)
            ctn = ptx.rem(lw.b, U32, index, tiles.num_n)
        else:
            group = s.group_m // sh.cm
            b.comment(f"raster grouped over cluster tiles: groups of {group} cluster rows ({s.group_m} m-tiles)")
            in_group = ptx.mul(lw.b, U32, tiles.num_n, Imm(str(group)))
            first_m = ptx.mul(lw.b, U32, ptx.div(lw.b, U32, index, in_group), Imm(str(group)))
            size_m = ptx.min_(lw.b, U32, ptx.sub(lw.b, U32, tiles.num_m, first_m), Imm(str(group)))
            pos = ptx.rem(lw.b, U32, index, in_group)
            ctm = ptx.add(lw.b, U32, first_m, ptx.rem(lw.b, U32, pos, size_m))
            ctn = ptx.div(lw.b, U32, pos, size_m)
        tm = ptx.mad(lw.b, U32, ctm, Imm(str(sh.cm)), self.dm)
        tn = ptx.mad(lw.b, U32, ctn, Imm(str(sh.cn)), self.dn)
        bm0 = ptx.mul(lw.b, U32, tm, Imm(str(s.bm)), comment="bm0: first row of this CTA's tile")
        bn0 = ptx.mul(lw.b, U32, tn, Imm(str(s.bn)), comment="bn0: first column of this CTA's tile")
        return Tile(tm, tn, bm0, bn0)


def cluster_roles(lw: ClusterOps, shape: ClusterShape) -> ClusterRoles:
    """%cluster_ctarank -> (dm, dn); the multicast masks and slice offsets of each shared operand."""
    b, sh = lw.b, shape
    b.comment(f"cluster of {sh.cm}x{sh.cn} CTAs: rank r is tile (dm, dn) = (r % {sh.cm}, r / {sh.cm}) of "
              "the cluster tile")
    rank = ptx.mov(lw.b, U32, Sym("%cluster_ctarank"))
    dm = ptx.rem(lw.b, U32, rank, Imm(str(sh.cm))) if sh.cm > 1 else ptx.mov(lw.b, U32, Imm("0"))
    dn = ptx.div(lw.b, U32, rank, Imm(str(sh.cm))) if sh.cn > 1 else ptx.mov(lw.b, U32, Imm("0"))
    masks: dict[str, VReg] = {}
    slice_rows: dict[str, VReg] = {}
    if "B" in sh.multicast:  # the cluster column: ranks CM*dn .. CM*dn + CM-1
        column = ptx.shl(lw.b, B32, Imm(str((1 << sh.cm) - 1)), ptx.mul(lw.b, U32, dn, Imm(str(sh.cm))))
        masks["B"] = _b16(b, column, "ctaMask of B: the CTAs of this cluster column (same n-tile)")
        slice_rows["B"] = dm
    if "A" in sh.multicast:  # the cluster row: ranks dm, dm + CM, ...
        pattern = sum(1 << (sh.cm * j) for j in range(sh.cn))
        row = ptx.shl(lw.b, B32, Imm(str(pattern)), dm)
        masks["A"] = _b16(b, row, "ctaMask of A: the CTAs of this cluster row (same m-tile)")
        slice_rows["A"] = dn
    return ClusterRoles(lw, shape, rank, dm, dn, masks, slice_rows)


def _b16(b: Builder, x: VReg, comment: str) -> VReg:
    return ptx.cvt(b, U16, U32, x, comment=comment)


@dataclass(frozen=True)
class ClusterRelease:
    """The consumers' release of a stage with multicast (an `mbarrier_ring.StageRelease`): lane j
    arrives on empty[stage] of receiver j, through `remote_empty` (its receiver's empty[0], from
    `ClusterRoles.release_targets`), at cluster scope."""

    roles: ClusterRoles
    remote_empty: VReg

    def release(self, ring: "MbarrierRing", index: VReg, guard: VReg | None, comment: str) -> None:
        addr = ptx.add(self.roles.ops.b, U32, self.remote_empty, ring.stage_offset(index))
        mb.arrive_remote(self.roles.b, Addr(addr), guard=guard, comment=comment + " (every CTA my stage came from)")


def cluster_tiles_of(tiles: tuple[int, int], cluster: tuple[int, int]) -> tuple[int, int]:
    """(cluster tiles along M, along N) for a tile grid: rounded up to whole clusters."""
    return -(-tiles[0] // cluster[0]), -(-tiles[1] // cluster[1])
