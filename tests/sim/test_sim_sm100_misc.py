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


CLC = """
    .reg .b128 %rq<2>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;            // response at +0 (16-byte aligned), mbarrier at +16
    add.u32 %r2, %r1, 16;
    setp.eq.u32 %p0, %r0, 0;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    bar.sync 0;
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 16;
    @%p0 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1], [%r2];   // TRY
WAIT
    ld.shared.v2.b64 {%rd4, %rd5}, [%r1];      // READ
    mov.b128 %rq1, {%rd4, %rd5};
    clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p2, %rq1;
    clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %r5, %rq1;
    selp.u32 %r6, 1, 0, %p2;
    mov.b128 {%rd6, %rd7}, %rq1;
    mov.u32 %r7, %ctaid.x;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r7, 16;
    add.u64 %rd0, %rd0, %rd1;
    @%p0 st.global.v2.u32 [%rd0], {%r6, %r5};
    @%p0 st.global.u64 [%rd0+8], %rd7;
    ret;"""
WAIT_LOOP = """L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra.uni L_wait;"""


def clc_kernel(wait: bool = True, target: str = "sm_100a") -> str:
    body = CLC.replace("WAIT", WAIT_LOOP if wait else "")
    return sm(kernel(body, shared=".shared .align 16 .b8 smem[32];\n"), target)


def test_try_cancel_takes_over_the_next_unlaunched_cta():
    """CTAs run one after another here: CTA 0 cancels CTA 1 (which never runs), CTA 2 cancels CTA 3;
    the response says canceled, ctaid.x of the cancelled CTA, and word 3 = 1 (the high half)."""
    out = np.full((4, 4), 7, np.uint32)
    sim.launch(clc_kernel(), "k", grid=(4,), block=(32,), args=[out])
    assert out[:, :2].tolist() == [[1, 1], [7, 7], [1, 3], [7, 7]]
    assert out[0, 2:].tolist() == [0, 1]


def test_try_cancel_fails_once_every_cta_has_started():
    out = np.full((1, 4), 7, np.uint32)
    sim.launch(clc_kernel(), "k", grid=(1,), block=(32,), args=[out])
    assert out[0, :2].tolist() == [0, 0xFFFFFFFF]


def test_reading_the_response_before_the_mbarrier_wait_is_a_hazard():
    ptx = clc_kernel(wait=False)
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", grid=(2,), block=(32,), args=[np.zeros((2, 4), np.uint32)])
    assert e.value.kind == "async-pending" and e.value.line == line_of(ptx, "READ")


def test_clusterlaunchcontrol_needs_sm100a():
    with pytest.raises(sim.HazardError, match="needs `.target sm_100a`"):
        sim.launch(clc_kernel(target="sm_90a"), "k", grid=(1,), block=(32,), args=[np.zeros((1, 4), np.uint32)])


def test_b128_registers_only_take_b128_instructions():
    body = "    .reg .b128 %q;\n    mov.b32 %r1, %q;\n    ret;"
    with pytest.raises(sim.HazardError, match="128-bit"):
        sim.launch(sm(kernel(body), "sm_100a"), "k", block=(32,), args=[np.zeros(1)])


def test_try_cancel_fails_while_every_cluster_is_resident():
    out = np.full((4, 4), 7, np.uint32)
    sim.launch(clc_kernel(), "k", grid=(4,), block=(32,), args=[out], cluster=(2, 1, 1))
    assert out[:, :2].tolist() == [[0, 0xFFFFFFFF]] * 4


def test_try_cancel_cancels_a_whole_waiting_cluster(monkeypatch):
    """One cluster resident at a time: CTA 0's request cancels cluster 1 (CTAs 2 and 3, which never
    run) and returns its first CTA; CTA 1's request finds nothing left to cancel."""
    from ptxgen.sim import machine
    monkeypatch.setattr(machine, "MIN_RESIDENT", 1)
    monkeypatch.setattr(machine, "RESIDENT_BUDGET", 1)
    out = np.full((4, 4), 7, np.uint32)
    sim.launch(clc_kernel(), "k", grid=(4,), block=(32,), args=[out], cluster=(2, 1, 1))
    assert out[:, :2].tolist() == [[1, 2], [0, 0xFFFFFFFF], [7, 7], [7, 7]]


CLC_MULTICAST = """
    .reg .b128 %rq<2>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r8, %cluster_ctarank;
    mov.u32 %r1, smem;
    add.u32 %r2, %r1, 16;
    setp.eq.u32 %p0, %r0, 0;
    setp.eq.u32 %p3, %r8, 0;
    and.pred %p3, %p3, %p0;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 16;
    @%p3 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [%r1], [%r2];
L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra.uni L_wait;
    ld.shared.v2.b64 {%rd4, %rd5}, [%r1];
    mov.b128 %rq1, {%rd4, %rd5};
    clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p2, %rq1;
    clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%r5, %r9, %r10, _}, %rq1;
    selp.u32 %r6, 1, 0, %p2;
    mov.u32 %r7, %ctaid.x;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r7, 16;
    add.u64 %rd0, %rd0, %rd1;
    @%p0 st.global.v4.u32 [%rd0], {%r6, %r5, %r9, %r10};
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;"""


def test_multicast_try_cancel_answers_every_cta_of_the_cluster(monkeypatch):
    """Rank 0 of cluster 0 cancels cluster 1 (CTAs 2, 3 never run); with .multicast::cluster::all
    the response lands in both CTAs of cluster 0, each on its own mbarrier."""
    from ptxgen.sim import machine
    monkeypatch.setattr(machine, "MIN_RESIDENT", 1)
    monkeypatch.setattr(machine, "RESIDENT_BUDGET", 1)
    ptx = sm(kernel(CLC_MULTICAST, shared=".shared .align 16 .b8 smem[32];\n"), "sm_100a")
    out = np.full((4, 4), 7, np.uint32)
    sim.launch(ptx, "k", grid=(4,), block=(32,), args=[out], cluster=(2, 1, 1))
    assert out.tolist() == [[1, 2, 0, 0], [1, 2, 0, 0], [7] * 4, [7] * 4]
