"""`ptxgen.tune`: static ranking without a GPU, the winner of injected measurements, the cache hook in
`compile`, the measurement plumbing through the simulator-backed driver, and Ray spreading."""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptxgen
from ptxgen.tune import cache as tuning_cache
from ptxgen.cli.app import main
from ptxgen.tune.choose import choose, describe_schedule
from ptxgen.tune.measure import TIMING_UNAVAILABLE, Measurement
from ptxgen.tune.tuner import tune

GEMM = ptxgen.Gemm(64, 64, 64)
DEVICE = "Test GPU (injected measure)"


@dataclass(frozen=True)
class TableMeasure:
    """An injected measure: each candidate's (status, seconds) from a table keyed by its flags.
    A value, so Ray pickles it; it names the process it ran in."""

    table: tuple[tuple[str, str, float | None], ...]
    device: str = DEVICE

    def __call__(self, g, s, arch) -> Measurement:
        status, t = {key: (st_, t_) for key, st_, t_ in self.table}[describe_schedule(s)]
        reason = f"pid {os.getpid()}" if status == "ok" else f"wrong result, dropped (pid {os.getpid()})"
        return Measurement(status, t if status == "ok" else None, reason, self.device)


@contextlib.contextmanager
def cache_dir():
    """A fresh PTXGEN_CACHE_DIR (a context manager: hypothesis examples each need their own)."""
    old = os.environ.get("PTXGEN_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        os.environ["PTXGEN_CACHE_DIR"] = d
        try:
            yield Path(d)
        finally:
            if old is None:
                os.environ.pop("PTXGEN_CACHE_DIR", None)
            else:
                os.environ["PTXGEN_CACHE_DIR"] = old


def entries(d: Path) -> list[Path]:
    return sorted((d / "tuning").glob("*" + tuning_cache.SUFFIX)) if (d / "tuning").is_dir() else []


@pytest.fixture(scope="module")
def static():
    """The static table for GEMM (no GPU here, no injected measure)."""
    driver = os.environ.pop("PTXGEN_DRIVER", None)  # whatever fixture ran first: no GPU for this one
    try:
        with cache_dir() as d:
            result = tune(GEMM, "sm_80", top=4, progress=False)
            assert entries(d) == []
    finally:
        if driver is not None:
            os.environ["PTXGEN_DRIVER"] = driver
    return result


def test_without_a_gpu_it_says_so_once_ranks_statically_and_caches_nothing(static):
    lines = static.lines()
    assert sum("no GPU here" in line for line in lines) == 1
    assert not static.measured and static.source == "cost model" and static.cached_at is None
    assert [c.status for c in static.candidates] == ["not measured"] * 4
    assert all(c.measured_s is None and c.predicted_s > 0 for c in static.candidates)
    assert static.winner == choose(GEMM, "sm_80").schedule  # the model's pick, as compile makes it
    assert lines[-1].startswith(f"winner: {describe_schedule(static.winner)} (cost model)")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_winner_is_the_fastest_correct_measurement_and_is_cached(static, data):
    keys = [describe_schedule(c.schedule) for c in static.candidates]
    times = data.draw(st.lists(st.floats(1e-6, 1e-3), min_size=len(keys), max_size=len(keys)), label="times")
    wrong = data.draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)), label="wrong")
    table = tuple((k, "wrong" if w else "ok", t) for k, w, t in zip(keys, wrong, times))
    with cache_dir() as d:
        r = tune(GEMM, "sm_80", top=4, measure=TableMeasure(table), progress=False)
        by_key = {describe_schedule(c.schedule): c for c in r.candidates}
        for k, w, t in zip(keys, wrong, times):
            c = by_key[k]
            assert (c.status, c.measured_s) == (("wrong", None) if w else ("ok", t))
            if w:
                assert "wrong result" in c.reason
        # equal medians: the model's better-ranked candidate wins
        correct = [(t, i, k) for i, (k, w, t) in enumerate(zip(keys, wrong, times)) if not w]
        if not correct:  # every candidate wrong: a ptxgen bug, said so; the model's pick, nothing cached
            assert r.source == "cost model" and r.winner == static.winner and entries(d) == []
            assert any("this is a bug in ptxgen" in note for note in r.notes)
            return
        assert not any("bug" in note for note in r.notes)
        best_t, _, best_k = min(correct)
        assert r.source == "measured" and describe_schedule(r.winner) == best_k and r.device == DEVICE
        entry = tuning_cache.load(GEMM, "sm_80", DEVICE)
        assert entry is not None and entry.schedule == r.winner and entry.measured_s == best_t
        assert entry.candidates == len(correct) and len(entries(d)) == 1
        assert tuning_cache.load(GEMM, "sm_90", DEVICE) is None  # keyed by arch
        assert tuning_cache.load(GEMM, "sm_80", "another GPU") is None  # and by device


