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
A (K, M) / B (K, N), the latter read by wgmma with its transpose bit), C (.u64), M, N, K, ldc
(.u32), then bias and scale (.u64) when the epilogue has them. `Kernel.tensor_maps` gives the
view, box and swizzle each map must have.

Each warpgroup owns its rows as wgmma m64 blocks (hopper_plan: rows_per_consumer), each
accumulating a 64 x BN f32 fragment (wgmma_layouts.accumulator_coord). The epilogue stores each
element directly (sm90/epilogue.py), guarded against M and N.
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
from ..tiles import TileScheduler
from . import wgmma_isa as wi
from .cluster import ClusterRoles, cluster_shape, split_box_rows
from .epilogue import DirectStores
from .mainloop import RingLayout, TmaWgmmaLoop, ring_layout
from .persistent import zero_accumulators
from .warp_specialized import WarpSpecializedLoop

SMEM_SYMBOL = "smem"
RING_BUFFER = "sm90_ring"
TENSOR_MAP_PARAMS = ("tmapA", "tmapB")
PARAMS = [Param(".align 64 .b8", "tmapA[128]"), Param(".align 64 .b8", "tmapB[128]"), Param(".u64", "C"),
          Param(".u32", "M"), Param(".u32", "N"), Param(".u32", "K"), Param(".u32", "ldc")]
PARAM_NAMES = ("tmapA[128]", "tmapB[128]", "C", "M", "N", "K", "ldc")
#: Appended when the epilogue adds a bias vector, then when it multiplies by a scale vector.
VECTOR_PARAMS = ("bias", "scale")


def kernel_params(g: Gemm) -> list[Param]:
    return list(PARAMS) + [Param(".u64", name) for name in VECTOR_PARAMS if getattr(g.epi, name)]


def entry_name(g: Gemm, s: Schedule) -> str:
    bm, bn, bk = s.block
    return f"ptxgen_gemm_sm90_{g.dtype}_{g.out_dtype}_{g.a_layout[0]}{g.b_layout[0]}_{bm}x{bn}x{bk}_s{s.stages}_tma_wgmma"


