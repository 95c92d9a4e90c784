"""`ptxgen run --workers N` and `--ray [ADDRESS]`: the same report as a serial run, clear errors."""
from __future__ import annotations

import re
import signal
import sys

import pytest

from ptxgen.cli import main

LIMIT_S = 300
RUN = ["run", "--sim", "--shape", "256x128x96", "--block", "64x64x32", "--split-k", "2"]


@pytest.fixture(autouse=True)
def bounded():
    def expire(signum, frame):
        raise TimeoutError(f"test ran past {LIMIT_S} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


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


def test_run_on_local_ray_reports_what_a_serial_run_does(capsys):
    ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[cluster]")')
    serial = report(RUN, capsys)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        same_report(serial, report([*RUN, "--ray"], capsys), "Ray")
    finally:
        if started:
            ray.shutdown()
