"""The derived numbers of a tcgen05 schedule: the MMA shape and kind, the operand tiles in shared
memory and their TMA boxes, the ring's bytes, the tensor-memory columns and accumulator buffers.

The verifier (verify.py) checks these against the sm_100a rules and the lowering (kernel.py)
reads them, so both see the same numbers. Facts: docs/ptx_facts/tcgen05.md (§12b TMEM allocation,
§12c MMA shapes, §12d descriptors), tma.md §9d (boxes).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...schedule.problem import DTYPE_BYTES, K_PACK, Gemm
from ...schedule.schedule import SWIZZLE_WIDTHS, Schedule
from ...schedule.swizzle import WIDEST_ALIGNMENT, Swizzle
from ...schedule.targets import target
from ..sm90.descriptors import CanonicalTile
from ..sm90.plan import EpilogueTile, TmaBox, _box, grouped_tiles
from .kinds import KIND, MMA_K, dense_idesc
from .scales import ScalePlan, scale_plan
from .store_path import staging_tile

#: cta_group::1 M values and the N rule per M (§12c, ISA Table 39): N a multiple of 16 up to 256
#: for M = 128, a multiple of 8 for M = 64.
MMA_M = (64, 128)
MMA_N_MAX = 256
TMEM_COLUMNS = 512
TMEM_LANES = 128
#: Warps of the CTA: 0..3 the epilogue (warp w reads TMEM lanes 32w..32w+31, §12b), 4 the TMA
#: producer, 5 the MMA issuer; 6 and 7 complete the second warpgroup and exit.
EPILOGUE_WARPS = 4
TMA_WARP = 4
MMA_WARP = 5
THREADS = 256
#: Named barrier where the epilogue warps and the MMA warp meet before TMEM is freed.
TEARDOWN_BARRIER = 1
MBARRIER_BYTES = 8
#: TMEM columns an epilogue warp reads with one tcgen05.ld.32x32b (one f32 per column and thread).
LD_COLUMNS = 32
#: Shared bytes past the ring's barriers: the 4-byte slot tcgen05.alloc writes the TMEM address to.
TMEM_SLOT_BYTES = 16
#: Cluster launch control (tile_scheduler.py): two 16-byte responses, then clc_full[2], clc_empty[2].
CLC_SLOTS = 2
CLC_BYTES = CLC_SLOTS * 16 + 2 * CLC_SLOTS * MBARRIER_BYTES
#: Staging buffers per epilogue warp of the TMA-store epilogue (chunk j in buffer j % 2), and as
#: many C-load buffers (beta != 0), each with its C-load mbarrier.
STAGING_BUFFERS = 2
C_BARRIER_BYTES = EPILOGUE_WARPS * STAGING_BUFFERS * MBARRIER_BYTES


def mma_n_step(bm: int) -> int:
    """N must be a multiple of this for an M = bm MMA (cta_group::1; every cta_group::2 M, 128 and
    256, has 16, as cta_group::1's M = 128)."""
    return 8 if bm == 64 else 16


def pow2_columns(cols: int) -> int:
    """The smallest legal tcgen05.alloc count (a power of two, 32..512) holding `cols` columns."""
    n = 32
    while n < cols:
        n *= 2
    return n


def idesc(g: Gemm, bm: int, bn: int, a_mn_major: bool, b_mn_major: bool) -> int:
    """The 32-bit instruction descriptor of the dense kinds (kinds.dense_idesc, §12e)."""
    return dense_idesc(g.dtype, bm, bn, a_mn_major, b_mn_major, g.b_dtype)


@dataclass(frozen=True)
class Sm100Plan:
    """A tcgen05 schedule's derived numbers (bytes from the 1024-aligned shared base)."""

    mma: tuple[int, int, int]          # (M, N, K) of one tcgen05.mma
    kind: str
    swizzle: int | None                # bytes, None where no TMA swizzle fits (the verifier refuses)
    a_box: TmaBox | None
    b_box: TmaBox | None
    a_tile: CanonicalTile | None
    b_tile: CanonicalTile | None
    a_stage: int                       # bytes of one stage of A, a multiple of 1024
    b_stage: int
    stages: int
    acc_buffers: int                   # 2 when 2 * BN columns fit the 512 of TMEM, else 1
    tmem_columns: int                  # what tcgen05.alloc asks for (a power of two)
    stage_tx_bytes: int                # bytes one CTA's copies of a stage bring (its own operand parts)
    idesc: int
    #: The TMA-store epilogue's staging unit per epilogue warp (epilogue_tma.py; None: direct stores).
    epilogue_tile: EpilogueTile | None = None
    #: Tiles taken by cluster launch control (tile_scheduler.py): response slots and barriers.
    clc: bool = False
    #: The TMA-store epilogue reads C (beta != 0) by TMA into buffers of its own, on C-load barriers.
    c_loads: bool = False
    #: (CM, CN) CTAs per cluster; 2 for a CTA pair's MMA (cta_pair.py); the operands a cta_group=1
    #: cluster's CTAs share by TMA multicast ("B" along CM, "A" along CN; cluster.py).
    cluster: tuple[int, int] = (1, 1)
    cta_group: int = 1
    multicast: tuple[str, ...] = ()
    scales: ScalePlan | None = None    # block-scaled kinds (scales.py): the stage's scale blocks follow B
    sf_stage: int = 0                  # bytes of one stage's scales, a multiple of 1024

    @property
    def stage_bytes(self) -> int:
        return self.a_stage + self.b_stage + self.sf_stage

    @property
    def full(self) -> int:
        """Offset of full[0]; then empty[S], acc_full[2], acc_empty[2], the TMEM address slot."""
        return self.stages * self.stage_bytes

    @property
    def empty(self) -> int:
        return self.full + MBARRIER_BYTES * self.stages

    @property
    def acc_full(self) -> int:
        return self.empty + MBARRIER_BYTES * self.stages

    @property
    def acc_empty(self) -> int:
        return self.acc_full + MBARRIER_BYTES * 2

    @property
    def tmem_slot(self) -> int:
        return self.acc_empty + MBARRIER_BYTES * 2

    @property
    def clc_slots(self) -> int:
        """Offset of the cluster-launch-control responses and barriers (tile_scheduler.py)."""
        return self.tmem_slot + TMEM_SLOT_BYTES

    @property
    def c_barriers(self) -> int:
        """Offset of the C-load barriers (two per epilogue warp) of the TMA-store epilogue."""
        return self.clc_slots + (CLC_BYTES if self.clc else 0)

    @property
    def staging(self) -> int:
        """Offset of the TMA-store epilogue's staging buffers, on the 1024-byte swizzle pattern."""
        return align_up(self.c_barriers + (C_BARRIER_BYTES if self.c_loads else 0), WIDEST_ALIGNMENT)

    @property
    def c_buffers(self) -> int:
        """Offset of the C-load buffers (beta != 0), laid out as the staging buffers are."""
        assert self.epilogue_tile is not None
        return self.staging + EPILOGUE_WARPS * STAGING_BUFFERS * self.epilogue_tile.buffer_bytes

    @property
    def nbytes(self) -> int:
        """Shared bytes from the aligned base (stages, barriers, slot, [CLC], [C barriers, staging,
        C buffers])."""
        if self.epilogue_tile is not None:
            per = EPILOGUE_WARPS * STAGING_BUFFERS * self.epilogue_tile.buffer_bytes
            return self.staging + per * (2 if self.c_loads else 1)
        return self.c_barriers

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory to request: `nbytes` plus slack to align the base to 1024 B."""
        return self.nbytes + WIDEST_ALIGNMENT


def _swizzle(extents: tuple[int, ...]) -> int | None:
    return next((w for w in SWIZZLE_WIDTHS if all(e % w == 0 for e in extents)), None)


def align_up(x: int, a: int) -> int:
    return -(-x // a) * a


def sm100_plan(g: Gemm, s: Schedule) -> Sm100Plan:
    """The plan of a tcgen05 schedule whose fields have their types (verify_types ran)."""
    pair_m, pair_n, bk = s.block
    group = s.cta_group if s.cta_group in (1, 2) else 1
    bm, bn = pair_m // group, pair_n // group   # one CTA's rows of A and of B (a pair splits both)
    esize = DTYPE_BYTES[g.dtype]
    bk = bk // K_PACK.get(g.dtype, 1)   # K as stored: fp4 packs two values per byte
    a_k, b_k = g.a_layout == "row", g.b_layout == "col"
    swizzle = _swizzle(((bk if a_k else bm) * esize, (bk if b_k else bn) * esize))
    a_box = _box("A", a_k, bm, bk, esize, swizzle)
    b_box = _box("B", b_k, bn, bk, esize, swizzle)
    tiles: list[CanonicalTile | None] = [None, None]
    if swizzle is not None and bm % 8 == 0 and bn % 8 == 0:
        mode = Swizzle.of_width(swizzle)
        try:
            tiles = [CanonicalTile(bm, bk, esize, "K" if a_k else "MN", mode),
                     CanonicalTile(bn, bk, esize, "K" if b_k else "MN", mode)]
        except ValueError:
            tiles = [None, None]
    scales = scale_plan(g, s)
    scale_columns = s.stages * scales.stage_columns if scales is not None else 0
    buffers = 2 if 2 * pair_n + scale_columns <= TMEM_COLUMNS else 1
    cluster = tuple(s.cluster) if s.cluster is not None else (1, 1)
    multicast = () if group == 2 else tuple(x for x, n in (("A", cluster[1]), ("B", cluster[0])) if n > 1)
    staged = staging_tile(g, s)
    plan = Sm100Plan(
        mma=(pair_m, pair_n, MMA_K.get(g.dtype, 16)), kind=scales.kind if scales else KIND.get(g.dtype, "f16"),
        swizzle=swizzle,
        a_box=a_box, b_box=b_box, a_tile=tiles[0], b_tile=tiles[1],
        a_stage=align_up(bm * bk * esize, WIDEST_ALIGNMENT), b_stage=align_up(bn * bk * esize, WIDEST_ALIGNMENT),
        stages=s.stages, acc_buffers=buffers, tmem_columns=pow2_columns(buffers * pair_n + scale_columns),
        stage_tx_bytes=(bm + bn) * bk * esize + (scales.tx_bytes if scales else 0),
        idesc=((scales.idesc(g, pair_m, pair_n, 0) if scales else idesc(g, pair_m, pair_n, not a_k, not b_k))
               if g.dtype in KIND else 0),
        scales=scales, sf_stage=align_up(scales.tx_bytes, WIDEST_ALIGNMENT) if scales else 0,
        cluster=(int(cluster[0]), int(cluster[1])), cta_group=group, multicast=multicast,
        epilogue_tile=staged, clc=s.tile_scheduler == "clc", c_loads=staged is not None and g.epi.beta != 0.0)
    direct = replace(plan, epilogue_tile=None, c_loads=False)
    limit = target("sm_100a").smem_per_block
    if s.epilogue_via_smem is None and plan.smem_bytes > limit >= direct.smem_bytes:
        return direct   # the default takes the TMA store only where its buffers fit beside the ring
    return plan


def persistent_ctas(g: Gemm, s: Schedule, sms: int) -> int:
    """One CTA per SM (`s.sms` if given), never more than the output tiles; with cluster launch
    control one CTA per tile (the running ones cancel the rest and take their tiles); with
    clusters, whole clusters, never more than the cluster tiles (the tile grid rounded up to whole
    clusters; a CTA pair's tile is BM x BN, its cluster one pair: cluster.py, cta_pair.py)."""
    cm, cn = tuple(s.cluster) if s.cluster is not None else (1, 1)
    if g.grouped:   # the most tiles any offs / masked_m can need (1-CTA clusters only: the verifier)
        return max(1, min(s.sms or sms, grouped_tiles(g, s.bm, s.bn)))
    if s.cta_group == 2:
        clusters = -(-g.m // s.bm) * -(-g.n // s.bn) * g.batch   # the pair is the cluster
    else:
        clusters = -(-g.m // s.bm // cm) * -(-g.n // s.bn // cn) * g.batch
    size = cm * cn
    if s.tile_scheduler == "clc":   # single-CTA clusters only (the verifier refuses the rest)
        return clusters
    if size == 1:
        return max(1, min(s.sms or sms, clusters))
    return size * max(1, min((s.sms or sms) // size, clusters))
