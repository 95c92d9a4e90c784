"""Derived geometry of a Hopper (wgmma) schedule, shared by the verifier and the sm_90a lowering.

`hopper_plan(g, s)` turns a (Gemm, Schedule) into concrete numbers: warpgroups and their rows,
the wgmma shape, the TMA boxes, the shared-memory budget part by part, the register split. It
never raises for a bad schedule: `verify_hopper` checks the plan, so the verifier and the
lowering read the same numbers. Facts: docs/ptx_facts/wgmma.md (§9a shapes, §9c descriptors),
tma.md (§9d′ box limits, swizzle modes), mbarrier.md (§9e), warp_specialisation.md (§9g).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...schedule.swizzle import WIDEST_ALIGNMENT, Swizzle
from ...schedule.geometry import align_up
from ...schedule.grouping import contiguous_tiles_bound
from ...schedule.problem import DTYPE_BYTES, WGMMA_K, WGMMA_M, Gemm
from ...schedule.schedule import SWIZZLE_WIDTHS, Schedule
from .block_scales import block_scale_registers
from .promotion import promotion_k

WARPGROUP_THREADS = 128
#: wgmma N per input dtype: 8..256 in steps of 8, but s8/u8 only 8, 16, 24 and multiples of 16
#: (ptxas rejects m64n40k32.s32.s8.s8; wgmma.md §9a type table).
N_FLOAT = tuple(range(8, 257, 8))
N_INTEGER = (8, 16, 24) + tuple(range(32, 257, 16))
WGMMA_N = {"f16": N_FLOAT, "bf16": N_FLOAT, "tf32": N_FLOAT, "e4m3": N_FLOAT, "e5m2": N_FLOAT,
           "s8": N_INTEGER, "u8": N_INTEGER}
#: Input dtypes wgmma can read MN-major (imm-trans-a/b exist only for 16-bit types, wgmma.md §9a).
TRANSPOSABLE = ("f16", "bf16")
#: TMA: every box dimension 1..256 elements; global strides multiples of 16 bytes (tma.md §9d′).
TMA_BOX_MAX = 256
TMA_STRIDE_ALIGN = 16
#: setmaxnreg counts: multiples of 8 in 24..256 (warp_specialisation.md §9g).
SETMAXNREG_MIN, SETMAXNREG_MAX, SETMAXNREG_STEP = 24, 256, 8
REGISTER_FILE = 65536
#: The kernel's register cap at launch (`.maxnreg`, which setmaxnreg needs): a multiple of 8 (the
#: per-thread allocation unit) at most 248 (ptxas caps a thread at 255).
MAX_LAUNCH_REGS = 248
#: Registers a consumer thread needs besides its accumulators: descriptors, k-loop and phase
#: counters, barrier addresses, epilogue temporaries (an estimate: CUTLASS's 128x256 tile runs its
#: 128 accumulators in 232 registers per consumer thread).
CONSUMER_OVERHEAD_REGS = 40
#: Swizzled tiles start on the widest swizzle pattern's boundary, 1024 bytes (descriptor base
#: offset 0 for every mode: `Swizzle.alignment`).
SWIZZLE_ALIGN = WIDEST_ALIGNMENT
#: The dynamic shared-memory base is rounded up to SWIZZLE_ALIGN at run time (whether the driver
#: honours `.align 1024` is unverified, module.md §10), which may cost up to this many bytes.
ALIGN_SLACK = SWIZZLE_ALIGN
MBARRIER_BYTES = 8
#: Epilogue via TMA store: each consumer stages its rows x `EPILOGUE_COLUMN_BYTES` of C at a time
#: (128B-swizzled, so the box's inner extent is one swizzle width), double-buffered so one buffer's
#: TMA store overlaps writing the other; beta != 0 reads C through TMA into as many buffers again.
EPILOGUE_COLUMN_BYTES = 128
EPILOGUE_BUFFERS = 2
#: Barriers besides the full/empty ring: the C-load pair of the TMA epilogue, per consumer.
EXTRA_BARRIERS = 2
#: With warp specialisation the producer warpgroup loads C (epilogue_c_load.py): each C buffer
#: also has a "free" barrier the consumers arrive on once they have read it, per consumer.
C_FREE_BARRIERS = 2


def epilogue_barriers(consumers: int, warp_specialized: bool) -> int:
    """The TMA epilogue's mbarriers besides the ring's: C-load (and, warp-specialised, C-free)
    pairs per consumer (reserved whether or not beta reads C)."""
    return consumers * (EXTRA_BARRIERS + (C_FREE_BARRIERS if warp_specialized else 0))
FP8_DTYPES = ("e4m3", "e5m2")


def floor_to(x: int, step: int) -> int:
    return x // step * step


def launch_regs(threads: int) -> int:
    """The register cap every thread launches with: the largest multiple of 8 that lets the
    whole CTA fit the 64K register file, at most MAX_LAUNCH_REGS."""
    return min(MAX_LAUNCH_REGS, floor_to(REGISTER_FILE // max(threads, 1), SETMAXNREG_STEP))


def default_consumer_regs(consumers: int, producer_regs: int) -> int:
    """The most each consumer warpgroup can `setmaxnreg.inc` to once the producer has released
    its registers down to `producer_regs`: the CTA's launch registers shared out (232 with two
    consumers and a producer at 40, CUTLASS's split; 256 with one)."""
    threads = WARPGROUP_THREADS * (consumers + 1)
    pool = launch_regs(threads) * threads // WARPGROUP_THREADS - producer_regs
    return max(SETMAXNREG_MIN, min(SETMAXNREG_MAX, floor_to(pool // consumers, SETMAXNREG_STEP)))


@dataclass(frozen=True)
class TmaBox:
    """One operand's TMA box: `inner` elements along the contiguous dimension (one swizzle
    width), `outer` rows; `count` boxes fill one stage's tile."""

    operand: str
    inner: int
    outer: int
    count: int
    k_major: bool
    #: Bytes of the tile's contiguous extent (BK, BM or BN elements): a multiple of the swizzle.
    contiguous_bytes: int


@dataclass(frozen=True)
class SmemBudget:
    """Shared memory of a Hopper kernel, part by part (bytes)."""

    stages: int
    a_stage: int
    b_stage: int
    epilogue_store: int
    epilogue_load: int
    barriers: int
    align_slack: int = ALIGN_SLACK
    #: Bytes after the mbarriers that start the epilogue staging on a 1024-byte boundary (its
    #: swizzle pattern, like the stages'); 0 without staging.
    barrier_pad: int = 0
    #: Staging bytes the TMA epilogue takes from the idle ring instead (staging_fits_ring), not
    #: counted in the total.
    staging_in_ring: int = 0

    @property
    def ring(self) -> int:
        return self.stages * (self.a_stage + self.b_stage)

    @property
    def total(self) -> int:
        return (self.ring + self.epilogue_store + self.epilogue_load + self.barriers + self.barrier_pad
                + self.align_slack)

    def describe(self) -> str:
        epi = (f" + {self.epilogue_store} B epilogue staging" if self.epilogue_store else "") + (
            f" + {self.epilogue_load} B C staging" if self.epilogue_load else "")
        pad = f" (+ {self.barrier_pad} B to align the staging)" if self.barrier_pad else ""
        if self.staging_in_ring:
            pad += f" ({self.staging_in_ring} B of epilogue staging reuse the ring)"
        return (f"{self.stages} stages x ({self.a_stage} B of A + {self.b_stage} B of B){epi} + "
                f"{self.barriers} B mbarriers{pad} + {self.align_slack} B to align the base to 1024 B = {self.total} B")


@dataclass(frozen=True)
class HopperPlan:
    """Everything the sm_90a lowering needs to know about a (Gemm, Schedule), as numbers."""

    consumers: int
    rows_per_consumer: int
    wgmma: tuple[int, int, int]           # (64, BN, k)
    wgmmas_per_k_tile: int                # per consumer: rows/64 x BK/k
    threads: int
    warp_specialized: bool
    launch_regs: int                      # the kernel's .maxnreg
    producer_regs: int | None             # setmaxnreg.dec (warp specialised)
    consumer_regs: int                    # setmaxnreg.inc, or launch_regs without specialisation
    accumulator_regs: int                 # per consumer thread
    swizzle: int | None                   # None: no width fits (the verifier says why)
    a_box: TmaBox | None
    b_box: TmaBox | None
    stage_tx_bytes: int                   # expect_tx per stage (OOB fill counts, tma.md §9d)
    epilogue: str                         # "tma" (staged through shared memory) or "direct"
    epilogue_tile: "EpilogueTile | None"  # the TMA epilogue's staging unit (None: direct stores)
    smem: SmemBudget
    cluster: tuple[int, int]
    #: The operand a cluster's CTAs share and load once by multicast: "B" along CM (same columns),
    #: "A" along CN (same rows), None without multicast. A (2, 2) cluster multicasts both.
    multicast: tuple[str, ...]
    tiles: tuple[int, int]                # output tiles along M and N
    #: fp8 promotion (promotion.py): K per temporary accumulator, None without promotion.
    promotion_k: int | None = None
    #: Block-scaled fp8 (block_scales.py): registers a consumer thread holds for the scales (0: none).
    block_scale_regs: int = 0

    @property
    def held_accumulator_regs(self) -> int:
        """Accumulator registers a consumer thread holds: twice `accumulator_regs` with promotion
        (the wgmma's temporary and the promoted f32 accumulator)."""
        return self.accumulator_regs * (2 if self.promotion_k is not None else 1)

    @property
    def swizzle_mode(self) -> Swizzle:
        """The operand tiles' swizzle (TMA boxes and wgmma descriptors alike)."""
        if self.swizzle is None:
            raise ValueError("no swizzle width fits these tiles: verify the schedule first (verify_hopper says why)")
        return Swizzle.of_width(self.swizzle)


@dataclass(frozen=True)
class EpilogueTile:
    """The TMA-store epilogue's unit: each consumer warpgroup stages `rows` x `cols` of C (one TMA
    box) in `swizzle`-byte swizzled shared memory (0: none), `chunks` of them across BN, in
    EPILOGUE_BUFFERS buffers of `buffer_bytes` each (and as many again for C when beta != 0).

    The box row is one swizzle width (TMA's rule, tma.md §9d′): the widest of 128/64/32 B dividing
    BN's bytes; where none does (16-bit BN = 8, 24, 40, ...), no swizzle and the widest row of at
    most EPILOGUE_COLUMN_BYTES that divides BN (box rows are multiples of 16 B)."""

    rows: int
    cols: int
    swizzle: int
    out_bytes: int
    chunks: int

    @property
    def pitch(self) -> int:
        """Bytes of one staged row (the box's inner extent)."""
        return self.cols * self.out_bytes

    @property
    def swizzle_mode(self) -> Swizzle:
        """The staging boxes' swizzle (TMA store and the epilogue's own addresses alike)."""
        return Swizzle.of_width(self.swizzle)

    @property
    def buffer_bytes(self) -> int:
        """One buffer, rounded to the 1024-byte swizzle pattern (a multiple already: rows % 64 == 0)."""
        return align_up(self.rows * self.pitch, SWIZZLE_ALIGN)


def staging_fits_ring(s: Schedule, staging: int, ring: int) -> bool:
    """Whether the TMA epilogue stages C in the ring's bytes: without warp specialisation or a
    persistent grid the ring is idle once every warpgroup's last wgmma has retired (the epilogue
    starts with a CTA barrier), so staging there costs no shared memory and keeps the main loop's
    occupancy (CUTLASS's non-persistent TMA kernel shares the bytes the same way). A persistent
    or warp-specialised kernel overlaps the epilogue with the next tile's loads: separate bytes."""
    return not s.warp_specialized and not s.persistent and staging <= ring


def epilogue_tile(rows: int, bn: int, out_bytes: int) -> EpilogueTile:
    row_bytes = bn * out_bytes
    width = next((w for w in SWIZZLE_WIDTHS if w <= EPILOGUE_COLUMN_BYTES and row_bytes % w == 0), None)
    if width is not None:
        return EpilogueTile(rows, width // out_bytes, width, out_bytes, row_bytes // width)
    pitch = max(p for p in range(TMA_STRIDE_ALIGN, EPILOGUE_COLUMN_BYTES + 1, TMA_STRIDE_ALIGN)
                if row_bytes % p == 0)
    return EpilogueTile(rows, pitch // out_bytes, 0, out_bytes, row_bytes // pitch)


def _swizzle_for(extents: tuple[int, ...], chosen: int | None) -> int | None:
    if chosen is not None:
        return chosen
    return next((w for w in SWIZZLE_WIDTHS if all(e % w == 0 for e in extents)), None)


def _box(operand: str, k_major: bool, mn: int, bk: int, esize: int, swizzle: int | None) -> TmaBox | None:
    contiguous = (bk if k_major else mn) * esize
    if swizzle is None:
        return None
    inner = swizzle // esize
    return TmaBox(operand, inner, mn if k_major else bk, max(1, contiguous // swizzle), k_major, contiguous)


#: Output element sizes the TMA-store epilogue stages (stmatrix for 2 bytes, st.shared.v2 for 4):
#: quantised s8/u8 outputs are stored directly (epilogue_tma.py has no 1-byte staging).
TMA_STAGED_OUT_BYTES = (2, 4)


def epilogue_path(g: Gemm, s: Schedule) -> str:
    """"tma" (C staged through shared memory, stored by TMA) or "direct" (st.global from the
    accumulators): `epilogue_via_smem`, or where None, TMA whenever C's rows and base are 16-byte
    aligned (TMA's stride rule), BN's output bytes make whole 16-byte box rows, and the GEMM is
    one matrix with no split-K or Stream-K, with a 2- or 4-byte output."""
    if s.epilogue_via_smem is not None:
        return "tma" if s.epilogue_via_smem else "direct"
    aligned = (g.leading_dims()[2] * g.out_bytes) % TMA_STRIDE_ALIGN == 0 and g.out_alignment() >= TMA_STRIDE_ALIGN
    boxable = (s.block[1] * g.out_bytes) % TMA_STRIDE_ALIGN == 0   # a box row is a multiple of 16 B
    # batches (C's map would be 3-D), split-K and Stream-K store through the direct path for now
    # (verify_sm90_built.py refuses epilogue_via_smem=True with them)
    single = g.batch == 1 and s.split_k == 1 and not s.stream_k and not g.grouped  # grouped: clips per group (grouped.py)
    staged = g.out_bytes in TMA_STAGED_OUT_BYTES  # 8-bit (quantised) outputs store directly
    return "tma" if aligned and boxable and single and staged else "direct"


def hopper_plan(g: Gemm, s: Schedule) -> HopperPlan:
    """The derived numbers of a wgmma schedule (fields as the verifier's type checks left them)."""
    bm, bn, bk = s.block
    esize = DTYPE_BYTES[g.dtype]
    consumers = s.consumers
    rows = bm // consumers
    a_k_major, b_k_major = g.a_layout == "row", g.b_layout == "col"
    extents = ((bk if a_k_major else bm) * esize, (bk if b_k_major else bn) * esize)
    swizzle = _swizzle_for(extents, s.swizzle)
    a_box = _box("A", a_k_major, bm, bk, esize, swizzle)
    b_box = _box("B", b_k_major, bn, bk, esize, swizzle)
    threads = WARPGROUP_THREADS * (consumers + (1 if s.warp_specialized else 0))
    cap = launch_regs(threads)
    k = WGMMA_K[g.dtype]
    acc_regs = rows * bn // WARPGROUP_THREADS // (2 if g.accumulator == "f16" else 1)
    epilogue = epilogue_path(g, s)
    out = DTYPE_BYTES[g.out_dtype]
    tile = epilogue_tile(rows, bn, out) if epilogue == "tma" and (bn * out) % TMA_STRIDE_ALIGN == 0 else None
    staging = consumers * EPILOGUE_BUFFERS * tile.buffer_bytes if tile is not None else 0
    c_staging = staging if g.epi.beta != 0.0 else 0
    barriers = MBARRIER_BYTES * (2 * s.stages + epilogue_barriers(consumers, bool(s.warp_specialized)))
    a_stage, b_stage = align_up(bm * bk * esize, SWIZZLE_ALIGN), align_up(bn * bk * esize, SWIZZLE_ALIGN)
    if staging and staging_fits_ring(s, staging + c_staging, s.stages * (a_stage + b_stage)):
        smem = SmemBudget(s.stages, a_stage, b_stage, 0, 0, barriers, staging_in_ring=staging + c_staging)
    else:
        smem = SmemBudget(s.stages, a_stage, b_stage, staging, c_staging, barriers,
                          barrier_pad=align_up(barriers, SWIZZLE_ALIGN) - barriers if staging else 0)
    cm, cn = s.cluster
    multicast = tuple(op for op, along in (("B", cm), ("A", cn)) if s.multicast and along > 1)
    plan = HopperPlan(
        consumers=consumers, rows_per_consumer=rows, wgmma=(WGMMA_M, bn, k),
        wgmmas_per_k_tile=(rows // WGMMA_M) * (bk // k), threads=threads,
        warp_specialized=bool(s.warp_specialized), launch_regs=cap,
        producer_regs=s.producer_regs if s.warp_specialized else None,
        consumer_regs=s.consumer_regs if s.warp_specialized else cap, accumulator_regs=acc_regs,
        swizzle=swizzle, a_box=a_box, b_box=b_box, stage_tx_bytes=(bm + bn) * bk * esize, epilogue=epilogue,
        epilogue_tile=tile,
        smem=smem, cluster=(cm, cn), multicast=multicast, tiles=(-(-g.m // bm), -(-g.n // bn)),
        promotion_k=promotion_k(g, s))
    if g.block_scale is not None:
        plan = replace(plan, block_scale_regs=block_scale_registers(plan, s))
    return plan


def persistent_ctas(g: Gemm, s: Schedule, sms: int) -> int:
    """CTAs of a persistent grid: one per SM (`s.sms` if given), never more than the work units
    (tiles x splits x batch, the tile grid rounded up to whole clusters: targets/sm90/cluster.py),
    rounded down to whole clusters."""
    cm, cn = s.cluster
    tiles_m, tiles_n = -(-g.m // s.bm // cm) * cm, -(-g.n // s.bn // cn) * cn
    size = cm * cn
    work = tiles_m * tiles_n * s.split_k * g.batch
    if g.grouped:  # the most tiles any offs / masked_m can need (grouped.py walks them)
        work = grouped_tiles(g, s.bm, s.bn)
    return max(size, floor_to(min(s.sms or sms, work), size))


def grouped_tiles(g: Gemm, bm: int, bn: int) -> int:
    """Tiles of a grouped GEMM (grouped.py) under the most any counts can need, which sizes its
    persistent grid: contiguous, the m-tile bound of grouping.contiguous_tiles_bound; masked,
    every slot full."""
    tiles_m = contiguous_tiles_bound(g, bm) if g.grouping == "contiguous" else g.groups * -(-g.m // bm)
    return tiles_m * -(-g.n // bn)
