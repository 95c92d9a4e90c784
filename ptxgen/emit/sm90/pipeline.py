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
batch > 1, then bias and scale (.u64) when the epilogue has them, then workspace and counters
(.u64) with split-K. `Kernel.tensor_maps` gives the view, box and swizzle each map must have; a
batched GEMM's A and B maps are 3-D, the batch outermost (sm90/batch.py). Split-K
(sm90/splitk.py): %ctaid.z = batch * split_k + split; each split's main loop runs its k-range,
and the last split sums the f32 partials before the epilogue.

Each warpgroup owns its rows as wgmma m64 blocks (hopper_plan: rows_per_consumer), each
accumulating a 64 x BN f32 fragment (wgmma_layouts.accumulator_coord). The epilogue follows
hopper_plan's path: staged through shared memory and stored by TMA (sm90/epilogue_tma.py), or each
element stored directly (sm90/epilogue.py), guarded against M and N.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import Builder, Function, Imm, Param, Sym, VReg
from ...regalloc.smem import SmemBuffer
from ...schedule.hopper import ALIGN_SLACK, SWIZZLE_ALIGN, hopper_plan
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ..index import ExprEmitter
from ..memory import ld_param
from ..scalar_ops import ScalarOps
from ..tiles import TileScheduler, ZSlot
from . import wgmma_isa as wi
from . import batch as sm90_batch
from . import splitk as sm90_splitk
from .cluster import ClusterRoles, cluster_shape, split_box_rows
from .epilogue import DirectStores
from .epilogue_tma import TmaStores, tma_epilogue_layout
from .mainloop import RingLayout, TmaWgmmaLoop, ring_layout
from .persistent import zero_accumulators
from .streamk import Sm90StreamK
from .warp_specialized import WarpSpecializedLoop
from .operand_types import accumulator_class, accumulator_dtype, zero_accumulator

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
    return (maps + list(SCALAR_PARAMS) + sm90_batch.batch_params(g.batch)
            + [Param(".u64", name) for name in VECTOR_PARAMS if getattr(g.epi, name)] + sm90_splitk.split_k_params(s))


def entry_name(g: Gemm, s: Schedule) -> str:
    bm, bn, bk = s.block
    split = f"_splitk{s.split_k}" if s.split_k > 1 else ""
    return f"ptxgen_gemm_sm90_{g.dtype}_{g.out_dtype}_{g.a_layout[0]}{g.b_layout[0]}_{bm}x{bn}x{bk}_s{s.stages}_tma_wgmma{split}"


