"""Stream-K on sm_90a (targets/sm90/streamk.py): emit/streamk.py's persistent loop over work units,
each unit run by the TMA/wgmma main loop over its k-range, the ring's barriers re-initialised
between units, partials in the wgmma accumulator layout, the epilogue run once per tile by its
owner. Proven on the simulator against float64 numpy with a poisoned C; a planted bug (the
barriers not re-initialised, so the second unit waits on the wrong phase) must be caught."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError, sim
from ptxgen.check import random_operands, random_epilogue_operands, random_scale, reference, tolerance
from ptxgen.targets.sm90.streamk import Sm90StreamK
from ptxgen.schedule.streamk import stream_k_plan
from ptxgen.schedule.verify import verify_rules
from tests import harness

ARCH = "sm_90a"


def stream_k(block, sms, decomposition="stream-k", stages=2, consumers=1) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, warp_specialized=False, consumers=consumers,
                    decomposition=decomposition, sms=sms)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_sm90_stream_k_matches_numpy(data):
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "bf16")), label="out_dtype")
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    m, n = (data.draw(st.integers(1, 200), label=x) for x in ("M", "N"))
    k = data.draw(st.integers(1, 40), label="K/8") * 8
    if a_layout == "col":
        m = -(-m // 8) * 8
    if b_layout == "row":
        n = -(-n // 8) * 8
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, epilogue=epi,
             batch=data.draw(st.sampled_from((1, 1, 2)), label="batch"))
    s = stream_k((64, data.draw(st.sampled_from((32, 64)), label="BN"), data.draw(st.sampled_from((32, 64)), label="BK")),
                 data.draw(st.integers(1, 6), label="sms"),
                 data.draw(st.sampled_from(("stream-k", "stream-k-pure")), label="decomposition"),
                 data.draw(st.integers(1, 3), label="stages"))
    try:
        verify_rules(g, s, ARCH)
    except ScheduleError:
        assume(False)
    kern = ptxgen.compile(g, s, arch=ARCH)
    assert 1 <= kern.grid[0] <= s.sms and kern.grid[1:] == (1, 1)
    harness.check(kern, seed=s.sms)


def test_a_cta_runs_several_units_and_the_owner_sums_the_partials():
    """3 CTAs over 4 tiles of 3 k-tiles (pure Stream-K): each CTA's 4 iterations span two tiles,
    split ones among them, so the ring is reused across units and partials are handed over."""
    g = Gemm(128, 128, 192, a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0, bias="col"))
    s = stream_k((64, 64, 64), 3, "stream-k-pure")
    plan = stream_k_plan(g, s, 3)
    units = [plan.units(c) for c in range(3)]
    assert all(len(u) >= 2 for u in units) and any(not x.whole for u in units for x in u)
    harness.check(g, s, ARCH, seed=7)


@pytest.mark.parametrize("g, s", [
    (Gemm(264, 136, 200, a_layout="row", b_layout="col", epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col")),
     stream_k((128, 64, 64), 3, "stream-k", consumers=2)),
    (Gemm(136, 72, 256, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row", batch=3),
     stream_k((64, 64, 32), 4, "stream-k-pure", stages=3)),
], ids=["2wg-hybrid-epilogue", "mn-major-batched-pure"])
def test_stream_k_two_warpgroups_and_batches(g, s):
    harness.check(g, s, ARCH, seed=11)


def test_barriers_not_reinitialised_between_units_are_caught(monkeypatch):
    """Planted bug: the next unit's loop waits on parity 0 of barriers left in a later phase."""
    g = Gemm(128, 128, 192, a_layout="row", b_layout="col")
    s = stream_k((64, 64, 64), 3, "stream-k-pure")
    harness.check(g, s, ARCH, seed=1)
    monkeypatch.setattr(Sm90StreamK, "reinit_barriers", lambda self: None)
    bad = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, 1)
    with pytest.raises(sim.HazardError):
        bad.simulate(a, b)


def test_stream_k_kernel_assembles_without_spills_or_serialised_wgmma():
    from ptxgen.runtime.assemble import assemble

    g = Gemm(4096, 4096, 4096, out_dtype="bf16", a_layout="row", b_layout="col", batch=2,
             epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col"))
    k = ptxgen.compile(g, stream_k((128, 256, 64), None, stages=3, consumers=2), arch=ARCH)
    assert "%nctaid.x" in k.ptx and "mbarrier.inval" in k.ptx
    r = assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
    log = r.log.lower()
    assert "warning" not in log and "serializ" not in log, r.log


def test_cli_info_and_run_describe_stream_k(capsys):
    from ptxgen.cli.app import main

    flags = ["--arch", ARCH, "--instruction", "wgmma", "--block", "64x64x64", "--no-warp-specialized",
             "--shape", "200x136x192", "--stream-k", "pure", "--sms", "4"]
    assert main(["info", *flags]) == 0
    out = capsys.readouterr().out
    assert "stream-k-pure over a persistent grid" in out and "grid (4, 1, 1)" in out, out
    assert main(["run", *flags, "--sim"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_one_thread_polls_the_flag_and_dropping_the_barrier_after_it_is_caught():
    """The owner's fix-up: thread 0 alone spins on the flag (ld.acquire.gpu), then bar.sync passes
    the acquire on (CUTLASS's GenericBarrier::wait_eq). Planted bug: without that barrier threads
    1-255 read the partial unordered after the publisher's release, a race the simulator names."""
    import dataclasses
    import re

    g = Gemm(128, 128, 192, a_layout="row", b_layout="col")
    s = stream_k((64, 64, 64), 3, "stream-k-pure")
    k = ptxgen.compile(g, s, arch=ARCH)
    spin = k.ptx[k.ptx.index("$L_fixup_wait_flag:"):k.ptx.index("$L_fixup_flag_seen:")]
    assert spin.count("ld.acquire.gpu") == 1
    poll_guard = re.search(r"@!(%p\d+) bra \$L_fixup_flag_seen;", k.ptx)
    assert poll_guard, "only one thread enters the spin loop"
    harness.check(g, s, ARCH, seed=3)
    ptx, n = re.subn(r"(\$L_fixup_flag_seen:\n)\s*bar\.sync 0;[^\n]*\n", r"\1", k.ptx)
    assert n >= 1
    a, b = random_operands(g, 1)
    with pytest.raises(sim.HazardError) as err:
        dataclasses.replace(k, ptx=ptx).simulate(a, b)
    assert err.value.kind == "race", err.value
