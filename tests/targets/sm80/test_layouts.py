"""The emitter's layout tables, checked cell by cell against docs/ptx_facts/ (§1, §4, §8).

The expected values are written here from the fact sheet's tables, independently of
`ptxgen.targets.sm80.layouts`, and the ldmatrix rule is re-derived from the ISA text.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.targets.sm80 import layouts as L
from ptxgen.emit.index import evaluate
from ptxgen.emit.swizzle import smem_element_offset, smem_offset
from ptxgen.schedule.geometry import OperandTile

LANES = np.arange(32)


def at(e, lane):
    return int(evaluate(e, np.array([lane]))[0])


def sheet_a(lane):  # §1 table: reg -> ((row, col) lo, (row, col) hi)
    g, t = lane >> 2, lane & 3
    return {0: ((g, 2 * t), (g, 2 * t + 1)), 1: ((g + 8, 2 * t), (g + 8, 2 * t + 1)),
            2: ((g, 2 * t + 8), (g, 2 * t + 9)), 3: ((g + 8, 2 * t + 8), (g + 8, 2 * t + 9))}


def sheet_b(lane):  # §1: Rb0 = {B[2t][g], B[2t+1][g]}, Rb1 = {B[2t+8][g], B[2t+9][g]}
    g, t = lane >> 2, lane & 3
    return {0: ((2 * t, g), (2 * t + 1, g)), 1: ((2 * t + 8, g), (2 * t + 9, g))}


def sheet_c(lane):  # §1: c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
    g, t = lane >> 2, lane & 3
    return {0: (g, 2 * t), 1: (g, 2 * t + 1), 2: (g + 8, 2 * t), 3: (g + 8, 2 * t + 1)}


@pytest.mark.parametrize("lane", range(32))
def test_mma_fragment_tables_match_the_sheet(lane):
    for reg, halves in sheet_a(lane).items():
        for half, (r, c) in enumerate(halves):
            row, col = L.mma_a_coord(reg, half)
            assert (at(row, lane), at(col, lane)) == (r, c), ("A", lane, reg, half)
    for reg, halves in sheet_b(lane).items():
        for half, (k, n) in enumerate(halves):
            kk, nn = L.mma_b_coord(reg, half)
            assert (at(kk, lane), at(nn, lane)) == (k, n), ("B", lane, reg, half)
    for reg, (r, c) in sheet_c(lane).items():
        row, col = L.mma_c_coord(reg)
        assert (at(row, lane), at(col, lane)) == (r, c), ("C", lane, reg)


def isa_ldmatrix(tile: np.ndarray, rows: np.ndarray, chunks: np.ndarray, count: int, trans: bool):
    """ldmatrix per PTX ISA: lane 8j+r gives row r of matrix j; returns [lane][j] = (lo, hi)."""
    mats = [np.stack([tile[rows[8 * j + r], 8 * chunks[8 * j + r]: 8 * chunks[8 * j + r] + 8]
                      for r in range(8)]) for j in range(count)]
    out = {}
    for lane in range(32):
        for j, m in enumerate(mats):
            if not trans:
                out[lane, j] = (m[lane >> 2, 2 * (lane & 3)], m[lane >> 2, 2 * (lane & 3) + 1])
            else:
                out[lane, j] = (m[2 * (lane & 3), lane >> 2], m[2 * (lane & 3) + 1, lane >> 2])
    return out


def element_ids(rows: int, cols: int) -> np.ndarray:
    return np.arange(rows * cols).reshape(rows, cols)


def test_a_ldmatrix_form_yields_the_a_fragment():
    tile = element_ids(16, 16)  # A block, M x K, K contiguous
    got = isa_ldmatrix(tile, evaluate(L.A_ROWMAJOR.row, LANES), evaluate(L.A_ROWMAJOR.chunk, LANES), 4, False)
    for lane in range(32):
        for reg, halves in sheet_a(lane).items():
            assert got[lane, reg] == tuple(tile[r, c] for r, c in halves)


def test_a_m_contiguous_trans_form_yields_the_a_fragment():
    at_ = element_ids(16, 16)  # A stored K x M: at_[k][m] = A[m][k]
    form = L.A_MCONTIG
    got = isa_ldmatrix(at_, evaluate(form.row, LANES), evaluate(form.chunk, LANES), 4, form.trans)
    for lane in range(32):
        for reg, halves in sheet_a(lane).items():
            assert got[lane, reg] == tuple(at_[c, r] for r, c in halves)


@pytest.mark.parametrize("form,count", [(L.B_KCONTIG, 4), (L.B_KCONTIG_X2, 2)])
def test_b_k_contiguous_forms_yield_b_fragments(form, count):
    bt = element_ids(16, 16)  # B stored N x K: bt[n][k] = B[k][n]
    got = isa_ldmatrix(bt, evaluate(form.row, LANES), evaluate(form.chunk, LANES), count, form.trans)
    for lane in range(32):
        for nblk in range(count // 2):
            for reg, halves in sheet_b(lane).items():
                assert got[lane, 2 * nblk + reg] == tuple(bt[8 * nblk + n, k] for k, n in halves)


@pytest.mark.parametrize("form,count", [(L.B_NCONTIG, 4), (L.B_NCONTIG_X2, 2)])
def test_b_n_contiguous_trans_forms_yield_b_fragments(form, count):
    b = element_ids(16, 16)  # B stored K x N
    got = isa_ldmatrix(b, evaluate(form.row, LANES), evaluate(form.chunk, LANES), count, form.trans)
    for lane in range(32):
        for nblk in range(count // 2):
            for reg, halves in sheet_b(lane).items():
                assert got[lane, 2 * nblk + reg] == tuple(b[k, 8 * nblk + n] for k, n in halves)


def test_ldmatrix_received_matches_isa_text():
    for lane in range(32):
        assert L.ldmatrix_received(lane, False) == (lane // 4, 2 * (lane % 4), lane // 4, 2 * (lane % 4) + 1)
        assert L.ldmatrix_received(lane, True) == (2 * (lane % 4), lane // 4, 2 * (lane % 4) + 1, lane // 4)


def swizzled_offsets(cols: int, rows: int = 32) -> np.ndarray:
    tile = OperandTile("A", rows, cols, 2, False, "swizzle", 128)
    r = np.repeat(np.arange(rows), tile.chunks_per_row)
    c = np.tile(np.arange(tile.chunks_per_row), rows)
    from ptxgen.emit.index import Const
    offs = [at(smem_offset(Const(int(rr)), Const(int(cc)), tile.pitch, tile.swizzle_pattern), 0)
            for rr, cc in zip(r, c)]
    return np.array(offs).reshape(rows, tile.chunks_per_row)


def test_64_wide_f16_swizzle_is_the_sheets_formula():
    # §8: element (r, c) of a 64-wide f16 tile lives at r*128 + (((c>>3) ^ (r&7)) << 4) + (c&7)*2
    offs = swizzled_offsets(64)
    for r in range(32):
        for chunk in range(8):
            assert offs[r, chunk] == r * 128 + ((chunk ^ (r & 7)) << 4)


@pytest.mark.parametrize("cols", [16, 32, 64, 128, 256])
def test_swizzle_is_a_bijection_and_conflict_free(cols):
    offs = swizzled_offsets(cols)
    assert sorted(offs.ravel()) == list(range(0, offs.size * 16, 16))
    groups = (offs >> 4) & 7  # 4-bank group of each 16-byte chunk
    cpr = offs.shape[1]
    for r0 in range(0, 32, 8):  # ldmatrix: 8 consecutive rows, same logical chunk
        for chunk in range(cpr):
            assert len(set(groups[r0:r0 + 8, chunk])) == 8
    flat = groups.ravel()  # cp.async: 8 consecutive threads write 8 consecutive chunks
    for i in range(0, flat.size, 8):
        assert len(set(flat[i:i + 8])) == 8


# --- m16n8k8 tf32 (§2a) and m16n8k32 int8 (§2b) per-element tables -----------------------------
def sheet_tf32_a(lane):  # §2a: a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]
    g, t = lane >> 2, lane & 3
    return {0: [(g, t)], 1: [(g + 8, t)], 2: [(g, t + 4)], 3: [(g + 8, t + 4)]}


def sheet_tf32_b(lane):  # §2a: b0 = B[t][g], b1 = B[t+4][g]  (as (n, k))
    g, t = lane >> 2, lane & 3
    return {0: [(g, t)], 1: [(g, t + 4)]}


def sheet_int8_a(lane):  # §2b: Ra0 = A[g][4t..4t+3], Ra1 = A[g+8][4t..], Ra2 = A[g][16+4t..], Ra3 = A[g+8][16+4t..]
    g, t = lane >> 2, lane & 3
    return {0: [(g, 4 * t + i) for i in range(4)], 1: [(g + 8, 4 * t + i) for i in range(4)],
            2: [(g, 16 + 4 * t + i) for i in range(4)], 3: [(g + 8, 16 + 4 * t + i) for i in range(4)]}


def sheet_int8_b(lane):  # §2b: Rb0 = B[4t..4t+3][g], Rb1 = B[16+4t..16+4t+3][g]  (as (n, k))
    g, t = lane >> 2, lane & 3
    return {0: [(g, 4 * t + i) for i in range(4)], 1: [(g, 16 + 4 * t + i) for i in range(4)]}


@pytest.mark.parametrize("table,sheet", [(L.TF32_A, sheet_tf32_a), (L.TF32_B, sheet_tf32_b),
                                         (L.INT8_A, sheet_int8_a), (L.INT8_B, sheet_int8_b)],
                         ids=["tf32-A", "tf32-B", "int8-A", "int8-B"])
@pytest.mark.parametrize("lane", range(32))
def test_scalar_fragment_tables_match_the_sheet(table, sheet, lane):
    cells = sheet(lane)
    assert table.regs == len(cells) and all(len(v) == table.elems for v in cells.values())
    for reg, elems in cells.items():
        for elem, (mn, k) in enumerate(elems):
            got_mn, got_k = table.coord(reg, elem)
            assert (at(got_mn, lane), at(got_k, lane)) == (mn, k), (lane, reg, elem)


@pytest.mark.parametrize("table,rows", [(L.TF32_A, 16), (L.TF32_B, 8), (L.INT8_A, 16), (L.INT8_B, 8)])
def test_scalar_fragment_tables_cover_each_block_once(table, rows):
    k_len = 32 * table.elems // 4  # 8 tf32 or 32 int8: one mma k-step is 32 bytes of K
    seen = [(at(mn, lane), at(k, lane)) for lane in range(32) for reg in range(table.regs)
            for elem in range(table.elems) for mn, k in [table.coord(reg, elem)]]
    assert sorted(seen) == [(m, k) for m in range(rows) for k in range(k_len)]


def test_scalar_fragments_cover_the_sizes_ldmatrix_cannot_transpose():
    assert set(L.SCALAR_FRAGMENTS) == {(4, "A"), (4, "B"), (1, "A"), (1, "B")}


@pytest.mark.parametrize("layout", ["swizzle", "pad", "plain"])
def test_element_offsets_place_bytes_inside_the_chunk_the_copies_wrote(layout):
    from ptxgen.emit.index import Const
    tile = OperandTile("A", 32, 64, 1, True, layout, 128)  # 64-byte rows: 4 chunks, 2 swizzle bits
    swz = tile.swizzle_pattern
    for row in range(32):
        for col in range(64):
            chunk = at(smem_offset(Const(row), Const(col // 16), tile.pitch, swz), 0)
            assert at(smem_element_offset(Const(row), Const(col), tile.pitch, swz), 0) == chunk + col % 16
