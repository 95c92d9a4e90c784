"""GEMM lowering: (Gemm, Schedule, shared-memory plan) -> a Function over virtual registers.

`GemmLowering` drives one kernel; what runs on the tensor cores is its `Pipeline`
(pipeline.py): sm80/ (cp.async + ldmatrix + mma.sync) or wmma/ (cp.async + wmma). Structure:
  setup      parameters, CTA tile (tiles.py: row or grouped raster), per-thread address bases
  k-range    all of K, or this split's k-tiles (splitk.py); Stream-K (streamk.py) instead loops
             over work units, each a tile and a k-range
  main loop  the pipeline's, over the k-range (sm80/mainloop.py: a modulo-scheduled cp.async
             pipeline as in CUTLASS's sm80 mainloop, fragment loads: sm80/fragments.py)
  split-K    workspace partials, the last CTA of a tile sums them (splitk.py)
  epilogue   epilogue/: the accumulators, converted and stored (direct, or staged through shared memory)
"""
from __future__ import annotations

from ...regalloc.smem import SmemPlan
from ...schedule.geometry import operand_tiles
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...schedule.swizzle import WIDEST_ALIGNMENT
from ...ir import Builder, Function, Imm, Param, VReg, ops as ptx
from ...emit.describe import entry_variant
from ...emit.edges import StoreEdges
from ...emit.groups import COUNTS_PARAM
from ...emit.splitk import SplitK
from ...emit.streamk import StreamK
from .context import SMEM_SYMBOL, Sm80Context, batch_offsets, batch_strides, kernel_context, needs_workspace
from .pipeline import Sm80Pipeline
from .wmma.pipeline import WmmaPipeline
from ...ir.ops import B32, F32, U32, U64, S64
from ...emit.tiles import KRange, Tile, TileOperands, TileScheduler
from ...emit.memory import ld_param
from ...emit.scalar_ops import ScalarOps
from ...emit.epilogue.math import EpilogueMath
from ...emit.pipeline import Accumulators, CpAsyncPipeline

PARAMS = [Param(".u64", "A"), Param(".u64", "B"), Param(".u64", "C"), Param(".u32", "M"),
          Param(".u32", "N"), Param(".u32", "K"), Param(".u32", "lda"), Param(".u32", "ldb"),
          Param(".u32", "ldc")]
#: Appended after PARAMS for batched GEMMs: element strides between batches (0 broadcasts).
BATCH_PARAMS = [Param(".u64", "batch_stride_a"), Param(".u64", "batch_stride_b"), Param(".u64", "batch_stride_c")]
#: Appended when the epilogue adds a bias vector, then when it multiplies by a scale vector
#: (each shared by every batch), in this order.
BIAS_PARAM = Param(".u64", "bias")
SCALE_PARAM = Param(".u64", "scale")


#: Appended last by workspace split-K (f32 partial tiles, one u32 arrival counter per tile) and by
#: Stream-K (one f32 partial tile and one u32 flag per persistent CTA).
SPLIT_K_PARAMS = [Param(".u64", "workspace"), Param(".u64", "counters")]


def kernel_params(g: Gemm, s: Schedule) -> list[Param]:
    scratch = (s.split_k > 1 and s.split_k_mode == "workspace") or s.stream_k
    return (list(PARAMS) + group_stride_params(g) + (BATCH_PARAMS if g.batch > 1 else [])
            + ([BIAS_PARAM] if g.epi.bias else []) + ([SCALE_PARAM] if g.epi.scale else [])
            + (SPLIT_K_PARAMS if scratch else []) + group_count_params(g))


def group_stride_params(g: Gemm) -> list[Param]:
    """A grouped GEMM's strides between its groups' matrices: contiguous B's only (A's and C's
    groups are rows of one matrix), masked A's, B's and C's (each group a slot), k-contiguous C's
    only (A's and B's groups are slices of K of one matrix each)."""
    if g.grouping == "contiguous":
        return [BATCH_PARAMS[1]]
    if g.grouping == "k-contiguous":
        return [BATCH_PARAMS[2]]
    return list(BATCH_PARAMS) if g.grouping == "masked" else []


