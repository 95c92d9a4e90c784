"""Where tcgen05.ld / tcgen05.st move each register, and where tcgen05.mma keeps its matrices in
tensor memory (docs/ptx_facts/tcgen05.md §12f).

Data-path layouts (PTX ISA §9.7.16.2.3 "Data Movement Shape", Table 49; the figures are images,
the formulas are CUTLASS's SM100_TMEM_LOAD atoms and Triton's tile layouts). For thread t of the
warp and destination register i, relative to the lane L0 and column C0 of taddr:

  .32x32b.xN    lane t,                          column i                       (N regs)
  .16x64b.xN    lane (t>>2) + 8(t&1),            column ((t>>1)&1) + 2i         (N regs)
  .16x128b.xN   lane (t>>2) + 8(i&1),            column (t&3) + 4(i>>1)         (2N regs)
  .16x256b.xN   lane (t>>2) + 8((i>>1)&1),       column 2(t&3) + (i&1) + 8(i>>2) (4N regs)
  .16x32bx2.xN  lane t&15,                       column i (+ immHalfSplitoff for t >= 16)

With .pack::16b (ld) / .unpack::16b (st) register column c stands for the two columns 2c and
2c+1: bits 15:0 of the register <-> bits 15:0 of column 2c, bits 31:16 <-> bits 15:0 of 2c+1.
"""
from __future__ import annotations

import functools

import numpy as np

SHAPES = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")
REGS_PER_NUM = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
MAX_NUM = {"32x32b": 128, "16x64b": 128, "16x128b": 64, "16x256b": 32, "16x32bx2": 128}
NUMS = (1, 2, 4, 8, 16, 32, 64, 128)


@functools.lru_cache(maxsize=None)
def ldst_map(shape: str, num: int, split: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(lanes, columns), each (32 threads, registers) int64, relative to taddr; `split` is the
    immHalfSplitoff of .16x32bx2. Checked to be a bijection onto the cells it names (split 0 of
    .16x32bx2 is the caller's base map, whose halves coincide until the offset is added)."""
    t = np.arange(32)[:, None]
    i = np.arange(num * REGS_PER_NUM[shape])[None, :]
    if shape == "32x32b":
        lane, col = t + 0 * i, i + 0 * t
    elif shape == "16x64b":
        lane, col = (t >> 2) + 8 * (t & 1) + 0 * i, ((t >> 1) & 1) + 2 * i
    elif shape == "16x128b":
        lane, col = (t >> 2) + 8 * (i & 1), (t & 3) + 4 * (i >> 1)
    elif shape == "16x256b":
        lane, col = (t >> 2) + 8 * ((i >> 1) & 1), 2 * (t & 3) + (i & 1) + 8 * (i >> 2)
    elif shape == "16x32bx2":
        lane, col = (t & 15) + 0 * i, i + split * (t >= 16)
    else:
        raise ValueError(f"unknown tcgen05 data-movement shape {shape}")
    lane = np.broadcast_to(lane, (32, i.size)).astype(np.int64)
    col = np.broadcast_to(col, (32, i.size)).astype(np.int64)
    cells = lane * 4096 + col
    if (shape != "16x32bx2" or split) and np.unique(cells).size != cells.size:
        raise ValueError(f".{shape}.x{num} with half-split offset {split} names a tensor-memory cell twice")
    return lane, col


def d_lanes(m: int) -> np.ndarray:
    """TMEM lane (relative to D's lane) of accumulator row m (§9.7.16.10.5, cta_group::1):
    M = 128 -> layout D, lane m; M = 64 -> layout F, rows in lanes 0-15 of each 32-lane quarter."""
    rows = np.arange(m)
    if m == 128:
        return rows
    return 32 * (rows >> 4) + (rows & 15)
