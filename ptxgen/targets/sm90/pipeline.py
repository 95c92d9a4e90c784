"""The sm_90a GEMM lowering: TMA + mbarrier ring + wgmma, one or two consumer warpgroups (each owns
BM/consumers rows), optionally in thread-block clusters with TMA multicast (cluster.py; the
warp-specialised persistent kernel only). Two kernels:
  * warp-specialised (the default; warp_specialized.py): a producer warpgroup's elected thread
    issues the copies on a full/empty ring; with `persistent` (the default) a grid of
    min(tiles, SMs) CTAs walks the output tiles (persistent.py), else one CTA per tile;
  * not (mainloop.py): thread 0 of the consumers also issues the copies, one CTA per output tile.
Tiles come from tiles.TileScheduler (row or grouped raster).

Kernel parameters: tmapA, tmapB (`.param .align 64 .b8 [128]`, CUtensorMaps passed by value, of
each operand's view with its contiguous dimension last: K-major A (M, K) / B (N, K), MN-major
A (K, M) / B (K, N), the latter read by wgmma with its transpose bit), then tmapC (C as (M, N),
for the TMA-store epilogue only), C (.u64), M, N, K, ldc (.u32), batch_stride_c (.u64) when
batch > 1, then bias and scale (.u64) when the epilogue has them, then scale_a, scale_b (.u64)
and sa_row_stride, sa_k_stride, sb_k_stride, sb_n_stride (.u32) when block-scaled (block_scales.py),
then workspace and counters
(.u64) with split-K or Stream-K. Grouped GEMMs (grouped.py): batch_stride_c after ldc when masked,
sa_group_stride, sb_group_stride (.u32) after the scales' strides, and offs / masked_m (.u64) last. `Kernel.tensor_maps` gives the view, box and swizzle each map must have; a
batched GEMM's A and B maps are 3-D, the batch outermost (sm90/batch.py). Split-K
(sm90/splitk.py): %ctaid.z = batch * split_k + split; each split's main loop runs its k-range,
and the last split sums the f32 partials before the epilogue. Stream-K (sm90/streamk.py): a
persistent loop over work units, each a tile and a k-range, run by the same pipeline.

Each warpgroup owns its rows as wgmma m64 blocks (hopper_plan: rows_per_consumer), each
accumulating a 64 x BN f32 fragment (wgmma_layouts.accumulator_coord). The epilogue follows
hopper_plan's path: staged through shared memory and stored by TMA (sm90/epilogue_tma.py), or each
element stored directly (sm90/epilogue.py), guarded against M and N.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import Builder, Function, Imm, Param, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, B64, U32, U64
from ...regalloc.smem import SmemBuffer
from .plan import ALIGN_SLACK, SWIZZLE_ALIGN, hopper_plan
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...emit.describe import entry_variant
from ...emit.index import Expr, ExprEmitter
from ...emit.mbarrier_ring import MbarrierRing
from ...emit.memory import ld_param
from ...emit.scalar_ops import ScalarOps
from ...emit.tiles import KRange, Tile, TileScheduler, ZSlot
from . import wgmma_isa as wi
from . import batch as sm90_batch
from . import grouped as sm90_grouped
from . import splitk as sm90_splitk
from . import streamk as sm90_streamk
from .block_scales import POINTER_PARAMS as BS_POINTERS, STRIDE_PARAMS as BS_STRIDES
from .cluster import cluster_roles, cluster_shape, split_box_rows
from .context import Sm90Context, TmaOperands
from .epilogue import DirectStores
from .epilogue_tma import TmaStores, tma_epilogue_layout
from .mainloop import RingLayout, TmaWgmmaLoop, ring_layout
from .persistent import zero_accumulators
from .splitk import WgmmaPartials
from .streamk import Sm90StreamK
from .warp_specialized import WarpSpecializedKernel, empty_arrivals
from .warp_specialized import init_barriers as ws_init_barriers
from .operand_types import accumulator_class, accumulator_dtype

SMEM_SYMBOL = "smem"
RING_BUFFER = "sm90_ring"
TENSOR_MAP_PARAMS = ("tmapA", "tmapB")
#: The TMA-store epilogue's map of C (hopper_plan(...).epilogue == "tma"), after tmapB.
C_MAP_PARAM = "tmapC"
SCALAR_PARAMS = [Param(".u64", "C"), Param(".u32", "M"), Param(".u32", "N"), Param(".u32", "K"), Param(".u32", "ldc")]
#: Appended when the epilogue adds a bias vector, then when it multiplies by a scale vector.
VECTOR_PARAMS = ("bias", "scale")


def tensor_map_params(g: Gemm, s: Schedule) -> tuple[str, ...]:
    return TENSOR_MAP_PARAMS + ((C_MAP_PARAM,) if hopper_plan(g, s).epilogue == "tma" else ())


def param_names(g: Gemm, s: Schedule) -> tuple[str, ...]:
    """The leading parameter names (maps, C, M, N, K, ldc) compile checks the entry against."""
    return tuple(f"{m}[128]" for m in tensor_map_params(g, s)) + tuple(p.name for p in SCALAR_PARAMS)


def kernel_params(g: Gemm, s: Schedule) -> list[Param]:
    maps = [Param(".align 64 .b8", f"{m}[128]") for m in tensor_map_params(g, s)]
    return (maps + list(SCALAR_PARAMS) + sm90_batch.batch_params(g.batch) + sm90_grouped.grouped_params(g)
            + [Param(".u64", name) for name in VECTOR_PARAMS if getattr(g.epi, name)] + block_scale_params(g)
            + sm90_grouped.grouped_scale_params(g) + sm90_splitk.split_k_params(s) + sm90_grouped.counts_params(g))


def block_scale_params(g: Gemm) -> list[Param]:
    """scale_a, scale_b (.u64) and the scales' element strides (.u32), for a block-scaled GEMM
    (block_scales.py)."""
    if g.block_scale is None:
        return []
    return [Param(".u64", n) for n in BS_POINTERS] + [Param(".u32", n) for n in BS_STRIDES]


def entry_name(g: Gemm, s: Schedule) -> str:
    bm, bn, bk = s.block
    split = f"_splitk{s.split_k}" if s.split_k > 1 else ""
    fast = "_fastacc" if g.fast_accum else ""  # fp8's single-level kernel, next to the promoted one
    return (f"ptxgen_gemm_sm90_{g.dtype}_{g.out_dtype}_{g.a_layout[0]}{g.b_layout[0]}_{bm}x{bn}x{bk}_s{s.stages}"
            f"_tma_wgmma{split}{entry_variant(g, s)}{fast}")


@dataclass(frozen=True)
class TileStores:
    """One tile's epilogue (a `pipeline.TileEpilogue`): the pipeline's store path, bound to the
    tile's operands."""

    stores: DirectStores
    ops: TmaOperands

    def emit(self, acc: list[tuple[VReg, ...]]) -> None:
        self.stores.emit(acc, self.ops)


