"""The fragment layouts of docs/ptx_facts/ §1, §2 and §4, written out independently
of ptxgen (so the GPU tests can judge the facts sheet, the simulator and the emitter alike).

Notation: lane = %laneid, g = lane >> 2, t = lane & 3. A fragment map takes (lane, i) for the
i-th element a lane holds (elements packed low-to-high into 32-bit registers) and returns the
(row, col) of the matrix element it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

FragMap = Callable[[int, int], tuple[int, int]]


def _gt(lane: int) -> tuple[int, int]:
    return lane >> 2, lane & 3


# §1 m16n8k16, 16-bit A/B
def a_m16n8k16_16bit(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def b_m16n8k16_16bit(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return 2 * t + (i & 1) + 8 * (i >> 1), g


# §1 C/D (f32: one element per register; f16: two per register, same positions)
def c_m16n8(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return g + 8 * (i >> 1), 2 * t + (i & 1)


# §2a m16n8k8 tf32 (note a1 is the row+8 element)
def a_m16n8k8_tf32(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return g + 8 * (i & 1), t + 4 * (i >> 1)


def b_m16n8k8_tf32(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return t + 4 * i, g


# §2b m16n8k32 8-bit
def a_m16n8k32_8bit(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)


def b_m16n8k32_8bit(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return 4 * t + (i & 3) + 16 * (i >> 2), g


# §2c m16n8k8 16-bit
def a_m16n8k8_16bit(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return g + 8 * (i >> 1), 2 * t + (i & 1)


def b_m16n8k8_16bit(lane: int, i: int) -> tuple[int, int]:
    g, t = _gt(lane)
    return 2 * t + i, g


@dataclass(frozen=True)
class Fragment:
    """How a (rows x cols) matrix of `bits`-wide elements spreads over 32 lanes' registers."""

    rows: int
    cols: int
    bits: int
    nregs: int
    where: FragMap

    @property
    def per_reg(self) -> int:
        return 32 // self.bits

    def pack(self, bits: np.ndarray) -> np.ndarray:
        """(rows, cols) unsigned bit patterns -> (32, nregs) uint32 registers."""
        assert bits.shape == (self.rows, self.cols)
        regs = np.zeros((32, self.nregs), np.uint64)
        mask = (1 << self.bits) - 1
        for lane in range(32):
            for i in range(self.nregs * self.per_reg):
                r, c = self.where(lane, i)
                regs[lane, i // self.per_reg] |= (int(bits[r, c]) & mask) << (self.bits * (i % self.per_reg))
        return regs.astype(np.uint32)

    def unpack(self, regs: np.ndarray) -> np.ndarray:
        """(32, nregs) uint32 registers -> (rows, cols) bit patterns (uint64), -1 where no lane."""
        out = np.full((self.rows, self.cols), -1, np.int64)
        mask = (1 << self.bits) - 1
        for lane in range(32):
            for i in range(self.nregs * self.per_reg):
                r, c = self.where(lane, i)
                out[r, c] = (int(regs[lane, i // self.per_reg]) >> (self.bits * (i % self.per_reg))) & mask
        return out

    def covers_once(self) -> bool:
        seen = {}
        for lane in range(32):
            for i in range(self.nregs * self.per_reg):
                seen[self.where(lane, i)] = seen.get(self.where(lane, i), 0) + 1
        return len(seen) == self.rows * self.cols and set(seen.values()) == {1}


# -- ldmatrix (§4) ---------------------------------------------------------------------------
def ldmatrix_expected(tile_u16: np.ndarray, row_of_lane: np.ndarray, nmat: int, trans: bool
                      ) -> np.ndarray:
    """(32, nmat) uint32 each lane should receive.

    `tile_u16` is the shared tile as rows of 8 u16 (16 bytes); lane 8j+r supplies the index of
    the tile row that is row r of matrix j (`row_of_lane`). Without .trans lane l gets
    {lo: M_j[l>>2][2(l&3)], hi: M_j[l>>2][2(l&3)+1]}; with .trans {lo: M_j[2(l&3)][l>>2],
    hi: M_j[2(l&3)+1][l>>2]}.
    """
    out = np.zeros((32, nmat), np.uint32)
    for j in range(nmat):
        m = tile_u16[row_of_lane[8 * j: 8 * j + 8]]  # (8, 8): row r = tile row of lane 8j+r
        for lane in range(32):
            q, p = lane >> 2, lane & 3
            lo, hi = (m[q, 2 * p], m[q, 2 * p + 1]) if not trans else (m[2 * p, q], m[2 * p + 1, q])
            out[lane, j] = int(lo) | (int(hi) << 16)
    return out
