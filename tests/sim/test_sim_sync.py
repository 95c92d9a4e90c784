"""Memory ordering between CTAs and the cooperative scheduler: flag hand-offs, split-K / Stream-K
fix-ups, persistent grids, missing release/acquire/bar.sync as races, and deadlock detection.

Every expected value is computed here from the kernel's intent; hazards must name the right line.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of

HANDOFF_PARAMS = ".param .u64 pOut, .param .u64 pData, .param .u64 pFlag"


def handoff(release: str, acquire: str, after_spin: str = "", psync: str = "bar.sync 0;",
            csync: str = "bar.sync 0;", wait_while: str = "eq.u32 %p3, %r4, 0", producer: int = 1) -> str:
    """CTA `producer` writes data[t] = t + 100, syncs and signals; the other CTA spins on the flag
    (every thread loads it, so the loop is uniform), syncs and copies data[t] to out[t]."""
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    ld.param.u64 %rd1, [pData];
    ld.param.u64 %rd2, [pFlag];
    ld.param.u64 %rd3, [pOut];
    mul.wide.u32 %rd4, %r1, 4;
    add.u64 %rd5, %rd1, %rd4;
    add.u64 %rd6, %rd3, %rd4;
    setp.eq.u32 %p2, %r1, 0;              // thread 0 signals
    setp.ne.u32 %p1, %r2, {producer};
    @%p1 bra $L_consumer;
    add.u32 %r3, %r1, 100;
    st.global.u32 [%rd5], %r3;            // DATA_ST
    {psync}
    {release}
    ret;
$L_consumer:
$L_spin:
    {acquire}
    setp.{wait_while};
    @%p3 bra $L_spin;
    {after_spin}
    {csync}
    ld.global.u32 %r5, [%rd5];            // DATA_LD
    st.global.u32 [%rd6], %r5;
    ret;""", params=HANDOFF_PARAMS)


def run_handoff(ptx: str, threads: int = 64, **kw):
    out, data, flag = np.zeros(threads, np.uint32), np.zeros(threads, np.uint32), np.zeros(1, np.uint32)
    res = sim.launch(ptx, "k", grid=(2,), block=(threads,), args=[out, data, flag], **kw)
    return out, res


RELEASES = {
    "st.release": "@%p2 st.release.gpu.global.u32 [%rd2], 1;",
    "fence+relaxed": "@%p2 fence.acq_rel.gpu;\n    @%p2 st.relaxed.gpu.global.u32 [%rd2], 1;",
    "membar+volatile": "@%p2 membar.gl;\n    @%p2 st.volatile.global.u32 [%rd2], 1;",
    "red.release": "@%p2 red.release.gpu.global.add.u32 [%rd2], 1;",
    "fence.sc+atom": "@%p2 fence.sc.gpu;\n    @%p2 atom.global.exch.b32 %r9, [%rd2], 1;",
    "atom.acq_rel.sys": "@%p2 atom.acq_rel.sys.global.add.u32 %r9, [%rd2], 1;",
}
ACQUIRES = {
    "ld.acquire": ("ld.acquire.gpu.global.u32 %r4, [%rd2];   // SPIN", ""),
    "relaxed+fence": ("ld.relaxed.gpu.global.u32 %r4, [%rd2];   // SPIN", "fence.acq_rel.gpu;"),
    "volatile+membar": ("ld.volatile.global.u32 %r4, [%rd2];   // SPIN", "membar.gl;"),
    "atom.acquire": ("atom.acquire.gpu.global.add.u32 %r4, [%rd2], 0;   // SPIN", ""),
    "generic ld.acquire.sys": ("ld.acquire.sys.u32 %r4, [%rd2];   // SPIN", ""),
}


@pytest.mark.parametrize("rel", sorted(RELEASES))
@pytest.mark.parametrize("acq", sorted(ACQUIRES))
def test_release_acquire_handoff_between_ctas(rel, acq):
    spin, after = ACQUIRES[acq]
    out, _ = run_handoff(handoff(RELEASES[rel], spin, after))
    assert out.tolist() == [t + 100 for t in range(64)]


def test_handoff_works_whichever_cta_produces_and_counts_instructions():
    spin, _ = ACQUIRES["ld.acquire"]
    for producer in (0, 1):
        out, res = run_handoff(handoff(RELEASES["st.release"], spin, producer=producer))
        assert out.tolist() == [t + 100 for t in range(64)]
        assert res.ctas == 2
    # the producer runs 17 instructions; the consumer 11 before the loop, 3 per spin, 6 after
    assert (res.instructions - 64 * (17 + 11 + 6)) % (64 * 3) == 0


