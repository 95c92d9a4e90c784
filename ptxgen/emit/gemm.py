"""GEMM lowering: (Gemm, Schedule, shared-memory plan) -> a Function over virtual registers.

Structure of the kernel (a modulo-scheduled cp.async pipeline, as in CUTLASS's sm80 mainloop):
  setup      parameters, CTA tile origin (row or grouped raster), per-thread address bases
  prologue   k-tiles 0..S-2 -> stages 0..S-2, one commit_group each (guarded by k-tile < KT)
  main loop  issue k-tile i+S-1 into the stage read last iteration; commit; fragment loads +
             mma.sync over k-tile i from stage i % S (ldmatrix, or scalar ld.shared for
             M/N-contiguous tf32 and int8 tiles: gemm_fragments.py); wait_group + bar.sync
             placement and the cross-tile fragment prefetch: gemm_mainloop.py
  epilogue   drain the copy groups, convert and store the accumulators from their fragments
With stages == 1 there is one buffer: copy, wait, barrier, compute, barrier.
"""
from __future__ import annotations

from ..regalloc.smem import SmemPlan
from ..schedule.geometry import operand_tiles, staging_layout
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from .builder import Builder
from .gemm_fragments import FragmentLoader
from .gemm_mainloop import MainLoop
from .gemm_plan import CopyPlan, copy_plan
from .index import ExprEmitter
from .addressing import RowPointers
from .gemm_edges import EdgeChecks
from .gemm_epilogue import EpilogueEmitter
from .gemm_epilogue_smem import StagedEpilogue
from .gemm_splitk import SplitK
from .gemm_streamk import StreamK
from .gemm_wmma import WmmaMath
from .ir import Addr, Function, Imm, Operand, Param, Sym, VReg
from .memory import cp_async, ld_param

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


