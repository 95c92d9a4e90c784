"""Measuring grouped candidates (tune/measure.py) through the simulator-backed driver: each is
checked group by group with balanced sizes passed on the device, then timed (which the stand-in
refuses, so nothing is cached)."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen.schedule.grouping import balanced_counts
from ptxgen.tune.measure import TIMING_UNAVAILABLE, DeviceMeasure, grouped_sizes


@pytest.fixture
def stand_in(monkeypatch):
    from ptxgen.runtime import simdriver

    reason = simdriver.compiler_unavailable_reason()
    if reason:
        pytest.skip(f"the stand-in driver cannot be built: {reason}")
    monkeypatch.setenv("PTXGEN_DRIVER", "sim")


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_grouped_candidates_are_checked_with_their_sizes_on_the_device(stand_in, grouping):
    g = ptxgen.Gemm(48, 32, 40, groups=3, grouping=grouping)
    k = ptxgen.compile(g, ptxgen.Schedule(block=(32, 32, 32)), "sm_90")
    m = DeviceMeasure(repeats=1, warmup=0).measure_kernel(k)
    assert m.status == TIMING_UNAVAILABLE and "checked correct" in m.reason, m.reason


def test_balanced_sizes_cover_every_row():
    contiguous = ptxgen.Gemm(100, 8, 8, groups=3, grouping="contiguous")
    assert balanced_counts(contiguous).tolist() == [33, 67, 100]
    masked = ptxgen.Gemm(50, 8, 8, groups=2, grouping="masked")
    assert grouped_sizes(masked)["masked_m"].tolist() == [50, 50]
    assert grouped_sizes(ptxgen.Gemm(8, 8, 8)) == {}