def test_without_timings_the_winner_is_the_best_ranked_candidate_not_found_wrong(static):
    keys = [describe_schedule(c.schedule) for c in static.candidates]
    measure = TableMeasure(tuple((k, "wrong" if i < 2 else TIMING_UNAVAILABLE, None) for i, k in enumerate(keys)))
    with cache_dir() as d:
        r = tune(GEMM, "sm_80", top=4, measure=measure, progress=False)
        assert entries(d) == []
    assert r.source == "cost model" and r.winner == static.candidates[2].schedule
    assert [line.endswith("<- winner") for line in r.lines() if "--block" in line and "µs" in line] == \
        [False, False, True, False]
    assert not [line for line in r.lines() if re.search(r"\d us\b", line)]  # scaled by seconds_text, never raw "us"


def test_progress_reports_each_measured_candidate(static):
    table = tuple((describe_schedule(c.schedule), "ok", 1e-5 * (i + 1)) for i, c in enumerate(static.candidates))
    seen = []
    with cache_dir():
        tune(GEMM, "sm_80", top=4, measure=TableMeasure(table), progress=lambda done, total: seen.append((done, total)),
             save=False)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="top=0 must be an integer >= 1; fix: top=1"):
        tune(GEMM, "sm_80", top=0)
    with pytest.raises(TypeError, match="must be a ptxgen.Gemm"):
        tune("64x64x64", "sm_80")


# -- through the simulator-backed driver --------------------------------------------------------------
@pytest.fixture
def stand_in(monkeypatch):
    from ptxgen.runtime import simdriver

    reason = simdriver.compiler_unavailable_reason()
    if reason:
        pytest.skip(f"the stand-in driver cannot be built: {reason}")
    monkeypatch.setenv("PTXGEN_DRIVER", "sim")
    return tuning_cache.current_device()


@pytest.mark.parametrize("g", [
    ptxgen.Gemm(32, 48, 40),  # edges on every side, small enough to simulate every CTA
    ptxgen.Gemm(32, 48, 40, a_layout="col", b_layout="row", epilogue=ptxgen.Epilogue(beta=1.0, bias="col"), batch=2),
], ids=["tn", "nt-beta-bias-batched"])
def test_through_the_stand_in_each_candidate_is_checked_then_timing_is_unavailable(stand_in, g):
    """The real launch path checks each candidate; the timed launches' device operands (strided,
    column-major, batched, the epilogue's vectors) are prepared before the driver refuses timing."""
    with cache_dir() as d:
        r = tune(g, "sm_90", top=2, repeats=1, warmup=0, progress=False)
        assert entries(d) == []  # nothing measured, nothing cached
    assert [c.status for c in r.candidates] == [TIMING_UNAVAILABLE] * 2
    assert all("checked correct" in c.reason and "CUDA_ERROR_NOT_SUPPORTED" in c.reason for c in r.candidates)
    assert any(TIMING_UNAVAILABLE in note for note in r.notes)
    assert r.source == "cost model" and r.winner == choose(g, "sm_90").schedule


def test_compile_without_a_schedule_uses_the_cached_winner_for_this_device(stand_in, static):
    assert stand_in  # the stand-in's device name keys the cache
    keys = [describe_schedule(c.schedule) for c in static.candidates]
    table = tuple((k, "ok", 1e-4 if i != 2 else 5e-5) for i, k in enumerate(keys))  # the model's 3rd is fastest
    with cache_dir():
        r = tune(GEMM, "sm_80", top=4, measure=TableMeasure(table, device=stand_in), progress=False)
        assert r.winner == static.candidates[2].schedule != choose(GEMM, "sm_80").schedule
        k = ptxgen.compile(GEMM, arch="sm_80")
        assert k.schedule == r.winner
        assert k.choice.source.startswith(f"tuning cache (measured 50 µs on {stand_in}")
        assert k.choice.lines()[0].startswith(f"chosen     {describe_schedule(r.winner)}, from the tuning cache")
        # a neighbour in the same power-of-two bucket (and alignments) takes it too; another dtype's class does not
        assert ptxgen.compile(ptxgen.Gemm(60, 56, 40), arch="sm_80").choice.source.startswith("tuning cache")
        assert ptxgen.compile(ptxgen.Gemm(64, 64, 64, dtype="bf16"), arch="sm_80").choice.source == "cost model"
        os.environ["PTXGEN_CACHE"] = "0"
        try:
            assert ptxgen.compile(GEMM, arch="sm_80").choice.source == "cost model"
        finally:
            del os.environ["PTXGEN_CACHE"]


def test_a_corrupt_entry_warns_once_is_ignored_and_the_next_tune_rewrites_it(stand_in, static):
    table = tuple((describe_schedule(c.schedule), "ok", 1e-4 * (4 - i)) for i, c in enumerate(static.candidates))
    with cache_dir() as d:
        tune(GEMM, "sm_80", top=4, measure=TableMeasure(table, device=stand_in), progress=False)
        [path] = entries(d)
        path.write_text(path.read_text()[:40])  # a writer killed mid-way by something other than ptxgen
        with pytest.warns(tuning_cache.CacheWarning, match="corrupt") as caught:
            assert ptxgen.compile(GEMM, arch="sm_80").choice.source == "cost model"
            assert ptxgen.compile(GEMM, arch="sm_80").choice.source == "cost model"
        assert len([w for w in caught if "corrupt" in str(w.message)]) == 1
        tune(GEMM, "sm_80", top=4, measure=TableMeasure(table, device=stand_in), progress=False)
        assert ptxgen.compile(GEMM, arch="sm_80").schedule == static.candidates[3].schedule


