"""Stream-K: the decomposition model, and persistent kernels run whole on the simulator.

The simulator runs every CTA of the persistent grid, interleaved, with its cross-CTA
happens-before model on: a partial read without a release/acquire pair is a race, and an owner
waiting for a flag nobody sets is a deadlock.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_operands
from ptxgen.schedule.streamk import stream_k_grid, stream_k_plan
from ptxgen.simulate import run_simulation
from ptxgen.sim import HazardError
from tests import harness

from tests.draws import draw_gemm, draw_small_schedule

SIZES = [1, 7, 17, 63, 64, 100, 129, 200]


# -- the decomposition model ------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_iteration_is_run_once_and_work_is_balanced(data):
    tiles_m = data.draw(st.integers(1, 9), label="tiles_m")
    tiles_n = data.draw(st.integers(1, 9), label="tiles_n")
    kt = data.draw(st.integers(1, 12), label="k_tiles")
    g = Gemm(64 * tiles_m, 64 * tiles_n, 32 * kt, batch=data.draw(st.integers(1, 3), label="batch"))
    s = Schedule(block=(64, 64, 32), decomposition=data.draw(st.sampled_from(["stream-k", "stream-k-pure"]),
                                                             label="decomposition"))
    ctas = stream_k_grid(g, s, data.draw(st.integers(1, 40), label="sms"))
    p = stream_k_plan(g, s, ctas)
    runs: Counter = Counter()
    sk_work = []
    for c in range(ctas):
        units = p.units(c)
        partial = [u for u in units if not u.starts_tile]
        dp_units = sum(u.tile < p.dp_tiles for u in units)
        assert len(partial) <= 1 and (not partial or units.index(partial[0]) == dp_units)  # published first
        sk_work.append(sum(u.k_count for u in units if u.tile >= p.dp_tiles))
        for u in units:
            assert u.k_count >= 1 and u.k_first + u.k_count <= kt
            if u.tile < p.dp_tiles:
                assert u.whole
            runs.update((u.tile, k) for k in range(u.k_first, u.k_first + u.k_count))
            for other in p.contributors(c, u):
                assert other < c  # owners wait only for CTAs launched before them
    assert runs == Counter({(t, k): 1 for t in range(p.tiles) for k in range(kt)})
    if p.sk_tiles:
        busy = sk_work[:p.sk_ctas]
        assert max(busy) - min(busy) <= 1 and min(busy) >= 1
    if s.decomposition == "stream-k" and p.tiles >= ctas:
        assert p.sk_tiles < 2 * ctas  # the hybrid keeps Stream-K to under two tiles per CTA


def test_contributors_are_exactly_the_partial_units():
    g, s = Gemm(64 * 5, 64 * 3, 32 * 7), Schedule(block=(64, 64, 32), decomposition="stream-k-pure")
    p = stream_k_plan(g, s, 4)
    published = {c: u.tile for c in range(4) for u in p.units(c) if not u.starts_tile}
    owned = {c2: (c, u.tile) for c in range(4) for u in p.units(c) for c2 in p.contributors(c, u)}
    assert published and set(published) == set(owned)
    assert all(owned[c][1] == tile for c, tile in published.items())


def test_hybrid_uses_whole_tile_waves_then_stream_k():
    g, s = Gemm(64 * 7, 64 * 3, 320), Schedule(block=(64, 64, 32), decomposition="stream-k")
    p = stream_k_plan(g, s, 5)  # 21 tiles = 4 waves of 5 + 1: 3 whole waves, then 6 tiles Stream-K
    assert (p.dp_tiles, p.sk_tiles) == (15, 6)
    assert stream_k_plan(g, s, 7).sk_tiles == 0  # 21 = 3 x 7: all data-parallel
    assert stream_k_plan(g, dataclasses.replace(s, decomposition="stream-k-pure"), 7).dp_tiles == 0


# -- kernels on the simulator -----------------------------------------------------------------
def simulate(g: Gemm, s: Schedule, ctas=None):
    """The harness's check; `ctas` orders the whole persistent grid. (kernel, C)."""
    checked = harness.check(g, s, seed=g.m + 3 * g.n + 7 * g.k, ctas=ctas, bound=False)
    return checked.kernel, checked.out


