"""The one swizzle value (ptxgen/schedule/swizzle.py) against the ISA tables: the wgmma descriptor
code per mode (docs/ptx_facts/wgmma.md §9c), the CUtensorMapSwizzle enum (tma.md §9d′), the XOR
pattern per mode (tma.md "Swizzle modes", shared_memory.md §8), alignment, LBO/SBO, and the row
and unit forms the emitters use agreeing with the byte form.

Expected values are written out by hand from those tables, not computed with the module.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.emit.index import Const, evaluate
from ptxgen.emit.swizzle import smem_offset
from ptxgen.schedule.swizzle import (SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B, SWIZZLE_NONE, TMA_MODES,
                                     WIDEST_ALIGNMENT, Swizzle, chunk_swizzle)

# (mode, CuTe Swizzle<B,M,S>, row width, descriptor bits 63-62, CUtensorMapSwizzle, pattern start)
ISA_TABLE = [
    (SWIZZLE_NONE, (0, 4, 3), 16, 0, 0, 16),
    (SWIZZLE_32B, (1, 4, 3), 32, 3, 1, 256),
    (SWIZZLE_64B, (2, 4, 3), 64, 2, 2, 512),
    (SWIZZLE_128B, (3, 4, 3), 128, 1, 3, 1024),
]


@pytest.mark.parametrize("mode, bms, width, code, enum, align", ISA_TABLE)
def test_each_mode_derives_the_isa_encodings(mode, bms, width, code, enum, align):
    assert (mode.bits, mode.base, mode.shift) == bms
    assert (mode.width, mode.descriptor_code, mode.tensor_map_enum, mode.alignment) == (width, code, enum, align)
    assert mode.name == ("none" if width == 16 else f"{width}B")
    assert mode.tensor_map_name == f"CU_TENSOR_MAP_SWIZZLE_{mode.name.upper()}"
    assert Swizzle.named(mode.name) == mode
    assert Swizzle.of_descriptor_code(code) == mode
    assert Swizzle.of_width(width if width > 16 else 0) == mode


def test_modes_are_ordered_like_the_tensor_map_enum_and_the_widest_aligns_everything():
    assert [m.name for m in TMA_MODES] == ["none", "32B", "64B", "128B"]
    assert WIDEST_ALIGNMENT == 1024 and all(WIDEST_ALIGNMENT % m.alignment == 0 for m in TMA_MODES)


# byte address -> physical byte, per mode; chunk bits [4, 4+B) ^= address bits [7, 7+B)
# 0x3A5: bits 9..7 = 0b111, chunk bits 6..4 = 0b010, byte 5
HAND_XOR = {
    SWIZZLE_128B: {0x000: 0x000, 0x080: 0x090, 0x3A5: 0x3D5, 0x40F: 0x40F, 0x1F0: 0x1C0},
    SWIZZLE_64B: {0x000: 0x000, 0x080: 0x090, 0x3A5: 0x395, 0x1F0: 0x1C0},
    SWIZZLE_32B: {0x000: 0x000, 0x080: 0x090, 0x3A5: 0x3B5, 0x1F0: 0x1E0},
    SWIZZLE_NONE: {0x000: 0x000, 0x080: 0x080, 0x3A5: 0x3A5},
}


@pytest.mark.parametrize("mode", list(HAND_XOR), ids=lambda m: m.name)
def test_xor_pattern_by_hand(mode):
    for logical, physical in HAND_XOR[mode].items():
        assert mode(logical) == physical, hex(logical)


def test_128b_row_r_maps_chunk_j_to_j_xor_r():
    """PTX ISA "Swizzling Modes": in a 128-byte-wide box, row r's chunk j lands in chunk j ^ (r % 8)."""
    for r in range(16):
        for j in range(8):
            assert SWIZZLE_128B(r * 128 + j * 16 + 3) == r * 128 + ((j ^ (r % 8)) * 16) + 3


@pytest.mark.parametrize("mode", TMA_MODES[1:], ids=lambda m: m.name)
def test_each_mode_is_a_permutation_of_its_period(mode):
    images = [mode(a) for a in range(mode.period)]
    assert sorted(images) == list(range(mode.period))
    assert mode(mode.period + 0x30) == mode.period + mode(0x30)   # repeats from an aligned start


@pytest.mark.parametrize("mode, mn, k, esize, major, lbo, sbo", [
    (SWIZZLE_128B, 64, 64, 2, "K", 16, 1024), (SWIZZLE_64B, 64, 32, 2, "K", 16, 512),
    (SWIZZLE_32B, 64, 16, 2, "K", 16, 256), (SWIZZLE_NONE, 64, 64, 2, "K", 128, 8 * 128),
    (SWIZZLE_128B, 128, 64, 2, "MN", 64 * 128, 1024), (SWIZZLE_NONE, 64, 16, 2, "MN", 128 * 8, 128)])
def test_lbo_sbo_follow_the_canonical_layouts(mode, mn, k, esize, major, lbo, sbo):
    """wgmma.md §9c: K-major swizzled SBO = 8 rows x width, LBO unused (16); no swizzle LBO = 128,
    SBO = 8 rows of K bytes; MN-major swizzled LBO = k rows x width, no swizzle SBO = 128."""
    assert mode.lbo_sbo(major, mn, k, esize) == (lbo, sbo)


@pytest.mark.parametrize("chunks, bms", [(1, (0, 4, 3)), (2, (1, 4, 3)), (4, (2, 4, 3)), (8, (3, 4, 3)),
                                         (16, (3, 4, 4)), (32, (3, 4, 5))])
def test_sm80_stage_tiles_row_form_equals_the_byte_form(chunks, bms):
    """The cp.async/ldmatrix tiles key the XOR by row index; it is the same permutation as the
    byte-address swizzle on row * pitch + chunk * 16 (and 128-byte rows are the 128B mode)."""
    swz = chunk_swizzle(chunks)
    assert (swz.bits, swz.base, swz.shift) == bms
    pitch = 16 * chunks
    tid = np.zeros(1, dtype=np.int64)
    for row in range(20):
        for chunk in range(chunks):
            placed = int(evaluate(smem_offset(Const(row), Const(chunk), pitch, swz), tid)[0])
            assert placed == swz(row * pitch + chunk * 16), (row, chunk)
    if chunks == 8:
        assert swz == SWIZZLE_128B


def test_unit_form_equals_the_byte_form():
    for mode in (SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B):
        for unit in range(64):
            assert mode.permute_units(unit) == mode(unit << 4) >> 4


def test_bad_values_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="S >= B"):
        Swizzle(3, 4, 2)
    with pytest.raises(ValueError, match="not one of"):
        Swizzle.named("16B")
    with pytest.raises(ValueError, match="128, 64, 32"):
        Swizzle.of_width(48)
    with pytest.raises(ValueError, match="not a TMA/wgmma swizzle mode"):
        _ = chunk_swizzle(16).descriptor_code
    with pytest.raises(ValueError, match="power of two"):
        SWIZZLE_128B.permute_row_unit(0, 0, 96)
    with pytest.raises(ValueError, match="power-of-two number of chunks"):
        chunk_swizzle(6)
