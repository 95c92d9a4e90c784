"""bench/fuzz_campaign.sh: chunks of bench/fuzz.py under one deadline, each chunk's report whole in
its own file, and nothing started once the deadline is near."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "fuzz_campaign.sh"


def run(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("bash") is None or shutil.which("timeout") is None:
        pytest.skip("bench/fuzz_campaign.sh needs bash and coreutils' timeout")
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


def test_chunks_write_whole_reports_with_their_seeds(tmp_path):
    r = run(str(tmp_path), "300", "1", "sm_90a:2:2:30000:--arch+sm_90a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fuzz-sm_90a-30000.txt", "fuzz-sm_90a-30002.txt"]
    text = (tmp_path / "fuzz-sm_90a-30002.txt").read_text()
    assert text.startswith("# PYTHONPATH=. python bench/fuzz.py --arch sm_90a --draws 2 --seed 30002 --workers 1")
    assert "seeds 30002..30003" in text and "\nwrong " in text
    assert r.stdout.count("exit 0; wrong 0 error 0") == 2


def test_no_chunk_starts_past_the_deadline(tmp_path):
    r = run(str(tmp_path), "5", "1", "sm_90a:3:2:30000:--arch+sm_90a")
    assert r.returncode == 0 and "deadline reached, chunk 0 of 3 not started" in r.stdout
    assert not list(tmp_path.iterdir())


def test_usage_without_arguments():
    r = run()
    assert r.returncode == 2 and "CAMPAIGN" in r.stdout
