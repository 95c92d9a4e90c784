"""Every schedule of the sweep assembles for sm_80 and sm_90 with 0 spill bytes."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen.schedule.geometry import smem_bytes

from .sweep_cases import ROWS, case_id, sweep

CASES = sweep()


def test_sweep_covers_the_issue_space():
    assert len(CASES) >= 24
    blocks = {s.block for _, s in CASES}
    assert {b[0] for b in blocks} >= {64, 128, 256} and {b[1] for b in blocks} >= {64, 128, 256}
    assert {b[2] for b in blocks} == {32, 64}
    assert {s.warps for _, s in CASES} >= {(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2)}
    assert {s.stages for _, s in CASES} == {1, 2, 3, 4, 5}
    assert {s.smem_layout for _, s in CASES} == {"swizzle", "pad", "plain"}
    assert {(g.a_layout, g.b_layout) for g, _ in CASES} == {("row", "row"), ("row", "col"), ("col", "row"),
                                                            ("col", "col")}
    assert {g.dtype for g, _ in CASES} == {"f16", "bf16"}
    assert {g.out_dtype for g, _ in CASES} == {"f32", "f16", "bf16"}
    assert len({case_id(c) for c in CASES}) == len(ROWS)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_assembles_without_spills(case, arch):
    g, s = case
    k = ptxgen.compile(g, s, arch)
    r = k.resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0, str(r)
    assert r.stack_bytes == 0
    assert 0 < r.registers <= 255
    assert k.smem_bytes == smem_bytes(g, s)
