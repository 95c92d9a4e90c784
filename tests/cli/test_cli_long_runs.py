"""Long and large runs: memory refused up front, Ctrl-C, time warnings, progress, sampled reference."""
from __future__ import annotations

import io
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ptxgen
from ptxgen.check import random_epilogue_operands, random_operands, random_scale, reference, reference_tile
from ptxgen.cli.app import main
from ptxgen.scaleout.progress import ProgressBar
from ptxgen.simulate import run_simulation, steps_per_cta
from tests import harness

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_too_large_for_host_memory_is_refused_before_allocating():
    """`--shape 100000x100000x64 --sim` used to die in numpy with a MemoryError traceback (on a
    24 GB machine); a C of 3.6 TB does not fit anywhere."""
    r = subprocess.run([sys.executable, "-m", "ptxgen", "run", "--shape", "1000000x1000000x64", "--sim"],
                       capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "GB of host memory" in r.stderr and "C 3725.3 GB" in r.stderr and "smaller --shape" in r.stderr


def test_memory_check_counts_what_the_run_allocates():
    from ptxgen.cli.app import UsageError
    from ptxgen.cli.run import check_memory, host_bytes

    k = ptxgen.compile(ptxgen.Gemm(4096, 4096, 64), ptxgen.Schedule(block=(128, 128, 32)))
    need = host_bytes(k, 5 * 128 * 128)
    assert need["C"] == 4 * 4096 * 4096 and need["A and B"] == 2 * 2 * 4096 * 64
    check_memory(k, 5 * 128 * 128, available=2 * sum(need.values()))
    with pytest.raises(UsageError, match="smaller --shape"):
        check_memory(k, 5 * 128 * 128, available=sum(need.values()) // 2)


def test_memory_error_anywhere_is_one_line(monkeypatch, capsys):
    import ptxgen.cli.app as cli

    monkeypatch.setattr(cli, "cmd_info", lambda args: (_ for _ in ()).throw(MemoryError()))
    assert main(["info"]) == 1
    err = capsys.readouterr().err
    assert "out of host memory" in err and "smaller" in err and "Traceback" not in err


def test_ctrl_c_exits_130_with_one_line():
    p = subprocess.Popen([sys.executable, "-m", "ptxgen", "run", "--sim", "--shape", "1x1x20000000", "--progress", "off"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
                         preexec_fn=harness.default_sigint)
    line = p.stderr.readline()  # the time warning comes just before the operands and the simulation
    assert "will take about" in line and "smaller --shape" in line and "calibrated by a warm-up run" in line
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err and "interrupted" in err, err


def test_time_estimate_counts_the_instructions_each_cta_issues():
    g = ptxgen.Gemm(64, 64, 200)  # 7 k-tiles: the main loop body 6 more times
    k = ptxgen.compile(g, ptxgen.Schedule(block=(64, 64, 32)))
    a, b = random_operands(g)
    _, res = run_simulation(k, a, b)
    assert steps_per_cta(k) == res.instructions // k.block[0]


def test_slow_runs_are_announced_with_the_fix(monkeypatch, capsys):
    import ptxgen.cli.run as cli_run

    monkeypatch.setattr(cli_run, "SLOW_RUN_S", 0.0)
    assert main(["run", "--shape", "64x64x64", "--block", "64x64x32", "--all-ctas"]) == 0
    err = capsys.readouterr().err
    assert "warning: simulating the grid's one CTA will take about 0:" in err
    assert "smaller --shape" in err and "drop --all-ctas" in err
    assert "(calibrated by a warm-up run of this schedule)" in err


def test_the_warning_says_when_its_estimate_is_a_fallback(monkeypatch, capsys):
    import ptxgen.cli.run as cli_run
    import ptxgen.simulate as simulate

    def broken(twins):
        raise RuntimeError("no warm-up here")

    monkeypatch.setattr(cli_run, "SLOW_RUN_S", 0.0)
    monkeypatch.setattr(simulate, "measure_pace", broken)
    monkeypatch.setattr(simulate, "_PACES", {})
    assert main(["run", "--shape", "64x64x64", "--block", "64x64x32", "--all-ctas"]) == 0
    err = capsys.readouterr().err
    assert "(a fallback guess; assumed: the warm-up run failed (RuntimeError: no warm-up here))" in err


def test_simulate_reports_progress_per_cta():
    g = ptxgen.Gemm(128, 96, 32)
    k = ptxgen.compile(g, ptxgen.Schedule(block=(32, 32, 32), warps=(1, 1)))
    a, b = random_operands(g)
    calls = []
    k.simulate(a, b, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 12) for i in range(1, 13)]
    calls.clear()
    k.simulate(a, b, ctas=[(0, 0, 0), (2, 3, 0)], progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)]


def test_progress_bar_shows_ctas_elapsed_and_eta():
    out = io.StringIO()
    bar = ProgressBar(8, estimate_s=100.0, stream=out, delay=0.0, tick=10.0)
    bar.draw()
    assert "0/8 CTAs" in out.getvalue() and "ETA 1:40" in out.getvalue()  # from the estimate
    bar(2)
    bar.close()
    text = out.getvalue()
    assert "2/8 CTAs" in text and "25%" in text and "elapsed" in text and text.endswith("\n")


def test_progress_bar_stays_quiet_on_short_runs():
    out = io.StringIO()
    bar = ProgressBar(4, stream=out, delay=60.0)
    bar(4)
    bar.close()
    assert out.getvalue() == ""


def test_tile_reference_equals_the_full_one():
    g = ptxgen.Gemm(70, 90, 40, out_dtype="f32", epilogue=ptxgen.Epilogue(alpha=0.5, beta=1.0, bias="row", scale="col"))
    a, b = random_operands(g)
    c0, bias = random_epilogue_operands(g)
    scale = random_scale(g)
    full = reference(a, b, g.epilogue, c0, bias, scale)
    rows, cols = slice(64, 70), slice(32, 64)
    np.testing.assert_array_equal(reference_tile(a, b, g.epilogue, rows, cols, c0, bias, scale), full[rows, cols])


def test_sampled_run_references_only_the_sampled_tiles(monkeypatch, capsys):
    """8192^3 used to spend 30 s on a full float64 reference while checking 5 tiles."""
    import ptxgen.check as check

    shapes = []
    real = check.reference

    def spy(a, b, *rest):
        shapes.append((a.shape[0], b.shape[1]))
        return real(a, b, *rest)

    monkeypatch.setattr(check, "reference", spy)
    assert main(["run", "--shape", "300x300x32", "--block", "64x64x32", "--epilogue", "bias=col"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "checked 5 of 25 tiles (5 of 25 CTAs)" in out
    assert len(shapes) == 5 and all(m <= 64 and n <= 64 for m, n in shapes)


def test_stray_writes_outside_the_checked_tiles_are_counted():
    from ptxgen.check import poisoned
    from ptxgen.cli.run import stray_writes, tile_regions

    k = ptxgen.compile(ptxgen.Gemm(300, 300, 32), ptxgen.Schedule(block=(64, 64, 32)))
    regions = tile_regions(k, [(0, 0, 0)])
    c = poisoned((300, 300), "f32")
    c[:64, :64] = 1.0
    assert stray_writes(k, c, None, regions) == 0
    c[200, 7] = 2.0
    assert stray_writes(k, c, None, regions) == 1


@pytest.mark.parametrize("where,message", [((299, 299), "worst: [299, 299]: got 1000"),  # inside the last corner tile
                                           ((100, 7), "FAIL: 1 elements outside")])  # in a tile not simulated
def test_sampled_run_still_fails_a_wrong_element(where, message, monkeypatch, capsys):
    import ptxgen.simulate as simulate

    real = simulate.run_simulation

    def corrupt(*args, **kw):
        c, res = real(*args, **kw)
        c[where] = 1e3
        return c, res

    monkeypatch.setattr(simulate, "run_simulation", corrupt)
    assert main(["run", "--shape", "300x300x32", "--block", "64x64x32"]) == 1
    assert message in capsys.readouterr().out
