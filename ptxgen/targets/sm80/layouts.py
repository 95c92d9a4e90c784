"""Fragment layouts and ldmatrix address roles as data (docs/ptx_facts/mma_sync.md §1, §2;
shared_memory.md §4); the shared-memory swizzle these tiles use is ../swizzle.py
(docs/ptx_facts/shared_memory.md §8).

Each table maps a lane (and register/half) to matrix coordinates, written as index
expressions so the lowering emits them and the tests evaluate them cell by cell.
`g = lane >> 2` (groupID), `t = lane & 3` (threadID_in_group).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...emit.index import Const, Expr, Tid

LANE = Tid() & 31
GROUP = LANE >> 2
THREAD_IN_GROUP = LANE & 3


# --- mma.sync.aligned.m16n8k16 fragments ---------------------------------------------------
def mma_a_coord(reg: int, half: int) -> tuple[Expr, Expr]:
    """(row, col) of A element a_{2*reg+half} (16x16, four .b32 registers per lane)."""
    i = 2 * reg + half
    return GROUP + 8 * ((i >> 1) & 1), 2 * THREAD_IN_GROUP + (i & 1) + 8 * (i >> 2)


def mma_b_coord(reg: int, half: int) -> tuple[Expr, Expr]:
    """(k, n) of B element b_{2*reg+half} (16x8, two .b32 registers per lane)."""
    i = 2 * reg + half
    return 2 * THREAD_IN_GROUP + (i & 1) + 8 * (i >> 1), GROUP


def mma_c_coord(reg: int) -> tuple[Expr, Expr]:
    """(row, col) of f32 accumulator c_reg (16x8, four .f32 registers per lane)."""
    return GROUP + 8 * (reg >> 1), 2 * THREAD_IN_GROUP + (reg & 1)


# --- per-element fragment tables: m16n8k8 tf32 and m16n8k32 s8/u8 -------------------------------
# (docs/ptx_facts/mma_sync.md §2a, §2b)
@dataclass(frozen=True)
class FragmentTable:
    """Which operand element each lane holds in each fragment register.

    `coord(reg, elem)` gives `(mn, k)` of element `elem` of register `reg`: `mn` is the row of A
    (m, 0..15) or the column of B (n, 0..7) within the mma block, `k` its k index. A register
    holds `elems` elements of `32 // elems` bits, element 0 in the least significant bits.
    Scalar fragment loads read these positions one by one where ldmatrix cannot (MN-contiguous
    tiles of 32- or 8-bit elements).
    """

    regs: int
    elems: int
    coord: Callable[[int, int], tuple[Expr, Expr]]


def _tf32_a(reg: int, elem: int) -> tuple[Expr, Expr]:
    # a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]: a1 is the row+8 element
    return GROUP + 8 * (reg & 1), THREAD_IN_GROUP + 4 * (reg >> 1)


def _tf32_b(reg: int, elem: int) -> tuple[Expr, Expr]:
    # b0 = B[t][g], b1 = B[t+4][g]
    return GROUP, THREAD_IN_GROUP + 4 * reg


def _int8_a(reg: int, byte: int) -> tuple[Expr, Expr]:
    # Ra0 = A[g][4t..4t+3], Ra1 = A[g+8][4t..], Ra2 = A[g][16+4t..], Ra3 = A[g+8][16+4t..]
    return GROUP + 8 * (reg & 1), 4 * THREAD_IN_GROUP + byte + 16 * (reg >> 1)


def _int8_b(reg: int, byte: int) -> tuple[Expr, Expr]:
    # Rb0 = B[4t..4t+3][g], Rb1 = B[16+4t..16+4t+3][g]
    return GROUP, 4 * THREAD_IN_GROUP + byte + 16 * reg


TF32_A = FragmentTable(4, 1, _tf32_a)
TF32_B = FragmentTable(2, 1, _tf32_b)
INT8_A = FragmentTable(4, 4, _int8_a)
INT8_B = FragmentTable(2, 4, _int8_b)
#: Fragment table per (element bytes, operand) for the element sizes ldmatrix cannot transpose.
SCALAR_FRAGMENTS: dict[tuple[int, str], FragmentTable] = {
    (4, "A"): TF32_A, (4, "B"): TF32_B, (1, "A"): INT8_A, (1, "B"): INT8_B}


# --- ldmatrix address roles ----------------------------------------------------------------
@dataclass(frozen=True)
class LdmatrixForm:
    """How the 32 lanes of an `ldmatrix.x4` address a shared tile to get mma fragments.

    Lane l supplies the start of one 16-byte row: tile row `row(l)` and 16-byte chunk
    `chunk(l)` relative to the fragment block's origin. `trans` selects `.trans`.
    The x4 result registers r0..r3 are, per form:
      a_rowmajor: Ra0..Ra3 of one m16 x k16 A block (A stored M x K, K contiguous)
      a_mcontig:  the same, with .trans (A stored K x M, M contiguous)
      b_kcontig:  Rb0, Rb1 of n-block 0 then n-block 1 (B stored N x K, K contiguous)
      b_ncontig:  same, with .trans (B stored K x N, N contiguous)
    Rows of the tile are M, K, N and K respectively; chunks run along K, M, K and N.
    """

    name: str
    row: Expr
    chunk: Expr
    trans: bool


A_ROWMAJOR = LdmatrixForm("a_rowmajor", LANE & 15, LANE >> 4, False)
#: Matrix j = lane >> 3 covers k rows 8*(j >> 1).. and m columns 8*(j & 1)..: Ra0..Ra3 in order.
A_MCONTIG = LdmatrixForm("a_mcontig", (LANE & 7) + ((LANE >> 4) << 3), (LANE >> 3) & 1, True)
B_KCONTIG = LdmatrixForm("b_kcontig", (LANE & 7) + ((LANE >> 4) << 3), (LANE >> 3) & 1, False)
B_NCONTIG = LdmatrixForm("b_ncontig", LANE & 15, LANE >> 4, True)
#: x2 variants for a lone n8 block: lanes 0-15 matter; the upper lanes repeat them.
B_KCONTIG_X2 = LdmatrixForm("b_kcontig_x2", LANE & 7, (LANE >> 3) & 1, False)
B_NCONTIG_X2 = LdmatrixForm("b_ncontig_x2", LANE & 15, Const(0), True)


def ldmatrix_received(lane: int, trans: bool) -> tuple[int, int, int, int]:
    """ISA rule: (row, col) pairs of matrix j that lane receives in (lo, hi) halves.

    Returns (row_lo, col_lo, row_hi, col_hi) within the 8x8 matrix, where the matrix's row r
    is the 16 bytes at the address lane 8j+r supplied (docs/ptx_facts/shared_memory.md §4).
    """
    if not trans:
        return lane >> 2, 2 * (lane & 3), lane >> 2, 2 * (lane & 3) + 1
    return 2 * (lane & 3), lane >> 2, 2 * (lane & 3) + 1, lane >> 2
