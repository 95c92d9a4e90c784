"""The wgmma shared-memory matrix descriptor and the canonical layouts it describes
(docs/ptx_facts/wgmma.md, "Matrix descriptor" and "Canonical layouts"; PTX ISA "Matrix Descriptor
Format" and "Shared Memory Matrix Layout").

A descriptor is a 64-bit value, identical across the warpgroup:
  bits 13-0  start address >> 4 (shared window, 18-bit address)
  bits 29-16 leading-dimension byte offset (LBO) >> 4
  bits 45-32 stride-dimension byte offset (SBO) >> 4
  bits 51-49 base offset (0 when the swizzle pattern starts on its natural boundary)
  bits 63-62 swizzle: 0 none, 1 128B, 2 64B, 3 32B (NOT the CUtensorMapSwizzle order; both come
             from the one `Swizzle` value, schedule/swizzle.py)
All other bits are 0 on sm_90 (the sm_100 descriptor's fixed 0b001 at bits 48-46 is not Hopper's).

The layouts here are the ones a TMA box of the same swizzle writes, so the producer (TMA) and the
consumer (wgmma) agree by construction; tests check them against ptxgen.sim's own decoder.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import Builder
from ...ir import Imm, Vec, VReg, ops as ptx
from ...ir.ops import B32, B64, S64, U32
from ...schedule.swizzle import SWIZZLE_128B, Swizzle

_FIELD_LIMIT = 1 << 18     # the 14-bit fields hold bits 17..4 of a byte quantity


def _enc(value: int, what: str) -> int:
    if value < 0 or value % 16 or value >= _FIELD_LIMIT:
        raise ValueError(f"descriptor {what} = {value} bytes: it must be a multiple of 16 below 2**18 "
                         f"(the field keeps bits 17..4); align the shared tile or shrink the offset")
    return value >> 4


@dataclass(frozen=True)
class SmemDescriptor:
    """The fields of one descriptor, in bytes (start is a shared-window address)."""

    start: int
    lbo: int
    sbo: int
    swizzle: Swizzle = SWIZZLE_128B
    base_offset: int = 0

    def encode(self) -> int:
        if not isinstance(self.swizzle, Swizzle) or not self.swizzle.is_tma_mode:
            raise ValueError(f"swizzle {self.swizzle!r} is not a wgmma swizzle mode: pass one of "
                             f"schedule.swizzle.TMA_MODES, e.g. Swizzle.named('128B')")
        if not 0 <= self.base_offset <= 7:
            raise ValueError(f"base offset {self.base_offset} must be 0..7 (3 bits)")
        return (_enc(self.start % _FIELD_LIMIT, "start address") | _enc(self.lbo, "LBO") << 16
                | _enc(self.sbo, "SBO") << 32 | self.base_offset << 49
                | self.swizzle.descriptor_code << 62)

    def hi_lo(self) -> tuple[int, int]:
        """(high 32 bits, low 32 bits): the emitter builds the 64-bit value with mov.b64 {lo, hi}
        from a fixed high word and a low word that carries the (run-time) start address."""
        v = self.encode()
        return v >> 32, v & 0xFFFFFFFF


def decode(value: int) -> SmemDescriptor:
    """The fields of a 64-bit descriptor (for reports and round-trip tests)."""
    return SmemDescriptor(start=(value & 0x3FFF) << 4, lbo=((value >> 16) & 0x3FFF) << 4,
                          sbo=((value >> 32) & 0x3FFF) << 4, swizzle=Swizzle.of_descriptor_code((value >> 62) & 3),
                          base_offset=(value >> 49) & 7)


def base_offset_for(pattern_start: int, swizzle: Swizzle) -> int:
    """Base offset field for a swizzled tile whose pattern starts at `pattern_start`: 0 on the
    pattern's natural boundary, else (addr >> 7) & 7 (PTX ISA "Matrix Descriptor Format")."""
    if not swizzle.bits or pattern_start % swizzle.alignment == 0:
        return 0
    return (pattern_start >> 7) & 7


