"""A CTA may not end with an asynchronous access of its shared memory still in flight (issue 21;
ptxgen/sim/exit_checks.py, docs/ptx_facts/tma.md §9d-exit): its shared memory can be given to the
next CTA once its last thread exits. Each kind, planted and fixed: a bulk store not covered by a
cp.async.bulk.wait_group{.read}, a cp.async with no wait, a TMA load whose phase nobody waited
for, a wgmma with no wgmma.wait_group. The hazard names the line that issued the operation."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of
from test_sim_async_strict import NT, bulk_load_kernel, bulk_store_kernel, run_store, wgmma_kernel


def _flagged(ptx: str, marker: str, launch) -> sim.HazardError:
    with pytest.raises(sim.HazardError) as e:
        launch(ptx)
    assert e.value.kind == "async-pending" and e.value.line == line_of(ptx, marker), e.value
    assert "exits" in e.value.detail
    return e.value


def _store_kernel(wait: str) -> str:
    """Thread 0 bulk-stores the staged buffer and commits; `wait` replaces its wait; no rewrite."""
    ptx = bulk_store_kernel(after_wait="", rewrite="", between="")
    return ptx.replace("    @%p0 cp.async.bulk.wait_group.read 0;   // WAIT\n", wait)


@pytest.mark.parametrize("wait", ["@%p0 cp.async.bulk.wait_group.read 0;", "@%p0 cp.async.bulk.wait_group 0;"])
def test_a_bulk_store_waited_for_before_exit_is_clean(wait):
    run_store(_store_kernel(f"    {wait}\n"))


@pytest.mark.parametrize("wait", ["", "    @%p0 cp.async.bulk.wait_group.read 1;\n",
                                  "    @!%p0 cp.async.bulk.wait_group.read 0;\n"])
def test_a_bulk_store_still_reading_shared_memory_at_exit_is_flagged(wait):
    """No wait, a wait that leaves the last group pending, or a wait by threads that did not issue it."""
    e = _flagged(_store_kernel(wait), "STORE", run_store)
    assert "wait_group.read 0" in e.detail and "thread 0" in e.detail


def _cp_async_kernel(wait: str) -> str:
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    mul.wide.u32 %rd3, %r1, 16;
    add.u64 %rd4, %rd1, %rd3;
    mov.u32 %r2, buf;
    mad.lo.u32 %r3, %r1, 16, %r2;
    cp.async.cg.shared.global [%r3], [%rd4], 16;   // COPY
    cp.async.commit_group;
{wait}    ret;""", params=".param .u64 pOut, .param .u64 pIn", shared=".shared .align 16 .b8 buf[512];")


def _run_cp(ptx: str) -> None:
    sim.launch(ptx, "k", block=(32,), args=[np.zeros(4, np.uint8), np.ones(512, np.uint8)])


def test_a_cp_async_not_landed_at_exit_is_flagged_and_a_wait_fixes_it():
    _flagged(_cp_async_kernel(""), "COPY", _run_cp)
    _run_cp(_cp_async_kernel("    cp.async.wait_group 0;\n"))
    _run_cp(_cp_async_kernel("    cp.async.wait_all;\n"))


def test_a_tma_load_whose_phase_nobody_waited_for_is_flagged_at_exit():
    good = bulk_load_kernel(after_wait="    bar.sync 0;\n")
    bad = good.replace("   // LOAD\n", "   // LOAD\n    ret;\n")
    src = np.ones(16 * NT, np.uint8)

    def run(ptx):
        sim.launch(ptx, "k", block=(NT,), args=[src, np.zeros_like(src)])
    _flagged(bad, "LOAD", run)
    run(good)


def test_a_wgmma_in_flight_at_exit_is_flagged():
    """Both warpgroups issue and commit a wgmma; without the wgmma.wait_group it still reads shared
    memory when the CTA ends."""
    good = "\n".join(line for line in wgmma_kernel("").split("\n") if "// REWRITE" not in line)
    good = good.replace("1, 1, 0, 0;", "1, 1, 0, 0;   // MMA")
    bad = "\n".join(line for line in good.split("\n") if "// WAIT" not in line)

    def run(ptx):
        sim.launch(ptx, "k", block=(256,), args=[np.zeros(4, np.uint32)])
    run(good)
    e = _flagged(bad, "MMA", run)
    assert "wgmma.wait_group 0" in e.detail
