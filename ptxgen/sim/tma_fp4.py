"""TMA of fp4 data padded in shared memory: the tensor-map data type CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B
(sm_100a; docs/ptx_facts/sm100_formats.md §2a), which `kind::f8f6f4`/`mxf8f6f4` MMAs with an e2m1
operand read (`.b4x16_p64`: each 16 e2m1 values, 8 bytes, followed by 8 bytes of padding).

The array holds two e2m1 per byte along its innermost axis; the map's innermost dimension, box and
the copy's innermost coordinate count e2m1 elements (Triton's PTX passes k, not k/2). The simulator
stores such a map as one of 8-byte units (16 elements each) and expands every unit to 16 shared
bytes when the copy lands. The mbarrier's complete-tx counts the packed bytes read (8 per unit), as
Triton's `expect_tx` for these copies does (the 128x128-element fp4 box of the corpus's mixed
mxfp8 x mxfp4 entry expects 8192 bytes, not the 16384 it occupies in shared memory).
"""
from __future__ import annotations

import numpy as np

from .errors import Fault

DATA_TYPE = "16U4_ALIGN16B"
ELEMS_PER_UNIT = 16          # e2m1 values per 8-byte unit in global memory, per 16 bytes in shared
UNIT_BYTES = 8


def check_array(array: np.ndarray, box: tuple[int, ...]) -> None:
    """The driver-side rules for a padded-fp4 map, as far as the simulator relies on them."""
    if array.dtype != np.uint8:
        raise ValueError(f"a {DATA_TYPE} TensorMap takes a uint8 array of packed e2m1 pairs, not {array.dtype}")
    if (array.shape[-1] * 2) % ELEMS_PER_UNIT:
        raise ValueError(f"{DATA_TYPE}: the innermost extent {array.shape[-1] * 2} e2m1 values is not a multiple of "
                         f"{ELEMS_PER_UNIT}")
    if box[-1] % ELEMS_PER_UNIT:
        raise ValueError(f"{DATA_TYPE}: the innermost box {box[-1]} (e2m1 values) is not a multiple of {ELEMS_PER_UNIT}")


def unit_view(array: np.ndarray) -> np.ndarray:
    """The packed array viewed as 8-byte units (16 e2m1 values each) along its innermost axis: the
    same memory, so the launch still passes the caller's buffer."""
    if array.shape[-1] > 1 and array.strides[-1] != 1:
        raise ValueError(f"{DATA_TYPE}: the innermost axis must be contiguous")
    try:
        return array.view(np.uint64)
    except ValueError as err:
        raise ValueError(f"{DATA_TYPE}: cannot view the array as 8-byte units ({err}); pass rows that start "
                         "8-byte aligned") from None


def inner_coordinate(c: int, what: str) -> int:
    """Unit index of an innermost coordinate given in e2m1 elements."""
    if c % ELEMS_PER_UNIT:
        raise Fault("misaligned", f"{what}: innermost coordinate {c} of a {DATA_TYPE} map is not a multiple of "
                    f"{ELEMS_PER_UNIT} e2m1 values")
    return c // ELEMS_PER_UNIT


def expand(units: np.ndarray) -> np.ndarray:
    """Packed bytes (8 per unit) -> shared bytes: each unit's 8 bytes, then 8 zero bytes."""
    u = units.reshape(-1, UNIT_BYTES)
    return np.concatenate([u, np.zeros_like(u)], axis=1).reshape(-1)
