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
from ...ir import Builder, Function, Imm, Param, Sym, VReg, ops as ptx
from ...emit.edges import StoreEdges
from ...emit.index import ExprEmitter
from ...emit.splitk import SplitK
from ...emit.streamk import StreamK
from .pipeline import Sm80Pipeline
from .wmma.pipeline import WmmaPipeline
from ...ir.ops import B32, F32, U32, U64, S64
from ...emit.tiles import KRange, Tile, TileOperands, TileScheduler, ZSlot
from ...emit.memory import load_param, ld_param
from ...emit.scalar_ops import ScalarOps
from ...emit.epilogue.math import EpilogueMath
from ...emit.pipeline import Accumulators, CpAsyncPipeline

SMEM_SYMBOL = "smem"
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
    return (list(PARAMS) + (BATCH_PARAMS if g.batch > 1 else []) + ([BIAS_PARAM] if g.epi.bias else [])
            + ([SCALE_PARAM] if g.epi.scale else []) + (SPLIT_K_PARAMS if scratch else []))


def entry_name(g: Gemm, s: Schedule) -> str:
    bm, bn, bk = s.block
    acc = "_acc16" if g.acc_dtype == "f16" else ""
    epi = (("" if g.epi.is_identity else "_epi") + ("_wmma" if s.instruction == "wmma" else "")
           + (f"_splitk{s.split_k}" if s.split_k > 1 else "") + ("_streamk" if s.stream_k else ""))
    return (f"ptxgen_gemm_{g.dtype}_{g.out_dtype}{acc}_{g.a_layout[0]}{g.b_layout[0]}_{bm}x{bn}x{bk}"
            f"_w{s.warps[0]}x{s.warps[1]}_s{s.stages}_{s.smem_layout}{epi}")


def pipeline_class(s: Schedule) -> type[Sm80Pipeline] | type[WmmaPipeline]:
    """The math pipeline a schedule lowers to: wmma, or (every other instruction) mma.sync."""
    return WmmaPipeline if s.instruction == "wmma" else Sm80Pipeline


class GemmLowering(ScalarOps):
    """Builds one kernel; every emitter receives this object's builder explicitly.

    It holds the kernel-invariant values only (parameters, thread index, shared window), all
    declared here and emitted once by `setup` (or Stream-K's setup); the pipeline holds its own
    (copy plans, shared bases). Per-tile values flow by return: the tile scheduler returns the
    `Tile`, split-K and Stream-K the `KRange`, `Pipeline.operands` the `TileOperands`.
    """

    def __init__(self, g: Gemm, s: Schedule, plan: SmemPlan):
        self.g, self.s, self.plan = g, s, plan
        self.b = Builder(entry_name(g, s), kernel_params(g, s))
        self.workspace_split = s.split_k > 1 and s.split_k_mode == "workspace"
        self.needs_workspace = self.workspace_split or s.stream_k
        self.b.function.directives.append(f".maxntid {s.threads}, 1, 1")
        self.b.function.shared.append((SMEM_SYMBOL, WIDEST_ALIGNMENT, None))
        self.tile_a, self.tile_b = operand_tiles(g, s)
        self.pipeline: CpAsyncPipeline = pipeline_class(s)(self)
        self.scheduler = TileScheduler(self)
        # Kernel-invariant registers, emitted by the setup before any use:
        self._tid: VReg | None = None  # %tid.x, from load_pointers
        self.ptr: dict[str, VReg] = {}  # global pointers (A, B, C moved to the batch, vectors, workspace)
        self.dims: dict[str, VReg] = {}  # .u32 size parameters, loaded on first use
        self._smem: VReg | None = None  # shared window address of the buffers, from load_dims
        self._ex: ExprEmitter | None = None  # per-thread index expressions over %tid.x, from load_pointers

    # -- kernel-invariant registers, each emitted once by the setup -----------------------------------
    @property
    def tid(self) -> VReg:
        assert self._tid is not None, "load_pointers() emits %tid.x before any use"
        return self._tid

    @property
    def smem(self) -> VReg:
        assert self._smem is not None, "load_dims() emits the shared window address before any use"
        return self._smem

    @property
    def ex(self) -> ExprEmitter:
        assert self._ex is not None, "load_pointers() creates the expression emitter with %tid.x"
        return self._ex

    # -- setup ---------------------------------------------------------------------------------
    def setup(self) -> tuple[Tile, KRange, ZSlot | None, TileOperands]:
        """Kernel-invariant values, then this CTA's tile, its k-range (all of K) and operands."""
        b, s = self.b, self.s
        b.banner("Setup: parameters, CTA tile origin, per-thread address bases")
        self.load_pointers()
        z = self.scheduler.z_slot()
        if self.g.batch > 1:
            assert z is not None
            self.batch_offsets(z.batch)
        self.load_dims()
        tile = self.scheduler.tile()
        b.comment(f"KT = ceil(K / {s.bk}): number of k-tiles")
        k = KRange(self.ceil_div(self.dim("K"), s.bk))
        ops = self.pipeline.operands(tile)
        self.pipeline.setup()
        return tile, k, z, ops

    def load_pointers(self) -> None:
        """%tid.x and the global pointers (A, B, C, then bias / workspace when present)."""
        self._tid = ptx.mov(self.b, U32, Sym("%tid.x"))
        self._ex = ExprEmitter(self.b, self._tid)
        extra = ((("bias",) if self.g.epi.bias else ()) + (("scale",) if self.g.epi.scale else ())
                 + (("workspace", "counters") if self.needs_workspace else ()))
        for name in ("A", "B", "C") + extra:
            self.ptr[name] = ptx.to_global(self.b, U64, load_param(self.b, U64, name))

    def load_dims(self) -> None:
        for n in ("K", "lda", "ldb", "ldc"):
            self.dim(n)
        self._smem = ptx.mov(self.b, U32, Sym(SMEM_SYMBOL), comment="shared window address of the tile buffers")

    def batch_offsets(self, batch: VReg, base: dict[str, VReg] | None = None,
                      strides: dict[str, VReg] | None = None) -> None:
        """Move A, B and C to batch `batch`: ptr = base + batch * batch_stride * element bytes."""
        self.b.comment("batch: the batch index selects the matrices (a batch stride of 0 broadcasts)")
        base = base or self.ptr
        strides = strides or self.batch_strides()
        z = ptx.cvt(self.b, U64, U32, batch)
        for name, eb in (("A", self.g.in_bytes), ("B", self.g.in_bytes), ("C", self.g.out_bytes)):
            step = ptx.mul(self.b, U64, z, strides[name])
            self.ptr[name] = ptx.mad(self.b, U64, step, Imm(str(eb)), base[name])

    def batch_strides(self) -> dict[str, VReg]:
        return {n: load_param(self.b, U64, f"batch_stride_{n.lower()}") for n in ("A", "B", "C")}

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
        if self.s.stream_k:
            return StreamK(self).lower()
        b, s = self.b, self.s
        tile, k, z, ops = self.setup()
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


def lower_gemm(g: Gemm, s: Schedule, plan: SmemPlan) -> Function:
    return GemmLowering(g, s, plan).lower()