@pytest.mark.parametrize("g,s", [
    (Gemm(200, 136, 300), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=5)),
    (Gemm(128, 128, 256), Schedule(block=(64, 64, 32), decomposition="stream-k-pure", sms=3)),
    (Gemm(100, 70, 300, out_dtype="bf16", batch=2,
          epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col", activation="gelu")),
     Schedule(block=(64, 64, 32), decomposition="stream-k", sms=3, raster="grouped", group_m=2)),
    (Gemm(64, 64, 96, a_layout="col", b_layout="row"),
     Schedule(block=(64, 64, 32), decomposition="stream-k", sms=2, stages=1)),
    (Gemm(1, 256, 4096, out_dtype="f16"), Schedule(block=(64, 128, 64), warps=(1, 2), stages=4,
                                                   decomposition="stream-k", sms=16)),
    (Gemm(150, 90, 200, dtype="bf16", epilogue=Epilogue(bias="row", activation="relu")),
     Schedule(block=(64, 64, 32), decomposition="stream-k", sms=4, epilogue_via_smem=False)),
    (Gemm(100, 72, 300, out_dtype="f16", epilogue=Epilogue(alpha=0.5, bias="col")),
     Schedule(block=(64, 64, 32), warps=(2, 2), instruction="wmma", smem_layout="pad",
              decomposition="stream-k-pure", sms=5)),
], ids=["hybrid", "pure", "batch-epilogue-grouped", "layouts-one-stage", "decode-m1", "registers-bias-row",
        "wmma"])