def expect(ptx: str, kind: str, marker: str, **kw) -> sim.HazardError:
    with pytest.raises(sim.HazardError) as err:
        run_handoff(ptx, **kw)
    assert (err.value.kind, err.value.line) == (kind, line_of(ptx, marker)), str(err.value)
    return err.value


def test_signal_without_release_is_a_race_on_the_data():
    spin, _ = ACQUIRES["ld.acquire"]
    expect(handoff("@%p2 st.relaxed.gpu.global.u32 [%rd2], 1;", spin), "race", "// DATA_LD")
    expect(handoff("@%p2 red.relaxed.gpu.global.add.u32 [%rd2], 1;", spin), "race", "// DATA_LD")
    # a fence executed by other threads does not make thread 0's relaxed store a release
    expect(handoff("@!%p2 fence.acq_rel.gpu;\n    @%p2 st.relaxed.gpu.global.u32 [%rd2], 1;", spin),
           "race", "// DATA_LD")


def test_plain_store_of_the_flag_races_with_the_polling_load():
    spin, _ = ACQUIRES["ld.acquire"]
    expect(handoff("@%p2 st.global.u32 [%rd2], 1;", spin), "race", "// SPIN")


def test_relaxed_poll_without_fence_is_a_race_on_the_data():
    spin, _ = ACQUIRES["relaxed+fence"]
    expect(handoff(RELEASES["st.release"], spin), "race", "// DATA_LD")


def test_cta_scope_does_not_synchronise_ctas():
    expect(handoff("@%p2 st.release.cta.global.u32 [%rd2], 1;", ACQUIRES["ld.acquire"][0]), "race", "// SPIN")
    expect(handoff(RELEASES["st.release"], "ld.acquire.cta.global.u32 %r4, [%rd2];   // SPIN"), "race", "// SPIN")
    expect(handoff("@%p2 fence.acq_rel.cta;\n    @%p2 st.relaxed.gpu.global.u32 [%rd2], 1;",
                   ACQUIRES["ld.acquire"][0]), "race", "// DATA_LD")


def test_missing_bar_sync_before_thread0_signals_is_a_race():
    err = expect(handoff(RELEASES["st.release"], ACQUIRES["ld.acquire"][0], psync=""), "race", "// DATA_LD")
    assert "thread 1" in str(err)          # thread 0's own data was covered by its release
    # without the barrier but with every thread releasing, everything is covered
    out, _ = run_handoff(handoff("st.release.gpu.global.u32 [%rd2], 1;", ACQUIRES["ld.acquire"][0], psync=""))
    assert out.tolist() == [t + 100 for t in range(64)]


def test_acquire_by_thread0_reaches_the_others_only_through_bar_sync():
    spin = ("@%p2 ld.acquire.gpu.global.u32 %r4, [%rd2];   // SPIN\n"
            "    @!%p2 ld.relaxed.gpu.global.u32 %r4, [%rd2];")
    out, _ = run_handoff(handoff(RELEASES["st.release"], spin))
    assert out.tolist() == [t + 100 for t in range(64)]
    err = expect(handoff(RELEASES["st.release"], spin, csync=""), "race", "// DATA_LD")
    assert "bar.sync" in str(err)


def test_spin_on_a_value_that_never_comes_is_a_deadlock():
    ptx = handoff(RELEASES["st.release"], ACQUIRES["ld.acquire"][0], wait_while="ne.u32 %p3, %r4, 2")
    err = expect(ptx, "deadlock", "// SPIN", threads=32)
    assert "(0, 0, 0)" in str(err)


def test_waiting_for_a_cta_that_is_not_simulated_is_a_deadlock_that_says_so():
    ptx = handoff(RELEASES["st.release"], ACQUIRES["volatile+membar"][0], after_spin="membar.gl;")
    err = expect(ptx, "deadlock", "// SPIN", threads=32, ctas=[(0, 0, 0)])
    assert "ctas=" in str(err)


