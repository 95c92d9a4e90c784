"""Async-proxy accesses of shared memory are in flight until the wait that covers them (issue 21).

Hand-written kernels, each with a racy form the simulator must flag and a fixed twin it must run:
* a bulk store's source may be read until the issuing thread's `cp.async.bulk.wait_group.read`;
  other threads may rewrite it only after a barrier (or mbarrier phase) that follows that wait;
* a wgmma's shared operands likewise until the warpgroup's `wgmma.wait_group`;
* a TMA load's bytes are visible only to threads ordered after a wait that observed its phase;
* a TMA load's complete-tx uses its mbarrier through the generic proxy: the init must be ordered
  before the issue (a bar.sync), and no proxy fence is needed.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import line_of

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"
NT = 128
NBYTES = 16 * NT


def bulk_store_kernel(after_wait: str, rewrite: str = "    st.shared.v4.b32 [%r4], {%r0, %r0, %r0, %r0};   // REWRITE\n",
                      between: str = "    bar.sync 0;\n") -> str:
    """All threads stage 16 bytes each, fence.proxy.async, bar.sync; thread 0 bulk-stores the buffer
    and commits; `between` (a barrier between issue and wait in the issue's kernel); thread 0 waits
    .read 0; `after_wait`; every thread rewrites its 16 bytes (`rewrite`); a final bar.sync."""
    return HEADER + f""".shared .align 128 .b8 buf[{NBYTES}];
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 pSrc, .param .u64 pOut)
{{
    .reg .pred %p<8>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p0, %r0, 0;
    mov.u32 %r1, buf;
    mov.u32 %r2, bar;
    shl.b32 %r3, %r0, 4;
    add.u32 %r4, %r1, %r3;
    ld.param.u64 %rd1, [pSrc];
    ld.param.u64 %rd2, [pOut];
    cvt.u64.u32 %rd3, %r3;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.v4.b32 {{%r20, %r21, %r22, %r23}}, [%rd4];
    st.shared.v4.b32 [%r4], {{%r20, %r21, %r22, %r23}};
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @%p0 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], {NBYTES};   // STORE
    @%p0 cp.async.bulk.commit_group;
{between}    @%p0 cp.async.bulk.wait_group.read 0;   // WAIT
{after_wait}{rewrite}    bar.sync 0;
    ret;
}}
"""


def run_store(ptx: str) -> np.ndarray:
    src = (np.arange(NBYTES) % 251 + 1).astype(np.uint8)
    out = np.zeros(NBYTES, dtype=np.uint8)
    sim.launch(ptx, "k", block=(NT,), args=[src, out])
    return out


def test_rewrite_after_the_leaders_read_wait_without_a_barrier_is_a_race():
    """Issue 21's kernel: a bar.sync between issue and wait orders nothing about the async read."""
    bad = bulk_store_kernel(after_wait="")
    with pytest.raises(sim.HazardError) as e:
        run_store(bad)
    assert e.value.kind == "race" and e.value.line == line_of(bad, "REWRITE")
    assert f"line {line_of(bad, 'WAIT')}" in e.value.detail and "bulk store" in e.value.detail


def test_a_barrier_after_the_wait_fixes_it():
    out = run_store(bulk_store_kernel(after_wait="    bar.sync 0;\n"))
    assert np.array_equal(out, (np.arange(NBYTES) % 251 + 1).astype(np.uint8))


def test_the_issuing_thread_may_rewrite_after_its_own_wait():
    mine = "    @%p0 st.shared.v4.b32 [%r4], {%r0, %r0, %r0, %r0};\n"
    run_store(bulk_store_kernel(after_wait="", rewrite=mine, between=""))


def test_a_barrier_only_before_the_wait_with_no_barrier_in_between_is_flagged_too():
    bad = bulk_store_kernel(after_wait="", between="")
    with pytest.raises(sim.HazardError) as e:
        run_store(bad)
    assert e.value.line == line_of(bad, "REWRITE")


# ------------------------------------------------------------------ mbarrier hand-off
def test_mbarrier_arrive_after_the_wait_orders_the_rewrite():
    handoff = ("    @%p0 mbarrier.arrive.shared::cta.b64 _, [%r2];\n"
               "SPIN:\n    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;\n    @!%p1 bra SPIN;\n")
    run_store(bulk_store_kernel(after_wait=handoff))


