"""Named barriers between independent warps: the CUTLASS producer/consumer pattern with bar.arrive and
bar.sync on ids and counts held in registers, non-aligned barrier.sync reached from two places in a
warp, barriers and exited threads, and the hazards (thread-count mismatch, a warp arriving twice in
one phase, an aligned barrier reached by part of a warp, a deadlock), each next to its fixed twin."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from ptxgen.sim.errors import HazardError
from sim_util import line_of
from test_independent_warps import entry, hazard, run

# warp 0 produces in[i*32 + lane] into stage i % 2, warp 1 sums (i + 1) * stage[lane]; full[s] is
# barrier 1 + s, empty[s] is barrier 3 + s (CUTLASS NamedBarrier: ids and counts in registers)
PRODUCER_CONSUMER = """
    mov.u32 %r2, 0;
    mov.u32 %r12, 64;                    // threads per barrier
    setp.ne.u32 %p1, %r31, 0;
    @%p1 bra CONSUMER;
    ld.param.u64 %rd2, [pIn];
    mul.wide.u32 %rd3, %r30, 4;
    add.u64 %rd2, %rd2, %rd3;
PRODUCE:
    and.b32 %r3, %r2, 1;
    setp.lt.u32 %p2, %r2, 2;
    add.u32 %r11, %r3, 3;
    {empty_wait}
    ld.global.u32 %r7, [%rd2];
    add.u64 %rd2, %rd2, 128;
    shl.b32 %r8, %r3, 7;
    shl.b32 %r9, %r30, 2;
    add.u32 %r8, %r8, %r9;
    mov.u32 %r10, buf;
    add.u32 %r8, %r8, %r10;
    st.shared.u32 [%r8], %r7;
    add.u32 %r11, %r3, 1;
    bar.arrive %r11, %r12;               // ARRIVE_FULL
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p3, %r2, {n};
    @%p3 bra PRODUCE;
    bra DONE;
CONSUMER:
    mov.u32 %r20, 0;
CONSUME:
    and.b32 %r3, %r2, 1;
    add.u32 %r11, %r3, {full_base};
    bar.sync %r11, {consumer_count};     // SYNC_FULL
    shl.b32 %r8, %r3, 7;
    shl.b32 %r9, %r30, 2;
    add.u32 %r8, %r8, %r9;
    mov.u32 %r10, buf;
    add.u32 %r8, %r8, %r10;
    ld.shared.u32 %r7, [%r8];
    add.u32 %r2, %r2, 1;
    mad.lo.u32 %r20, %r7, %r2, %r20;
    add.u32 %r11, %r3, 3;
    bar.arrive %r11, 64;
    setp.lt.u32 %p3, %r2, {n};
    @%p3 bra CONSUME;
    sub.u64 %rd4, %rd0, 128;
    st.global.u32 [%rd4], %r20;
DONE:
"""
EMPTY_WAIT = "@!%p2 bar.sync %r11, %r12;          // SYNC_EMPTY"


def producer_consumer(n: int, empty_wait: str = EMPTY_WAIT, full_base: int = 1,
                      consumer_count: str = "%r12") -> str:
    body = PRODUCER_CONSUMER.format(n=n, empty_wait=empty_wait, full_base=full_base,
                                    consumer_count=consumer_count)
    return entry(body, shared=".shared .align 16 .b32 buf[64];\n",
                 params=".param .u64 pOut, .param .u64 pIn")


def data(n: int) -> np.ndarray:
    return np.random.default_rng(2).integers(1, 1000, size=(n, 32)).astype(np.uint32)


def test_producer_consumer_warps_with_bar_arrive_and_bar_sync():
    n = 9
    x = data(n)
    out = run(producer_consumer(n), 64, x)
    want = (x.astype(np.int64) * np.arange(1, n + 1)[:, None]).sum(axis=0)
    assert out[:32].tolist() == want.tolist()


def test_thread_count_mismatch_between_participants_is_a_hazard():
    e = hazard(producer_consumer(4, consumer_count="96"), 64, "divergence", "// SYNC_FULL", data(4))
    assert "same thread count" in e.detail


def test_producer_that_does_not_wait_for_empty_arrives_twice_in_a_phase():
    e = hazard(producer_consumer(4, empty_wait=""), 64, "race", "// ARRIVE_FULL", data(4))
    assert "second time in one phase" in e.detail


def test_barriers_no_one_else_arrives_at_are_a_deadlock_naming_them():
    ptx = producer_consumer(4, full_base=5)     # the consumer waits on barriers 5/6 nobody arrives at
    with pytest.raises(sim.HazardError) as e:
        run(ptx, 64, data(4))
    assert e.value.kind == "deadlock"
    assert e.value.line in (line_of(ptx, "// SYNC_FULL"), line_of(ptx, "// SYNC_EMPTY"))
    assert "barrier 5" in e.value.detail and "barrier 3" in e.value.detail


SPLIT_WARP = """
    mov.u32 %r3, buf;
    shl.b32 %r4, %r0, 2;
    add.u32 %r5, %r3, %r4;
    mul.lo.u32 %r6, %r0, 3;
    st.shared.u32 [%r5], %r6;
    setp.lt.u32 %p1, %r30, 16;
    @%p1 bra LOW;
    barrier.sync{aligned} 0;             // HIGH
    bra JOIN;
LOW:
    barrier.sync{aligned} 0;             // LOW
JOIN:
    xor.b32 %r4, %r0, 1;
    shl.b32 %r4, %r4, 2;
    add.u32 %r5, %r3, %r4;
    ld.shared.u32 %r7, [%r5];
    st.global.u32 [%rd0], %r7;