def test_cas_spin_lock_serialises_ctas_and_a_never_released_lock_deadlocks():
    body = """
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pLock];
    mov.u32 %r1, %ctaid.x;
$L_lock:
    atom.acquire.gpu.global.cas.b32 %r2, [%rd2], 0, 1;   // LOCK
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $L_lock;
    ld.global.u32 %r3, [%rd1];            // critical section: a plain read-modify-write
    add.u32 %r3, %r3, %r1;
    add.u32 %r3, %r3, 1;
    st.global.u32 [%rd1], %r3;
    UNLOCK
    ret;"""
    params = ".param .u64 pOut, .param .u64 pLock"
    out, lock = np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    ptx = kernel(body.replace("UNLOCK", "st.release.gpu.global.b32 [%rd2], 0;"), params=params)
    sim.launch(ptx, "k", grid=(6,), block=(1,), args=[out, lock])
    assert int(out[0]) == sum(c + 1 for c in range(6)) and int(lock[0]) == 0
    ptx = kernel(body.replace("UNLOCK", ""), params=params)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", grid=(3,), block=(1,), args=[np.zeros(1, np.uint32), np.zeros(1, np.uint32)])
    assert (err.value.kind, err.value.line) == ("deadlock", line_of(ptx, "// LOCK"))


# ------------------------------------------------------------------ split-K / Stream-K fix-up
FIXUP = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    ld.param.u64 %rd1, [pA];
    ld.param.u64 %rd2, [pWork];
    ld.param.u64 %rd3, [pFlag];
    ld.param.u64 %rd4, [pOut];
    // partial sum of A[k, t] over this CTA's 4 k-rows (A is 16 x 32 f32)
    mov.f32 %f1, 0f00000000;
    mov.u32 %r3, 0;
$L_k:
    shl.b32 %r4, %r2, 2;
    add.u32 %r4, %r4, %r3;
    mad.lo.u32 %r5, %r4, 32, %r1;
    mul.wide.u32 %rd5, %r5, 4;
    add.u64 %rd6, %rd1, %rd5;
    ld.global.f32 %f2, [%rd6];
    add.f32 %f1, %f1, %f2;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, 4;
    @%p1 bra $L_k;
    setp.eq.u32 %p2, %r1, 0;
    setp.eq.u32 %p3, %r2, 0;
    @%p3 bra $L_owner;
    mad.lo.u32 %r6, %r2, 32, %r1;         // workspace[cta][t]
    mul.wide.u32 %rd7, %r6, 4;
    add.u64 %rd8, %rd2, %rd7;
    st.global.f32 [%rd8], %f1;
    bar.sync 0;
    @%p2 SIGNAL;
    ret;
$L_owner:
$L_wait:
    ld.acquire.gpu.global.u32 %r7, [%rd3];   // WAIT
    setp.lt.u32 %p4, %r7, 3;
    @%p4 bra $L_wait;
    bar.sync 0;
    mov.u32 %r8, 1;
$L_sum:
    mad.lo.u32 %r6, %r8, 32, %r1;
    mul.wide.u32 %rd7, %r6, 4;
    add.u64 %rd8, %rd2, %rd7;
    ld.global.f32 %f3, [%rd8];            // WORK_LD
    add.f32 %f1, %f1, %f3;
    add.u32 %r8, %r8, 1;
    setp.lt.u32 %p5, %r8, 4;
    @%p5 bra $L_sum;
    mul.wide.u32 %rd9, %r1, 4;
    add.u64 %rd10, %rd4, %rd9;
    st.global.f32 [%rd10], %f1;
    ret;"""
FIXUP_PARAMS = ".param .u64 pA, .param .u64 pWork, .param .u64 pFlag, .param .u64 pOut"


def run_fixup(signal: str, order=None):
    ptx = kernel(FIXUP.replace("SIGNAL", signal), params=FIXUP_PARAMS)
    A = np.random.default_rng(3).integers(-8, 8, (16, 32)).astype(np.float32)  # sums are exact
    work, flag, out = np.zeros(4 * 32, np.float32), np.zeros(1, np.uint32), np.zeros(32, np.float32)
    sim.launch(ptx, "k", grid=(4,), block=(32,), args=[A, work, flag, out], ctas=order)
    return ptx, A, out, flag


def test_streamk_fixup_with_a_counter_of_released_reductions():
    for signal in ("red.release.gpu.global.add.u32 [%rd3], 1", "atom.acq_rel.gpu.global.inc.u32 %r9, [%rd3], 99"):
        for order in (None, [(3,), (2,), (1,), (0,)]):
            _, A, out, flag = run_fixup(signal, order)
            assert out.tolist() == A.sum(axis=0).tolist() and int(flag[0]) == 3


def test_streamk_fixup_with_relaxed_reductions_is_a_race():
    with pytest.raises(sim.HazardError) as err:
        ptx, *_ = run_fixup("red.relaxed.gpu.global.add.u32 [%rd3], 1")
    ptx = kernel(FIXUP.replace("SIGNAL", "x"), params=FIXUP_PARAMS)
    assert (err.value.kind, err.value.line) == ("race", line_of(ptx, "// WORK_LD"))


# ------------------------------------------------------------------ persistent grid
PERSISTENT = """
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pCtr];
    ld.param.u64 %rd3, [pTotal];
    mov.u32 %r1, %ctaid.x;
