"""Compiled kernels run on the CPU simulator and match a float64 numpy reference.

Inputs are random and never zero, C is poisoned with NaN, and the simulator's race, async-copy,
bounds and alignment checks are on for every run.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, ScheduleError
from ptxgen.simulate import run_simulation
from tests import harness

from .sweep_cases import case_id, sweep


def check(k: ptxgen.Kernel, ctas=None, seed: int = 0):
    """The harness's check of the simulated CTAs' tiles (nothing written elsewhere); the simulator's
    result (shared-memory wavefronts)."""
    results = []

    def simulate(a, b, **options):
        c, res = run_simulation(k, a, b, **options)
        results.append(res)
        return c

    harness.check(k, seed=seed, ctas=ctas, bound=False, simulate=simulate)
    return results[-1]


def conflicts(k: ptxgen.Kernel, res) -> dict[str, int]:
    """Extra wavefronts per instruction family (ldmatrix, cp.async) over the ideal."""
    lines = k.ptx.splitlines()
    extra = {"ldmatrix": 0, "cp.async": 0}
    for line, (w, ideal) in res.smem_wavefronts.items():
        text = lines[line - 1]
        for fam in extra:
            if fam in text:
                extra[fam] += w - ideal
    return extra


@st.composite
def legal_case(draw):
    bm = draw(st.sampled_from([64, 128]), label="BM")
    bn = draw(st.sampled_from([64, 128]), label="BN")
    bk = draw(st.sampled_from([32, 64]), label="BK")
    wm = draw(st.sampled_from([1, 2, 4]), label="WM")
    wn = draw(st.sampled_from([1, 2]), label="WN")
    stages = draw(st.integers(1, 5), label="stages")
    kt = draw(st.integers(1, 6), label="k-tiles")  # includes K/BK < stages
    g = Gemm(bm * draw(st.integers(1, 2), label="M tiles"), bn * draw(st.integers(1, 2), label="N tiles"),
             bk * kt, dtype=draw(st.sampled_from(["f16", "bf16"]), label="dtype"),
             out_dtype=draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
             a_layout=draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=draw(st.sampled_from(["row", "col"]), label="b_layout"))
    s = Schedule(block=(bm, bn, bk), warps=(wm, wn), stages=stages,
                 smem_layout=draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                 raster=draw(st.sampled_from(["row", "grouped"]), label="raster"), group_m=2,
                 frag_double_buffer=draw(st.booleans(), label="dbuf"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    return g, s, draw(st.integers(0, 2**16), label="seed")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(legal_case())
def test_random_schedules_match_numpy(case):
    g, s, seed = case
    k = ptxgen.compile(g, s)
    gx, gy, _ = k.grid
    ctas = [(gx - 1, gy - 1, 0)] if gx * gy > 2 else None  # the far corner, or the whole small grid
    res = check(k, ctas, seed)
    if s.smem_layout == "swizzle":
        assert conflicts(k, res) == {"ldmatrix": 0, "cp.async": 0}


@pytest.mark.parametrize("case", sweep(), ids=case_id)
def test_every_sweep_schedule_is_correct(case):
    g, s = case
    g = Gemm(s.bm, s.bn, 2 * s.bk, g.dtype, g.out_dtype, g.a_layout, g.b_layout)
    k = ptxgen.compile(g, s)
    res = check(k)
    found = conflicts(k, res)
    if s.smem_layout == "swizzle":
        assert found == {"ldmatrix": 0, "cp.async": 0}


def test_plain_layout_shows_the_conflicts_swizzle_removes():
    g = Gemm(128, 128, 64)
    plain = ptxgen.compile(g, Schedule(block=(128, 128, 64), smem_layout="plain"))
    swz = ptxgen.compile(g, Schedule(block=(128, 128, 64), smem_layout="swizzle"))
    assert conflicts(plain, check(plain))["ldmatrix"] > 0
    assert conflicts(swz, check(swz)) == {"ldmatrix": 0, "cp.async": 0}


def test_multi_cta_grid_with_grouped_raster_covers_every_tile():
    g = Gemm(256, 384, 64, out_dtype="bf16")
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32), warps=(2, 2), stages=2, raster="grouped", group_m=3))
    check(k)  # whole grid: 4 x 6 CTAs; no NaN left, no cross-CTA race
