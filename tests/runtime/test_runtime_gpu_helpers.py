"""The hardware tests' helpers (tests/gpu/gpu_helpers.py), exercised without a GPU."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))

import gpu_helpers as H  # noqa: E402
from ptxgen.runtime.operands import check_operand  # noqa: E402


def test_record_writes_json_lines(tmp_path, monkeypatch, capsys):
    path = tmp_path / "rep.jsonl"
    monkeypatch.setenv("PTXGEN_GPU_REPORT", str(path))
    H.record("t1", hw=np.arange(4, dtype=np.uint32), x=np.float32(1.5),
             bf=np.ones(2, ml_dtypes.bfloat16), nested={"a": (1, 2)})
    H.record("t2", ok=True)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0] == {"test": "t1", "hw": [0, 1, 2, 3], "x": 1.5, "bf": [1.0, 1.0], "nested": {"a": [1, 2]}}
    assert lines[1] == {"test": "t2", "ok": True}
    assert "[gpu-report]" in capsys.readouterr().out


def test_report_path_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("PTXGEN_GPU_REPORT", raising=False)
    monkeypatch.setenv("OUT", str(tmp_path))
    assert H.report_path() == tmp_path / "gpu_report.jsonl"


def test_draw_kernel_and_operands():
    ptxgen = pytest.importorskip("ptxgen")
    if not hasattr(ptxgen, "compile"):
        pytest.skip("ptxgen.compile not available yet")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    seen = []

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.data())
    def prop(data):
        g, s, kern = H.draw_kernel(data, "sm_90", max_tiles=(2, 2, 2))
        assert (g.m % s.bm, g.n % s.bn, g.k % s.bk) == (0, 0, 0)
        assert kern.gemm == g and kern.schedule == s
        a, b = H.random_operands(g, 0)
        check_operand(a, name="A", shape=(g.m, g.k), dtype=g.dtype, layout=g.a_layout)
        check_operand(b, name="B", shape=(g.k, g.n), dtype=g.dtype, layout=g.b_layout)
        assert (a != 0).all() and (b != 0).all()
        seen.append(g.b_layout)

    prop()
    assert seen


def test_rel_fro():
    ref = np.ones((4, 4))
    assert H.rel_fro(ref, ref) == 0
    assert H.rel_fro(ref * 1.01, ref) == pytest.approx(0.01)
