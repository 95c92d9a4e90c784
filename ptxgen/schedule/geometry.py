"""Derived geometry of a schedule, shared by the verifier and the lowering.

Everything here is a pure function of (Gemm, Schedule): how each operand tile sits in shared
memory, how threads split its 16-byte copies, and how many registers the tiles need.
"""
from __future__ import annotations

from dataclasses import dataclass

from .grouping import contiguous_tiles_bound
from .problem import Gemm
from .rules import rules_for
from .schedule import Schedule
from .streamk import stream_k_grid
from .swizzle import WIDEST_ALIGNMENT, Swizzle, chunk_swizzle

CHUNK_BYTES = 16  # one cp.async.cg copy, one ldmatrix row


def align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass(frozen=True)
class OperandTile:
    """One operand's block tile as stored in shared memory: `rows` x `cols`, cols contiguous.

    The tile keeps the operand's global storage order, so global->shared copies move whole
    16-byte chunks of contiguous elements. `k_along_rows` says whether K runs down the rows
    (a row-major B, K x N) or along the contiguous columns (A row-major, B column-major).
    """

    name: str
    rows: int
    cols: int
    elem_bytes: int
    k_along_rows: bool
    smem_layout: str
    threads: int
    #: Bytes one copy instruction moves: 16 (cp.async.cg) unless the operands' alignment is smaller.
    copy_bytes: int = CHUNK_BYTES
    #: Row padding of the "pad" layout: one 16-byte chunk, or 32 bytes where wmma needs every
    #: row 32-byte aligned.
    pad_bytes: int = CHUNK_BYTES

    @property
    def scalar_fragments(self) -> bool:
        """Whether mma fragments come from scalar shared loads instead of ldmatrix: the tile has M
        (A) or N (B) contiguous and 32- or 8-bit elements, which `.trans` (16-bit only) cannot
        transpose, so each fragment element is read from its own k row."""
        return self.k_along_rows and self.elem_bytes != 2

    @property
    def row_bytes(self) -> int:
        return self.cols * self.elem_bytes

    @property
    def chunks_per_row(self) -> int:
        return self.row_bytes // CHUNK_BYTES

    @property
    def units_per_row(self) -> int:
        """Copies per tile row (16-byte chunks, or narrower units for less-aligned operands)."""
        return self.row_bytes // self.copy_bytes

    @property
    def units(self) -> int:
        return self.rows * self.units_per_row

    @property
    def copies_per_thread(self) -> int:
        return self.units // self.threads

    @property
    def pitch(self) -> int:
        """Bytes between consecutive rows in shared memory ("pad" adds one 16-byte chunk)."""
        return self.row_bytes + (self.pad_bytes if self.smem_layout == "pad" else 0)

    @property
    def align(self) -> int:
        """Swizzled tiles start on the widest pattern's period (1024 B): the XOR here is
        tile-relative, so this only keeps the offset and address forms equal (shared_memory.md §8)."""
        return WIDEST_ALIGNMENT if self.smem_layout == "swizzle" else 128

    @property
    def stage_bytes(self) -> int:
        return align_up(self.rows * self.pitch, self.align)

    @property
    def swizzle_pattern(self) -> Swizzle | None:
        """The XOR of a "swizzle" tile (`swizzle.chunk_swizzle`: it follows the row width, so 8
        consecutive rows always land in 8 distinct bank groups), None for pad and plain tiles."""
        return chunk_swizzle(self.chunks_per_row) if self.smem_layout == "swizzle" else None


def operand_tiles(g: Gemm, s: Schedule) -> tuple[OperandTile, OperandTile]:
    bm, bn, bk = s.block
    cb = min(CHUNK_BYTES, g.alignment())
    pad = 32 if s.instruction == "wmma" else CHUNK_BYTES
    if g.a_layout == "row":  # stored M x K, K contiguous
        a = OperandTile("A", bm, bk, g.in_bytes, False, s.smem_layout, s.threads, cb, pad)
    else:  # stored K x M, M contiguous
        a = OperandTile("A", bk, bm, g.in_bytes, True, s.smem_layout, s.threads, cb, pad)
    if g.b_layout == "col":  # stored N x K, K contiguous
        b = OperandTile("B", bn, bk, g.in_bytes, False, s.smem_layout, s.threads, cb, pad)
    else:  # stored K x N, N contiguous
        b = OperandTile("B", bk, bn, g.in_bytes, True, s.smem_layout, s.threads, cb, pad)
    return a, b


