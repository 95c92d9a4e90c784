"""TMA of fp4 / fp6 data padded in shared memory: the tensor-map data types
CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B and 16U6_ALIGN16B (sm_100a; docs/ptx_facts/sm100_formats.md
§2a, §2b), which `kind::f8f6f4`/`mxf8f6f4` MMAs with an e2m1 or fp6 operand read (`.b4x16_p64`:
each 16 e2m1 values, 8 bytes, then 8 bytes of padding; `.b6x16_p32`: each 16 fp6 values, 12 bytes,
then 4 bytes of padding).

The array holds the packed values (two e2m1 per byte; fp6 as one little-endian bit stream, value i
at bits 6i, as CUTLASS stores float_e2m3_t / float_e3m2_t); the map's innermost dimension, box and
the copy's innermost coordinate count values (Triton's PTX passes k, not k/2, for fp4). The
simulator stores such a map as one of packed units (16 values each: one 8-byte word for fp4, three
4-byte words for fp6) and expands every unit to 16 shared bytes when the copy lands. The mbarrier's
complete-tx counts the packed bytes read, as Triton's `expect_tx` for fp4 copies does (the
128x128-element fp4 box of the corpus's mixed mxfp8 x mxfp4 entry expects 8192 bytes, not the
16384 it occupies in shared memory) and CUTLASS's transaction bytes for fp6 do (size x 6 bits:
sm100_blockscaled_mma_warpspecialized.hpp, ABTmaTransactionBytes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import Fault

ELEMS_PER_UNIT = 16          # values per packed unit in global memory, per 16 bytes in shared


@dataclass(frozen=True)
class PaddedType:
    """A padded sub-byte tensor-map data type."""
    name: str                # the CUtensorMapDataType, without its prefix
    values: str              # what the packed values are, for messages
    bits: int                # bits per value
    word: type               # numpy type the packed array is viewed as (a unit is whole words)

    @property
    def unit_bytes(self) -> int:
        return ELEMS_PER_UNIT * self.bits // 8

    @property
    def words_per_unit(self) -> int:
        return self.unit_bytes // np.dtype(self.word).itemsize


PADDED = {t.name: t for t in (PaddedType("16U4_ALIGN16B", "e2m1", 4, np.uint64),
                              PaddedType("16U6_ALIGN16B", "fp6", 6, np.uint32))}
DATA_TYPE = "16U4_ALIGN16B"


def check_array(kind: PaddedType, array: np.ndarray, box: tuple[int, ...]) -> None:
    """The driver-side rules for a padded map, as far as the simulator relies on them."""
    if array.dtype != np.uint8:
        raise ValueError(f"a {kind.name} TensorMap takes a uint8 array of packed {kind.values} values, not "
                         f"{array.dtype}")
    if array.shape[-1] % kind.unit_bytes:
        raise ValueError(f"{kind.name}: the innermost extent of {array.shape[-1]} bytes is not a whole number of "
                         f"{kind.unit_bytes}-byte units ({ELEMS_PER_UNIT} {kind.values} values each; the value "
                         f"count must be a multiple of {ELEMS_PER_UNIT})")
    if box[-1] % ELEMS_PER_UNIT:
        raise ValueError(f"{kind.name}: the innermost box {box[-1]} ({kind.values} values) is not a multiple of "
                         f"{ELEMS_PER_UNIT}")


def unit_view(kind: PaddedType, array: np.ndarray) -> np.ndarray:
    """The packed array viewed as words (whole units of 16 values along its innermost axis): the
    same memory, so the launch still passes the caller's buffer."""
    if array.shape[-1] > 1 and array.strides[-1] != 1:
        raise ValueError(f"{kind.name}: the innermost axis must be contiguous")
    try:
        return array.view(kind.word)
    except ValueError as err:
        raise ValueError(f"{kind.name}: cannot view the array as {np.dtype(kind.word).itemsize}-byte words "
                         f"({err}); pass rows that start {np.dtype(kind.word).itemsize}-byte aligned") from None


def map_box(kind: PaddedType, box: tuple[int, ...]) -> tuple[int, ...]:
    """The box in words of the unit view (innermost given in values)."""
    return tuple(box[:-1]) + (box[-1] // ELEMS_PER_UNIT * kind.words_per_unit,)


def inner_coordinate(kind: PaddedType, c: int, what: str) -> int:
    """Word index of an innermost coordinate given in values."""
    if c % ELEMS_PER_UNIT:
        raise Fault("misaligned", f"{what}: innermost coordinate {c} of a {kind.name} map is not a multiple of "
                    f"{ELEMS_PER_UNIT} {kind.values} values")
    return c // ELEMS_PER_UNIT * kind.words_per_unit


def expand(kind: PaddedType, data: np.ndarray) -> np.ndarray:
    """Packed bytes (unit_bytes per unit) -> shared bytes: each unit's bytes, then zero bytes up to 16."""
    u = data.reshape(-1, kind.unit_bytes)
    return np.concatenate([u, np.zeros((len(u), 16 - kind.unit_bytes), u.dtype)], axis=1).reshape(-1)
