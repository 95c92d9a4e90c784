"""`bench/gemm.py --check-only`: every benchmark candidate runs through the driver API and is
checked, on a GPU or through the simulator-backed stand-in driver."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from gpu_helpers import require_gpu

require_gpu()

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gemm_check  # noqa: E402


def test_check_only_runs_candidates_through_the_driver():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gemm.py"), "--check-only", "--dtypes", "bf16",
                           "--max-candidates", "2"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [l for l in proc.stdout.splitlines() if l.startswith("  ok ")]
    assert len(rows) == 2 and "PASS: 0 of 2 candidate runs wrong or failed" in proc.stdout


def test_check_only_reports_a_wrong_result(monkeypatch):
    """The check can fail: a reference off by one in one element makes the candidate 'wrong'."""
    import ptxgen.check as check

    real = check.reference

    def off_by_one(a, b, *args, **kw):
        ref = real(a, b, *args, **kw)
        ref[1, 2] += 1.0
        return ref

    monkeypatch.setattr(check, "reference", off_by_one)
    spec = gemm_check.distinct_candidates()[0]
    row = gemm_check.check_candidate(spec, "f16", gemm_check_arch())
    assert row["status"] == "wrong" and "[1, 2]" in row["detail"], row


def test_reduced_shapes_keep_edges_and_busy_splits():
    for spec in gemm_check.distinct_candidates():
        m, n, k = gemm_check.reduced_shape(spec)
        bm, bn, bk = spec.block
        assert m % bm and n % bn and k % bk == 8 and k // bk >= max(spec.split_k, 2), spec.name


def gemm_check_arch() -> str:
    from gpu_helpers import device_compile_arch

    return device_compile_arch()