class Sm90Pipeline:
    """TMA loads into 128B/64B/32B-swizzled stages completing on the full mbarriers of the
    kernel's ring, wgmma from descriptors into f32 (s32) accumulators; implements
    `pipeline.Pipeline[list[tuple[VReg, ...]], TmaOperands]`."""

    def __init__(self, ctx: Sm90Context):
        self.ctx = ctx
        self.loop = TmaWgmmaLoop(ctx)
        self.stores = TmaStores(ctx) if ctx.plan.epilogue == "tma" else DirectStores(ctx)
        self.partials = WgmmaPartials(ctx)

    @classmethod
    def shared_buffers(cls, g: Gemm, s: Schedule) -> list[SmemBuffer]:
        """One buffer: the ring and its barriers (then split-K's flag, or the TMA epilogue's
        staging), plus slack to round the base up to 1024 B."""
        plan = hopper_plan(g, s)
        ring = ring_layout(plan, s.bm, s.bn, s.bk, g.in_bytes, s.stages)
        end = ring.nbytes + sm90_splitk.flag_bytes(s)
        if plan.epilogue_tile is not None:
            assert not sm90_splitk.flag_bytes(s), "split-K stores directly (hopper.epilogue_path)"
            end = tma_epilogue_layout(plan.epilogue_tile, plan.consumers, g.epi.beta != 0.0, ring,
                                      plan.smem.staging_in_ring > 0, plan.warp_specialized).end
        return [SmemBuffer(RING_BUFFER, end + ALIGN_SLACK, SWIZZLE_ALIGN, 0, 0)]

    def setup(self) -> None:
        if isinstance(self.stores, TmaStores):
            self.stores.init_barriers()  # before the ring's, whose bar.sync publishes both
        if self.ctx.plan.warp_specialized:
            ws_init_barriers(self.ctx)
        else:
            self.loop.init_barriers()

    def accumulators(self) -> list[tuple[VReg, ...]]:
        """One 64 x BN f32 (s32 for s8/u8) fragment per m64 block of the warpgroup's rows."""
        ctx = self.ctx
        n_regs = wi.accumulator_registers(ctx.s.bn, accumulator_dtype(ctx.g))
        return [ctx.b.regs(accumulator_class(ctx.g), n_regs) for _ in range(ctx.plan.rows_per_consumer // 64)]

    def mainloop(self, acc: list[tuple[VReg, ...]], ops: TmaOperands, k: KRange) -> None:
        """One CTA's loop over the k-range (the warp-specialised kernel runs its roles' loops instead)."""
        assert not self.ctx.plan.warp_specialized, "warp_specialized.WarpSpecializedKernel runs that loop"
        self.loop.emit(acc, ops, k)

    def epilogue(self, tile: Tile, ops: TmaOperands) -> TileStores:
        assert ops.tile is tile, "the operands are the tile's"
        return TileStores(self.stores, ops)

    def drain(self) -> None:
        """Before the consumers exit: the TMA-store epilogue's last stores have read shared memory."""
        if isinstance(self.stores, TmaStores):
            self.stores.drain()

    def partial_origin(self, row_elems: int) -> Expr:
        return self.partials.partial_origin(row_elems)

    def store_partial(self, acc: list[tuple[VReg, ...]], base: VReg, row_elems: int) -> None:
        self.partials.store_partial(acc, base, row_elems)

    def add_partial(self, acc: list[tuple[VReg, ...]], base: VReg, row_elems: int) -> None:
        self.partials.add_partial(acc, base, row_elems)


class Sm90Lowering(ScalarOps):
    """Builds one sm_90a kernel: the entry, its directives and the problem's plan here; the
    kernel-invariant registers come from `setup`, which returns them as an `Sm90Context`."""

    def __init__(self, g: Gemm, s: Schedule, offset: int = 0):
        self.g, self.s, self.plan = g, s, hopper_plan(g, s)
        self.layout: RingLayout = ring_layout(self.plan, s.bm, s.bn, s.bk, g.in_bytes, s.stages)
        self.ring_offset = offset
        self.b = Builder(entry_name(g, s), kernel_params(g, s))
        self.b.function.directives.append(f".maxntid {self.plan.threads}, 1, 1")
        if self.plan.warp_specialized:  # setmaxnreg needs a register cap (warp_specialisation.md §9g)
            self.b.function.directives.append(f".maxnreg {self.plan.launch_regs}")
        self.cluster_shape = cluster_shape(self.plan)
        if self.cluster_shape is not None:  # a 1-D cluster of consecutive CTAs of the 1-D persistent grid (cluster.py)
            self.b.function.directives.append(f".reqnctapercluster {self.cluster_shape.size}, 1, 1")
        self.b.function.shared.append((SMEM_SYMBOL, SWIZZLE_ALIGN, None))
        self.dims: dict[str, VReg] = {}

    # -- the kernel --------------------------------------------------------------------------
    def setup(self, per_cta_tile: bool = True) -> tuple[Sm90Context, VReg, Tile | None]:
        """Parameters, the CTA's batch and tile (unless tiles come from a walk or from Stream-K's
        units: per_cta_tile=False, or the warp-specialised kernel), the aligned shared base, the
        ring and the cluster registers; returns the kernel context, the k-tile count and the
        CTA's tile (None where roles or units choose tiles)."""
        b, s, g, plan = self.b, self.s, self.g, self.plan
        b.banner("Setup: tensor maps, CTA tile origin, 1024-aligned shared ring, barriers")
        tid = ptx.mov(self.b, U32, Sym("%tid.x"))
        ex = ExprEmitter(b, tid)
        leader = ptx.setp(self.b, "eq", U32, tid, Imm("0"))
        warpgroup = ptx.shr(self.b, U32, tid, Imm("7"), comment="consumer warpgroup: its BM/consumers rows")
        tmaps: dict[str, VReg] = {}
        for name, param in zip(("A", "B", "C"), tensor_map_params(g, s)):
            addr = ptx.mov(self.b, B64, Sym(param))
            tmaps[name] = ptx.to_param(self.b, U64, addr, comment=f"generic address of {param} (by value)")
        ptr: dict[str, VReg] = {}  # global pointers: C, then bias / scale when present
        for name in ("C",) + tuple(n for n in VECTOR_PARAMS if getattr(g.epi, n)) + (
                BS_POINTERS if g.block_scale is not None else ()):
            ptr[name] = ptx.to_global(self.b, U64, ld_param(b, "b64", ".u64", name))
        for n in ("M", "N", "K", "ldc"):
            self.dim(n)
        z: ZSlot | None = None
        batch: tuple[VReg, ...] = ()
        if per_cta_tile and not (plan.warp_specialized and s.persistent):  # the walk takes the batch
            z = sm90_batch.z_slot(self)
            ptr["C"] = sm90_batch.batch_matrix_c(self, z, ptr["C"])
            batch = sm90_batch.tma_batch_coordinate(self, z)
        tile = None
        if per_cta_tile and not plan.warp_specialized:  # warp-specialised roles walk their tiles (persistent.py)
            tile = TileScheduler(self).tile()
        window = ptx.mov(self.b, U32, Sym(SMEM_SYMBOL))
        start = ptx.add(self.b, U32, window, Imm(str(self.ring_offset + SWIZZLE_ALIGN - 1)))
        smem = ptx.and_(self.b, B32, start, Imm(str(-SWIZZLE_ALIGN)),
                        comment="ring base rounded up to 1024 B (swizzle pattern, descriptor base offset 0)")
        full = ptx.add(self.b, U32, smem, Imm(str(self.layout.barriers)), comment="full barriers")
        empty = (ptx.add(self.b, U32, full, Imm(str(self.layout.empty)), comment="empty barriers")
                 if self.layout.empty_barriers else None)
        cluster = cluster_roles(self, self.cluster_shape) if self.cluster_shape is not None else None
        # the producer's wait stays at CTA scope with peers releasing into it, as CUTLASS's
        # ClusterBarrier::wait does: .acquire.cluster halved the cluster kernel's speed on an H200
        # (docs/ptx_facts/clusters.md §9f)
        ring = MbarrierRing(self, self.layout.stages, full, empty,
                            empty_arrivals(plan.consumers, cluster) if empty is not None else 0)
        ctx = Sm90Context(b, self.dims, g, s, plan, self.layout, tid, ex, leader, warpgroup, tmaps, ptr, z, batch,
                          smem, ring, cluster)
        b.comment(f"KT = ceil(K / {s.bk}): number of k-tiles")
        return ctx, self.ceil_div(self.dim("K"), s.bk), tile

    def lower(self) -> Function:
        if self.s.stream_k:
            ctx, kt_tile, _ = self.setup(per_cta_tile=False)
            ctx = sm90_streamk.with_scratch_pointers(ctx)
            return Sm90StreamK(ctx, Sm90Pipeline(ctx)).lower(kt_tile)
        ctx, kt_count, tile = self.setup()
        k = KRange(kt_count)
        split_k = sm90_splitk.Sm90SplitK(ctx) if self.s.split_k > 1 else None
        if split_k is not None:
            assert ctx.z is not None and ctx.z.split is not None
            first, count = split_k.k_range(kt_count, ctx.z.split)
            k = KRange(count, first=first)
        pipeline = Sm90Pipeline(ctx)
        pipeline.setup()
        acc = pipeline.accumulators()
        if self.plan.warp_specialized:  # zeroes, runs the epilogue and exits per role and tile
            WarpSpecializedKernel(ctx, pipeline).emit(acc, kt_count)
            return self.b.function
        assert tile is not None
        ops = TmaOperands(tile, ctx.batch, ctx.ptr["C"], ctx.warpgroup)
        zero_accumulators(ctx, acc)
        pipeline.mainloop(acc, ops, k)
        if split_k is not None:
            assert ctx.z is not None
            split_k.reduce(acc, tile, ctx.z)
        pipeline.epilogue(tile, ops).emit(acc)
        pipeline.drain()
        self.b.emit("ret")
        return self.b.function


def lower_sm90(g: Gemm, s: Schedule, ring_offset: int = 0) -> Function:
    return Sm90Lowering(g, s, ring_offset).lower()


@dataclass(frozen=True)
class TensorMapSpec:
    """What one by-value tensor-map parameter must describe: `operand`'s 2-D view with its
    contiguous dimension last (`k_major`: A as (M, K), B as (N, K); else A as (K, M), B as (K, N);
    C as (M, N) with its ldc), boxes of `box` elements (numpy order: rows, then one swizzle width
    of the contiguous dimension) in `swizzle` mode, out-of-bounds elements filled with zero
    (loads) or not written (stores). A batched GEMM's A and B maps are 3-D: (batch, rows, cols)
    with the operand's batch stride, box (1, rows, width)."""

    param: str
    operand: str
    box: tuple[int, ...]
    swizzle: str
    k_major: bool = True

    @property
    def batched(self) -> bool:
        return len(self.box) == 3

    def view(self, logical):
        """The view of the logical operand (A: M x K, B: K x N, with a leading batch axis when
        batched; numpy or strided) the map describes."""
        transpose = self.k_major == (self.operand == "B")
        return logical.swapaxes(-1, -2) if transpose else logical


def tensor_map_specs(g: Gemm, s: Schedule) -> tuple[TensorMapSpec, ...]:
    plan = hopper_plan(g, s)
    shape = cluster_shape(plan)
    specs = []
    for param, box in zip(TENSOR_MAP_PARAMS, (plan.a_box, plan.b_box)):
        assert box is not None, "the verifier admits only operands TMA can describe"
        rows = split_box_rows(box.outer, shape.parts(box.operand)) if shape is not None else box.outer
        # batched: A and B 3-D; grouped: B 3-D (one weight per group), A too when masked (grouped.py)
        outer = g.batch > 1 or (g.grouped and (box.operand == "B" or g.grouping == "masked"))
        dims = ((1,) if outer else ()) + (rows, box.inner)
        specs.append(TensorMapSpec(param, box.operand, dims, plan.swizzle_mode.name, box.k_major))
    tile = plan.epilogue_tile
    if tile is not None:
        specs.append(TensorMapSpec(C_MAP_PARAM, "C", (tile.rows, tile.cols), tile.swizzle_mode.name))
    return tuple(specs)