def test_mbarrier_arrive_before_the_wait_does_not():
    arrive = "    @%p0 mbarrier.arrive.shared::cta.b64 _, [%r2];\n"
    spin = "SPIN:\n    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;\n    @!%p1 bra SPIN;\n"
    bad = bulk_store_kernel(after_wait=spin, between="    bar.sync 0;\n" + arrive)
    with pytest.raises(sim.HazardError) as e:
        run_store(bad)
    assert e.value.kind == "race" and e.value.line == line_of(bad, "REWRITE")


# ------------------------------------------------------------------ named barriers
def named_barrier_kernel(writer_warp: int) -> str:
    """Warps 0 and 1 meet at named barrier 1 after thread 0's wait; warp `writer_warp` rewrites."""
    after = ("    setp.lt.u32 %p3, %r0, 64;\n    @!%p3 bra SKIP;\n    bar.sync 1, 64;\nSKIP:\n"
             f"    setp.eq.u32 %p4, %r5, {writer_warp};\n")
    rewrite = "    @%p4 st.shared.v4.b32 [%r4], {%r0, %r0, %r0, %r0};   // REWRITE\n"
    return bulk_store_kernel(after_wait=after, rewrite=rewrite).replace(
        "    shl.b32 %r3, %r0, 4;\n", "    shl.b32 %r3, %r0, 4;\n    shr.u32 %r5, %r0, 5;\n")


def test_a_named_barrier_orders_only_its_participants():
    run_store(named_barrier_kernel(1))
    bad = named_barrier_kernel(2)
    with pytest.raises(sim.HazardError) as e:
        run_store(bad)
    assert e.value.kind == "race" and e.value.line == line_of(bad, "REWRITE") and "thread 64" in e.value.detail


# ------------------------------------------------------------------ TMA loads
def bulk_load_kernel(after_wait: str, init_sync: str = "    bar.sync 0;\n", issuer: int = 0) -> str:
    """Thread 0 inits an mbarrier and arrives with expect-tx; thread `issuer` bulk-loads 2 KiB on it
    and waits for the phase; `after_wait`; every thread reads its 16 bytes and stores them to out."""
    return HEADER + f""".shared .align 128 .b8 buf[{NBYTES}];
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 pSrc, .param .u64 pOut)
{{
    .reg .pred %p<8>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p0, %r0, 0;
    setp.eq.u32 %p5, %r0, {issuer};
    mov.u32 %r1, buf;
    mov.u32 %r2, bar;
    shl.b32 %r3, %r0, 4;
    add.u32 %r4, %r1, %r3;
    ld.param.u64 %rd1, [pSrc];
    ld.param.u64 %rd2, [pOut];
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
{init_sync}    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], {NBYTES};
    @%p5 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], {NBYTES}, [%r2];   // LOAD
    @!%p5 bra DONE;
SPIN:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra SPIN;
DONE:
{after_wait}    ld.shared.v4.b32 {{%r20, %r21, %r22, %r23}}, [%r4];   // READ
    cvt.u64.u32 %rd3, %r3;
    add.u64 %rd4, %rd2, %rd3;
    st.global.v4.b32 [%rd4], {{%r20, %r21, %r22, %r23}};
    ret;
}}
"""


def run_load(ptx: str) -> np.ndarray:
    src = (np.arange(NBYTES) % 249 + 1).astype(np.uint8)
    out = np.zeros(NBYTES, dtype=np.uint8)
    sim.launch(ptx, "k", block=(NT,), args=[src, out])
    assert np.array_equal(out, src)
    return out


def test_tma_bytes_read_by_threads_that_did_not_wait_is_a_race():
    bad = bulk_load_kernel(after_wait="")
    with pytest.raises(sim.HazardError) as e:
        run_load(bad)
    assert e.value.kind == "race" and e.value.line == line_of(bad, "READ") and "thread 1 " in e.value.detail


def test_tma_bytes_after_a_barrier_behind_the_wait_or_after_waiting_yourself():
    run_load(bulk_load_kernel(after_wait="    bar.sync 0;\n"))
    everyone = bulk_load_kernel(after_wait="").replace("    @!%p5 bra DONE;\n", "")
    run_load(everyone)