class GemmLowering:
    """Builds one kernel; every emitter receives this object's builder explicitly."""

    def __init__(self, g: Gemm, s: Schedule, plan: SmemPlan):
        self.g, self.s, self.plan = g, s, plan
        self.b = Builder(entry_name(g, s), kernel_params(g, s))
        self.workspace_split = s.split_k > 1 and s.split_k_mode == "workspace"
        self.needs_workspace = self.workspace_split or s.stream_k
        self.k_left: VReg | None = None  # K left from this CTA's first k-tile (split-K), else K
        self.b.function.directives.append(f".maxntid {s.threads}, 1, 1")
        self.b.function.shared.append((SMEM_SYMBOL, 1024, None))
        self.tile_a, self.tile_b = operand_tiles(g, s)
        self.copy = {"A": copy_plan(self.tile_a), "B": copy_plan(self.tile_b)}
        self.wmma = WmmaMath(self) if s.instruction == "wmma" else None
        self.fragments = None if self.wmma else FragmentLoader(self.b, g, s, self.tile_a, self.tile_b)
        self.mi, self.ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8

    # -- small helpers ------------------------------------------------------------------------
    def u32(self, op: str, *srcs, comment: str | None = None) -> VReg:
        d = self.b.reg("b32")
        self.b.emit(op, d, *srcs, ndefs=1, comment=comment)
        return d

    def u64(self, op: str, *srcs, comment: str | None = None) -> VReg:
        d = self.b.reg("b64")
        self.b.emit(op, d, *srcs, ndefs=1, comment=comment)
        return d

    def pred(self, op: str, *srcs) -> VReg:
        p = self.b.reg("pred")
        self.b.emit(op, p, *srcs, ndefs=1)
        return p

    def wide_mul(self, a: VReg | Imm, bb: VReg | Imm) -> VReg:
        return self.u64("mul.wide.u32", a, bb)

    def ceil_div(self, x: VReg, d: int) -> VReg:
        up = self.u32("add.u32", x, Imm(str(d - 1))) if d > 1 else x
        if d & (d - 1) == 0:
            return self.u32("shr.u32", up, Imm(str(d.bit_length() - 1)))
        return self.u32("div.u32", up, Imm(str(d)))

    def dim(self, name: str) -> VReg:
        """A .u32 size parameter, loaded on first use."""
        if name not in self.dims:
            self.dims[name] = ld_param(self.b, "b32", ".u32", name)
        return self.dims[name]

    # -- setup ---------------------------------------------------------------------------------
    def setup(self) -> None:
        b, s = self.b, self.s
        b.banner("Setup: parameters, CTA tile origin, per-thread address bases")
        self.load_pointers()
        self.z_index()
        if self.g.batch > 1:
            self.batch_offsets()
        self.load_dims()
        self.tile_origin()
        b.comment(f"KT = ceil(K / {s.bk}): number of k-tiles")
        self.kt = self.ceil_div(self.dim("K"), s.bk)
        self.ex = ExprEmitter(b, self.tid)
        self.tile_addressing()
        self.shared_addressing()

    def load_pointers(self) -> None:
        """%tid.x and the global pointers (A, B, C, then bias / workspace when present)."""
        self.tid = self.u32("mov.u32", Sym("%tid.x"))
        self.ptr = {}
        extra = ((("bias",) if self.g.epi.bias else ()) + (("scale",) if self.g.epi.scale else ())
                 + (("workspace", "counters") if self.needs_workspace else ()))
        for name in ("A", "B", "C") + extra:
            raw = ld_param(self.b, "b64", ".u64", name)
            self.ptr[name] = self.u64("cvta.to.global.u64", raw)

    def load_dims(self) -> None:
        self.dims: dict[str, VReg] = {}
        for n in ("K", "lda", "ldb", "ldc"):
            self.dim(n)
        self.smem = self.u32("mov.u32", Sym(SMEM_SYMBOL), comment="shared window address of the tile buffers")

    def tile_addressing(self) -> None:
        """Per-tile state: global pointers to k-tile 0 of the CTA tile, and the edge bounds."""
        self.gptr = {n: self.global_tile_pointer(n) for n in ("A", "B")}
        self.edge = EdgeChecks(self)
        self.edge.prepare()

    def shared_addressing(self) -> None:
        """Tile-independent shared addresses: copy destinations and fragment sources in stage 0."""
        self.dst_bases = {n: self.shared_bases(n, self.copy[n].dst.bases) for n in ("A", "B")}
        if self.wmma:
            self.wmma.setup()
        else:
            self.frag_bases = {n: self.shared_bases(n, self.fragments.plans[n].addr.bases) for n in ("A", "B")}

    def z_index(self) -> None:
        """ctaid.z = batch * split_k + split: which batch (bidx) and which K slice (split)."""
        g, s = self.g, self.s
        if g.batch == 1 and s.split_k == 1:
            return
        self.zslot = self.u32("mov.u32", Sym("%ctaid.z"))
        if s.split_k == 1:
            self.bidx = self.zslot
            return
        self.b.comment(f"ctaid.z = batch * {s.split_k} + split")
        self.split = self.u32("rem.u32", self.zslot, Imm(str(s.split_k)))
        self.bidx = self.u32("div.u32", self.zslot, Imm(str(s.split_k)))

    def batch_offsets(self, base: dict[str, VReg] | None = None,
                      strides: dict[str, VReg] | None = None) -> None:
        """Move A, B and C to batch `self.bidx`: ptr = base + batch * batch_stride * element bytes."""
        self.b.comment("batch: the batch index selects the matrices (a batch stride of 0 broadcasts)")
        base = base or self.ptr
        strides = strides or self.batch_strides()
        z = self.u64("cvt.u64.u32", self.bidx)
        for name, eb in (("A", self.g.in_bytes), ("B", self.g.in_bytes), ("C", self.g.out_bytes)):
            step = self.u64("mul.lo.u64", z, strides[name])
            self.ptr[name] = self.u64("mad.lo.u64", step, Imm(str(eb)), base[name])

    def batch_strides(self) -> dict[str, VReg]:
        return {n: ld_param(self.b, "b64", ".u64", f"batch_stride_{n.lower()}") for n in ("A", "B", "C")}

    def tile_origin(self, pid: VReg | None = None) -> None:
        """tm, tn (the CTA tile's indices) and bm0, bn0 (its first row and column).

        From the launch grid, or (Stream-K) from a linear tile index `pid` within the batch."""
        b, s = self.b, self.s
        if s.raster == "row" and pid is None:
            b.comment("raster row: ctaid.x -> n-tile, ctaid.y -> m-tile")
            tn, tm = self.u32("mov.u32", Sym("%ctaid.x")), self.u32("mov.u32", Sym("%ctaid.y"))
        elif s.raster == "row":
            b.comment("raster row: tile -> (tile / tiles_n, tile % tiles_n)")
            num_n = self.ceil_div(self.dim("N"), s.bn)
            tm = self.u32("div.u32", pid, num_n)
            tn = self.u32("rem.u32", pid, num_n)
        else:
            b.comment(f"raster grouped: groups of {s.group_m} m-tiles walk n together (L2 reuse)")
            if pid is None:
                pid = self.u32("mov.u32", Sym("%ctaid.x"))
            num_m, num_n = self.ceil_div(self.dim("M"), s.bm), self.ceil_div(self.dim("N"), s.bn)
            in_group = self.u32("mul.lo.u32", num_n, Imm(str(s.group_m)))
            group = self.u32("div.u32", pid, in_group)
            first_m = self.u32("mul.lo.u32", group, Imm(str(s.group_m)))
            left = self.u32("sub.u32", num_m, first_m)
            size_m = self.u32("min.u32", left, Imm(str(s.group_m)))
            pos = self.u32("rem.u32", pid, in_group)
            tm = self.u32("add.u32", first_m, self.u32("rem.u32", pos, size_m))
            tn = self.u32("div.u32", pos, size_m)
        self.tm, self.tn = tm, tn
        self.bm0 = self.u32("mul.lo.u32", tm, Imm(str(s.bm)), comment="bm0: first row of the CTA tile")
        self.bn0 = self.u32("mul.lo.u32", tn, Imm(str(s.bn)), comment="bn0: first column of the CTA tile")

    def global_tile_pointer(self, name: str) -> VReg:
        """Pointer to this thread's first chunk of k-tile 0 of operand `name`."""
        cp: CopyPlan = self.copy[name]
        tile = cp.tile
        eb = tile.elem_bytes
        self.b.comment(f"{name}: thread's first {tile.copy_bytes}-byte copy of k-tile 0 in global memory")
        row = self.ex.reg(cp.row0)
        col = self.ex.reg(cp.col0 * (tile.copy_bytes // eb))
        origin = self.bm0 if name == "A" else self.bn0  # the CTA's first row of A / column of B
        if tile.k_along_rows:  # tile rows run along K: the CTA origin is a column offset
            col = self.u32("add.u32", col, origin)
        else:
            row = self.u32("add.u32", row, origin)
        return self.element_pointer(self.ptr[name], "lda" if name == "A" else "ldb", row, col, eb)

    def element_pointer(self, base: VReg, ld: str, row: VReg, col: VReg, eb: int) -> VReg:
        """base + (row * ld + col) * eb, all in 64 bits: ld * eb (and row * ld * eb) reach 2^32
        bytes for large leading dimensions, where 32-bit products would alias rows."""
        off = self.u64("mad.wide.u32", row, self.dim(ld), self.u64("cvt.u64.u32", col))
        if eb > 1:
            off = self.u64("shl.b64", off, Imm(str(eb.bit_length() - 1)))
        return self.u64("add.s64", base, off)

    def shared_bases(self, name: str, bases) -> list[VReg]:
        """Absolute shared addresses in stage 0 of `name`, one per per-thread offset expression."""
        offset = self.plan.offsets[name]
        start = self.u32("add.u32", self.smem, Imm(str(offset))) if offset else self.smem
        return [self.u32("add.u32", start, self.ex.emit(e)) for e in bases]

    # -- pipeline pieces --------------------------------------------------------------------------
    def k_advance(self) -> dict[str, VReg | Imm]:
        """Bytes a global tile pointer moves per k-tile."""
        out: dict[str, VReg | Imm] = {}
        for name in ("A", "B"):
            tile = self.copy[name].tile
            if tile.k_along_rows:
                ld = self.dim("lda" if name == "A" else "ldb")
                out[name] = self.wide_mul(ld, Imm(str(self.s.bk * tile.elem_bytes)))
            else:
                out[name] = Imm(str(self.s.bk * tile.elem_bytes))
        return out

    def skip_k_tiles(self, first: VReg, what: str) -> None:
        """Move both global tile pointers forward by `first` k-tiles (split-K, Stream-K units)."""
        for name in ("A", "B"):
            adv = self.advance[name]
            skip = (self.wide_mul(first, adv) if isinstance(adv, Imm)
                    else self.u64("mul.lo.u64", self.u64("cvt.u64.u32", first), adv))
            self.b.emit("add.s64", self.gptr[name], self.gptr[name], skip, ndefs=1, comment=f"{name} -> {what}")

    def row_steps(self) -> dict[str, dict[int, VReg]]:
        """Loop-invariant 64-bit byte steps between consecutive copy rows (usually just one)."""
        out: dict[str, dict[int, VReg]] = {}
        for name in ("A", "B"):
            cp = self.copy[name]
            ld = self.dim("lda" if name == "A" else "ldb")
            rows = sorted(set(cp.rows))
            deltas = sorted({b - a for a, b in zip(rows, rows[1:])})
            out[name] = {d: self.wide_mul(ld, Imm(str(d * cp.tile.elem_bytes))) for d in deltas}
        return out

    def issue_tile(self, name: str, stage_off: VReg | int, guard: VReg | None, what: str,
                   k_rem: VReg | None) -> None:
        """Copy one k-tile of `name` into the stage at byte offset `stage_off`, then advance.

        `k_rem` (K left from this k-tile's start) is given only when K ends inside a k-tile.
        """
        cp = self.copy[name]
        cb = cp.tile.copy_bytes
        kind = "cp.async" if cb >= 4 else "ld.global + st.shared"
        self.b.comment(f"{what}: {kind} {name} ({cp.tile.copies_per_thread} x {cb} B per thread)")
        if isinstance(stage_off, int):
            dst = [(base, stage_off) for base in self.dst_bases[name]]
        else:
            dst = [(self.u32("add.u32", base, stage_off), 0) for base in self.dst_bases[name]]
        sizes = self.edge.src_sizes(name, k_rem)
        row_ptr = RowPointers(self.b, self.gptr[name], steps=self.steps[name])  # steps: loop-invariant
        for it in range(cp.tile.copies_per_thread):
            r = cp.rows[it]
            base_i, imm = cp.dst.site[it]
            reg, extra = dst[base_i]
            dst_addr, src_addr = Addr(reg, imm + extra), Addr(row_ptr[r], cp.cols[it] * cb)
            if cb >= 4:
                cp_async(self.b, dst_addr, src_addr, cb, src_size=sizes[it], guard=guard)
            else:
                self.copy_narrow(dst_addr, src_addr, cb, cp.tile.elem_bytes, sizes[it], guard)
        self.b.emit("add.s64", self.gptr[name], self.gptr[name], self.advance[name], ndefs=1,
                    comment=f"{name} pointer -> next k-tile")

    def copy_narrow(self, dst: Addr, src: Addr, cb: int, eb: int, size: Operand | None,
                    guard: VReg | None) -> None:
        """A synchronous 1- or 2-byte copy (no cp.async is that narrow), zero outside the matrix.

        `size` is cp.async's src-size: the unit's bytes inside the matrix. A 2-byte unit of 8-bit
        elements may straddle the edge (size 1): then only its first byte is loaded (`ld.u8`
        zero-extends, and the first element is the low byte), so no byte past the edge is read.
        """
        h = self.b.reg("b16")
        typ = ".b16" if cb == 2 else ".u8"
        if size is not None or guard is not None:
            self.b.emit("mov.b16", h, Imm("0"), ndefs=1)
        if size is None:
            self.b.emit(f"ld.global{typ}", h, src, ndefs=1, guard=guard)
        else:
            full = self.pred("setp.eq.u32", size, Imm(str(cb)))
            self.b.emit(f"ld.global{typ}", h, src, ndefs=1, guard=self.both(full, guard))
            if cb == 2 and eb == 1:  # the straddling unit: its first byte only
                first = self.pred("setp.eq.u32", size, Imm("1"))
                self.b.emit("ld.global.u8", h, src, ndefs=1, guard=self.both(first, guard))
        self.b.emit(f"st.shared{typ}", dst, h, guard=guard)

    def both(self, p: VReg, q: VReg | None) -> VReg:
        return p if q is None else self.pred("and.pred", p, q)

    # -- the kernel ---------------------------------------------------------------------------------
    def lower(self) -> Function:
        if self.s.stream_k:
            return StreamK(self).lower()
        b, s = self.b, self.s
        self.setup()
        self.steps = self.row_steps()
        self.advance = self.k_advance()
        if s.split_k > 1:
            if not hasattr(self, "bidx"):
                self.bidx = self.u32("mov.u32", Imm("0"))
            SplitK(self).k_range()
        acc = self.accumulators()
        self.zero_accumulators(acc)
        self.mainloop(acc)
        if self.workspace_split:
            SplitK(self).reduce(acc)
        (StagedEpilogue if staging_layout(self.g, s) else EpilogueEmitter)(self).emit(acc)
        b.emit("ret")
        return b.function

    def accumulators(self) -> list[list[tuple[VReg, ...]]]:
        """The warp tile's accumulator registers, [mi][ni] mma fragments (or wmma fragments)."""
        if self.wmma:
            return self.wmma.accumulators()
        cls, per_tile = ("f32", 4) if self.g.accumulator == "f32" else ("b32", 2 if self.g.acc_dtype == "f16" else 4)
        return [[self.b.regs(cls, per_tile) for _ in range(self.ni)] for _ in range(self.mi)]

    def zero_accumulators(self, acc) -> None:
        f16_acc, s = self.g.acc_dtype == "f16", self.s
        float_acc = self.g.accumulator == "f32"
        kind = "f16x2" if f16_acc else self.g.accumulator
        self.b.comment(f"zero {sum(len(f) for row in acc for f in row)} {kind} "
                       f"accumulators (warp tile {s.warp_tile[0]}x{s.warp_tile[1]})")
        for row in acc:
            for frag in row:
                for r in frag:
                    self.b.emit("mov.f32" if float_acc else "mov.b32", r, Imm("0f00000000" if float_acc else "0"),
                                ndefs=1)

    def mainloop(self, acc) -> None:
        """The K loop over this CTA's `self.kt` k-tiles (at least one), from `self.gptr`."""
        MainLoop(self).emit(acc)


def lower_gemm(g: Gemm, s: Schedule, plan: SmemPlan) -> Function:
    return GemmLowering(g, s, plan).lower()
