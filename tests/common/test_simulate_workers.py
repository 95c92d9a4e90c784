"""Kernel.simulate(workers=N / "ray"): CTAs spread over processes or Ray give the serial run's bytes.

Kernels whose CTAs wait on each other (split-K, Stream-K) keep each communicating group in one
task; what a spread run could not reproduce is refused; a race between tasks is reported.
"""
from __future__ import annotations

import dataclasses
import re
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_epilogue_operands, random_operands, random_scale
from ptxgen.sim import HazardError
from ptxgen.simulate import run_simulation, sample_ctas
from ptxgen.scaleout.simulate import (GroupResult, Merger, OverlappingWrites, changed_runs,
                                    communication_groups, run_indices)

from tests.draws import draw_gemm, draw_small_schedule

LIMIT_S = 300


pytestmark = pytest.mark.usefixtures("bounded")   # each test stops after LIMIT_S (conftest.py)


def both_runs(k, ctas=None, workers=2, **spread):
    """(serial C, serial SimResult, spread C, spread SimResult) on the same operands."""
    g = k.gemm
    a, b = random_operands(g, seed=5)
    c0, bias = random_epilogue_operands(g, seed=6)
    scale = random_scale(g)
    runs = []
    for w in (1, workers):
        runs += run_simulation(k, a, b, ctas, c=None if c0 is None else c0.copy(), bias=bias, scale=scale,
                               workers=w, **spread)
    return runs


def assert_identical(k, ctas=None, workers=2, **spread):
    c1, r1, c2, r2 = both_runs(k, ctas, workers, **spread)
    assert c1.tobytes() == c2.tobytes()
    assert (r1.instructions, r1.smem_wavefronts, r1.ctas, r1.global_addresses) == \
           (r2.instructions, r2.smem_wavefronts, r2.ctas, r2.global_addresses)


@pytest.mark.parametrize("g,s", [
    (Gemm(128, 192, 64), Schedule(block=(64, 64, 32))),
    (Gemm(100, 70, 300, out_dtype="bf16", batch=2, epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col")),
     Schedule(block=(64, 64, 32), split_k=3)),
    (Gemm(128, 128, 256), Schedule(block=(64, 64, 32), split_k=3, split_k_mode="atomic")),
    (Gemm(200, 136, 300), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=5)),
    (Gemm(64 * 6, 64, 64), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=4)),
], ids=["tiles", "workspace-split-k-batch-epilogue", "atomic-split-k", "stream-k", "stream-k-two-chains"])
def test_spread_run_is_bit_identical_to_serial(g, s):
    assert_identical(ptxgen.compile(g, s))


