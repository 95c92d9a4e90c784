"""`compile(gemm)` without a schedule: the chooser's pick is legal, never spills, runs correctly, and
fits the shape (decode M=1 must not run a 128-row tile; 77x131x45 and 100x72x7 batch 3
spilled on the old fixed default)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.cli import main
from ptxgen.tune import choose as choose_module
from ptxgen.tune.choose import choose, rank
from ptxgen.tune.costmodel import predict
from tests import harness
from ptxgen.check import compare, random_operands, reference
from ptxgen.cli.app import main

SMALL = [1, 2, 7, 16, 17, 40, 63, 100]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_chosen_schedule_is_legal_spill_free_and_correct(data):
    g = Gemm(data.draw(st.sampled_from(SMALL), label="M"), data.draw(st.sampled_from(SMALL), label="N"),
             data.draw(st.sampled_from(SMALL), label="K"),
             dtype=data.draw(st.sampled_from(["f16", "bf16", "tf32", "s8"]), label="dtype"),
             a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"),
             batch=data.draw(st.sampled_from([1, 2]), label="batch"))
    if g.dtype == "s8":
        g = Gemm(g.m, g.n, g.k, dtype="s8", out_dtype="s32", a_layout=g.a_layout, b_layout=g.b_layout, batch=g.batch)
    arch = data.draw(st.sampled_from(["sm_80", "sm_90"]), label="arch")
    k = ptxgen.compile(g, arch=arch)
    ptxgen.verify(g, k.schedule, arch)
    assert k.choice is not None and k.choice.schedule == k.schedule
    assert k.resources.spill_bytes == 0, f"{g} on {arch}: chosen {k.schedule} spills"
    harness.check(k, seed=g.m + 7 * g.n + 31 * g.k, bound=False)


@pytest.mark.parametrize("shape,extra", [((77, 131, 45), {}),
                                         ((100, 72, 7), {"batch": 3, "a_layout": "col", "b_layout": "col"})])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_issue_shapes_that_spilled_on_the_old_default_do_not_spill(shape, extra, arch):
    g = Gemm(*shape, **extra)
    k = ptxgen.compile(g, arch=arch)
    assert k.resources.spill_bytes == 0
    if shape == (77, 131, 45) and arch == "sm_80":  # the old CLI default did spill here
        assert ptxgen.compile(g, Schedule(block=(128, 128, 32)), arch).resources.spill_bytes > 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_decode_picks_a_small_m_tile(arch):
    k = ptxgen.compile(Gemm(1, 4096, 4096), arch=arch)
    m_side = k.schedule.bn if k.schedule.swap_ab else k.schedule.bm  # swap-AB tiles M along the tile's N
    assert m_side <= 32, k.schedule
    assert k.choice.prediction.edge_waste < 0.97


def test_a_spilling_candidate_is_passed_over(monkeypatch):
    """The first-ranked candidate is made to 'spill': the chooser records it and takes another."""
    g = Gemm(64, 64, 64)
    first = rank(g, "sm_80")[0].schedule
    real = choose_module.assembled_resources

    def fake(gemm, s, arch):
        regs, spill, kernel = real(gemm, s, arch)
        return (regs, 64, kernel) if s == first else (regs, spill, kernel)

    monkeypatch.setattr(choose_module, "assembled_resources", fake)
    c = choose(g, "sm_80")
    assert c.schedule != first and (first, 64) in c.spilled
    assert first not in [r.schedule for r in c.runners_up]


def test_the_spill_check_is_cached_per_process(monkeypatch):
    g = Gemm(48, 40, 24)
    s = rank(g, "sm_90")[0].schedule
    choose_module.assembled_resources(g, s, "sm_90")
    from ptxgen import kernel as kernel_module

    def no_assembly(self):
        raise AssertionError("assembled again")

    monkeypatch.setattr(kernel_module.Kernel, "assemble", no_assembly)
    regs, spill, _ = choose_module.assembled_resources(g, s, "sm_90")
    assert regs > 0 and spill == 0


def test_an_explicit_schedule_has_no_choice():
    assert ptxgen.compile(Gemm(64, 64, 64), Schedule(block=(64, 64, 32))).choice is None


def test_info_without_schedule_flags_says_why(capsys):
    assert main(["info", "--shape", "1x512x512", "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    chosen = next(line for line in out.splitlines() if line.startswith("chosen "))
    assert ("--block 16x" in chosen or "--swap-ab" in chosen) and "runner-up" in out and "waves" in out  # M=1 tile
    assert main(["info", "--shape", "1x512x512", "--stages", "2"]) == 0  # a schedule flag: no choice
    out = capsys.readouterr().out
    assert "chosen" not in out and "block 128x128x32" in out


def test_a_problem_no_schedule_fits_gets_its_own_error():
    with pytest.raises(ptxgen.ScheduleError, match="lda"):
        ptxgen.compile(Gemm(64, 64, 64, lda=63), arch="sm_80")


def test_unmodelled_arguments_are_named():
    with pytest.raises(TypeError, match="ptxgen.Gemm"):
        ptxgen.compile((64, 64, 64))
    with pytest.raises(ValueError, match="sm_80"):
        ptxgen.compile(Gemm(64, 64, 64), arch="sm_70")


def test_prediction_waves_and_limiter_match_occupancy():
    g = Gemm(4096, 4096, 4096)
    p = predict(g, Schedule(block=(128, 128, 32), warps=(2, 2), stages=3), "sm_80", registers=232)
    # 232 registers x 128 threads: 2 CTAs/SM by registers; 1024 tiles over 216 per wave
    assert (p.ctas_per_sm, p.limiter, p.ctas) == (2, "registers", 1024)
    assert p.waves == pytest.approx(1024 / 216)


def test_the_readme_quickstart_runs_without_schedule_flags(capsys):
    """README quickstart: `ptxgen run --shape 256x256x128 --dtype f16` chooses, runs and passes."""
    assert main(["run", "--shape", "256x256x128", "--dtype", "f16", "--sim"]) == 0
    out = capsys.readouterr().out
    assert "chosen     --block" in out and "PASS" in out and " 0 B spill stores" in out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_long_k_on_few_tiles_shares_k_and_big_problems_do_not(arch):
    """Split-K or Stream-K when M*N cannot fill the GPU and K is long; whole tiles when it can."""
    small = choose(Gemm(128, 128, 65536), arch).schedule
    assert small.split_k > 1 or small.stream_k, small
    big = choose(Gemm(4096, 4096, 4096), arch).schedule
    assert big.split_k == 1 and big.bm >= 64 and big.bn >= 64, big


def test_without_an_assembler_the_model_alone_chooses(monkeypatch):
    from ptxgen.runtime.assemble import AssemblerNotFound

    def missing(gemm, s, arch):
        raise AssemblerNotFound("no nvJitLink here")

    monkeypatch.setattr(choose_module, "assembled_resources", missing)
    c = choose(Gemm(64, 64, 64), "sm_80")
    assert not c.registers_checked and c.schedule == rank(Gemm(64, 64, 64), "sm_80")[0].schedule
    assert any("spills unchecked" in line for line in c.lines())


def test_after_a_spill_only_smaller_register_needs_are_assembled(monkeypatch):
    """Issue 22: the 8 tries went to near-copies of one warp tile. Every candidate needing at least
    what the first one needs 'spills' here: each later try needs fewer registers or has a smaller
    warp tile, and the chooser comes back with a kernel instead of an error."""
    g = Gemm(4096, 4096, 4096, out_dtype="f16")
    first = rank(g, "sm_80")[0].schedule
    need = choose_module.register_need(g, first)
    tried = []

    def fake(gemm, s, arch):
        tried.append(s)
        return 200, (64 if choose_module.register_need(gemm, s) >= need else 0), None

    monkeypatch.setattr(choose_module, "assembled_resources", fake)
    c = choose(g, "sm_80")
    assert choose_module.register_need(g, c.schedule) < need and c.spilled == [(first, 64)]
    assert all(not choose_module._not_smaller(g, s, first) for s in tried[1:]), tried


def test_when_every_try_spills_the_fewest_registers_are_the_last_resort(monkeypatch):
    g = Gemm(2130, 4986, 4743, dtype="bf16")
    ranked = rank(g, "sm_90")
    fewest = choose_module.last_resort(g, ranked).schedule

    def fake(gemm, s, arch):
        return 255, (0 if s == fewest else 128), None

    monkeypatch.setattr(choose_module, "assembled_resources", fake)
    c = choose(g, "sm_90")
    assert c.schedule == fewest and len(c.spilled) == choose_module.MAX_ASSEMBLED
    assert choose_module.register_need(g, fewest) == min(choose_module.register_need(g, r.schedule) for r in ranked)


@pytest.mark.parametrize("shape,dtype,arch", [((2130, 4986, 4743), "bf16", "sm_90"), ((1695, 3815, 3625), "f16", "sm_80"),
                                              ((2690, 2761, 2033), "bf16", "sm_90")])
def test_issue_22_shapes_compile_without_spills(shape, dtype, arch):
    """Each raised 'the 8 best-ranked schedules all spill registers' before issue 22."""
    k = ptxgen.compile(Gemm(*shape, dtype=dtype), arch=arch)
    assert k.resources.spill_bytes == 0
