"""Block-scaled fp8 on sm_90a (schedule/block_scale.py; DeepSeek-V3 §3.3): the promotion of each
128-wide K slice (promotion.py, docs/ptx_facts/wgmma.md §9b′) becomes
`acc = fma(tmp, sa[row, kb] * sb[kb, n-block], acc)`; ue8m0 scales: docs/ptx_facts/sm100_formats.md §1.

Who loads the scales: the consumer threads, with plain `ld.global` (as DeepGEMM's sm90 fp8 GEMM
reads B's 128x128 scales; CUTLASS's blockwise sm90 mainloop copies both into shared memory in the
producer instead). Per 128 of K a thread needs only one sa per accumulator row it owns (2 per m64
block: rows 16w + g and + 8) and one sb per 128-column block of its tile (1, or BN/128), so the
loads are a handful of scalars per k-tile, issued at the top of the k-tile before the ring wait:
their latency hides behind the full-barrier wait and the wgmmas, and the producer's TMA ring, its
barriers' byte counts and the shared-memory plan stay as they are.

Addressing: the kernel takes `scale_a`, `scale_b` (.u64) and the element strides
`sa_row_stride`, `sa_k_stride`, `sb_k_stride`, `sb_n_stride` (.u32) of the logical (M, Kb) and
(Kb, Nb) arrays, so any storage works: row-major, or DeepGEMM's TMA-friendly M-major sa (its
(Kb, M) array's transpose: strides (1, M)). Per tile each thread forms a pointer per owned row
(clamped to M - 1) and per n-block (clamped to Nb - 1): rows and columns past the edge load a
real scale and are never stored. Per K-block kb the offsets kb * k_stride are added.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, B64, F32, S64, U8, U32
from ...schedule.block_scale import SCALE_BLOCK_K
from .wgmma_layouts import accumulator_coord

if TYPE_CHECKING:
    from ...schedule.schedule import Schedule
    from .context import Sm90Context, TmaOperands
    from .plan import HopperPlan

#: The kernel parameters block scaling appends (after the epilogue's vectors): pointers, then strides.
POINTER_PARAMS = ("scale_a", "scale_b")
STRIDE_PARAMS = ("sa_row_stride", "sa_k_stride", "sb_k_stride", "sb_n_stride")
#: A grouped GEMM's scales (targets/sm90/grouped.py) add the element strides between the groups'
#: sa (masked: (G, max_m, Kb); 0 for contiguous, whose sa is (M_total, Kb)) and sb ((G, Kb, Nb)).
GROUP_STRIDE_PARAMS = ("sa_group_stride", "sb_group_stride")


def n_blocks_per_tile(bn: int) -> int:
    """128-column scale blocks one tile's columns span (BN divides 128 or is a multiple of it)."""
    return max(1, bn // SCALE_BLOCK_K)


def chunks_per_k_tile(bk: int) -> int:
    return max(1, bk // SCALE_BLOCK_K)


def block_scale_registers(plan: "HopperPlan", s: "Schedule") -> int:
    """32-bit registers a consumer thread holds for the scales through the k-loop: a 64-bit
    pointer per owned row and per n-block, and one factor per (row, n-block, chunk of the k-tile)."""
    rows = 2 * plan.rows_per_consumer // 64
    blocks = n_blocks_per_tile(s.bn)
    return 2 * (rows + blocks) + rows * blocks * chunks_per_k_tile(s.bk)


class BlockScales:
    """One consumer thread's scale pointers (per tile) and factors (per k-tile)."""

    def __init__(self, ctx: "Sm90Context"):
        self.ctx, self.b = ctx, ctx.b
        bs = ctx.g.block_scale
        assert bs is not None
        self.bs = bs
        self.rows = 2 * ctx.plan.rows_per_consumer // 64
        self.blocks = n_blocks_per_tile(ctx.s.bn)
        self.chunks = chunks_per_k_tile(ctx.s.bk)
        self.shift = bs.itemsize.bit_length() - 1
        self.row_ptr: list[VReg] = []
        self.last_block_k: VReg | None = None   # ceil(K/128) - 1, where a k-tile has several chunks
        self.col_ptr: list[VReg] = []
        #: factors[chunk][(row, block)]: sa * sb of the k-tile's chunks
        self.factors: list[dict[tuple[int, int], VReg]] = []

    def _pointer(self, base: VReg, index: VReg, stride: str) -> VReg:
        ctx = self.ctx
        off = ptx.mul_wide(ctx.b, U32, index, ctx.dim(stride))
        if self.shift:
            off = ptx.shl(ctx.b, B64, off, Imm(str(self.shift)))
        return ptx.add(ctx.b, S64, base, off)

    def begin_tile(self, ops: "TmaOperands") -> None:
        """Pointers to sa[row, 0] of each accumulator row the thread owns and sb[0, n-block] of each
        128-column block of the tile (clamped into the arrays: an edge tile's overhang is never stored)."""
        ctx, b, plan = self.ctx, self.b, self.ctx.plan
        b.comment(f"block scales ({self.bs.dtype}): this thread's {self.rows} rows of sa and the tile's "
                  f"{self.blocks} n-block(s) of sb, clamped to M - 1 and ceil(N/128) - 1")
        row0 = ptx.add(ctx.b, U32, ops.tile.bm0, ctx.ex.emit(accumulator_coord(0)[0]))
        if plan.consumers > 1:
            row0 = ptx.mad(ctx.b, U32, ops.warpgroup, Imm(str(plan.rows_per_consumer)), row0)
        # a grouped tile's rows are clamped into its own group (a contiguous tile straddling the
        # next group reads that group's A rows, never stored: their scales need only be in bounds)
        last_row = ptx.sub(ctx.b, U32, ctx.dim("M") if ops.rows_end is None else ops.rows_end, Imm("1"))
        base_a, base_b = self.group_bases(ops)
        self.row_ptr = []
        for r in range(self.rows):
            row = ptx.add(ctx.b, U32, row0, Imm(str(64 * (r >> 1) + 8 * (r & 1)))) if r else row0
            row = ptx.min_(ctx.b, U32, row, last_row)
            self.row_ptr.append(self._pointer(base_a, row, "sa_row_stride"))
        last_block = ptx.sub(ctx.b, U32, self.ctx.ceil_div(ctx.dim("N"), SCALE_BLOCK_K), Imm("1"))
        first = ptx.shr(ctx.b, U32, ops.tile.bn0, Imm(str(SCALE_BLOCK_K.bit_length() - 1)))
        if self.chunks > 1:
            self.last_block_k = ptx.sub(ctx.b, U32, self.ctx.ceil_div(ctx.dim("K"), SCALE_BLOCK_K), Imm("1"))
        self.col_ptr = []
        for j in range(self.blocks):
            nb = ptx.add(ctx.b, U32, first, Imm(str(j))) if j else first
            nb = ptx.min_(ctx.b, U32, nb, last_block)
            self.col_ptr.append(self._pointer(base_b, nb, "sb_n_stride"))

    def group_bases(self, ops: "TmaOperands") -> tuple[VReg, VReg]:
        """sa and sb of the tile's group: the pointers moved by group * the group strides (sa
        only when masked: a contiguous sa's rows are M_total's); the pointers themselves when not
        grouped."""
        ctx = self.ctx
        base_a, base_b = ctx.ptr["scale_a"], ctx.ptr["scale_b"]
        if ops.group is None:
            return base_a, base_b
        if ctx.g.grouping == "masked":
            base_a = self._pointer(base_a, ops.group, GROUP_STRIDE_PARAMS[0])
        return base_a, self._pointer(base_b, ops.group, GROUP_STRIDE_PARAMS[1])

    def _load(self, ptr: VReg, kb: VReg, stride: str) -> VReg:
        ctx = self.ctx
        addr = self._pointer(ptr, kb, stride)
        if self.bs.dtype == "f32":
            return ptx.load(ctx.b, "global", F32, Addr(addr))
        raw = ptx.load(ctx.b, "global", U8, Addr(addr))   # ue8m0: the biased exponent e -> 2^(e-127)
        bits = ptx.shl(ctx.b, B32, raw, Imm("23"))
        return ptx.mov(ctx.b, F32, bits)

    def load_k_tile(self, kt: VReg) -> None:
        """The k-tile's factors sa[row, kb] * sb[kb, block] for each of its 128-K chunks, loaded at
        the top of the k-tile (before the ring wait) so the loads overlap the wait and the wgmmas."""
        ctx, s = self.ctx, self.ctx.s
        b = self.b
        b.comment(f"block scales of k-tile kt: K-block kb = kt * {s.bk} / 128"
                  + (f" + chunk (0..{self.chunks - 1})" if self.chunks > 1 else "")
                  + f"; {self.rows} sa x {self.blocks} sb loads per chunk, their products the promotion's factors")
        self.factors = []
        for c in range(self.chunks):
            kb = self.k_block(kt, c)
            sa = [self._load(p, kb, "sa_k_stride") for p in self.row_ptr]
            sb = [self._load(p, kb, "sb_k_stride") for p in self.col_ptr]
            self.factors.append({(r, j): ptx.mul(ctx.b, F32, sa[r], sb[j])
                                 for r in range(self.rows) for j in range(self.blocks)})

    def k_block(self, kt: VReg, chunk: int) -> VReg:
        """The K-block of chunk `chunk` of k-tile kt: kt * BK / 128 + chunk (BK divides 128 or is a
        multiple of it, so a chunk never straddles two blocks)."""
        ctx, bk = self.ctx, self.ctx.s.bk
        if bk < SCALE_BLOCK_K:
            return ptx.shr(ctx.b, U32, kt, Imm(str((SCALE_BLOCK_K // bk).bit_length() - 1)))
        kb = ptx.mul(ctx.b, U32, kt, Imm(str(bk // SCALE_BLOCK_K))) if bk > SCALE_BLOCK_K else kt
        if not chunk:
            return kb
        # a wide last k-tile's later chunks may lie wholly past K (TMA filled them with zeros, so
        # their temporary is 0): their K-block is clamped into sa and sb, not read past them
        return ptx.min_(ctx.b, U32, ptx.add(ctx.b, U32, kb, Imm(str(chunk))), self.last_block_k)

    def factor(self, chunk: int, frag: int, reg: int) -> VReg:
        """The factor of accumulator register `reg` of m64 block `frag` in chunk `chunk` of the k-tile."""
        row = 2 * frag + ((reg >> 1) & 1)
        block = (8 * (reg >> 2)) // SCALE_BLOCK_K if self.blocks > 1 else 0
        return self.factors[chunk][(row, block)]