class Sm90Pipeline:
    """TMA loads into 128B/64B/32B-swizzled stages completing on full mbarriers, wgmma from
    descriptors into f32 accumulators (the `Pipeline` roles this slice has: shared buffers,
    setup, accumulators, main loop, epilogue; partial tiles belong to split-K, not built)."""

    def __init__(self, lw: "Sm90Lowering"):
        self.lw = lw
        self.loop = WarpSpecializedLoop(lw) if lw.plan.warp_specialized else TmaWgmmaLoop(lw)

    @classmethod
    def shared_buffers(cls, g: Gemm, s: Schedule) -> list[SmemBuffer]:
        """One buffer: the ring and its barriers, plus slack to round the base up to 1024 B."""
        plan = hopper_plan(g, s)
        ring = ring_layout(plan, s.bm, s.bn, s.bk, g.in_bytes, s.stages)
        return [SmemBuffer(RING_BUFFER, ring.nbytes + ALIGN_SLACK, SWIZZLE_ALIGN, 0, 0)]

    def setup(self) -> None:
        self.loop.init_barriers()

    def accumulators(self) -> list[tuple[VReg, ...]]:
        """One 64 x BN f32 fragment per m64 block of the warpgroup's rows."""
        n_regs = wi.accumulator_registers(self.lw.s.bn, "f32")
        return [self.lw.b.regs("f32", n_regs) for _ in range(self.lw.plan.rows_per_consumer // 64)]

    def mainloop(self, acc: list[tuple[VReg, ...]], kt_count: VReg) -> None:
        self.loop.emit(acc, kt_count)

    def epilogue(self, acc: list[tuple[VReg, ...]]) -> None:
        DirectStores(self.lw).emit(acc)


class Sm90Lowering(ScalarOps):
    """Builds one sm_90a kernel; holds the kernel-invariant registers its parts share."""

    def __init__(self, g: Gemm, s: Schedule, offset: int = 0):
        self.g, self.s, self.plan = g, s, hopper_plan(g, s)
        self.ring: RingLayout = ring_layout(self.plan, s.bm, s.bn, s.bk, g.in_bytes, s.stages)
        self.ring_offset = offset
        self.b = Builder(entry_name(g, s), kernel_params(g))
        self.b.function.directives.append(f".maxntid {self.plan.threads}, 1, 1")
        if self.plan.warp_specialized:  # setmaxnreg needs a register cap (warp_specialisation.md §9g)
            self.b.function.directives.append(f".maxnreg {self.plan.launch_regs}")
        shape = cluster_shape(self.plan)
        self.cluster: ClusterRoles | None = ClusterRoles(self, shape) if shape is not None else None
        if shape is not None:  # a 1-D cluster of consecutive CTAs of the 1-D persistent grid (cluster.py)
            self.b.function.directives.append(f".reqnctapercluster {shape.size}, 1, 1")
        self.b.function.shared.append((SMEM_SYMBOL, 1024, None))
        self.pipeline = Sm90Pipeline(self)
        self.dims: dict[str, VReg] = {}
        self.ptr: dict[str, VReg] = {}  # global pointers: C, then bias / scale when present

    # -- the kernel --------------------------------------------------------------------------
    def setup(self) -> VReg:
        """Parameters, the tile origin, the aligned shared base; returns the k-tile count."""
        b, s = self.b, self.s
        b.banner("Setup: tensor maps, CTA tile origin, 1024-aligned shared ring, barriers")
        self.tid = self.u32("mov.u32", Sym("%tid.x"))
        self.ex = ExprEmitter(b, self.tid)
        self.leader = self.pred("setp.eq.u32", self.tid, Imm("0"))
        self.warpgroup = self.u32("shr.u32", self.tid, Imm("7"), comment="consumer warpgroup: its BM/consumers rows")
        self.tmaps: dict[str, VReg] = {}
        for name, param in zip(("A", "B"), TENSOR_MAP_PARAMS):
            addr = self.u64("mov.b64", Sym(param))
            self.tmaps[name] = self.u64("cvta.param.u64", addr, comment=f"generic address of {param} (by value)")
        for name in ("C",) + tuple(n for n in VECTOR_PARAMS if getattr(self.g.epi, n)):
            self.ptr[name] = self.u64("cvta.to.global.u64", ld_param(b, "b64", ".u64", name))
        for n in ("M", "N", "K", "ldc"):
            self.dim(n)
        if not self.plan.warp_specialized:  # warp-specialised roles walk their tiles themselves (persistent.py)
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
        kt_count = self.setup()
        self.pipeline.setup()
        acc = self.pipeline.accumulators()
        if self.plan.warp_specialized:  # zeroes, runs the epilogue and exits per role and tile
            self.pipeline.mainloop(acc, kt_count)
            return self.b.function
        zero_accumulators(self, acc)
        self.pipeline.mainloop(acc, kt_count)
        self.pipeline.epilogue(acc)
        self.b.emit("ret")
        return self.b.function


def lower_sm90(g: Gemm, s: Schedule, ring_offset: int = 0) -> Function:
    return Sm90Lowering(g, s, ring_offset).lower()


@dataclass(frozen=True)
class TensorMapSpec:
    """What one by-value tensor-map parameter must describe: `operand`'s 2-D view with its
    contiguous dimension last (`k_major`: A as (M, K), B as (N, K); else A as (K, M), B as (K, N)),
    boxes of `box` elements (numpy order: rows, then one swizzle width of the contiguous
    dimension) in `swizzle` mode, out-of-bounds elements filled with zero."""

    param: str
    operand: str
    box: tuple[int, int]
    swizzle: str
    k_major: bool = True

    def view(self, logical):
        """The view of the logical operand (A: M x K, B: K x N; numpy or strided) the map describes."""
        transpose = self.k_major == (self.operand == "B")
        return logical.T if transpose else logical


def tensor_map_specs(g: Gemm, s: Schedule) -> tuple[TensorMapSpec, ...]:
    plan = hopper_plan(g, s)
    shape = cluster_shape(plan)
    specs = []
    for param, box in zip(TENSOR_MAP_PARAMS, (plan.a_box, plan.b_box)):
        assert box is not None, "the verifier admits only operands TMA can describe"
        rows = split_box_rows(box.outer, shape.parts(box.operand)) if shape is not None else box.outer
        specs.append(TensorMapSpec(param, box.operand, (rows, box.inner), f"{plan.swizzle}B", box.k_major))
    return tuple(specs)
