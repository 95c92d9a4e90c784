"""`ptxgen run --workers N` and `--ray [ADDRESS]`: the same report as a serial run, clear errors."""
from __future__ import annotations

import re
import signal
import sys

import pytest

from ptxgen.cli.app import main
from tests import harness

LIMIT_S = 300
RUN = ["run", "--sim", "--shape", "256x128x96", "--block", "64x64x32", "--split-k", "2"]


pytestmark = pytest.mark.usefixtures("bounded")   # each test stops after LIMIT_S (conftest.py)


def report(argv: list[str], capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def same_report(serial: str, spread: str, where: str) -> None:
    assert f"every CTA over {where}" in spread
    assert re.sub(r" over [^,]*,", ",", spread) == serial  # instructions, errors, bank conflicts: all equal


def test_run_with_workers_reports_what_a_serial_run_does(capsys):
    serial = report(RUN, capsys)
    assert "PASS" in serial
    same_report(serial, report([*RUN, "--workers", "2"], capsys), "2 local processes")


@pytest.mark.parametrize("argv,needle", [
    (["--workers", "0"], "--workers must be a positive integer"),
    (["--workers", "two"], "--workers must be a positive integer"),
    (["--workers", "2", "--ray"], "pass one"),
])
def test_bad_worker_flags_are_usage_errors(argv, needle, capsys):
    try:
        status = main([*RUN, *argv])
    except SystemExit as e:  # argparse's own usage errors
        status = e.code
    assert status == 2
    assert needle in capsys.readouterr().err


def test_ray_without_ray_installed_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main([*RUN, "--ray"]) == 2
    err = capsys.readouterr().err
    assert 'pip install -e ".[cluster]"' in err and "Traceback" not in err


def test_run_on_local_ray_reports_what_a_serial_run_does(local_ray, capsys):
    serial = report(RUN, capsys)
    same_report(serial, report([*RUN, "--ray"], capsys), "Ray")


def test_memory_check_counts_a_copy_of_c_per_worker():
    import ptxgen
    from ptxgen.cli.app import UsageError
    from ptxgen.cli.run import check_memory, host_bytes

    k = ptxgen.compile(ptxgen.Gemm(4096, 4096, 64), ptxgen.Schedule(block=(128, 128, 32)))
    serial = sum(host_bytes(k, 128 * 128).values())
    assert host_bytes(k, 128 * 128, workers=4)["C in each of 4 workers"] == 4 * 4 * 4096 * 4096
    check_memory(k, 128 * 128, available=2 * serial)
    with pytest.raises(UsageError, match="fewer --workers"):
        check_memory(k, 128 * 128, available=2 * serial, workers=4)


def test_ctrl_c_with_workers_exits_130_with_one_line():
    import os
    import pathlib
    import subprocess
    import time

    root = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    p = subprocess.Popen([sys.executable, "-m", "ptxgen", "run", "--sim", "--shape", "128x128x600000", "--block",
                          "32x32x32", "--workers", "2", "--progress", "off"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root, env=env,
                         start_new_session=True, preexec_fn=harness.default_sigint)
    line = p.stderr.readline()  # the time warning comes just before the operands and the simulation
    assert "will take about" in line
    time.sleep(3.0)
    os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the parent and its workers
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err and "interrupted" in err, err