# ---------------------------------------------------------------------------- canonical layouts
@dataclass(frozen=True)
class CanonicalTile:
    """An operand tile `mn x k` (A: M x K, B: N x K) of `esize`-byte elements in shared memory,
    laid out as wgmma's canonical layout for `major` ("K" or "MN") and `swizzle`.

    K-major, swizzled (width W bytes): each row holds W bytes of K; 8 rows form one 8*W-byte atom;
    atoms stack along MN (SBO = 8*W); K beyond W bytes continues in a new block of mn*W bytes.
    LBO is unused with a swizzle; 16 is written (the encoded 1 CUTLASS writes).
    K-major, none: 8x16-byte core matrices of 128 contiguous bytes, adjacent along K (LBO = 128),
    one row of them per 8 MN rows (SBO = 128 * k*esize/16).
    MN-major, swizzled: each row holds W bytes of MN; 8 rows (8 consecutive k) form an atom,
    atoms stack along K (SBO = 8*W); MN beyond W bytes continues in a block of k*W bytes (LBO).
    MN-major, none: core matrices of 8 k-rows x 16 bytes of MN; along MN they are SBO = 128 apart,
    along K (groups of 8) LBO = 128 * mn*esize/16 apart (the roles of LBO and SBO swap).
    """

    mn: int
    k: int
    esize: int
    major: str = "K"
    swizzle: Swizzle = SWIZZLE_128B

    def __post_init__(self) -> None:
        if self.major not in ("K", "MN"):
            raise ValueError(f"major {self.major!r} must be 'K' or 'MN'")
        if not isinstance(self.swizzle, Swizzle) or not self.swizzle.is_tma_mode:
            raise ValueError(f"swizzle {self.swizzle!r} is not a wgmma swizzle mode: pass one of "
                             f"schedule.swizzle.TMA_MODES, e.g. Swizzle.named('128B')")
        w = self.swizzle.width
        along = self.k if self.major == "K" else self.mn
        other = self.mn if self.major == "K" else self.k
        if (along * self.esize) % w or other % 8:
            raise ValueError(f"a {self.major}-major {self.swizzle.name} tile needs the contiguous extent "
                             f"({along} x {self.esize} B) to be a multiple of {w} B and the other extent "
                             f"({other}) a multiple of 8")

    @property
    def width(self) -> int:
        return self.swizzle.width

    @property
    def nbytes(self) -> int:
        return self.mn * self.k * self.esize

    @property
    def lbo(self) -> int:
        return self.swizzle.lbo_sbo(self.major, self.mn, self.k, self.esize)[0]

    @property
    def sbo(self) -> int:
        return self.swizzle.lbo_sbo(self.major, self.mn, self.k, self.esize)[1]

    def offset(self, mn: int, k: int) -> int:
        """Logical byte offset of element (mn, k) from the tile base, before the swizzle."""
        e, w = self.esize, self.width
        if self.major == "K":
            kb = k * e
            if not self.swizzle.bits:
                return (mn // 8) * self.sbo + (kb // 16) * self.lbo + (mn % 8) * 16 + kb % 16
            return (kb // w) * self.mn * w + (mn // 8) * self.sbo + (mn % 8) * w + kb % w
        mb = mn * e
        if not self.swizzle.bits:
            return (mb // 16) * self.sbo + (k // 8) * self.lbo + (k % 8) * 16 + mb % 16
        return (mb // w) * self.lbo + (k // 8) * self.sbo + (k % 8) * w + mb % w

    def address(self, base: int, mn: int, k: int) -> int:
        """Physical shared byte of element (mn, k) for a tile at `base` (aligned to the pattern)."""
        if base % self.swizzle.alignment:
            raise ValueError(f"a {self.swizzle.name} tile must start on a {self.swizzle.alignment}-byte "
                             f"boundary (base offset 0); got {base:#x}")
        return self.swizzle(base + self.offset(mn, k))

    def descriptor(self, base: int, mn0: int = 0, k0: int = 0) -> SmemDescriptor:
        """Descriptor of the sub-tile starting at (mn0, k0) (mn0 a multiple of 8 for K-major, of
        the swizzle width for MN-major; k0 a multiple of one wgmma's K): the start address is the
        unswizzled logical offset, which is how CuTe's descriptor iterator advances along K."""
        if base % self.swizzle.alignment:
            raise ValueError(f"a {self.swizzle.name} tile must start on a {self.swizzle.alignment}-byte "
                             f"boundary; got {base:#x}")
        mn_step = 8 if self.major == "K" else max(self.width, 16) // self.esize
        k_step = 16 // self.esize if self.major == "K" else 8
        if mn0 % mn_step or k0 % k_step or not (0 <= mn0 < self.mn and 0 <= k0 < self.k):
            raise ValueError(f"a {self.major}-major {self.swizzle.name} sub-tile starts at a multiple of {mn_step} "
                             f"along MN and of {k_step} along K inside the {self.mn} x {self.k} tile; "
                             f"got ({mn0}, {k0})")
        return SmemDescriptor(base + self.offset(mn0, k0), self.lbo, self.sbo, self.swizzle, 0)

    def k_step_bytes(self, k_elems: int) -> int:
        """Start-address advance for k_elems more K inside one swizzle row (K-major only)."""
        if self.major != "K" or (k_elems * self.esize) % 16:
            raise ValueError("k steps inside a row apply to K-major tiles, in 16-byte multiples")
        return k_elems * self.esize


# ---------------------------------------------------------------------------- emission
@dataclass(frozen=True)
class DescriptorWords:
    """A descriptor kept as its two 32-bit words until a wgmma needs it: `lo` (start address and
    LBO fields, bits 31..0) and `hi` (SBO, base offset, swizzle; loop-invariant).

    Why split: every offset a kernel adds (stage, warpgroup rows, k-step) lands in the start field,
    bits 13..0 of the low word, without a carry out of bit 31, so a 32-bit add on `lo` is the whole
    arithmetic, as CUTLASS's `GmmaDescriptor` does it (docs/ptx_facts/wgmma.md, "Matrix
    descriptor"). An `add.s64` on the joined value makes ptxas 13.5 rebuild 64-bit uniform pairs
    around every HGMMA (UMOV/UIADD3 pairs, or R2UR under nvJitLink); `join` right at the wgmma
    keeps the low word the only thing that changes."""

    lo: VReg
    hi: VReg


def emit_descriptor_words(b: Builder, smem_addr: VReg, tile: CanonicalTile) -> DescriptorWords:
    """The words of `tile`'s descriptor at the run-time shared-window address `smem_addr` (aligned
    to its swizzle pattern): lo = ((addr >> 4) & 0x3FFF) | the LBO field, hi a constant."""
    hi_fields, lo_fields = SmemDescriptor(0, tile.lbo, tile.sbo, tile.swizzle).hi_lo()
    start, low, high = b.reg("b32"), b.reg("b32"), b.reg("b32")
    b.emit("bfe.u32", start, smem_addr, 4, 14, ndefs=1, comment="descriptor start field: addr[17:4]")
    b.emit("or.b32", low, start, lo_fields, ndefs=1, comment=f"| LBO {tile.lbo} B")
    b.emit("mov.u32", high, hi_fields, ndefs=1, comment=f"SBO {tile.sbo} B, {tile.swizzle.name} swizzle")
    return DescriptorWords(low, high)


def offset_words(b: Builder, words: DescriptorWords, units: VReg | int, comment: str | None = None) -> DescriptorWords:
    """The descriptor `units` 16-byte units further: a 32-bit add on the low word (the start
    field never carries out of bit 31: shared memory is below 2**18 bytes)."""
    if isinstance(units, int):
        if units == 0:
            return words
        units = Imm(str(units))
    lo = b.reg("b32")
    b.emit("add.u32", lo, words.lo, units, ndefs=1, comment=comment)
    return DescriptorWords(lo, words.hi)


def join_words(b: Builder, words: DescriptorWords) -> VReg:
    """The 64-bit descriptor a wgmma reads: mov.b64 {lo, hi}."""
    desc = b.reg("b64")
    b.emit("mov.b64", desc, Vec((words.lo, words.hi)), ndefs=1)
    return desc


def emit_descriptor(b: Builder, smem_addr: VReg, tile: CanonicalTile) -> VReg:
    """The 64-bit descriptor of `tile` at the run-time shared-window address `smem_addr` (aligned to
    its swizzle pattern): a constant high word (SBO, swizzle) and a low word of the start field
    ((addr >> 4) & 0x3FFF) or'ed with the LBO field, joined with mov.b64 {lo, hi}."""
    return join_words(b, emit_descriptor_words(b, smem_addr, tile))


def advance_descriptor(b: Builder, desc: VReg, byte_offset: int, comment: str | None = None) -> VReg:
    """The descriptor `byte_offset` bytes further (as CuTe's descriptor iterator: add offset >> 4 to
    the 64-bit value). Exact while start + offset stays below 2**18, which all shared memory does.
    The kernels' loops use `DescriptorWords` instead (32-bit arithmetic; see there)."""
    if byte_offset % 16:
        raise ValueError(f"descriptor offsets are in 16-byte units; {byte_offset} is not a multiple of 16")
    if byte_offset == 0:
        return desc
    return ptx.add(b, S64, desc, byte_offset >> 4, comment=comment)