"""


def test_non_aligned_barrier_sync_reached_from_two_places_in_a_warp():
    ptx = entry(SPLIT_WARP.format(aligned=""), shared=".shared .align 4 .b32 buf[64];\n")
    out = run(ptx, 64)
    assert out.tolist() == [3 * (t ^ 1) for t in range(64)]


def test_aligned_barrier_reached_by_part_of_a_warp_is_divergence():
    ptx = entry(SPLIT_WARP.format(aligned=".aligned"), shared=".shared .align 4 .b32 buf[64];\n")
    e = hazard(ptx, 64, "divergence", "// HIGH")
    assert "16 of the 32" in e.detail


def test_barrier_without_count_completes_when_the_missing_warp_exits():
    ptx = entry("""
    mov.u32 %r3, buf;
    setp.ne.u32 %p1, %r31, 0;
    @%p1 bra LATE;
    shl.b32 %r4, %r30, 2;
    add.u32 %r5, %r3, %r4;
    st.shared.u32 [%r5], %r0;
    bar.sync 0;                          // warp 0 waits here first
    xor.b32 %r4, %r4, 4;
    add.u32 %r5, %r3, %r4;
    ld.shared.u32 %r7, [%r5];
    st.global.u32 [%rd0], %r7;
    ret;
LATE:
    mov.u32 %r7, 5;
    st.global.u32 [%rd0], %r7;
    exit;                                // warp 1 never arrives: it exits
""", shared=".shared .align 4 .b32 buf[32];\n")
    out = run(ptx, 64)
    assert out.tolist() == [t ^ 1 for t in range(32)] + [5] * 32


def test_bar_sync_with_a_count_larger_than_the_cta_is_a_deadlock():
    ptx = entry("""
    bar.sync 1, 128;                     // BAR
    st.global.u32 [%rd0], %r0;
""")
    e = hazard(ptx, 64, "deadlock", "// BAR")
    assert "barrier 1" in e.detail and "128 threads" in e.detail
    assert run(ptx.replace("128", "64"), 64).tolist() == list(range(64))


SPLIT_ARRIVE = """
    mov.u32 %r3, buf;
    setp.ne.u32 %p1, %r31, 0;
    @%p1 bra CONSUMER;
    shl.b32 %r4, %r30, 2;
    add.u32 %r5, %r3, %r4;
    mul.lo.u32 %r6, %r30, 7;
    st.shared.u32 [%r5], %r6;
    setp.lt.u32 %p2, %r30, 16;
    @%p2 bra LOW;
    {arrive} 1, 64;                      // HIGH
    bra DONE;
LOW:
    {arrive} 1, 64;                      // LOW
    bra DONE;
CONSUMER:
    barrier.sync 1, 64;
    shl.b32 %r4, %r30, 2;
    add.u32 %r5, %r3, %r4;
    ld.shared.u32 %r7, [%r5];
    st.global.u32 [%rd0], %r7;
DONE:
"""


def test_non_aligned_barrier_arrive_by_a_split_warp_counts_the_warp_once_all_lanes_arrived():
    """barrier.arrive without .aligned may be executed by a warp's lanes at different places (PTX ISA
    barrier: non-aligned forms); the warp arrives once all its non-exited lanes did. bar.arrive
    (aligned) by half a warp is a divergence hazard."""
    ptx = entry(SPLIT_ARRIVE.format(arrive="barrier.arrive"), shared=".shared .align 4 .b32 buf[32];\n")
    out = run(ptx, 64)
    assert out[32:].tolist() == [7 * lane for lane in range(32)]
    bad = entry(SPLIT_ARRIVE.format(arrive="bar.arrive"), shared=".shared .align 4 .b32 buf[32];\n")
    e = hazard(bad, 64, "divergence", "// HIGH")
    assert "16 of the 32" in e.detail


def _poll_kernel(tail: str) -> str:
    """Thread 0 spins on a global flag that warp 1 sets after a long loop; the other lanes of warp 0
    go ahead to `tail` (the aligned barrier they must share with thread 0)."""
    return f"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 32;
    @!%p1 bra NOT_SETTER;
    mov.u32 %r2, 0;
SLOW:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p2, %r2, 2000;
    @%p2 bra SLOW;
    st.release.gpu.global.u32 [%rd1], 1;
NOT_SETTER:
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra AFTER_POLL;
POLL:
    ld.acquire.gpu.global.u32 %r3, [%rd1];
    setp.eq.u32 %p2, %r3, 0;
    @%p2 bra POLL;
AFTER_POLL:
{tail}
    ret;
}}
"""


def test_one_thread_polls_while_its_warp_waits_at_the_barrier():
    # thread 0 polls for longer than the scheduler's fairness quantum (warps.FAIR_BACKEDGES), so
    # lanes 1-31 reach the aligned bar.sync first: they wait there for thread 0 (the hardware
    # reconverges the warp), which is not divergence
    sim.launch(_poll_kernel("    bar.sync 0;"), "k", grid=(1, 1, 1), block=(64, 1, 1),
               args=[np.zeros(1, np.uint32)])


def test_the_rest_of_the_warp_at_another_aligned_barrier_is_divergence():
    tail = """    @%p3 bra OTHER;
    bar.sync 0;
    bra.uni DONE;
OTHER:
    bar.sync 0;
DONE:"""
    with pytest.raises(HazardError) as err:
        sim.launch(_poll_kernel(tail), "k", grid=(1, 1, 1), block=(64, 1, 1), args=[np.zeros(1, np.uint32)])
    assert err.value.kind == "divergence"
