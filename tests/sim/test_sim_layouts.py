"""The simulator's fragment tables, checked cell by cell against the tables of the PTX facts sheet.

The expected tables below are transcribed from docs/ptx_facts/ §1, §2 and §4 as written
there (register -> element), not derived from the simulator's formulas.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.sim import layouts

# (register, sub-element) -> (row, col) as functions of g = lane>>2, t = lane&3
SHEET_A_16BIT = {  # §1 table "A (16x16)"
    (0, 0): lambda g, t: (g, 2 * t), (0, 1): lambda g, t: (g, 2 * t + 1),
    (1, 0): lambda g, t: (g + 8, 2 * t), (1, 1): lambda g, t: (g + 8, 2 * t + 1),
    (2, 0): lambda g, t: (g, 2 * t + 8), (2, 1): lambda g, t: (g, 2 * t + 9),
    (3, 0): lambda g, t: (g + 8, 2 * t + 8), (3, 1): lambda g, t: (g + 8, 2 * t + 9),
}
SHEET_B_16BIT = {  # §1 "Rb0 = {lo: B[2t][g], hi: B[2t+1][g]}, Rb1 = {lo: B[2t+8][g], hi: B[2t+9][g]}"
    (0, 0): lambda g, t: (2 * t, g), (0, 1): lambda g, t: (2 * t + 1, g),
    (1, 0): lambda g, t: (2 * t + 8, g), (1, 1): lambda g, t: (2 * t + 9, g),
}
SHEET_C_F32 = {  # §1 "c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]"
    (0, 0): lambda g, t: (g, 2 * t), (1, 0): lambda g, t: (g, 2 * t + 1),
    (2, 0): lambda g, t: (g + 8, 2 * t), (3, 0): lambda g, t: (g + 8, 2 * t + 1),
}
SHEET_C_F16 = {  # §1 "R0 = {lo: C[g][2t], hi: C[g][2t+1]}, R1 = {lo: C[g+8][2t], hi: C[g+8][2t+1]}"
    (0, 0): lambda g, t: (g, 2 * t), (0, 1): lambda g, t: (g, 2 * t + 1),
    (1, 0): lambda g, t: (g + 8, 2 * t), (1, 1): lambda g, t: (g + 8, 2 * t + 1),
}
SHEET_A_TF32 = {  # §2a "a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]"
    (0, 0): lambda g, t: (g, t), (1, 0): lambda g, t: (g + 8, t),
    (2, 0): lambda g, t: (g, t + 4), (3, 0): lambda g, t: (g + 8, t + 4),
}
SHEET_B_TF32 = {(0, 0): lambda g, t: (t, g), (1, 0): lambda g, t: (t + 4, g)}  # §2a
SHEET_A_K8_16BIT = {  # §2c "Ra0 = {A[g][2t], A[g][2t+1]}, Ra1 = {A[g+8][2t], A[g+8][2t+1]}"
    (0, 0): lambda g, t: (g, 2 * t), (0, 1): lambda g, t: (g, 2 * t + 1),
    (1, 0): lambda g, t: (g + 8, 2 * t), (1, 1): lambda g, t: (g + 8, 2 * t + 1),
}
SHEET_B_K8_16BIT = {(0, 0): lambda g, t: (2 * t, g), (0, 1): lambda g, t: (2 * t + 1, g)}  # §2c


def _int8_a():  # §2b "Ra0 = A[g][4t..4t+3], Ra1 = A[g+8][4t..], Ra2 = A[g][16+4t..], Ra3 = A[g+8][16+4t..]"
    rows = {0: 0, 1: 8, 2: 0, 3: 8}
    cols = {0: 0, 1: 0, 2: 16, 3: 16}
    return {(r, b): (lambda g, t, r=r, b=b: (g + rows[r], cols[r] + 4 * t + b)) for r in range(4) for b in range(4)}


def _int8_b():  # §2b "Rb0 = B[4t..4t+3][g], Rb1 = B[16+4t..16+4t+3][g]"
    return {(r, b): (lambda g, t, r=r, b=b: (16 * r + 4 * t + b, g)) for r in range(2) for b in range(4)}


CASES = [
    ("a_m16n8k16_16bit", layouts.a_m16n8k16_16bit, SHEET_A_16BIT),
    ("b_m16n8k16_16bit", layouts.b_m16n8k16_16bit, SHEET_B_16BIT),
    ("c_m16n8_f32", layouts.c_m16n8_f32, SHEET_C_F32),
    ("c_m16n8_f16", layouts.c_m16n8_f16, SHEET_C_F16),
    ("a_m16n8k8_tf32", layouts.a_m16n8k8_tf32, SHEET_A_TF32),
    ("b_m16n8k8_tf32", layouts.b_m16n8k8_tf32, SHEET_B_TF32),
    ("a_m16n8k8_16bit", layouts.a_m16n8k8_16bit, SHEET_A_K8_16BIT),
    ("b_m16n8k8_16bit", layouts.b_m16n8k8_16bit, SHEET_B_K8_16BIT),
    ("a_m16n8k32_8bit", layouts.a_m16n8k32_8bit, _int8_a()),
    ("b_m16n8k32_8bit", layouts.b_m16n8k32_8bit, _int8_b()),
]


@pytest.mark.parametrize("name,build,sheet", CASES, ids=[c[0] for c in CASES])
def test_fragment_table_matches_sheet_cell_by_cell(name, build, sheet):
    table = build()
    assert table.shape[1] * table.shape[2] == len(sheet), "table has a different number of cells"
    checked = 0
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for (reg, sub), where in sheet.items():
            assert tuple(table[lane, reg, sub]) == where(g, t), f"{name} lane {lane} reg {reg} sub {sub}"
            checked += 1
    assert checked == 32 * len(sheet)


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_table_matches_sheet(trans):
    # §4: no trans: lane l gets {lo: M[l>>2][2(l&3)], hi: M[l>>2][2(l&3)+1]};
    #     .trans:   lane l gets {lo: M[2(l&3)][l>>2], hi: M[2(l&3)+1][l>>2]}
    table = layouts.ldmatrix_source(trans)
    for lane in range(32):
        for half in range(2):
            if trans:
                want = (2 * (lane & 3) + half, lane >> 2)
            else:
                want = (lane >> 2, 2 * (lane & 3) + half)
            assert tuple(table[lane, half]) == want


@pytest.mark.parametrize("name,build,sheet", CASES, ids=[c[0] for c in CASES])
def test_fragment_map_round_trips(name, build, sheet):
    table = build()
    rows = int(table[..., 0].max()) + 1
    cols = int(table[..., 1].max()) + 1
    fmap = layouts.fragment_map(table, rows, cols)
    matrix = np.arange(rows * cols) * 7 + 3
    fragment = matrix[fmap.to_fragment].reshape(table.shape[:3])
    for lane in (0, 5, 31):
        for reg in range(table.shape[1]):
            for sub in range(table.shape[2]):
                r, c = table[lane, reg, sub]
                assert fragment[lane, reg, sub] == matrix[r * cols + c]
    assert np.array_equal(fragment.reshape(-1)[fmap.to_matrix], matrix)


def test_fragment_map_rejects_a_non_bijection():
    table = layouts.c_m16n8_f32().copy()
    table[0, 0, 0] = table[0, 1, 0]
    with pytest.raises(AssertionError):
        layouts.fragment_map(table, 16, 8)
