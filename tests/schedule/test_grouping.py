"""Grouped GEMM problems (schedule/grouping.py): construction checks with their fixes, the
verifier's grouped rules, the launch grid, and the worst-case m-tile bound the contiguous grid uses."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.errors import LoweringNotBuilt
from ptxgen.schedule.geometry import grid_for
from ptxgen.schedule.grouping import contiguous_tiles_bound, describe, random_counts


@pytest.mark.parametrize("kw, field, fix", [
    (dict(groups=4), "gemm.groups", "grouping='contiguous'"),
    (dict(groups=2, grouping="ragged"), "gemm.grouping", "grouping='contiguous'"),
    (dict(groups=0, grouping="masked"), "gemm.groups", "groups="),
    (dict(groups=2.0, grouping="masked"), "gemm.groups", "groups=2"),
    (dict(groups=2, grouping="masked", batch=3), "gemm.batch", "batch=1"),
    (dict(groups=2, grouping="contiguous", a_layout="col"), "gemm.a_layout", "a_layout='row'"),
    (dict(groups=5000, grouping="masked"), "gemm.groups", "several launches"),
])
def test_construction_refuses_with_a_fix(kw, field, fix):
    with pytest.raises(ScheduleError) as e:
        Gemm(64, 64, 64, **kw)
    assert e.value.field == field and fix in e.value.fix, str(e.value)


def test_masked_a_may_be_column_major():
    assert Gemm(64, 64, 64, groups=2, grouping="masked", a_layout="col").grouped


S = Schedule(block=(64, 64, 32))


@pytest.mark.parametrize("gemm_kw, schedule_kw, field, fix", [
    ({}, dict(split_k=2), "schedule.split_k", "split_k=1"),
    ({}, dict(decomposition="stream-k"), "schedule.decomposition", "decomposition='tiles'"),
    ({}, dict(raster="grouped"), "schedule.raster", "raster='row'"),
    ({}, dict(instruction="wmma", warps=(2, 2), smem_layout="pad"), "schedule.instruction", "m16n8k16"),
    (dict(dtype="tf32"), {}, "gemm.dtype", "dtype='f16'"),
    (dict(epilogue=Epilogue(bias="row")), {}, "epilogue.bias", "bias='col'"),
    (dict(epilogue=Epilogue(scale="row")), {}, "epilogue.scale", "scale='col'"),
])
def test_verifier_refuses_what_is_not_built(gemm_kw, schedule_kw, field, fix):
    g = Gemm(128, 64, 64, groups=3, grouping="contiguous", **gemm_kw)
    with pytest.raises(ScheduleError) as e:
        ptxgen.verify(g, Schedule(**{"block": (64, 64, 32), **schedule_kw}))
    assert e.value.field == field and fix in e.value.fix, str(e.value)


def test_sm90a_grouped_is_built_and_fp8_is_refused_on_mma_sync():
    g = Gemm(128, 128, 64, groups=2, grouping="masked")
    ptxgen.verify(g, Schedule(block=(128, 128, 64), instruction="wgmma"), "sm_90a")  # targets/sm90/grouped.py
    with pytest.raises(LoweringNotBuilt, match="cluster=\\(1, 1\\)"):
        ptxgen.verify(g, Schedule(block=(128, 128, 64), instruction="wgmma", cluster=(2, 1)), "sm_90a")
    with pytest.raises(ScheduleError, match="arch='sm_90a'"):
        ptxgen.verify(Gemm(128, 128, 64, dtype="e4m3", groups=2, grouping="masked"), Schedule(block=(64, 64, 32)))


def test_grids():
    contiguous = Gemm(200, 100, 64, groups=5, grouping="contiguous")
    assert grid_for(contiguous, S) == (2, contiguous_tiles_bound(contiguous, 64), 1)
    masked = Gemm(100, 100, 64, groups=7, grouping="masked")
    assert grid_for(masked, S) == (2, 2, 7)


@pytest.mark.parametrize("seed", range(30))
def test_contiguous_tiles_bound_covers_every_offs(seed):
    """Whatever offs holds, the groups' m-tiles fit the grid, and some offs needs every one of them."""
    rng = np.random.default_rng(seed)
    g = Gemm(int(rng.integers(1, 600)), 8, 8, groups=int(rng.integers(1, 40)), grouping="contiguous")
    bm = int(rng.choice([16, 32, 64, 128]))
    bound = contiguous_tiles_bound(g, bm)
    for _ in range(50):
        ends = random_counts(g, rng, empty=float(rng.uniform(0, 0.8)))
        sizes = np.diff(np.concatenate([[0], ends]))
        assert int(np.sum(-(-sizes // bm))) <= bound
    # groups of one row, then the rest in one group: each small group takes a whole tile
    ones = min(g.groups - 1, g.m)
    worst = np.array([1] * ones + [g.m - ones] + [0] * (g.groups - ones - 1))
    assert worst.sum() == g.m and int(np.sum(-(-worst // bm))) == bound


def test_describe_says_what_m_means():
    assert "m = M_total = 200" in describe(Gemm(200, 8, 8, groups=2, grouping="contiguous"))
    assert "m = max_m = 64" in describe(Gemm(64, 8, 8, groups=2, grouping="masked"))


def test_random_counts_are_valid():
    rng = np.random.default_rng(0)
    for grouping in ("contiguous", "masked"):
        g = Gemm(77, 8, 8, groups=9, grouping=grouping)
        for _ in range(20):
            counts = random_counts(g, rng)
            assert counts.dtype == np.int32 and counts.shape == (9,)
            if grouping == "contiguous":
                assert (np.diff(counts) >= 0).all() and 0 <= counts[0] and counts[-1] <= 77
            else:
                assert ((0 <= counts) & (counts <= 77)).all()
