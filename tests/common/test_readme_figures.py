"""Figures the README quotes that are cheap to check stay true: the number of tests/gpu tests
(collected here, not run; the interop example runs in tests/runtime/test_readme_interop.py)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_test_count_the_readme_quotes_is_the_collected_count():
    text = " ".join((ROOT / "README.md").read_text().split())
    quoted = int(re.search(r"GPU tests run in CI: of its (\d+) tests", text).group(1))
    ran, skipped = (int(x) for x in re.search(r"(\d+) run through it .*? and (\d+) skip", text).groups())
    assert ran + skipped == quoted
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/gpu"], cwd=ROOT, capture_output=True, text=True, timeout=600).stdout
    ids = [line for line in out.splitlines() if line.startswith("tests/gpu/") and "::" in line]
    per_file = [int(m.group(1)) for m in re.finditer(r"^tests/gpu/\S+\.py: (\d+)$", out, re.M)]  # -qq
    collected = len(ids) or sum(per_file)
    assert collected == quoted, f"README says {quoted} tests/gpu tests, pytest collects {collected}"