def test_communicating_ctas_share_a_task():
    # split-K: the splits of a tile (same x, y and batch) together, every tile its own group
    k = ptxgen.compile(Gemm(128, 128, 256, batch=2), Schedule(block=(64, 64, 32), split_k=3))
    groups = communication_groups(k, None)
    assert len(groups) == 2 * 2 * 2 and all(len(grp) == 3 for grp in groups)
    assert all(len({(x, y, z // 3) for x, y, z in grp}) == 1 for grp in groups)
    # Stream-K over 6 tiles of 2 k-tiles on 4 CTAs: the hybrid makes 2 whole-tile waves (CTAs run
    # tiles 0-3 whole), then 2 tiles of 4 iterations shared out one each: CTAs {0, 1} and {2, 3}
    k = ptxgen.compile(Gemm(64 * 6, 64, 64), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=4))
    assert sorted(sorted(grp) for grp in communication_groups(k, None)) == \
        [[(0, 0, 0), (1, 0, 0)], [(2, 0, 0), (3, 0, 0)]]
    # CTAs that never talk: one each
    k = ptxgen.compile(Gemm(128, 192, 64), Schedule(block=(64, 64, 32)))
    assert communication_groups(k, None) == [[cta] for cta in sorted(
        [(x, y, 0) for x in range(k.grid[0]) for y in range(k.grid[1])], key=lambda c: (c[1], c[0]))]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_kernels_spread_bit_identically(data):
    g = draw_gemm(data, [33, 64, 100, 129])
    how = data.draw(st.sampled_from(["tiles", "workspace", "atomic", "stream-k"]), label="decomposition")
    extra = {"tiles": {}, "workspace": {"split_k": 2}, "atomic": {"split_k": 3, "split_k_mode": "atomic"},
             "stream-k": {"decomposition": "stream-k", "sms": 3}}[how]
    if how == "atomic":
        g = dataclasses.replace(g, out_dtype="f32")  # atomic split-K adds into an f32 C
    try:
        k = ptxgen.compile(g, draw_small_schedule(data, **extra))
    except ScheduleError:  # the verifier prunes what cannot be lowered (a split without k-tiles)
        assume(False)
    assert_identical(k, workers=data.draw(st.sampled_from([2, 3]), label="workers"))


def test_sampled_ctas_and_progress():
    k = ptxgen.compile(Gemm(64 * 5, 64 * 5, 64), Schedule(block=(64, 64, 32), split_k=2))
    ctas = sample_ctas(k)
    assert ctas is not None and len(ctas) < k.grid[0] * k.grid[1] * k.grid[2]
    assert_identical(k, ctas=ctas)
    a, b = random_operands(k.gemm)
    seen = []
    k.simulate(a, b, ctas=ctas, workers=2, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (len(ctas), len(ctas)) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert all(d % 2 == 0 for d, _ in seen)  # both splits of a tile finish together


def test_hazard_in_a_worker_is_the_serial_runs_hazard():
    # CTA 1 owns a tile CTA 0 shares (chains {0, 1} and {2, 3}, see above); without CTA 0 it waits
    # for a flag nobody sets: deadlock, raised in a worker process while the other chain completes
    k = ptxgen.compile(Gemm(64 * 6, 64, 64), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=4))
    a, b = random_operands(k.gemm)
    errors = []
    for workers in (1, 2):
        with pytest.raises(HazardError) as info:
            k.simulate(a, b, ctas=[(1, 0, 0), (2, 0, 0), (3, 0, 0)], workers=workers)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and errors[0].startswith("deadlock")


def test_atomic_split_k_beyond_the_resident_window_is_refused():
    # 3 splits of 60x60 tiles: 10800 CTAs, more than the simulator keeps resident, so the order of the
    # f32 atomics (and their rounding) in the serial run cannot be reproduced by separate tasks
    k = ptxgen.compile(Gemm(64 * 60, 64 * 60, 96), Schedule(block=(64, 64, 32), split_k=3, split_k_mode="atomic"))
    a, b = random_operands(k.gemm)
    with pytest.raises(ValueError, match=r"split_k_mode='workspace'.*|workers=1"):
        k.simulate(a, b, workers=2)
    # a few tiles (all resident at once) spread fine
    assert_identical(k, ctas=[(x, 0, z) for x in range(2) for z in range(3)])


def test_ctas_of_different_tasks_writing_the_same_bytes_are_a_race():
    k = ptxgen.compile(Gemm(128, 64, 64), Schedule(block=(64, 64, 32), raster="row"))
    every_cta_on_tile_0 = re.sub(r"%ctaid\.[xy]", "0", k.ptx)
    broken = dataclasses.replace(k, ptx=every_cta_on_tile_0)
    a, b = random_operands(k.gemm)
    with pytest.raises(HazardError, match="race"):
        broken.simulate(a, b)  # the serial run's race model
    with pytest.raises(OverlappingWrites, match=r"both wrote byte .* a race"):
        broken.simulate(a, b, workers=2)


def test_changed_runs_round_trip():
    before = np.zeros(40, np.uint8)
    after = before.copy()
    after[[3, 4, 5, 9, 20, 21, 39]] = [1, 2, 3, 4, 5, 6, 7]
    starts, lengths, data = changed_runs(before, after)
    assert starts.tolist() == [3, 9, 20, 39] and lengths.tolist() == [3, 1, 2, 1]
    assert run_indices(starts, lengths).tolist() == [3, 4, 5, 9, 20, 21, 39]
    merged = np.zeros(40, np.uint8)
    Merger(merged, [[(0, 0, 0)]]).add(0, GroupResult(starts, lengths, data, 0, {}, 1, {}))
    assert merged.tobytes() == after.tobytes()


def test_bad_workers_are_refused_before_any_work():
    k = ptxgen.compile(Gemm(64, 64, 64), Schedule(block=(64, 64, 32)))
    a, b = random_operands(k.gemm)
    with pytest.raises(ValueError, match="at least 1 process"):
        k.simulate(a, b, workers=0)


def test_ray_without_ray_installed_names_the_extra(monkeypatch):
    k = ptxgen.compile(Gemm(64, 128, 64), Schedule(block=(64, 64, 32)))
    a, b = random_operands(k.gemm)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[cluster\]"'):
        k.simulate(a, b, workers="ray")


def test_simulate_on_local_ray_is_bit_identical(local_ray):
    assert_identical(ptxgen.compile(Gemm(100, 70, 300, batch=2), Schedule(block=(64, 64, 32), split_k=2)),
                     workers="ray")


# -- sm_90a kernels: tensor maps by value ----------------------------------------------------------
def _sm90(g: Gemm, block=(64, 64, 64), split_k=1, sms=None):
    walk = dict(decomposition="stream-k-pure", sms=sms) if sms else dict(persistent=False, split_k=split_k)
    s = Schedule(block=block, instruction="wgmma", stages=2, warp_specialized=False, consumers=1, **walk)
    return ptxgen.compile(g, s, arch="sm_90a")


@pytest.mark.parametrize("g, split_k", [
    (Gemm(100, 72, 136, a_layout="row", b_layout="col",
          epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row")), 1),
    (Gemm(72, 136, 96, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row", batch=3), 1),
    (Gemm(72, 64, 264, a_layout="row", b_layout="col", batch=2, epilogue=Epilogue(beta=1.0, bias="col")), 3),
    (Gemm(200, 136, 192, a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0, bias="row")), -5),
], ids=["tn-edges-epilogue", "nt-batched", "split-k-batched", "stream-k-5-ctas"])
def test_sm90a_spread_run_is_bit_identical_to_serial(g, split_k):
    """The CUtensorMap arguments (sim.TensorMap) reach the workers: the same C, counts and addresses;
    split-K's splits of a tile, and Stream-K's chains of CTAs sharing tiles, share a task
    (split_k < 0: Stream-K over -split_k CTAs)."""
    k = _sm90(g, sms=-split_k) if split_k < 0 else _sm90(g, split_k=split_k)
    assert_identical(k, workers=3)


def test_sm90a_workers_keep_a_strided_view_of_the_operands(monkeypatch):
    """A's matrices further apart than dense and rows wider than K, with spawned workers (the job
    pickled, as for Ray): pickled as it is, a TensorMap's view would arrive as a contiguous copy
    without those strides (simulate_spread.ShippedMap)."""
    from ptxgen import scaleout

    monkeypatch.setattr(scaleout, "start_method", lambda: "spawn")
    g = Gemm(72, 64, 64, a_layout="row", b_layout="col", batch=2)
    k = _sm90(g)
    a, b = random_operands(g, seed=2)
    wide = np.zeros((4, 72, 80), a.dtype)
    wide[::2, :, :64] = a
    view = wide[::2, :, :64]
    c1, r1 = run_simulation(k, view, b, workers=1)
    c2, r2 = run_simulation(k, view, b, workers=2)
    assert c1.tobytes() == c2.tobytes() and r1.global_addresses == r2.global_addresses
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c2 - ref).max() < 1e-3


def test_cluster_kernels_spread_by_whole_clusters():
    # a cluster runs as a unit, so a task holds whole clusters; before, each CTA was its own task, each
    # task ran the CTA's whole cluster, and the merge refused the peers' identical writes as a race
    g = Gemm(256, 256, 128, dtype="f16", out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(128, 64, 64), instruction="wgmma", stages=2, cluster=(2, 1), sms=4),
                       arch="sm_90a")
    groups = communication_groups(k, None)
    size = k.cluster_dims[0] * k.cluster_dims[1] * k.cluster_dims[2]
    assert size == 2 and all(len(grp) == size for grp in groups) and len(groups) == k.grid[0] // size
    assert_identical(k)
