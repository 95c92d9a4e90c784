"""bench/ for sm_100a with no Blackwell GPU: gemm.py's dry-run plan (the tcgen05 candidates, the
chooser's pick, the block-scaled formats with the verifier's verdict) and the tcgen05 SASS
analysis of bench/sass_blackwell.py on a kernel assembled here."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("gemm")


def test_sm100a_dry_run_plans_tcgen05_candidates_and_the_block_scaled_verdicts(bench):
    shapes = [s for s in bench.SHAPES if s[:3] in {(8192, 8192, 8192), (2048, 4096, 11008), (64, 4096, 4096)}]
    jobs = bench.build_plan("sm_100a", bench.BLACKWELL_DTYPES, shapes)
    assert [j.dtype for j in jobs[:4]] == ["bf16", "f16", "mxfp8", "nvfp4"]
    assert len(jobs) == 4 * len(shapes) == 12
    for j in jobs:
        assert j.candidates, j
        if j.dtype in ("bf16", "f16"):
            schedules = [c.spec.schedule() for c in j.candidates]
            assert all(s.instruction == "tcgen05" for s in schedules)
            assert all(c.verdict == "ok" for c in j.candidates), [c.verdict for c in j.candidates]
            assert j.candidates[0].name == "128x256x64 tcgen05 s4 ws-persistent"
            chosen = [c for c in j.candidates if c.name.startswith("chosen ")]
            assert len(chosen) == 1 and "tcgen05" in chosen[0].name
            assert j.gemm().out_dtype == j.dtype and (j.gemm().a_layout, j.gemm().b_layout) == ("row", "col")
        else:  # planned with a verdict: refused (with the reason) until the block-scaled lowering lands
            assert all(c.spec.dtype == j.dtype for c in j.candidates)
            for c in j.candidates:
                assert c.verdict == "ok" or "block_scale" in c.verdict or "dtype" in c.verdict, c.verdict
    big = next(j for j in jobs if (j.dtype, j.m) == ("bf16", 8192))
    assert next(c for c in big.candidates if c.name.startswith("chosen ")).spec.schedule().bn == 256


def test_sm100a_dry_run_command_prints_the_plan(bench, capsys, monkeypatch):
    monkeypatch.setattr(bench, "SHAPES", [(2048, 4096, 4096, "llm")])
    monkeypatch.setattr(sys.modules["gemm_cases"], "SHAPES", [(2048, 4096, 4096, "llm")], raising=False)
    assert bench.main(["--arch", "sm_100a", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan for sm_100a: 4 problems")
    assert "128x256x64 tcgen05 s4 ws-persistent" in out and "mxfp8" in out and "nvfp4" in out


def test_bench_gemm_stays_small():
    assert len((ROOT / "bench" / "gemm.py").read_text().splitlines()) <= 500