def edges(g: Gemm, s: Schedule) -> tuple[bool, bool, bool]:
    """Whether M, N and K end inside a block tile, so copies and stores need bounds checks. A grouped
    GEMM's groups end at any row (their sizes are read on the device), so M always needs them; a
    k-contiguous one's end at any k, so K does."""
    k_grouped = g.grouping == "k-contiguous"
    return (g.grouped and not k_grouped) or g.m % s.bm != 0, g.n % s.bn != 0, k_grouped or g.k % s.bk != 0


@dataclass(frozen=True)
class StagingLayout:
    """The C staging tile of an epilogue via shared memory, and how threads drain it.

    16- and 8-bit outputs of mma.sync kernels are staged `typed`: in the output dtype, after the
    epilogue math, so the tile holds exactly the bytes that go to C (half or a quarter of an f32
    tile). Otherwise elements are f32 (the epilogue math runs in the drain), except on the wmma
    path with f16 accumulation: its opaque f16 fragments can only leave through
    `wmma.store.d.f16`, so that tile holds f16 (converting in registers would need the
    unspecified fragment mapping).
    """

    rows: int
    pitch: int  # bytes per row: BN elements plus 32 bytes, so fragment writes avoid bank conflicts
    chunk_elems: int  # output elements per store (16 bytes, or C's alignment)
    chunks_per_row: int
    chunks_per_thread: int
    threads: int

    @property
    def bytes(self) -> int:
        return self.rows * self.pitch

    #: wmma.store.d writes a plain strided tile, so the XOR below is only for mma fragments.
    plain: bool = False
    #: Bytes per staged element: 4 (f32), 2 for wmma's f16 accumulator fragments, or the output's.
    elem_bytes: int = 4
    #: Staged in the output dtype after the epilogue math (the drain only copies bytes to C).
    typed: bool = False

    @property
    def swizzle_pattern(self) -> Swizzle | None:
        """Drain chunks of 2 or 4 staged 16-byte units (16-bit or 8-bit outputs) put a quarter-warp's
        16-byte reads 32 or 64 bytes apart, hitting only 4 or 2 of the 8 bank groups; XORing the
        unit's low bits with the bits just above a 128-byte line (Swizzle<1 or 2, 4, 3> on the
        byte offset within a row) spreads them over all 8. None: no swizzle (one-unit chunks,
        wmma's plain tile, or a typed tile)."""
        units = 1 if self.plain or self.typed else max(1, self.chunk_elems * 4 // CHUNK_BYTES)
        return Swizzle.tma(units.bit_length() - 1) if units > 1 else None


#: Auto-staging never needs more shared memory than every target offers (99 KB on sm_86/sm_89).
AUTO_STAGING_MAX_BYTES = 99 * 1024


def store_chunk_elems(g: Gemm) -> int:
    """Output elements per staged store: 16 bytes, or fewer where C is less aligned."""
    return max(1, min(CHUNK_BYTES, g.out_alignment()) // g.out_bytes)


def staging_fits(g: Gemm, s: Schedule) -> bool:
    """Whether the staged epilogue's chunks split evenly and uniformly over the threads."""
    v = store_chunk_elems(g)
    cpr = s.bn // v
    chunks = s.bm * cpr
    return s.bn % v == 0 and chunks % s.threads == 0 and not (s.threads % cpr and cpr % s.threads)


def typed_pitch(row_bytes: int) -> int:
    """Row pitch of a typed staging tile: whole 16-byte units (the drain's reads), an odd number
    of them, so the 8 rows of a warp's fragment-pair writes (4 threads x 2 elements each, at most
    16 bytes per row) start 16 x odd bytes apart and cover distinct banks."""
    units = -(-row_bytes // CHUNK_BYTES)
    return (units + 1 - units % 2) * CHUNK_BYTES


def staging_layout(g: Gemm, s: Schedule) -> StagingLayout | None:
    """The staging tile, or None when the epilogue stores straight from registers.

    Default (None): stage when 16-byte stores are possible (alignment 16), the drain fits, and
    partial sums are not being added atomically (those are scalar reds either way).
    """
    want = s.epilogue_via_smem
    wmma = s.instruction == "wmma"
    if wmma:  # opaque fragments leave the warp only through wmma.store
        want = True
    atomic = s.split_k > 1 and s.split_k_mode == "atomic"
    if want is None:
        want = g.out_alignment() >= CHUNK_BYTES and staging_fits(g, s) and not atomic
    if not want:
        return None
    v = store_chunk_elems(g)
    cpr = s.bn // v
    if not wmma and not atomic and g.out_bytes < 4:
        st = StagingLayout(s.bm, typed_pitch(s.bn * g.out_bytes), v, cpr, s.bm * cpr // s.threads, s.threads,
                           elem_bytes=g.out_bytes, typed=True)
    else:
        eb = 2 if wmma and g.accumulator == "f16" else 4
        st = StagingLayout(s.bm, s.bn * eb + 32, v, cpr, s.bm * cpr // s.threads, s.threads, plain=wmma,
                           elem_bytes=eb)
    if s.epilogue_via_smem is None and not wmma and st.bytes > AUTO_STAGING_MAX_BYTES:
        return None
    return st


def describe_staging(g: Gemm, s: Schedule) -> str:
    """How the epilogue stores C, for PTX headers and `ptxgen info`."""
    st = staging_layout(g, s)
    if st is None:
        return "stored from registers"
    what = (f"in {g.out_dtype} after the math" if st.typed
            else f"in {'f16' if st.elem_bytes == 2 else 'f32'} before the math")
    return (f"staged {what} through {st.bytes} B of shared memory ({st.rows} x {st.pitch} B rows), "
            f"{st.chunk_elems * g.out_bytes} B stores")


def smem_bytes(g: Gemm, s: Schedule) -> int:
    """Total dynamic shared memory: `stages` copies of each operand tile; the epilogue's staging
    tile and split-K flag reuse those bytes (the planner places them over the stages)."""
    a, b = operand_tiles(g, s)
    tiles = align_up(s.stages * a.stage_bytes, b.align) + s.stages * b.stage_bytes
    st = staging_layout(g, s)
    epilogue = st.bytes if st else 0
    if s.split_k > 1 and s.split_k_mode == "workspace":
        epilogue = align_up(epilogue, 4) + 4
    return max(tiles, epilogue)


#: Registers an int8 fragment register being packed from scalar loads holds: its 4 loaded bytes.
PACK_TEMPORARIES = 4


#: Registers the cross-k-tile fragment prefetch keeps live beside the estimate: the next stage's
#: address bases and the copy pointers, live beside the carried fragments. Calibrated with
#: nvJitLink 13.5: 64x64 warp tiles went from 209 to 232 registers (tile kernels, est 216), and
#: Stream-K ones (est 232, 255 registers without it) spilled with it.
PREFETCH_REGISTERS = 24
#: The cross-k-tile prefetch applies to k-tiles of 2 to this many mma k-steps: past that the
#: boundary is a small share of a k-tile, while the assembler hoists more loads across it (a 64x64
#: tf32 warp tile with 8 k-steps spilled 672 B with it, 48 B without).
MAX_PREFETCH_K_STEPS = 4


def register_limit(s: Schedule, regs_per_sm: int = 65536, max_per_thread: int = 255) -> int:
    """Registers a thread may use so that one CTA fits the register file (every target has 64 K)."""
    return min(max_per_thread, regs_per_sm // s.threads // 8 * 8)


def mma_k_steps(g: Gemm, s: Schedule) -> int:
    """mma k-steps per k-tile: one step covers 32 bytes of K (k16 f16/bf16, k8 tf32, k32 int8)."""
    return s.bk * g.in_bytes // 32


def prefetches_across_k_tiles(g: Gemm, s: Schedule) -> bool:
    """Whether the main loop loads k-tile i+1's first fragments under k-tile i's last mma (CUTLASS's
    multistage order). It needs mma.sync fragments (wmma's are opaque), a pipelined loop, 2 to
    MAX_PREFETCH_K_STEPS k-steps per k-tile (so the carried registers are free when reloaded), and
    PREFETCH_REGISTERS to spare under the register limit."""
    k_steps = mma_k_steps(g, s)
    return (s.frag_double_buffer and s.instruction != "wmma" and s.stages > 1
            and 1 < k_steps <= MAX_PREFETCH_K_STEPS
            and _base_estimate(g, s)["total"] + PREFETCH_REGISTERS <= register_limit(s))


def fragment_buffering(g: Gemm, s: Schedule) -> str:
    """How the fragments are double-buffered, for headers and `ptxgen info`."""
    if not s.frag_double_buffer:
        return "off"
    return "on, across k-tiles" if prefetches_across_k_tiles(g, s) else "on"


#: Global->shared copies per thread per k-tile that cost one register beside the estimate: the
#: assembler keeps part of each unrolled copy's address and bounds predicate live across the loop.
#: Calibrated against nvJitLink 13.5 (bench/register_sample.py, bench/results/2026-11-26-register-
#: sample-*): with 2-byte copies (odd K, bf16) 64 copies took 232-estimate tiles to 254-255
#: registers without spilling and 240-estimate ones into spills; 48 copies spilled a 240 (the
#: spill edge lies between 0.31 and 0.36 registers a copy). Aligned 16-byte copies (8-20 a
#: thread) add 3-7.
COPIES_PER_REGISTER = 3


def register_estimate(g: Gemm, s: Schedule) -> dict[str, int]:
    """Per-thread registers the tiles need: accumulators, fragments, a fixed overhead, and what
    the unrolled global->shared copies keep live (plus the byte temporaries of int8 fragments
    packed from scalar loads, and what the cross-k-tile fragment prefetch keeps live where it
    applies). The copies' share is left out of the prefetch decision (`_base_estimate`), which
    sets the emitted code."""
    est = _base_estimate(g, s)
    if prefetches_across_k_tiles(g, s):
        est["prefetch"] = PREFETCH_REGISTERS
        est["total"] += PREFETCH_REGISTERS
    a, b = operand_tiles(g, s)
    est["copies"] = -(-(a.copies_per_thread + b.copies_per_thread) // COPIES_PER_REGISTER)
    est["total"] += est["copies"]
    return est


def _base_estimate(g: Gemm, s: Schedule) -> dict[str, int]:
    wm, wn = s.warp_tile
    mi, ni = wm // 16, wn // 8
    bufs = 2 if s.frag_double_buffer else 1
    frag_regs = (mi + ni // 2) * 8 if s.instruction == "wmma" else mi * 4 + ni * 2  # wmma holds A/B twice
    est = {
        "accumulators": mi * ni * (2 if g.acc_dtype == "f16" else 4),
        "fragments": bufs * frag_regs,
        "addressing": 24 + (16 if s.stream_k else 0),  # Stream-K: the decomposition and unit state
    }
    packed = [t for t in operand_tiles(g, s) if t.scalar_fragments and t.elem_bytes == 1]
    if packed:
        est["byte packing"] = PACK_TEMPORARIES * len(packed)
    est["total"] = sum(est.values())
    return est


def k_tiles(g: Gemm, s: Schedule) -> int:
    return -(-g.k // s.bk)


def grid_for(g: Gemm, s: Schedule, sms: int = 108) -> tuple[int, int, int]:
    """The launch grid; Stream-K's and a target's persistent grids use the schedule's `sms`, else
    `sms` given (the device's SM count on a GPU, the target's in the simulator)."""
    if s.stream_k:
        return (stream_k_grid(g, s, sms), 1, 1)
    target_rules = rules_for(s.instruction)
    own = target_rules.grid(g, s, sms) if target_rules is not None else None
    if own is not None:  # the target's own grid, e.g. sm_90a's persistent one (CTA x walks x, x + gridDim.x, ...)
        return own
    tm, tn = -(-g.m // s.bm), -(-g.n // s.bn)
    if g.grouping == "contiguous":  # m-tiles numbered over the groups, the most any offs can need (emit/groups.py)
        return (tn, contiguous_tiles_bound(g, s.bm), 1)
    if g.grouping in ("masked", "k-contiguous"):  # ctaid.z is the group: the m-tiles of its max_m slot, or of M
        return (tn, tm, g.groups)
    z = g.batch * s.split_k
    if s.raster == "grouped":
        return (tm * tn, 1, z)
    return (tn, tm, z)


def split_k_workspace(g: Gemm, s: Schedule) -> tuple[int, int]:
    """(f32 workspace elements, u32 tile counters) a workspace split-K kernel needs; (0, 0) otherwise.

    The workspace holds one f32 partial tile per split, batch and output tile, padded to whole
    tiles so partials need no bounds checks: [split][batch][tiles_m*BM][tiles_n*BN].
    """
    if s.split_k == 1 or s.split_k_mode != "workspace":
        return 0, 0
    tm, tn = -(-g.m // s.bm), -(-g.n // s.bn)
    return s.split_k * g.batch * tm * s.bm * tn * s.bn, g.batch * tm * tn