class Sm90Pipeline:
    """TMA loads into 128B/64B/32B-swizzled stages completing on full mbarriers, wgmma from
    descriptors into f32 accumulators (the `Pipeline` roles this slice has: shared buffers,
    setup, accumulators, main loop, epilogue; partial tiles belong to split-K, not built)."""

    def __init__(self, lw: "Sm90Lowering"):
        self.lw = lw
        self.loop = WarpSpecializedLoop(lw) if lw.plan.warp_specialized else TmaWgmmaLoop(lw)
        self.stores = TmaStores(lw) if lw.plan.epilogue == "tma" else DirectStores(lw)

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
                                      plan.smem.staging_in_ring > 0).end
        return [SmemBuffer(RING_BUFFER, end + ALIGN_SLACK, SWIZZLE_ALIGN, 0, 0)]

    def setup(self) -> None:
        if isinstance(self.stores, TmaStores):
            self.stores.init_barriers()  # before the ring's, whose bar.sync publishes both
        self.loop.init_barriers()

    def accumulators(self) -> list[tuple[VReg, ...]]:
        """One 64 x BN f32 (s32 for s8/u8) fragment per m64 block of the warpgroup's rows."""
        g = self.lw.g
        n_regs = wi.accumulator_registers(self.lw.s.bn, accumulator_dtype(g))
        return [self.lw.b.regs(accumulator_class(g), n_regs) for _ in range(self.lw.plan.rows_per_consumer // 64)]

    def mainloop(self, acc: list[tuple[VReg, ...]], kt_count: VReg, kt_begin: VReg | None = None) -> None:
        if kt_begin is None:  # the whole k-range (the warp-specialised loop has no other)
            self.loop.emit(acc, kt_count)
        else:
            self.loop.emit(acc, kt_count, kt_begin)

    def epilogue(self, acc: list[tuple[VReg, ...]]) -> None:
        self.stores.emit(acc)


class Sm90Lowering(ScalarOps):
    """Builds one sm_90a kernel; holds the kernel-invariant registers its parts share."""

    def __init__(self, g: Gemm, s: Schedule, offset: int = 0):
        self.g, self.s, self.plan = g, s, hopper_plan(g, s)
        self.ring: RingLayout = ring_layout(self.plan, s.bm, s.bn, s.bk, g.in_bytes, s.stages)
        self.ring_offset = offset
        self.b = Builder(entry_name(g, s), kernel_params(g, s))
        self.b.function.directives.append(f".maxntid {self.plan.threads}, 1, 1")
        if self.plan.warp_specialized:  # setmaxnreg needs a register cap (warp_specialisation.md §9g)
            self.b.function.directives.append(f".maxnreg {self.plan.launch_regs}")
        shape = cluster_shape(self.plan)
        self.cluster: ClusterRoles | None = ClusterRoles(self, shape) if shape is not None else None
        if shape is not None:  # a 1-D cluster of consecutive CTAs of the 1-D persistent grid (cluster.py)
            self.b.function.directives.append(f".reqnctapercluster {shape.size}, 1, 1")
        self.b.function.shared.append((SMEM_SYMBOL, SWIZZLE_ALIGN, None))
        self.pipeline = Sm90Pipeline(self)
        self.dims: dict[str, VReg] = {}
        self.ptr: dict[str, VReg] = {}  # global pointers: C, then bias / scale when present
        self.tma_batch: tuple[VReg, ...] = ()  # the TMA copies' batch coordinate, when batched
        self.z: ZSlot | None = None  # %ctaid.z as (batch, split), when the grid has a z dimension

    # -- the kernel --------------------------------------------------------------------------
    def setup(self, per_cta_tile: bool = True) -> VReg:
        """Parameters, the tile origin (unless Stream-K's units set it: per_cta_tile=False), the
        aligned shared base; returns the k-tile count."""
        b, s = self.b, self.s
        b.banner("Setup: tensor maps, CTA tile origin, 1024-aligned shared ring, barriers")
        self.tid = self.u32("mov.u32", Sym("%tid.x"))
        self.ex = ExprEmitter(b, self.tid)
        self.leader = self.pred("setp.eq.u32", self.tid, Imm("0"))
        self.warpgroup = self.u32("shr.u32", self.tid, Imm("7"), comment="consumer warpgroup: its BM/consumers rows")
        self.tmaps: dict[str, VReg] = {}
        for name, param in zip(("A", "B", "C"), tensor_map_params(self.g, s)):
            addr = self.u64("mov.b64", Sym(param))
            self.tmaps[name] = self.u64("cvta.param.u64", addr, comment=f"generic address of {param} (by value)")
        for name in ("C",) + tuple(n for n in VECTOR_PARAMS if getattr(self.g.epi, n)):
            self.ptr[name] = self.u64("cvta.to.global.u64", ld_param(b, "b64", ".u64", name))
        for n in ("M", "N", "K", "ldc"):
            self.dim(n)
        if per_cta_tile and not (self.plan.warp_specialized and s.persistent):  # the walk takes the batch
            self.z = z = sm90_batch.z_slot(self)
            self.tma_batch = sm90_batch.tma_batch_coordinate(self, z)
        if per_cta_tile and not self.plan.warp_specialized:  # warp-specialised roles walk their tiles (persistent.py)
            tile = TileScheduler(self).tile()  # type: ignore[arg-type]  # uses b, s, g, u32, dim, ceil_div
            self.tile_m0, self.tile_n0 = tile.bm0, tile.bn0
        window = self.u32("mov.u32", Sym(SMEM_SYMBOL))
        start = self.u32("add.u32", window, Imm(str(self.ring_offset + SWIZZLE_ALIGN - 1)))
        self.smem = self.u32("and.b32", start, Imm(str(-SWIZZLE_ALIGN)),
                             comment="ring base rounded up to 1024 B (swizzle pattern, descriptor base offset 0)")
        self.bars = self.u32("add.u32", self.smem, Imm(str(self.ring.barriers)), comment="full barriers")
        if self.ring.empty_barriers:
            self.empty_bars = self.u32("add.u32", self.bars, Imm(str(self.ring.empty)), comment="empty barriers")
        if self.cluster is not None:
            self.cluster.setup()
        b.comment(f"KT = ceil(K / {s.bk}): number of k-tiles")
        return self.ceil_div(self.dim("K"), s.bk)

    def lower(self) -> Function:
        if self.s.stream_k:
            return Sm90StreamK(self).lower()
        kt_count = self.setup()
        kt_begin = None
        split_k = sm90_splitk.Sm90SplitK(self) if self.s.split_k > 1 else None
        if split_k is not None:
            assert self.z is not None and self.z.split is not None
            kt_begin, kt_count = split_k.k_range(kt_count, self.z.split)
        self.pipeline.setup()
        acc = self.pipeline.accumulators()
        if self.plan.warp_specialized:  # zeroes, runs the epilogue and exits per role and tile
            self.pipeline.mainloop(acc, kt_count)
            return self.b.function
        zero_accumulators(self, acc)
        self.pipeline.mainloop(acc, kt_count, kt_begin)
        if split_k is not None:
            assert self.z is not None
            split_k.reduce(acc, self.z)
        self.pipeline.epilogue(acc)
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
        dims = ((1,) if g.batch > 1 else ()) + (rows, box.inner)
        specs.append(TensorMapSpec(param, box.operand, dims, plan.swizzle_mode.name, box.k_major))
    tile = plan.epilogue_tile
    if tile is not None:
        specs.append(TensorMapSpec(C_MAP_PARAM, "C", (tile.rows, tile.cols), tile.swizzle_mode.name))
    return tuple(specs)
