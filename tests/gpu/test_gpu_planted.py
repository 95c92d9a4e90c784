"""Planted bugs on hardware. Whether a race shows up is hardware nondeterminism, so these
tests RECORD how often wrong data was observed instead of asserting it; they do assert that
the correct twin is always right and that the simulator flags the bug deterministically."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from gpu_helpers import (device_compile_arch, random_operands, record, reference, rel_fro, require_gpu,
                         require_hardware, sim_or)

require_gpu()

import ptxgen  # noqa: E402
from ptxgen import sim  # noqa: E402
from ptxgen.runtime import launch_ptx  # noqa: E402

from planted_cases import CHUNKS, THREADS, exchange_expected as _expected, exchange_ptx  # noqa: E402

RUNS = sim_or(200, 3)  # the simulator is deterministic: a few runs check the plumbing


def _run_many(ptx: str) -> tuple[int, int]:
    """(runs with wrong data, wrong words in the worst run) over RUNS launches."""
    rng = np.random.default_rng(0)
    wrong_runs, worst = 0, 0
    for _ in range(RUNS):
        src = rng.integers(1, 2**32 - 1, THREADS * CHUNKS * 4, dtype=np.uint64).astype(np.uint32)
        out = np.zeros_like(src)
        launch_ptx(ptx, "xchg", grid=1, block=THREADS, args=[src, out])
        bad = int((out != _expected(src)).sum())
        wrong_runs += bad > 0
        worst = max(worst, bad)
    return wrong_runs, worst


def test_correct_exchange_is_always_right():
    wrong, worst = _run_many(exchange_ptx(wait=True, barrier=True))
    assert wrong == 0, f"{wrong}/{RUNS} runs wrong even with wait_group + bar.sync"


@pytest.mark.parametrize("wait,barrier", [(False, True), (True, False)])
def test_missing_sync_observed_rate(wait, barrier):
    require_hardware("how often a planted race corrupts data is hardware nondeterminism, and the "
                     "simulator refuses the racy launch")
    ptx = exchange_ptx(wait, barrier)
    wrong, worst = _run_many(ptx)
    bug = "missing cp.async.wait_group" if not wait else "missing bar.sync"
    record(f"planted::{bug}", runs=RUNS, wrong_runs=wrong, worst_wrong_words=worst,
           words=THREADS * CHUNKS * 4)
    with pytest.raises(sim.HazardError):  # the simulator must flag it every time
        src = np.arange(THREADS * CHUNKS * 4, dtype=np.uint32)
        sim.launch(ptx, "xchg", grid=(1, 1, 1), block=(THREADS, 1, 1), args=[src, np.zeros_like(src)])


def test_gemm_without_wait_group_observed_rate():
    require_hardware("how often a missing cp.async.wait_group corrupts data is hardware "
                     "nondeterminism, and the simulator refuses the racy launch")
    arch = device_compile_arch()
    g = ptxgen.Gemm(512, 512, 512, dtype="f16", out_dtype="f32")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(128, 128, 32), stages=3), arch=arch)
    lines = kern.ptx.splitlines()
    kept = [ln for ln in lines if not re.match(r"\s*cp\.async\.wait_group\b", ln)]
    if len(kept) == len(lines):
        pytest.skip("this kernel has no cp.async.wait_group to remove")
    # keep line count stable for error reports: replace each removed wait by a comment
    planted = "\n".join(ln if ln in kept else "    // planted bug: wait_group removed"
                        for ln in lines) + "\n"
    buggy = dataclasses.replace(kern, ptx=planted, _assembled=None)
    a, b = random_operands(g, 11)
    ref = reference(a, b)
    errs = []
    for _ in range(20):
        c = buggy(a, b, c=np.full((g.m, g.n), np.nan, np.float32))
        errs.append(rel_fro(c, ref))
    wrong = sum(e > 1e-3 or not np.isfinite(e) for e in errs)
    record("planted::gemm_without_wait_group", runs=len(errs), wrong_runs=wrong,
           max_rel_err=float(np.nanmax(errs)) if errs else None, schedule=str(kern.schedule))
    with pytest.raises(sim.HazardError):
        buggy.simulate(a, b, ctas=[(0, 0, 0)])