def test_stream_k_matches_numpy(g, s):
    simulate(g, s)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_random_stream_k_kernels_match_numpy(data):
    g = draw_gemm(data, SIZES, batch=data.draw(st.integers(1, 2), label="batch"),
                  epilogue=data.draw(st.sampled_from([None, Epilogue(alpha=2.0, bias="col"),
                                                      Epilogue(beta=-1.0, activation="silu")]), label="epilogue"))
    s = draw_small_schedule(
        data, instruction=data.draw(st.sampled_from(["m16n8k16", "m16n8k16", "wmma"]), label="instruction"),
        decomposition=data.draw(st.sampled_from(["stream-k", "stream-k-pure"]), label="decomposition"),
        sms=data.draw(st.integers(1, 9), label="sms"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    simulate(g, s)


def test_result_is_bit_identical_whichever_cta_runs_first():
    g, s = Gemm(200, 136, 300), Schedule(block=(64, 64, 32), decomposition="stream-k-pure", sms=5)
    _, forward = simulate(g, s, ctas=[(x, 0, 0) for x in range(5)])
    _, backward = simulate(g, s, ctas=[(x, 0, 0) for x in reversed(range(5))])
    assert np.array_equal(forward.view(np.uint32), backward.view(np.uint32))


def test_flags_are_reset_for_the_next_launch():
    g, s = Gemm(128, 128, 320), Schedule(block=(64, 64, 32), decomposition="stream-k-pure", sms=3)
    k = ptxgen.compile(g, s)
    a, b = random_operands(g)
    work, flags = np.zeros(k.workspace_elements, np.float32), np.zeros(k.counter_count, np.uint32)
    assert k.counter_count == 3 and k.workspace_elements == 3 * 64 * 64
    outs = []
    for _ in range(2):
        c = np.full((g.m, g.n), np.nan, np.float32)
        ptxgen.sim.launch(k.ptx, k.entry, grid=k.grid, block=k.block, dynamic_smem=k.smem_bytes,
                          args=[a, np.asfortranarray(b).ravel(order="K"), c, g.m, g.n, g.k, g.k, g.k, g.n,
                                work, flags])
        assert not flags.any()
        assert np.count_nonzero(work) > 0, "the partials stay in the workspace (README)"
        outs.append(c)
        work[:] = np.nan  # the workspace needs no zeroing: stale partials must not leak
    _, result = harness.judge(g, outs[0], harness.Operands(a, b), bound=False)
    assert result.ok and np.array_equal(outs[0], outs[1]), str(result)


@pytest.mark.parametrize("pattern,replacement,kind", [
    (r"ld\.acquire\.gpu", "ld.relaxed.gpu", "race"),
    (r"st\.release\.gpu", "st.relaxed.gpu", "race"),
    # thread 0 spins for ever while lanes 1-31 of its warp wait at the aligned bar.sync (the
    # hardware reconverges the warp there): a hang, reported as one (sim/named_barriers.py)
    (r"(st\.release\.gpu\.global\.u32 \[[^\]]+\]), 1;", r"\1, 0;", "deadlock"),
    # one thread polls: without the barrier after its poll only thread 0 is ordered after the release
    (r"(\$L_fixup_flag_seen:\n)\s*bar\.sync 0;[^\n]*\n", r"\1", "race"),
], ids=["owner-without-acquire", "partial-without-release", "flag-never-set", "no-barrier-after-the-poll"])
def test_broken_handshakes_are_caught(pattern, replacement, kind):
    g, s = Gemm(128, 128, 320), Schedule(block=(64, 64, 32), decomposition="stream-k-pure", sms=3)
    k = ptxgen.compile(g, s)
    ptx, count = re.subn(pattern, replacement, k.ptx)
    assert count >= 1
    broken = dataclasses.replace(k, ptx=ptx)
    a, b = random_operands(g)
    with pytest.raises(HazardError) as err:
        run_simulation(broken, a, b)
    assert err.value.kind == kind


def test_kernel_is_persistent_and_reads_its_grid():
    k = ptxgen.compile(Gemm(4096, 4096, 4096), Schedule(block=(128, 128, 32), decomposition="stream-k"), "sm_90")
    assert k.grid == (132, 1, 1) and "%nctaid.x" in k.ptx and "$L_unit_loop" in k.ptx
    assert k.launch_grid(114) == (114, 1, 1) and k.scratch_sizes((114, 1, 1)) == (114 * 128 * 128, 114)
    fixed = ptxgen.compile(Gemm(4096, 4096, 4096), Schedule(block=(128, 128, 32), decomposition="stream-k",
                                                            sms=64))
    assert fixed.grid == (64, 1, 1) and fixed.launch_grid(132) == (64, 1, 1)
    small = ptxgen.compile(Gemm(16, 16, 32), Schedule(block=(64, 64, 32), decomposition="stream-k"))
    assert small.grid == (1, 1, 1)  # never more CTAs than MAC iterations


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_stream_k_assembles_without_spills(arch):
    k = ptxgen.compile(Gemm(4096, 4096, 4096), Schedule(block=(128, 128, 32), warps=(2, 2), stages=4,
                                                        decomposition="stream-k"), arch)
    assert k.resources.spill_store_bytes == 0 and k.resources.spill_load_bytes == 0


@pytest.mark.parametrize("g,s,field", [
    (lambda: (Gemm(64, 64, 64), Schedule(block=(64, 64, 32), decomposition="streamk")), None, "schedule.decomposition"),
    (lambda: (Gemm(64, 64, 64), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=0)), None, "schedule.sms"),
    (Gemm(64, 64, 64), Schedule(block=(64, 64, 32), decomposition="stream-k", sms=10**6), "schedule.sms"),
    (Gemm(64, 64, 64), Schedule(block=(64, 64, 32), decomposition="stream-k", split_k=2), "schedule.split_k"),
    (Gemm(64, 64, 64, out_dtype="f16", acc_dtype="f16"), Schedule(block=(64, 64, 32), decomposition="stream-k"),
     "gemm.acc_dtype"),
    (Gemm(64, 64, 64, dtype="s8", out_dtype="s32"), Schedule(block=(64, 64, 64), decomposition="stream-k"),
     "gemm.acc_dtype"),
])
def test_stream_k_rules(g, s, field):
    with pytest.raises(ScheduleError) as err:  # a lambda: a bad value on its own raises when built
        ptxgen.verify(*(g() if callable(g) else (g, s)))
    assert err.value.field == field and err.value.fix
