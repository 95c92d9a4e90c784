"""Small sm_100a rules around tcgen05 (docs/ptx_facts/sm100_formats.md §6): setmaxnreg is
architecture-specific and runs on sm_100a as on sm_90a, wgmma stays sm_90a-only, griddepcontrol is a
no-op on one launch, and elect.sync runs on sm_100a."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim

from sim_util import kernel, line_of


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


BRX = """
    mov.u32 %r0, %tid.x;
    INDEX
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd0, %rd0, %rd1;
    brx.idxUNI %r1, tlist;   // BRX
L_a:
    mov.u32 %r2, 10;
    bra.uni L_done;
L_b:
    mov.u32 %r2, 20;
    bra.uni L_done;
L_c:
    mov.u32 %r2, 30;
L_done:
    st.global.u32 [%rd0], %r2;
    ret;
tlist: .branchtargets L_c, L_a, L_b;"""


def brx_kernel(index: str, uni: bool = False, target: str = "sm_100a") -> str:
    return sm(kernel(BRX.replace("INDEX", index).replace("UNI", ".uni" if uni else "")), target)


def test_brx_idx_sends_each_thread_to_its_listed_label():
    # index = tid % 3 -> list position 0, 1, 2 = L_c (30), L_a (10), L_b (20); threads disagree within warps
    out = np.zeros(96, np.uint32)
    sim.launch(brx_kernel("rem.u32 %r1, %r0, 3;"), "k", block=(96,), args=[out])
    assert out.tolist() == [(30, 10, 20)[t % 3] for t in range(96)]


def test_brx_idx_uni_with_warp_uniform_indices():
    out = np.zeros(96, np.uint32)
    sim.launch(brx_kernel("shr.u32 %r1, %r0, 5;", uni=True), "k", block=(96,), args=[out])
    assert out.tolist() == [(30, 10, 20)[t // 32] for t in range(96)]


def test_brx_idx_uni_that_splits_a_warp_is_divergence():
    ptx = brx_kernel("and.b32 %r1, %r0, 1;", uni=True)
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(32,), args=[np.zeros(32, np.uint32)])
    assert e.value.kind == "divergence" and e.value.line == line_of(ptx, "BRX")


def test_brx_idx_past_the_list_is_reported():
    ptx = brx_kernel("mov.u32 %r1, 3;")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(32,), args=[np.zeros(32, np.uint32)])
    assert e.value.kind == "out-of-bounds" and "past the end of tlist (3 targets)" in e.value.detail


def test_brx_idx_needs_a_declared_list():
    ptx = brx_kernel("mov.u32 %r1, 0;").replace("tlist: .branchtargets", "other: .branchtargets")
    with pytest.raises(sim.HazardError, match="not a `.branchtargets` list"):
        sim.launch(ptx, "k", block=(32,), args=[np.zeros(32, np.uint32)])
    ptx = brx_kernel("mov.u32 %r1, 0;").replace("tlist: .branchtargets", ".branchtargets")
    with pytest.raises(sim.HazardError, match="needs its own label"):
        sim.launch(ptx, "k", block=(32,), args=[np.zeros(32, np.uint32)])
