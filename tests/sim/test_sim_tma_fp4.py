"""TMA of packed e2m1 data landing padded in shared memory (sim.TensorMap data_type="16U4_ALIGN16B",
docs/ptx_facts/sm100_formats.md §2a): each 16 values (8 packed bytes) then 8 zero bytes, the box
and innermost coordinate counted in e2m1 values, complete-tx counting the packed bytes read; and
the same for packed fp6 ("16U6_ALIGN16B", §2b: 12 packed bytes then 4 zero bytes)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim

from test_sim_tma import load_kernel, physical

PADDED = "16U4_ALIGN16B"


def padded_load(a: np.ndarray, box, start, expect: int | None = None) -> np.ndarray:
    """Raw shared bytes of the box (rows x box[1] bytes, swizzled 128B) after the copy landed."""
    tmap = sim.TensorMap(a, box, swizzle="128B", data_type=PADDED)
    smem_bytes = box[0] * box[1]                    # 16 shared bytes per 16 e2m1 values
    packed = box[0] * box[1] // 2
    raw = np.zeros(smem_bytes, dtype=np.uint8)
    sim.launch(load_kernel(2, smem_bytes, expect=packed if expect is None else expect), "k",
               block=(max(32, smem_bytes // 16),), args=[raw, tmap, start[1] & 0xFFFFFFFF, start[0] & 0xFFFFFFFF],
               dynamic_smem=(smem_bytes + 1023) // 1024 * 1024 + 8)
    return raw


def expected_padded(a: np.ndarray, box, start) -> np.ndarray:
    """Logical shared bytes written out by hand: per row, per 16-value unit u, the 8 packed bytes
    a[row, 8u:8u+8] (zero outside the array), then 8 zero bytes."""
    rows, units = box[0], box[1] // 16
    out = np.zeros((rows, units, 16), dtype=np.uint8)
    for r in range(rows):
        for u in range(units):
            row, byte = start[0] + r, start[1] // 2 + 8 * u
            if 0 <= row < a.shape[0] and 0 <= byte < a.shape[1]:
                out[r, u, :8] = a[row, byte:byte + 8]
    return out.reshape(-1)


@pytest.mark.parametrize("start", [(0, 0), (2, 32), (-1, 0)])
def test_padded_fp4_box_lands_unit_by_unit(start):
    a = np.random.default_rng(3).integers(1, 256, (5, 64), dtype=np.uint8)    # 5 rows of 128 e2m1
    raw = padded_load(a, (4, 128), start)
    logical = raw[physical(np.arange(raw.size), "128B")]
    np.testing.assert_array_equal(logical, expected_padded(a, (4, 128), start))


def test_complete_tx_counts_the_packed_bytes():
    """Expecting the padded size (what the box occupies in shared memory) never completes."""
    a = np.ones((4, 64), dtype=np.uint8)
    with pytest.raises(sim.HazardError) as e:
        padded_load(a, (4, 128), (0, 0), expect=4 * 128)
    assert e.value.kind == "deadlock"


def test_innermost_coordinate_must_start_a_16_value_unit():
    with pytest.raises(sim.HazardError) as e:
        padded_load(np.ones((4, 64), dtype=np.uint8), (4, 128), (0, 8))
    assert e.value.kind == "misaligned" and "multiple of 16" in e.value.detail


def test_padded_map_checks_its_array_and_box():
    with pytest.raises(ValueError, match="uint8"):
        sim.TensorMap(np.ones((4, 64), np.uint16), (4, 128), swizzle="128B", data_type=PADDED)
    with pytest.raises(ValueError, match="multiple of 16"):
        sim.TensorMap(np.ones((4, 64), np.uint8), (4, 120), swizzle="128B", data_type=PADDED)
    with pytest.raises(ValueError, match="as wide as"):
        sim.TensorMap(np.ones((4, 64), np.uint8), (4, 64), swizzle="128B", data_type=PADDED)
    with pytest.raises(ValueError, match="not simulated"):
        sim.TensorMap(np.ones((4, 64), np.uint8), (4, 128), swizzle="128B", data_type="16U4_ALIGN8B")
    with pytest.raises(ValueError, match="12-byte units"):
        sim.TensorMap(np.ones((4, 64), np.uint8), (4, 128), swizzle="128B", data_type="16U6_ALIGN16B")


def fp6_load(a: np.ndarray, box, start, expect: int | None = None) -> np.ndarray:
    """Raw shared bytes of an fp6 box (rows x box[1] bytes, swizzled 128B) after the copy landed."""
    tmap = sim.TensorMap(a, box, swizzle="128B", data_type="16U6_ALIGN16B")
    smem_bytes = box[0] * box[1]                    # 16 shared bytes per 16 fp6 values
    packed = box[0] * box[1] * 3 // 4
    raw = np.zeros(smem_bytes, dtype=np.uint8)
    sim.launch(load_kernel(2, smem_bytes, expect=packed if expect is None else expect), "k",
               block=(max(32, smem_bytes // 16),), args=[raw, tmap, start[1] & 0xFFFFFFFF, start[0] & 0xFFFFFFFF],
               dynamic_smem=(smem_bytes + 1023) // 1024 * 1024 + 8)
    return raw


@pytest.mark.parametrize("start", [(0, 0), (1, 128), (-1, 0)])
def test_padded_fp6_box_lands_12_bytes_then_4_zero_bytes_per_16_values(start):
    """16U6_ALIGN16B: each 16 values (12 packed bytes) land in a 16-byte unit, then 4 zero bytes;
    coordinates count fp6 values (16 per 12 bytes), complete-tx the packed bytes."""
    a = np.random.default_rng(4).integers(1, 256, (5, 192), dtype=np.uint8)    # 5 rows of 256 fp6
    raw = fp6_load(a, (4, 128), start)
    logical = raw[physical(np.arange(raw.size), "128B")].reshape(4, 8, 16)
    want = np.zeros((4, 8, 16), np.uint8)
    for r in range(4):
        row = start[0] + r
        for u in range(8):
            byte = start[1] * 3 // 4 + 12 * u
            if 0 <= row < a.shape[0]:
                want[r, u, :12] = a[row, byte:byte + 12]
    np.testing.assert_array_equal(logical, want)


def test_fp6_complete_tx_counts_the_packed_bytes():
    with pytest.raises(sim.HazardError) as e:
        fp6_load(np.ones((4, 96), dtype=np.uint8), (4, 128), (0, 0), expect=4 * 128)
    assert e.value.kind == "deadlock"