def group_count_params(g: Gemm) -> list[Param]:
    """Last: the device array of the groups' sizes (`offs` or `masked_m`, int32)."""
    return [Param(".u64", COUNTS_PARAM[g.grouping])] if g.grouped else []


def entry_name(g: Gemm, s: Schedule) -> str:
    bm, bn, bk = s.block
    acc = "_acc16" if g.acc_dtype == "f16" else ""
    epi = (("" if g.epi.is_identity else "_epi") + ("_wmma" if s.instruction == "wmma" else "")
           + (f"_splitk{s.split_k}" if s.split_k > 1 else "") + entry_variant(g, s))
    return (f"ptxgen_gemm_{g.dtype}_{g.out_dtype}{acc}_{g.a_layout[0]}{g.b_layout[0]}_{bm}x{bn}x{bk}"
            f"_w{s.warps[0]}x{s.warps[1]}_s{s.stages}_{s.smem_layout}{epi}")


def pipeline_class(s: Schedule) -> type[Sm80Pipeline] | type[WmmaPipeline]:
    """The math pipeline a schedule lowers to: wmma, or (every other instruction) mma.sync."""
    return WmmaPipeline if s.instruction == "wmma" else Sm80Pipeline


class GemmLowering(ScalarOps):
    """Builds one kernel; every emitter receives this object's builder explicitly.

    It is built from the kernel-invariant registers (`Sm80Context`, which `kernel_context` emitted
    and returned) and writes none of its attributes afterwards; the pipeline holds its own (copy
    plans, shared bases). Per-tile values flow by return: the tile scheduler returns the `Tile`,
    split-K and Stream-K the `KRange`, `Pipeline.operands` the `TileOperands`.
    """

    def __init__(self, cx: Sm80Context, plan: SmemPlan):
        g, s = cx.g, cx.s
        self.cx, self.g, self.s, self.plan, self.b = cx, g, s, plan, cx.b
        self.tid, self.ex, self.smem = cx.tid, cx.ex, cx.smem
        self.ptr: dict[str, VReg] = cx.ptr  # global pointers (Stream-K moves A, B, C per unit)
        self.dims: dict[str, VReg] = cx.dims  # .u32 size parameters, loaded on first use
        self.workspace_split = s.split_k > 1 and s.split_k_mode == "workspace"
        self.needs_workspace = needs_workspace(s)
        self.tile_a, self.tile_b = operand_tiles(g, s)
        self.pipeline: CpAsyncPipeline = pipeline_class(s)(self)
        self.scheduler = TileScheduler(self)

    # -- setup ---------------------------------------------------------------------------------
    def setup(self) -> tuple[Tile, KRange, TileOperands]:
        """After the kernel-invariant values: this CTA's tile, its k-range (all of K) and operands."""
        b, s = self.b, self.s
        group = self.cx.group
        tile = self.scheduler.tile() if group is None else self.scheduler.group_tile(group.tm)
        b.comment(f"KT = ceil(K / {s.bk}): number of k-tiles")
        count = self.ceil_div(self.dim("K"), s.bk)
        if self.g.grouping == "k-contiguous":  # an empty group runs one zero-filled k-tile: accumulators stay 0
            count = ptx.max_(b, U32, count, 1, comment="KT >= 1: the loop runs at least one k-tile")
        k = KRange(count)
        ops = self.pipeline.operands(tile)
        self.pipeline.setup()
        return tile, k, ops

    def batch_offsets(self, batch: VReg, base: dict[str, VReg], strides: dict[str, VReg] | None = None) -> None:
        """Move A, B and C to batch `batch` (Stream-K's units): ptr = base + batch * batch_stride * bytes."""
        batch_offsets(self.b, self.g, self.ptr, batch, base, strides)

    def batch_strides(self) -> dict[str, VReg]:
        return batch_strides(self.b)

    def element_pointer(self, base: VReg, ld: str, row: VReg, col: VReg, eb: int) -> VReg:
        """base + (row * ld + col) * eb, all in 64 bits: ld * eb (and row * ld * eb) reach 2^32
        bytes for large leading dimensions, where 32-bit products would alias rows."""
        off = ptx.mad_wide(self.b, U32, row, self.dim(ld), ptx.cvt(self.b, U64, U32, col))
        if eb > 1:
            off = ptx.shl(self.b, U64, off, Imm(str(eb.bit_length() - 1)))
        return ptx.add(self.b, S64, base, off)

    def shared_bases(self, name: str, bases) -> list[VReg]:
        """Absolute shared addresses in stage 0 of `name`, one per per-thread offset expression."""
        offset = self.plan.offsets[name]
        start = ptx.add(self.b, U32, self.smem, Imm(str(offset))) if offset else self.smem
        return [ptx.add(self.b, U32, start, self.ex.emit(e)) for e in bases]

    # -- the kernel ---------------------------------------------------------------------------------
    def lower(self) -> Function:
        """The kernel of one CTA tile (Stream-K's persistent kernel is `StreamK`'s)."""
        b, s, z = self.b, self.s, self.cx.z
        tile, k, ops = self.setup()
        self.pipeline.prepare_loop()
        if s.split_k > 1:
            assert z is not None and z.split is not None
            k = SplitK(self).k_range(k.count, z.split, ops.gptr)
        acc = self.accumulators()
        self.zero_accumulators(acc)
        self.mainloop(acc, ops, k)
        if self.workspace_split:
            assert z is not None
            SplitK(self).reduce(acc, tile, z)
        self.pipeline.epilogue(tile, ops).emit(acc)
        if self.cx.absent is not None:
            b.place(self.cx.absent)  # grouped: CTAs past the groups' tiles come here
        b.emit("ret")
        return b.function

    def accumulators(self) -> Accumulators:
        """The warp tile's accumulator registers, as the pipeline lays them out."""
        return self.pipeline.accumulators()

    def zero_accumulators(self, acc) -> None:
        f16_acc, s = self.g.acc_dtype == "f16", self.s
        float_acc = self.g.accumulator == "f32"
        kind = "f16x2" if f16_acc else self.g.accumulator
        self.b.comment(f"zero {sum(len(f) for row in acc for f in row)} {kind} "
                       f"accumulators (warp tile {s.warp_tile[0]}x{s.warp_tile[1]})")
        for row in acc:
            for frag in row:
                for r in frag:
                    ptx.mov(self.b, F32 if float_acc else B32, Imm("0f00000000") if float_acc else 0, into=r)

    def mainloop(self, acc, ops: TileOperands, k: KRange) -> None:
        """The K loop over the k-tiles of `k` (at least one), from the pointers of `ops`."""
        self.pipeline.mainloop(acc, ops, k)


def kernel_builder(g: Gemm, s: Schedule) -> Builder:
    """The kernel's builder: its entry, parameters, thread count and the shared window."""
    b = Builder(entry_name(g, s), kernel_params(g, s))
    b.function.directives.append(f".maxntid {s.threads}, 1, 1")
    b.function.shared.append((SMEM_SYMBOL, WIDEST_ALIGNMENT, None))
    return b


def lower_gemm(g: Gemm, s: Schedule, plan: SmemPlan) -> Function:
    b = kernel_builder(g, s)
    if s.stream_k:
        cx = kernel_context(b, g, s, "Setup: parameters, Stream-K decomposition, per-thread shared addresses")
        return StreamK(GemmLowering(cx, plan)).lower()
    cx = kernel_context(b, g, s, "Setup: parameters, CTA tile origin, per-thread address bases")
    return GemmLowering(cx, plan).lower()