# ------------------------------------------------------------------ mbarrier.init before TMA
def test_tma_on_a_barrier_another_thread_initialised_needs_a_barrier_first():
    """The complete-tx accesses the mbarrier through the generic proxy: ordinary ordering (bar.sync)
    suffices, as in Triton's production PTX (no fence between init and the first TMA)."""
    bad = bulk_load_kernel(after_wait="    bar.sync 0;\n", init_sync="", issuer=32)
    with pytest.raises(sim.HazardError) as e:
        run_load(bad)
    assert e.value.kind == "race" and e.value.line == line_of(bad, "LOAD") and "complete-tx" in e.value.detail
    run_load(bulk_load_kernel(after_wait="    bar.sync 0;\n", issuer=32))


def test_the_initialising_thread_may_issue_the_tma_without_a_barrier():
    run_load(bulk_load_kernel(after_wait="    bar.sync 0;\n", init_sync=""))


# ------------------------------------------------------------------ wgmma operands
def wgmma_kernel(before_rewrite: str) -> str:
    """Both warpgroups run one m64n8k16 wgmma on the same shared A and B (no-swizzle K-major
    descriptors), commit and wait; then thread 128 (warpgroup 1) rewrites A's first bytes."""
    a_desc = (0 >> 4) | (128 >> 4) << 16 | (256 >> 4) << 32      # start 0, LBO 128, SBO 256
    b_desc = (4096 >> 4) | (128 >> 4) << 16 | (256 >> 4) << 32
    return HEADER + f""".shared .align 1024 .b8 buf[8192];
.visible .entry k(.param .u64 pOut)
{{
    .reg .pred %p<8>; .reg .b32 %r<40>; .reg .b64 %rd<8>; .reg .f32 %d<4>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, buf;
    shl.b32 %r3, %r0, 5;
    add.u32 %r4, %r1, %r3;
    st.shared.v4.b32 [%r4], {{%r1, %r1, %r1, %r1}};
    st.shared.v4.b32 [%r4+16], {{%r1, %r1, %r1, %r1}};
    fence.proxy.async.shared::cta;
    bar.sync 0;
    mov.b64 %rd1, {a_desc};
    mov.b64 %rd2, {b_desc};
    setp.ne.u32 %p1, %r0, %r0;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%d0, %d1, %d2, %d3}}, %rd1, %rd2, %p1, 1, 1, 0, 0;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;   // WAIT
{before_rewrite}    setp.eq.u32 %p2, %r0, 128;
    @%p2 st.shared.u32 [buf+16], %r0;   // REWRITE
    ret;
}}
"""


def test_rewriting_a_wgmma_operand_another_warpgroup_read_needs_a_barrier_after_its_wait():
    bad = wgmma_kernel("")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(bad, "k", block=(256,), args=[np.zeros(4, np.uint32)])
    assert e.value.kind == "race" and e.value.line == line_of(bad, "REWRITE")
    assert "warpgroup 0" in e.value.detail and f"line {line_of(bad, 'WAIT')}" in e.value.detail
    sim.launch(wgmma_kernel("    bar.sync 0;\n"), "k", block=(256,), args=[np.zeros(4, np.uint32)])


# ------------------------------------------------------------------ setmaxnreg register budget
def setmaxnreg_kernel(producer: int, consumer: int, maxnreg: int = 168) -> str:
    """384 threads under .maxnreg: warpgroup 0 decs to `producer`, warpgroups 1-2 inc to `consumer`
    (the consumers' branch comes first, so the simulator may run their .inc before the .dec)."""
    return HEADER + f""".visible .entry k(.param .u64 pOut)
.maxnreg {maxnreg}
{{
    .reg .pred %p<4>; .reg .b32 %r<8>;
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p0, %r0, 128;
    @%p0 bra PRODUCER;
    setmaxnreg.inc.sync.aligned.u32 {consumer};   // INC
    bra.uni END;
PRODUCER:
    setmaxnreg.dec.sync.aligned.u32 {producer};   // DEC
END:
    ret;
}}
"""


def run_regs(ptx: str) -> None:
    sim.launch(ptx, "k", block=(384,), args=[np.zeros(1, np.uint32)])


