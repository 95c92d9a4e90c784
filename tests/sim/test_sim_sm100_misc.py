"""Small sm_100a rules around tcgen05 (docs/ptx_facts/sm100_formats.md §6): setmaxnreg is
architecture-specific and runs on sm_100a as on sm_90a, wgmma stays sm_90a-only, griddepcontrol is a
no-op on one launch, and elect.sync runs on sm_100a."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim

from sim_util import kernel


def sm(ptx: str, target: str) -> str:
    return ptx.replace(".version 7.8\n.target sm_80", f".version 8.7\n.target {target}")


SETMAXNREG = ("    setmaxnreg.inc.sync.aligned.u32 232;\n    griddepcontrol.wait;\n"
              "    griddepcontrol.launch_dependents;\n    ret;")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a", "sm_120a"])
def test_setmaxnreg_runs_on_the_arch_specific_targets(target):
    sim.launch(sm(kernel(SETMAXNREG), target), "k", block=(128,), args=[np.zeros(1)])


@pytest.mark.parametrize("target", ["sm_90", "sm_100"])
def test_setmaxnreg_is_refused_without_the_a_suffix(target):
    with pytest.raises(sim.HazardError) as e:
        sim.launch(sm(kernel(SETMAXNREG), target), "k", block=(128,), args=[np.zeros(1)])
    assert e.value.kind == "unsupported" and "sm_100a" in e.value.detail and target in e.value.detail


def test_wgmma_stays_sm90a_only():
    body = "    wgmma.fence.sync.aligned;\n    ret;"
    with pytest.raises(sim.HazardError) as e:
        sim.launch(sm(kernel(body), "sm_100a"), "k", block=(128,), args=[np.zeros(1)])
    assert e.value.kind == "unsupported" and "sm_90a" in e.value.detail


def test_elect_sync_elects_one_lane_on_sm100a():
    body = """
    elect.sync %r1|%p1, 0xffffffff;
    selp.u32 %r2, 1, 0, %p1;
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd0, %rd0, %rd1;
    st.global.u32 [%rd0], %r2;
    ret;"""
    out = np.full(32, 7, np.uint32)
    sim.launch(sm(kernel(body), "sm_100a"), "k", block=(32,), args=[out])
    assert out.sum() == 1