# -- Ray ---------------------------------------------------------------------------------------------
def test_ray_spreads_the_measurements_and_matches_a_serial_run(local_ray, static):
    table = tuple((describe_schedule(c.schedule), "wrong" if i == 0 else "ok", 1e-5 * (5 - i))
                  for i, c in enumerate(static.candidates))
    with cache_dir():
        serial = tune(GEMM, "sm_80", top=4, measure=TableMeasure(table), progress=False, save=False)
        spread = tune(GEMM, "sm_80", top=4, measure=TableMeasure(table), ray_address="", ray_gpus=0,
                      progress=False, save=False)
    assert [(c.schedule, c.status, c.measured_s) for c in spread.candidates] == \
        [(c.schedule, c.status, c.measured_s) for c in serial.candidates]
    assert spread.winner == serial.winner == static.candidates[3].schedule
    assert all(c.reason.endswith(f"pid {os.getpid()}") for c in serial.candidates if c.status == "ok")
    assert not any(f"pid {os.getpid()}" in c.reason for c in spread.candidates)  # ran in Ray's workers


# -- CLI ---------------------------------------------------------------------------------------------
def test_cli_tune_prints_the_table_without_a_gpu(capsys):
    with cache_dir() as d:
        assert main(["tune", "--shape", "64x64x64", "--top", "2"]) == 0
        assert entries(d) == []
    out = capsys.readouterr().out
    assert "no GPU here" in out and "not measured <- winner" in out and "winner: --block" in out
    assert len([line for line in out.splitlines() if "--block" in line and "not measured" in line]) == 2


@pytest.mark.parametrize("argv, message", [
    (["tune", "--shape", "64x64x64", "--block", "64x64x32"], "tune chooses the schedule, but --block was given"),
    (["tune", "--shape", "64x64x64", "--arch", "sm_90a", "--acc", "f16", "--out", "f16"], "not built yet"),  # f16 accumulation: outside the built slice
])
def test_cli_tune_errors_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("ptxgen: ")


def test_the_progress_bar_counts_candidates():
    import io

    from ptxgen.scaleout.progress import ProgressBar

    out = io.StringIO()
    bar = ProgressBar(3, stream=out, label="tuning", unit="candidates", delay=0.0, tick=60.0)
    bar(1)
    bar.close()
    assert "tuning: 1/3 candidates [" in out.getvalue()


def test_a_wrong_kernel_is_dropped_by_the_check_before_any_timing(stand_in):
    """A kernel whose PTX computes 2·A@B while its gemm says A@B (alpha is baked into the PTX) is
    caught by the reference check through the launch path: "wrong", never timed."""
    import dataclasses

    from ptxgen.tune.measure import DeviceMeasure

    g = ptxgen.Gemm(32, 48, 40)
    s = choose(g, "sm_90").schedule
    doubled = ptxgen.compile(dataclasses.replace(g, epilogue=ptxgen.Epilogue(alpha=2.0)), s, "sm_90")
    wrong = dataclasses.replace(doubled, gemm=g)
    m = DeviceMeasure(repeats=1, warmup=0).measure_kernel(wrong)
    assert m.status == "wrong" and m.time_s is None and "FAIL" in m.reason and m.device == stand_in
    right = DeviceMeasure(repeats=1, warmup=0).measure_kernel(ptxgen.compile(g, s, "sm_90"))
    assert right.status == TIMING_UNAVAILABLE


def test_checking_big_candidates_on_the_stand_in_is_announced(stand_in, monkeypatch):
    from ptxgen.tune.tuner import stand_in_warning

    # 8192³: its whole grid is about 50x the threshold at this machine's pace, so a faster CI
    # machine still crosses it (2048³ sat within 20% of it, below or above by the machine's speed)
    big = ptxgen.Gemm(8192, 8192, 8192)
    schedules = [choose(big, "sm_90", check_spills=False).schedule]
    warning = stand_in_warning(big, "sm_90", schedules)
    assert warning and "whole grid on the CPU simulator" in warning and "fix: a smaller shape" in warning
    assert stand_in_warning(ptxgen.Gemm(32, 48, 40), "sm_90", [choose(ptxgen.Gemm(32, 48, 40), "sm_90").schedule]) \
        is None
    monkeypatch.delenv("PTXGEN_DRIVER")
    assert stand_in_warning(big, "sm_90", schedules) is None  # a real driver times them


def test_cli_tune_on_a_ray_cluster_without_gpus_is_a_usage_error(local_ray, capsys):
    assert main(["tune", "--shape", "64x64x64", "--top", "2", "--ray"]) == 2
    err = capsys.readouterr().err
    assert "--ray: the cluster cannot measure" in err and "has 0" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
