"""Tile offsets in shared memory, placed through the one swizzle value (`schedule.swizzle.Swizzle`,
CuTe's Swizzle<B, M, S>) as index expressions.

Operand stage tiles are keyed by the tile row (`OperandTile.swizzle_pattern`), the f32 staging
tile of the epilogue by the 16-byte unit itself (`StagingLayout.swizzle_pattern`: its drain reads
whole rows). Copies, fragment loads and the epilogue all place bytes through these functions, so
writer and reader cannot disagree.
"""
from __future__ import annotations

from ..schedule.geometry import StagingLayout
from ..schedule.swizzle import Swizzle
from .index import Expr

__all__ = ["Swizzle", "smem_offset", "smem_element_offset", "stage_offset"]


def smem_offset(row: Expr, chunk: Expr, pitch: int, swizzle: Swizzle | None) -> Expr:
    """Byte offset of 16-byte chunk `chunk` of tile row `row` (the swizzle keyed by the row)."""
    if swizzle is not None:
        chunk = swizzle.permute_row_unit(row, chunk, pitch)
    return row * pitch + (chunk << 4)


def smem_element_offset(row: Expr, col_byte: Expr, pitch: int, swizzle: Swizzle | None) -> Expr:
    """Byte offset of the element at byte `col_byte` of tile row `row`: its 16-byte chunk placed
    by `smem_offset`, plus the byte within the chunk (swizzles move whole chunks)."""
    return smem_offset(row, col_byte >> 4, pitch, swizzle) + (col_byte & 15)


def stage_offset(row: Expr, col: Expr, st: StagingLayout) -> Expr:
    """Byte offset of element (row, col) of the epilogue's staging tile; with a swizzle its
    16-byte units of f32 move as `StagingLayout.swizzle_pattern` says (within the row)."""
    swizzle = st.swizzle_pattern
    if swizzle is None:
        return row * st.pitch + col * st.elem_bytes
    unit = col >> 2
    return row * st.pitch + (swizzle.permute_units(unit) << swizzle.base) + (col & 3) * 4
