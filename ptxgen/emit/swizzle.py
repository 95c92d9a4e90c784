"""The shared-memory XOR swizzle, as one object, and the tile offsets it places.

Every swizzle in the kernels is the same rule on 16-byte chunks: the chunk index is XORed with
`(key >> shift) & mask`, where the key is the tile row (operand stage tiles, CuTe's
Swizzle<B, 4, S> on byte offsets) or the chunk's own index (the f32 staging tile of the
epilogue, whose drain reads whole rows). Copies, fragment loads and the epilogue all place bytes
through this one object, so writer and reader cannot disagree.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schedule.geometry import OperandTile, StagingLayout
from .index import Expr


@dataclass(frozen=True)
class Swizzle:
    """chunk -> chunk ^ ((key >> shift) & mask), on 16-byte chunk indices."""

    shift: int
    mask: int

    def apply(self, chunk: Expr, key: Expr) -> Expr:
        return chunk ^ ((key >> self.shift) & self.mask)

    @classmethod
    def of_tile(cls, tile: OperandTile) -> "Swizzle | None":
        """An operand stage tile's swizzle (keyed by the tile row), or None for pad and plain
        tiles. The bits follow the row width (`OperandTile.swizzle_bits`,
        docs/ptx_facts/shared_memory.md §8)."""
        if tile.smem_layout != "swizzle":
            return None
        shift, mask = tile.swizzle_bits()
        return cls(shift, mask)

    @classmethod
    def of_staging(cls, st: StagingLayout) -> "Swizzle | None":
        """The f32 staging tile's swizzle (keyed by the 16-byte unit itself: bits above a 128-byte
        line spread a quarter-warp's reads over all bank groups), or None (`st.swizzle_mask`)."""
        return cls(3, st.swizzle_mask) if st.swizzle else None


def smem_offset(row: Expr, chunk: Expr, pitch: int, swizzle: Swizzle | None) -> Expr:
    """Byte offset of 16-byte chunk `chunk` of tile row `row` (the swizzle keyed by the row)."""
    if swizzle is not None:
        chunk = swizzle.apply(chunk, row)
    return row * pitch + (chunk << 4)


def smem_element_offset(row: Expr, col_byte: Expr, pitch: int, swizzle: Swizzle | None) -> Expr:
    """Byte offset of the element at byte `col_byte` of tile row `row`: its 16-byte chunk placed
    by `smem_offset`, plus the byte within the chunk (swizzles move whole chunks)."""
    return smem_offset(row, col_byte >> 4, pitch, swizzle) + (col_byte & 15)


def stage_offset(row: Expr, col: Expr, st: StagingLayout) -> Expr:
    """Byte offset of element (row, col) of the epilogue's staging tile; with a swizzle its
    16-byte units of f32 move as `Swizzle.of_staging` says."""
    swizzle = Swizzle.of_staging(st)
    if swizzle is None:
        return row * st.pitch + col * st.elem_bytes
    unit = col >> 2
    return row * st.pitch + (swizzle.apply(unit, unit) << 4) + (col & 3) * 4
