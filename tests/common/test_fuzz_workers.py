"""bench/fuzz.py --workers N / --ray: the same seeds print the same report as a serial run."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT_S = 300


def fuzz(*flags: str) -> list[str]:
    """The report's lines after the first (which holds the wall time and where the draws ran)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, str(ROOT / "bench/fuzz.py"), "--seed", "5", *flags], capture_output=True,
                       text=True, timeout=LIMIT_S, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    first, *rest = r.stdout.splitlines()
    assert first.startswith("fuzz: ")
    return [first.split(", on ")[1].split(",")[0], *rest]


def test_fuzz_spread_over_processes_reports_what_a_serial_run_does():
    serial = fuzz("--draws", "8", "--workers", "1")
    spread = fuzz("--draws", "8", "--workers", "2")
    assert serial[0] == "this process" and spread[0] == "2 local processes"
    assert spread[1:] == serial[1:]
    assert any(re.fullmatch(r"correct\s+[1-9]\d*", line) for line in serial)  # kernels ran, not only rejections


def test_hopper_fuzz_runs_wgmma_kernels_and_reports_the_same_spread():
    """--arch sm_90a: Hopper draws compile for sm_90a and simulate correctly; spread the same."""
    serial = fuzz("--draws", "12", "--workers", "1", "--arch", "sm_90a")
    spread = fuzz("--draws", "12", "--workers", "2", "--arch", "sm_90a")
    assert spread[1:] == serial[1:]
    assert any(re.fullmatch(r"correct\s+[1-9]\d*", line) for line in serial)
    assert "f16" in serial[-2] or "bf16" in serial[-2]


def test_fuzz_on_local_ray_reports_what_a_serial_run_does():
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[cluster]")')
    serial = fuzz("--draws", "8", "--workers", "1")
    spread = fuzz("--draws", "8", "--ray")  # a local instance on this machine's cores
    assert spread[0].startswith("Ray") and spread[1:] == serial[1:]


def test_workers_and_ray_together_are_refused():
    r = subprocess.run([sys.executable, str(ROOT / "bench/fuzz.py"), "--workers", "2", "--ray"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "pass one" in r.stderr
