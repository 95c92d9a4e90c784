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


def test_llm_designs_run_spread_and_are_never_rejected():
    """--designs grouped,block-scale: both designs run correctly (legal draws: none rejected) and
    --workers 2 reports what a serial run does."""
    serial = fuzz("--draws", "4", "--workers", "1", "--designs", "grouped,block-scale")
    spread = fuzz("--draws", "4", "--workers", "2", "--designs", "grouped,block-scale")
    assert spread[1:] == serial[1:]
    assert "correct         4" in serial and "rejected        0" in serial
    assert any(x.startswith("grouped ") for x in serial) and any(x.startswith("block-scale ") for x in serial)


def test_unknown_designs_and_designs_with_an_arch_are_refused():
    for flags, says in ((["--designs", "grouped,dense"], "unknown design(s) dense"),
                        (["--designs", "grouped", "--arch", "sm_90a"], "drop --arch/--instruction")):
        r = subprocess.run([sys.executable, str(ROOT / "bench/fuzz.py"), *flags], capture_output=True, text=True,
                           timeout=60, cwd=ROOT)
        assert r.returncode == 2 and says in r.stderr, r.stderr


def test_fuzz_on_local_ray_reports_what_a_serial_run_does():
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[cluster]")')
    serial = fuzz("--draws", "8", "--workers", "1")
    spread = fuzz("--draws", "8", "--ray")  # a local instance on this machine's cores
    assert spread[0].startswith("Ray") and spread[1:] == serial[1:]


def test_workers_and_ray_together_are_refused():
    r = subprocess.run([sys.executable, str(ROOT / "bench/fuzz.py"), "--workers", "2", "--ray"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "pass one" in r.stderr