def test_setmaxnreg_within_the_ctas_pool_runs():
    run_regs(setmaxnreg_kernel(40, 232))          # 40 x 128 + 232 x 256 = 64,512 = 168 x 384


@pytest.mark.parametrize("producer, consumer, owned", [(40, 248, 68608), (48, 232, 65536)])
def test_setmaxnreg_inc_overdrawing_the_pool_is_reported(producer, consumer, owned):
    """Issue 21: 68,608 registers asked of 64,512 assembles silently; so does 48/232 (65,536)."""
    bad = setmaxnreg_kernel(producer, consumer)
    with pytest.raises(sim.HazardError) as e:
        run_regs(bad)
    assert e.value.kind == "deadlock" and f"line {line_of(bad, 'INC')}" in e.value.detail
    assert f"{owned} registers" in e.value.detail and "64512" in e.value.detail


def test_setmaxnreg_must_respect_the_warps_current_count():
    bad = setmaxnreg_kernel(176, 232)             # .dec to more than the 168 the warp owns
    with pytest.raises(sim.HazardError) as e:
        run_regs(bad)
    assert e.value.kind == "out-of-bounds" and e.value.line == line_of(bad, "DEC")


def test_without_maxnreg_the_budget_is_unknown_and_not_checked():
    run_regs(setmaxnreg_kernel(40, 248).replace(".maxnreg 168\n", ""))


# ------------------------------------------------------------------ across a cluster
CLUSTER_RELEASE = """.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 pOut, .param .align 64 .b8 tmap[128])
{
    .reg .pred %p<8>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r30, %cluster_ctarank;
    mov.u32 %r1, smem;
    add.u32 %r2, %r1, 1024;
    add.u32 %r6, %r1, 1032;
    setp.eq.u32 %p0, %r0, 0;
    setp.eq.u32 %p3, %r30, 0;
    and.pred %p4, %p0, %p3;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    @%p0 mbarrier.init.shared::cta.b64 [%r6], 2;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r30, 1024;
    add.u64 %rd1, %rd1, %rd2;
    @%p0 cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], 1024;
    @%p0 cp.async.bulk.commit_group;
RELEASE
    @!%p4 bra ARMED;
EMPTY:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r6], 0;
    @!%p1 bra EMPTY;
ARMED:
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 1024;
    mov.b64 %rd3, tmap;
    cvta.param.u64 %rd3, %rd3;
    mov.u32 %r10, 0;
    mov.b16 %rs1, 3;
    @%p4 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%r1], [%rd3, {%r10, %r10}], [%r2], %rs1;   // LOAD
FULL:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra FULL;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}
"""
WAIT_READ = "    @%p0 cp.async.bulk.wait_group.read 0;\n"
REMOTE_RELEASE = ("    mapa.shared::cluster.u32 %r7, %r6, 0;\n"
                  "    @%p0 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r7];\n")


def cluster_release_kernel(release: str) -> str:
    return HEADER + CLUSTER_RELEASE.replace("RELEASE\n", release).replace(
        ".reg .b64 %rd<8>;", ".reg .b64 %rd<8>; .reg .b16 %rs<2>;")


def run_cluster_release(ptx: str) -> None:
    a = (np.arange(16 * 64) % 7 + 1).astype(np.float16).reshape(16, 64)
    sim.launch(ptx, "k", grid=(2,), block=(32,), cluster=(2,),
               args=[np.zeros(2048, np.uint8), sim.TensorMap(a, (8, 64))], dynamic_smem=2048)


def test_a_remote_release_after_the_peers_wait_orders_the_multicast_load():
    """Each CTA's thread 0 bulk-stores its buffer, waits .read, then releases rank 0's empty barrier
    with a remote arrive; rank 0 then multicasts a TMA load into both buffers: ordered."""
    run_cluster_release(cluster_release_kernel(WAIT_READ + REMOTE_RELEASE))


def test_a_remote_release_before_the_peers_wait_does_not():
    bad = cluster_release_kernel(REMOTE_RELEASE + WAIT_READ)
    with pytest.raises(sim.HazardError) as e:
        run_cluster_release(bad)
    # a race if rank 1 has waited when rank 0 issues, async-pending if it has not yet
    assert e.value.kind in ("race", "async-pending") and e.value.line == line_of(bad, "LOAD"), e.value
