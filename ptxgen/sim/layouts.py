"""Fragment layouts of mma.sync and ldmatrix as index tables (docs/ptx_facts/mma_sync.md §1, §2;
shared_memory.md §4).

Each table has shape (32 lanes, registers, elements per register, 2) holding (row, col) of the
matrix element that sits in that lane/register/sub-element; element 0 of a register is its lowest
bits. The formulas are written once here, as data, and the instruction code only gathers and
scatters with them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LANES = np.arange(32)
GROUP = LANES >> 2          # groupID
IN_GROUP = LANES & 3        # threadID_in_group


def _table(nregs: int, per_reg: int, row_col) -> np.ndarray:
    out = np.zeros((32, nregs, per_reg, 2), dtype=np.int64)
    for r in range(nregs):
        for e in range(per_reg):
            i = r * per_reg + e
            row, col = row_col(i, GROUP, IN_GROUP)
            out[:, r, e, 0] = row
            out[:, r, e, 1] = col
    return out


# ---- m16n8k16, 16-bit inputs (docs/ptx_facts/mma_sync.md §1)
def a_m16n8k16_16bit() -> np.ndarray:
    return _table(4, 2, lambda i, g, t: (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)))


def b_m16n8k16_16bit() -> np.ndarray:
    return _table(2, 2, lambda i, g, t: (2 * t + (i & 1) + 8 * (i >> 1), g))


def c_m16n8_f32() -> np.ndarray:
    """f32 / s32 accumulator: 4 registers of one element (docs/ptx_facts/mma_sync.md §1, §2b)."""
    return _table(4, 1, lambda i, g, t: (g + 8 * (i >> 1), 2 * t + (i & 1)))


def c_m16n8_f16() -> np.ndarray:
    """f16 accumulator: 2 .f16x2 registers, lower column in the low half."""
    return _table(2, 2, lambda i, g, t: (g + 8 * (i >> 1), 2 * t + (i & 1)))


# ---- m16n8k8, 16-bit inputs (docs/ptx_facts/mma_sync.md §2c)
def a_m16n8k8_16bit() -> np.ndarray:
    return _table(2, 2, lambda i, g, t: (g + 8 * (i >> 1), 2 * t + (i & 1)))


def b_m16n8k8_16bit() -> np.ndarray:
    return _table(1, 2, lambda i, g, t: (2 * t + (i & 1), g))


# ---- m16n8k8 tf32 (docs/ptx_facts/mma_sync.md §2a)
def a_m16n8k8_tf32() -> np.ndarray:
    return _table(4, 1, lambda i, g, t: (g + 8 * (i & 1), t + 4 * (i >> 1)))


def b_m16n8k8_tf32() -> np.ndarray:
    return _table(2, 1, lambda i, g, t: (t + 4 * i, g))


# ---- m16n8k32 8-bit integers (docs/ptx_facts/mma_sync.md §2b)
def a_m16n8k32_8bit() -> np.ndarray:
    return _table(4, 4, lambda i, g, t: (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)))


def b_m16n8k32_8bit() -> np.ndarray:
    return _table(2, 4, lambda i, g, t: (4 * t + (i & 3) + 16 * (i >> 2), g))


# ---- wmma m16n16k16 (docs/ptx_facts/mma_sync.md §3): the element-to-lane mapping is unspecified
# by PTX, so the simulator picks its own bijection: the m16n8k16 layouts of §1 for n = 0-7 and
# n = 8-15.
def _two_n8_halves(table: np.ndarray) -> np.ndarray:
    """Registers of the n = 0-7 half followed by those of the n = 8-15 half (col + 8)."""
    second = table.copy()
    second[..., 1] += 8
    return np.concatenate([table, second], axis=1)


def wmma_a() -> np.ndarray:
    """A 16x16: the 4 registers of the m16n8k16 A fragment (f16 fragments hold it twice)."""
    return a_m16n8k16_16bit()


def wmma_b() -> np.ndarray:
    """B 16x16 (k x n): 2 registers per n8 half, 4 in all (f16 fragments hold it twice)."""
    return _two_n8_halves(b_m16n8k16_16bit())


def wmma_c_f32() -> np.ndarray:
    return _two_n8_halves(c_m16n8_f32())


def wmma_c_f16() -> np.ndarray:
    return _two_n8_halves(c_m16n8_f16())


# ---- ldmatrix (docs/ptx_facts/shared_memory.md §4): lane l, half h of destination register j,
# from matrix j
def ldmatrix_source(trans: bool) -> np.ndarray:
    """(32, 2, 2): (row, col) inside the 8x8 matrix that lane l's half h receives."""
    out = np.zeros((32, 2, 2), dtype=np.int64)
    for h in range(2):
        if trans:
            out[:, h, 0], out[:, h, 1] = 2 * IN_GROUP + h, GROUP
        else:
            out[:, h, 0], out[:, h, 1] = GROUP, 2 * IN_GROUP + h
    return out


@dataclass(frozen=True)
class FragmentMap:
    """Gather/scatter indices between per-lane fragment values and a row-major matrix.

    `to_matrix[k]` is the position in the lane-major flattened fragment (lane, reg, element) of
    matrix element k (row-major); `to_fragment` is the inverse.
    """
    rows: int
    cols: int
    nregs: int
    per_reg: int
    to_matrix: np.ndarray
    to_fragment: np.ndarray


def fragment_map(table: np.ndarray, rows: int, cols: int) -> FragmentMap:
    """Build the gather/scatter permutations; fails loudly if the table is not a bijection."""
    lanes, nregs, per_reg, _ = table.shape
    flat = (table[..., 0] * cols + table[..., 1]).reshape(-1)
    if lanes * nregs * per_reg != rows * cols or sorted(flat.tolist()) != list(range(rows * cols)):
        raise AssertionError("fragment table is not a bijection onto the matrix")
    to_matrix = np.argsort(flat)
    return FragmentMap(rows, cols, nregs, per_reg, to_matrix, flat)
