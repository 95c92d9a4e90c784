"""Split-K: workspace (deterministic) and atomic modes, on the simulator's cross-CTA model."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError, sim
from ptxgen.check import random_operands
from tests import harness


@pytest.mark.parametrize("g,s", [
    (Gemm(128, 128, 256), Schedule(block=(64, 64, 32), split_k=4)),
    (Gemm(100, 70, 300, out_dtype="bf16", batch=2, epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col",
                                                                   activation="gelu")),
     Schedule(block=(64, 64, 32), split_k=3, stages=3)),
    (Gemm(64, 64, 96, a_layout="col", b_layout="row"), Schedule(block=(64, 64, 32), split_k=3, stages=1)),
    (Gemm(128, 128, 256), Schedule(block=(64, 64, 32), split_k=3, split_k_mode="atomic")),
    (Gemm(33, 65, 129, epilogue=Epilogue(alpha=2.0)), Schedule(block=(64, 64, 32), split_k=5,
                                                               split_k_mode="atomic", stages=1)),
], ids=["workspace", "workspace-batch-epilogue-edges", "workspace-layouts", "atomic", "atomic-edges-alpha"])
def test_split_k_matches_numpy(g, s):
    harness.check(g, s, bound=False)


#: The same split-K problem on both math backends: mma.sync fragments and wmma's opaque ones.
BACKENDS = {"mma": Schedule(block=(64, 64, 32), split_k=4),
            "wmma": Schedule(block=(64, 64, 32), split_k=4, instruction="wmma", smem_layout="pad")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_workspace_mode_is_deterministic_whoever_arrives_last(backend):
    g, s = Gemm(64, 64, 256), BACKENDS[backend]
    orders = [range(4), reversed(range(4)), [2, 0, 3, 1]]
    results = [harness.check(g, s, ctas=[(0, 0, z) for z in order], bound=False).out for order in orders]
    for c in results[1:]:
        assert np.array_equal(results[0].view(np.uint32), c.view(np.uint32))


def test_workspace_and_flag_reuse():
    k = ptxgen.compile(Gemm(128, 128, 256), Schedule(block=(64, 64, 32), split_k=4))
    assert k.workspace_elements == 4 * 128 * 128 and k.counter_count == 4
    a_end = 3 * 64 * 32 * 2  # A: 3 stages of a 64x32 f16 tile
    assert k.smem_plan.offsets["B"] == a_end and k.smem_bytes == 2 * a_end, "epilogue buffers add no bytes"
    flag = k.smem_plan.offsets["split_k_flag"]
    assert flag + 4 <= k.smem_bytes and k.smem_plan.offsets["C_stage"] == 0, "they reuse the tiles' bytes"
    assert k.grid == (2, 2, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_acquire_is_caught_as_a_race(backend):
    g = Gemm(64, 64, 128)
    k = ptxgen.compile(g, replace(BACKENDS[backend], split_k=2))
    broken = k.ptx.replace("atom.acq_rel.gpu.global.add.u32", "atom.relaxed.gpu.global.add.u32")
    broken = "\n".join(l for l in broken.splitlines() if "fence.acq_rel.gpu" not in l)
    assert broken != k.ptx
    a, b = random_operands(g)
    c = np.zeros((64, 64), np.float32)
    args = [a, b.T, c, 64, 64, 128, 128, 128, 64, np.zeros(k.workspace_elements, np.float32),
            np.zeros(k.counter_count, np.uint32)]
    with pytest.raises(sim.HazardError) as info:
        sim.launch(broken, k.entry, grid=k.grid, block=k.block, args=args, dynamic_smem=k.smem_bytes)
    assert info.value.kind == "race"


@pytest.mark.parametrize("g,s,field", [
    (Gemm(64, 64, 96), Schedule(block=(64, 64, 32), split_k=4), "schedule.split_k"),  # 3 k-tiles
    (Gemm(64, 64, 160), Schedule(block=(64, 64, 32), split_k=4), "schedule.split_k"),  # 5: 2,2,1,- empty
    (Gemm(64, 64, 256, out_dtype="f16"), Schedule(block=(64, 64, 32), split_k=2, split_k_mode="atomic"),
     "schedule.split_k_mode"),
    (Gemm(64, 64, 256, epilogue=Epilogue(activation="relu")),
     Schedule(block=(64, 64, 32), split_k=2, split_k_mode="atomic"), "schedule.split_k_mode"),
    (lambda: (Gemm(64, 64, 256), Schedule(block=(64, 64, 32), split_k=2, split_k_mode="tree")), None, "schedule.split_k_mode"),
    (Gemm(64, 64, 256, dtype="f16", out_dtype="f16", acc_dtype="f16"), Schedule(block=(64, 64, 32), split_k=2),
     "schedule.split_k"),
])
def test_split_k_rules(g, s, field):
    with pytest.raises(ScheduleError) as info:  # a lambda: a bad value on its own raises when built
        ptxgen.verify(*(g() if callable(g) else (g, s)))
    assert info.value.field == field


def test_counters_end_zero_and_stale_partials_do_not_matter():
    """The README's contract for the scratch buffers: the kernel leaves its counters at zero, so the
    next launch may reuse them; the workspace is NOT left zeroed (it keeps the partials) and needs no
    zeroing: a relaunch over a NaN-poisoned workspace is still exact."""
    g = Gemm(128, 96, 256)
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32), split_k=4))
    a, b = random_operands(g)
    work, counters = np.zeros(k.workspace_elements, np.float32), np.zeros(k.counter_count, np.uint32)
    outs = []
    for launch in range(2):
        c = np.full((g.m, g.n), np.nan, np.float32)
        sim.launch(k.ptx, k.entry, grid=k.grid, block=k.block, dynamic_smem=k.smem_bytes,
                   args=[a, b, c, g.m, g.n, g.k, g.k, g.k, g.n, work, counters])
        assert not counters.any(), "every tile counter is back at zero"
        assert np.count_nonzero(work) > 0, "the partials stay in the workspace"
        outs.append(c)
        work[:] = np.nan  # stale data in the workspace must not leak into the next launch
    _, result = harness.judge(g, outs[0], harness.Operands(a, b), bound=False)
    assert result.ok and np.array_equal(outs[0], outs[1]), str(result)