$L_next:
    atom.global.add.u32 %r2, [%rd2], 1;     // grab a work item
    setp.ge.u32 %p1, %r2, ITEMS;
    @%p1 bra $L_done;
    mad.lo.u32 %r3, %r1, 1000, %r2;
    mul.wide.u32 %rd4, %r2, 4;
    add.u64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r3;
    bra.uni $L_next;
$L_done:
    DONE_ATOM %r4, [%rd2+4], 1;
    setp.ne.u32 %p2, %r4, LAST;
    @%p2 bra $L_exit;
    mov.u32 %r5, 0;
    mov.u32 %r6, 0;
$L_sum:                                     // the last CTA adds up everybody's items
    mul.wide.u32 %rd4, %r5, 4;
    add.u64 %rd5, %rd1, %rd4;
    ld.global.u32 %r7, [%rd5];              // SUM_LD
    add.u32 %r6, %r6, %r7;
    add.u32 %r5, %r5, 1;
    setp.lt.u32 %p3, %r5, ITEMS;
    @%p3 bra $L_sum;
    st.global.u32 [%rd3], %r6;
$L_exit:
    ret;"""


def persistent(done_atom: str, ctas: int, items: int) -> str:
    body = PERSISTENT.replace("DONE_ATOM", done_atom).replace("ITEMS", str(items)).replace("LAST", str(ctas - 1))
    return kernel(body, params=".param .u64 pOut, .param .u64 pCtr, .param .u64 pTotal")


def test_persistent_grid_of_132_ctas_with_dynamic_work_and_last_cta_reduction():
    ctas, items = 132, 300
    ptx = persistent("atom.acq_rel.gpu.global.add.u32", ctas, items)
    out, ctr, total = np.zeros(items, np.uint32), np.zeros(2, np.uint32), np.zeros(1, np.uint32)
    res = sim.launch(ptx, "k", grid=(ctas,), block=(1,), args=[out, ctr, total])
    assert res.ctas == ctas
    assert (out % 1000).tolist() == list(range(items))          # every item done exactly once
    assert len(set((out // 1000).tolist())) == ctas              # interleaving spread the work
    assert int(total[0]) == int(out.sum()) and ctr.tolist() == [items + ctas, ctas]


def test_persistent_grid_last_cta_needs_acquire_release_on_the_done_counter():
    ptx = persistent("atom.relaxed.gpu.global.add.u32", 8, 40)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", grid=(8,), block=(1,), args=[np.zeros(40, np.uint32), np.zeros(2, np.uint32),
                                                          np.zeros(1, np.uint32)])
    assert (err.value.kind, err.value.line) == ("race", line_of(ptx, "// SUM_LD"))


def test_synchronised_overwrite_by_another_cta_is_not_a_race_but_unsynchronised_is():
    body = """
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pFlag];
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p1, %r1, 1;
    @%p1 bra $L_second;
    mov.u32 %r2, 7;
    st.global.u32 [%rd1], %r2;
    st.release.gpu.global.u32 [%rd2], 1;
    ret;
$L_second:
$L_spin:
    ld.acquire.gpu.global.u32 %r3, [%rd2];
    setp.eq.u32 %p2, %r3, 0;
    @%p2 bra $L_spin;
    mov.u32 %r2, 9;
    st.global.u32 [%rd1], %r2;            // OVERWRITE
    ret;"""
    params = ".param .u64 pOut, .param .u64 pFlag"
    out = np.zeros(1, np.uint32)
    sim.launch(kernel(body, params=params), "k", grid=(2,), block=(1,), args=[out, np.zeros(1, np.uint32)])
    assert int(out[0]) == 9
    ptx = kernel(body.replace("ld.acquire.gpu", "ld.relaxed.gpu"), params=params)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", grid=(2,), block=(1,), args=[out, np.zeros(1, np.uint32)])
    assert (err.value.kind, err.value.line) == ("race", line_of(ptx, "// OVERWRITE"))


def test_fence_and_sync_qualifier_errors_are_reported_before_running():
    for text, marker in [("ld.acquire.global.u32 %r1, [%rd1];", "ld.acquire"),
                         ("st.acquire.gpu.global.u32 [%rd1], %r1;", "st.acquire"),
                         ("ld.relaxed.gpu.global.cg.u32 %r1, [%rd1];", "ld.relaxed"),
                         ("ld.global.gpu.u32 %r1, [%rd1];", "ld.global.gpu"),
                         ("fence.gpu.sc;", "fence"), ("membar.gpu;", "membar"),
                         ("red.acquire.gpu.global.add.u32 [%rd1], 1;", "red.acquire"),
                         ("atom.global.cas.b32 %r1, [%rd1], 1;", "atom.global")]:
        ptx = kernel(f"    {text}\n    ret;")
        with pytest.raises(sim.HazardError) as err:
            sim.launch(ptx, "k", args=[np.zeros(1)])
        assert (err.value.kind, err.value.line) == ("unsupported", line_of(ptx, marker)), text


def test_happens_before_is_transitive_through_a_chain_of_ctas():
    """CTA 0's thread 0 writes data and releases flag 1; in CTA 1 thread 0 acquires it (relaxed
    load + fence) and releases flag 2 without touching the data; CTA 2 acquires flag 2 and may read
    CTA 0's data. Without CTA 1's fence the chain is broken."""
    body = """
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pFlag];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r9, %tid.x;
    setp.eq.u32 %p5, %r9, 0;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra $L_first;
    setp.eq.u32 %p2, %r1, 1;
    @%p2 bra $L_middle;
