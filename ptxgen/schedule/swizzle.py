"""One shared-memory swizzle value, CuTe's `Swizzle<B, M, S>`, and everything derived from it.

A swizzle permutes byte offsets: bits [M, M+B) are XORed with bits [M+S, M+S+B) (B bits, the
M low bits of a 2^M-byte unit kept, S the distance to the key bits). Every swizzled shared tile
in the kernels is one of these (docs/ptx_facts/shared_memory.md §8):

* TMA boxes and wgmma operand tiles: `Swizzle<B, 4, 3>` on the absolute shared address, B = 3, 2,
  1, 0 for the 128B, 64B, 32B and no-swizzle modes (tma.md "Swizzle modes", wgmma.md §9c);
* the sm_80 cp.async / ldmatrix stage tiles: `Swizzle<min(c, 3), 4, max(c, 3)>` for rows of 2^c
  16-byte chunks (the 128B pattern for 128-byte rows), on the tile-relative offset;
* the f32 epilogue staging tile: `Swizzle<1 or 2, 4, 3>` on the byte offset within a row.

From the value come the address XOR (on integers, or on index expressions by row and chunk),
the wgmma descriptor's swizzle code and its LBO/SBO, the CUtensorMapSwizzle enum, the name the
tensor-map APIs take ("128B"), and the alignment at which the pattern starts. The module imports
nothing, so the schedule, the emitters and the runtime can all use it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

#: Anything with the integer bit operators: an int, or an index expression (`emit.index.Expr`).
Bits = TypeVar("Bits")

#: The 16-byte unit every swizzle here moves (a core-matrix row, one cp.async/ldmatrix chunk).
UNIT_BITS = 4
#: TMA and wgmma key the XOR on address bits 7.. (one 128-byte line above the unit bits).
TMA_SHIFT = 3
#: wgmma descriptor bits 63-62 per B (wgmma.md §9c: 0 none, 1 128B, 2 64B, 3 32B).
_DESCRIPTOR_CODE = {0: 0, 3: 1, 2: 2, 1: 3}


@dataclass(frozen=True)
class Swizzle:
    """CuTe's Swizzle<B, M, S> on byte offsets: offset ^ ((offset & yyy_mask) >> S)."""

    bits: int    # B: how many bits the XOR changes
    base: int    # M: low bits kept (the unit is 2^M bytes)
    shift: int   # S: distance from the changed bits up to the key bits

    def __post_init__(self) -> None:
        if self.bits < 0 or self.base < 0 or self.shift < self.bits:
            raise ValueError(f"Swizzle<{self.bits}, {self.base}, {self.shift}>: B and M must be >= 0 and "
                             f"S >= B (key bits above the changed bits); use e.g. Swizzle(3, 4, 3)")

    # -- the permutation -------------------------------------------------------------------------
    @property
    def mask(self) -> int:
        """The B-bit mask, in units (2^B - 1)."""
        return (1 << self.bits) - 1

    @property
    def yyy_mask(self) -> int:
        """The key bits of a byte offset."""
        return self.mask << (self.base + self.shift)

    @property
    def zzz_mask(self) -> int:
        """The bits the key is XORed into."""
        return self.mask << self.base

    def __call__(self, offset: int) -> int:
        """The physical byte offset of logical byte offset `offset`."""
        return offset ^ ((offset & self.yyy_mask) >> self.shift)

    def permute_units(self, unit: Bits) -> Bits:
        """The permutation on 2^M-byte unit indices keyed by the unit itself:
        unit ^ ((unit >> S) & mask), equal to `self(unit << M) >> M`."""
        return unit ^ ((unit >> self.shift) & self.mask)

    def permute_row_unit(self, row: Bits, unit: Bits, pitch: int) -> Bits:
        """The physical unit of unit `unit` of tile row `row`, rows `pitch` bytes apart: the same
        permutation as `self(row * pitch + (unit << M))`, written with the row index as the key so
        the emitted code shifts the row rather than its byte offset. Needs a power-of-two pitch
        at most 2^(M+S) (key bits at or above the row bits)."""
        row_bits = pitch.bit_length() - 1
        key_shift = self.base + self.shift - row_bits
        if pitch <= 0 or pitch & (pitch - 1) or key_shift < 0:
            raise ValueError(f"{self}: rows of {pitch} bytes cannot key the XOR by row index; "
                             f"the pitch must be a power of two <= {1 << (self.base + self.shift)}")
        return unit ^ ((row >> key_shift) & self.mask)

    @property
    def period(self) -> int:
        """Bytes after which the pattern repeats: 2^(B+M+S)."""
        return 1 << (self.bits + self.base + self.shift)

    @property
    def alignment(self) -> int:
        """Where a tile must start for offset and absolute-address forms to agree: the period (1024
        for 128B, 512 for 64B, 256 for 32B; wgmma.md §9c base offset 0); without a swizzle (B = 0)
        only the 2^M-byte unit."""
        return self.period if self.bits else 1 << self.base

    # -- the TMA / wgmma modes: Swizzle<B, 4, 3>, B = 0..3 ---------------------------------------
    @property
    def is_tma_mode(self) -> bool:
        return self.base == UNIT_BITS and self.shift == TMA_SHIFT and self.bits <= 3

    def _mode(self) -> None:
        if not self.is_tma_mode:
            raise ValueError(f"{self} is not a TMA/wgmma swizzle mode (those are Swizzle<0..3, 4, 3>)")

    @property
    def width(self) -> int:
        """Bytes of one swizzled row, the span the XOR covers (16: one core-matrix row, no swizzle)."""
        self._mode()
        return 16 << self.bits

    @property
    def atom_bytes(self) -> int:
        """One pattern atom: 8 rows of `width` bytes (one 8x16-byte core matrix without a swizzle)."""
        return 8 * self.width

    @property
    def name(self) -> str:
        """The mode as the tensor-map APIs spell it: "none", "32B", "64B" or "128B"."""
        return f"{self.width}B" if self.bits else "none"

    @property
    def descriptor_code(self) -> int:
        """The wgmma descriptor's bits 63-62 (wgmma.md §9c): 0 none, 1 128B, 2 64B, 3 32B."""
        self._mode()
        return _DESCRIPTOR_CODE[self.bits]

    @property
    def umma_descriptor_code(self) -> int:
        """The sm_100a (tcgen05) descriptor's bits 63-61 (docs/ptx_facts/tcgen05.md §12d): 0 none,
        2 128B, 4 64B, 6 32B, i.e. twice the wgmma code (the field moved down one bit)."""
        return 2 * self.descriptor_code

    @property
    def tensor_map_enum(self) -> int:
        """CUtensorMapSwizzle (tma.md §9d′: NONE 0, 32B 1, 64B 2, 128B 3): B itself."""
        self._mode()
        return self.bits

    @property
    def tensor_map_name(self) -> str:
        """The driver's enum member name, CU_TENSOR_MAP_SWIZZLE_{NONE,32B,64B,128B}."""
        return f"CU_TENSOR_MAP_SWIZZLE_{self.name.upper()}"

    def lbo_sbo(self, major: str, mn: int, k: int, esize: int) -> tuple[int, int]:
        """The descriptor's leading- and stride-dimension byte offsets for an `mn` x `k` tile of
        `esize`-byte elements in wgmma's canonical `major` ("K" or "MN") layout (wgmma.md §9c
        "Canonical layouts"): atoms of 8 rows stack `atom_bytes` apart (SBO), except K-major without
        a swizzle, whose 8-row groups hold whole K rows; LBO steps to the next core matrix along
        K (no swizzle: 128; swizzled K-major: unused, 16 written as CUTLASS does) or, MN-major,
        to the next `width`-wide block of MN."""
        if major == "K":
            return (16, self.atom_bytes) if self.bits else (self.atom_bytes, 8 * k * esize)
        return (k * self.width if self.bits else self.atom_bytes * (mn * esize // 16)), self.atom_bytes

    @classmethod
    def tma(cls, bits: int) -> "Swizzle":
        return cls(bits, UNIT_BITS, TMA_SHIFT)

    @classmethod
    def of_width(cls, width: int | None) -> "Swizzle":
        """The mode whose rows are `width` bytes (128, 64, 32; 0, 16 or None: no swizzle)."""
        for mode in TMA_MODES:
            if width == mode.width or (not mode.bits and not width):
                return mode
        raise ValueError(f"no swizzle mode has {width}-byte rows: use 128, 64, 32, or 0 for none")

    @classmethod
    def named(cls, name: str) -> "Swizzle":
        """The mode named "none", "32B", "64B" or "128B"."""
        for mode in TMA_MODES:
            if name == mode.name:
                return mode
        raise ValueError(f"swizzle {name!r} is not one of {[m.name for m in TMA_MODES]}")

    @classmethod
    def of_descriptor_code(cls, code: int) -> "Swizzle":
        """The mode a descriptor's bits 63-62 select."""
        for mode in TMA_MODES:
            if code == mode.descriptor_code:
                return mode
        raise ValueError(f"descriptor swizzle code {code} is not 0..3")

    def __str__(self) -> str:
        return f"Swizzle<{self.bits},{self.base},{self.shift}>"


#: The TMA / wgmma modes, no swizzle first, then 32B, 64B, 128B (B = 0..3).
TMA_MODES: tuple[Swizzle, ...] = tuple(Swizzle.tma(b) for b in range(4))
SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = TMA_MODES
#: Shared tiles that any mode may use start here (the widest pattern's period, 1024 bytes).
WIDEST_ALIGNMENT = SWIZZLE_128B.alignment


def chunk_swizzle(chunks_per_row: int) -> Swizzle:
    """The sm_80 stage tile's swizzle for rows of `chunks_per_row` (a power of two) 16-byte chunks:
    c = log2 chunks, Swizzle<min(c,3), 4, max(c,3)>: the 128B pattern for 128-byte rows, the row
    index's low bits for wider rows, the bits just above a 128-byte line for narrower ones, so 8
    consecutive rows always land in 8 distinct bank groups (shared_memory.md §8)."""
    c = chunks_per_row.bit_length() - 1
    if chunks_per_row <= 0 or chunks_per_row & (chunks_per_row - 1):
        raise ValueError(f"an XOR-swizzled row needs a power-of-two number of chunks, got {chunks_per_row}")
    return Swizzle(min(c, 3), UNIT_BITS, max(c, TMA_SHIFT))