$L_last:
    ld.acquire.gpu.global.u32 %r2, [%rd2+4];
    setp.eq.u32 %p3, %r2, 0;
    @%p3 bra $L_last;
    ld.global.u32 %r3, [%rd1];            // READ
    @%p5 st.global.u32 [%rd1+4], %r3;
    ret;
$L_middle:
    ld.relaxed.gpu.global.u32 %r2, [%rd2];
    setp.eq.u32 %p3, %r2, 0;
    @%p3 bra $L_middle;
    MIDDLE_FENCE
    @%p5 st.release.gpu.global.u32 [%rd2+4], 1;
    ret;
$L_first:
    mov.u32 %r3, 42;
    @%p5 st.global.u32 [%rd1], %r3;
    @%p5 st.release.gpu.global.u32 [%rd2], 1;
    ret;"""
    params = ".param .u64 pOut, .param .u64 pFlag"
    for order in ([(0,), (1,), (2,)], [(2,), (1,), (0,)]):
        out = np.zeros(2, np.uint32)
        ptx = kernel(body.replace("MIDDLE_FENCE", "@%p5 fence.acq_rel.gpu;"), params=params)
        sim.launch(ptx, "k", grid=(3,), block=(32,), args=[out, np.zeros(2, np.uint32)], ctas=order)
        assert out.tolist() == [42, 42]
    ptx = kernel(body.replace("MIDDLE_FENCE", ""), params=params)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", grid=(3,), block=(32,), args=[np.zeros(2, np.uint32), np.zeros(2, np.uint32)])
    assert (err.value.kind, err.value.line) == ("race", line_of(ptx, "// READ"))


def test_resident_window_lets_later_ctas_wait_for_earlier_ones_but_not_the_reverse(monkeypatch):
    """With only 2 CTAs resident (as on a small GPU), CTAs 2 and 3 may wait for CTA 0, which is
    running or done; CTAs 0 and 1 waiting for CTA 3, which cannot start, is a deadlock."""
    monkeypatch.setattr(sim.machine, "MIN_RESIDENT", 2)
    monkeypatch.setattr(sim.machine, "RESIDENT_BUDGET", 1)
    body = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p1, %r1, SIGNALLER;
    @%p1 bra $L_signal;
    setp.WAITERS.u32 %p2, %r1, 2;
    @%p2 bra $L_out;
$L_wait:
    ld.acquire.gpu.global.u32 %r2, [%rd1];   // WAIT
    setp.eq.u32 %p3, %r2, 0;
    @%p3 bra $L_wait;
    bra.uni $L_out;
$L_signal:
    st.release.gpu.global.u32 [%rd1], 1;
$L_out:
    ret;"""
    ok = kernel(body.replace("SIGNALLER", "0").replace("WAITERS", "lt"))      # CTAs 2, 3 wait
    sim.launch(ok, "k", grid=(4,), block=(1,), args=[np.zeros(1, np.uint32)])
    bad = kernel(body.replace("SIGNALLER", "3").replace("WAITERS", "ge"))     # CTAs 0, 1 wait
    with pytest.raises(sim.HazardError) as err:
        sim.launch(bad, "k", grid=(4,), block=(1,), args=[np.zeros(1, np.uint32)])
    assert (err.value.kind, err.value.line) == ("deadlock", line_of(bad, "// WAIT"))
    assert "cannot start" in str(err.value)
