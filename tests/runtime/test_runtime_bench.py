"""bench/gemm.py without a GPU: the plan (--dry-run), verifier verdicts, and the report code;
bench/plot.py on a synthetic results file."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    try:
        import ptxgen

        ptxgen.compile, ptxgen.verify  # noqa: B018
    except (ImportError, AttributeError):
        pytest.skip("ptxgen.compile not available yet")
    return _load("gemm")


def test_plan_covers_every_problem_in_importance_order(bench):
    jobs = bench.build_plan("sm_90")
    keys = [(j.dtype, j.m, j.n, j.k) for j in jobs]
    assert keys[:2] == [("f16", 4096, 4096, 4096), ("bf16", 4096, 4096, 4096)]
    assert len(keys) == len(set(keys)) == 2 * (5 + 2 + 16 + 4 + 3)  # decode: M = 1, 8 x 2 weights
    for dt in ("f16", "bf16"):
        for s in (1024, 2048, 4096, 8192, 16384):
            assert (dt, s, s, s) in keys
        for k in (1024, 16384):
            assert (dt, 4096, 4096, k) in keys
        for m in (16, 64, 256, 2048):
            for n, k in bench.LLM_NK:
                assert (dt, m, n, k) in keys
        assert (dt, 1, 4096, 4096) in keys and (dt, 4095, 4095, 4095) in keys
    assert keys[-1][1:] == (16384, 16384, 16384)
    for j in jobs:
        names = [c.name for c in j.candidates]
        assert names[:len(bench.SCHEDULES)] == [bench.schedule_name(*s) for s in bench.SCHEDULES]
        assert any(n.endswith("stream-k") for n in names)  # every problem also tries Stream-K
        fixed = [c for c in j.candidates if c.spec.fixed is None]  # the chooser's pick (decode) aside
        assert [c.spec.schedule().raster for c in fixed].count("row") == 1  # the raster's control
        assert any("splitk" in n for n in names) == (j.m <= 256)  # few tiles: split-K candidates too
        assert j.gemm().out_dtype == j.dtype


def test_sm90a_plan_holds_the_built_hopper_candidates(bench):
    """--arch sm_90a: the built wgmma designs (warp-specialised persistent, the non-specialised
    baseline, fp8 tiles for e4m3) plus the chooser's pick, legal for every problem whose rows TMA
    can describe; the K = 4095 problems are refused with the reason (and the chooser adds none)."""
    shapes = [s for s in bench.SHAPES if s[:3] in {(4096, 4096, 4096), (16, 4096, 11008), (4095, 4095, 4095)}]
    jobs = bench.build_plan("sm_90a", ("f16", "bf16", "e4m3"), shapes)
    assert len(jobs) == 3 * len(shapes) == 9
    for j in jobs:
        names = [c.name for c in j.candidates]
        schedules = [c.spec.schedule() for c in j.candidates]
        assert all(s.instruction == "wgmma" for s in schedules)
        if j.dtype == "e4m3":
            assert names[:2] == ["128x192x128 wgmma c2 s3 ws-persistent", "128x192x128 wgmma c2 s4 ws-persistent"]
            assert j.gemm().out_dtype == "bf16"
        else:
            assert names[:6] == ["128x128x64 wgmma c2 s4 ws-persistent", "128x128x64 wgmma c2 s3 ws-persistent",
                                 "128x256x64 wgmma c2 s4 ws-persistent", "128x256x64 wgmma c2 s3 ws-persistent",
                                 "128x128x64 wgmma c2 s4 one-cta-per-tile", "64x128x64 wgmma c1 s4 ws-persistent"]
            assert [s.warp_specialized and s.persistent for s in schedules[:5]] == [True] * 4 + [False]
        if j.k % 8 == 0:
            assert all(c.verdict == "ok" for c in j.candidates), [c.verdict for c in j.candidates]
            chosen = [c for c in j.candidates if c.name.startswith("chosen ")]
            assert len(chosen) == 1 and chosen[0].spec.schedule() == bench.chosen_spec(j.gemm(), "sm_90a").fixed
        else:
            assert all("gemm.lda" in c.verdict and "16-byte" in c.verdict for c in j.candidates)
            assert not any(c.name.startswith("chosen ") for c in j.candidates)
    big = next(j for j in jobs if (j.dtype, j.m) == ("bf16", 4096))
    chosen = [c for c in big.candidates if c.name.startswith("chosen ")]
    assert len(chosen) == 1 and " ws-persistent" in chosen[0].name, chosen  # the cost model's pick
    pick = chosen[0].spec.schedule()
    assert pick.warp_specialized and pick.persistent and pick.bm * pick.bn >= 128 * 256, pick
    assert pick.stages >= 4 and f" s{pick.stages} " in chosen[0].name, chosen  # as deep a ring as fits
    if tuple(pick.cluster) != (1, 1):  # the name says the cluster it launches
        assert f"cluster{pick.cluster[0]}x{pick.cluster[1]}" in chosen[0].name, chosen


def test_sm90a_without_a_gpu_plans_then_says_no_gpu(bench, capsys):
    from ptxgen.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    assert bench.main(["--arch", "sm_90a", "--max-problems", "3", "--out", "/nonexistent"]) == 2
    captured = capsys.readouterr()
    assert "plan for sm_90a: 3 problems" in captured.out and "no valid schedule (unsupported) for: none" in captured.out
    assert captured.err.startswith("no GPU: ") and "Traceback" not in captured.err


def test_rejected_schedules_carry_the_verifier_reason(bench):
    jobs = {(j.dtype, j.m, j.n, j.k): j for j in bench.build_plan("sm_90")}
    m16 = jobs[("f16", 16, 4096, 4096)]  # edge tiles are lowered: M=16 < BM is planned, not rejected
    assert all(c.verdict == "ok" for c in m16.candidates)
    for job in jobs.values():  # a rejection names the field it breaks, as ScheduleError does
        assert all(c.verdict == "ok" or "=" in c.verdict.split(":")[0] for c in job.candidates)
    big = jobs[("f16", 4096, 4096, 4096)]
    assert sum(c.verdict == "ok" for c in big.candidates) >= 4


def test_decode_problems_plan_the_choosers_pick_with_swap_ab(bench):
    llm = _load("llm_cases")
    shapes = [s for s in llm.DECODE_SHAPES if s[1:3] == (4096, 4096)]
    assert [s[0] for s in shapes] == [1, 8, 64] and {s[1:3] for s in llm.DECODE_SHAPES} == {(4096, 4096), (11008, 4096)}
    jobs = bench.build_plan("sm_90", ("bf16",), shapes=shapes[:2])
    for j in jobs:
        (chosen,) = [c for c in j.candidates if c.spec.fixed is not None]
        assert chosen.verdict == "ok" and chosen.spec.fixed.swap_ab and chosen.name.endswith("swap-ab")


def test_moe_problems_are_planned_as_grouped_gemms(bench, capsys):
    llm = _load("llm_cases")
    jobs = llm.plan_moe("sm_90")
    assert {(j.layer.model, j.layer.n, j.layer.k) for j in jobs} == {
        ("DeepSeek-V3", 4096, 7168), ("DeepSeek-V3", 7168, 2048), ("Qwen3-30B-A3B", 1536, 2048),
        ("Qwen3-30B-A3B", 2048, 768)}
    assert {j.grouping for j in jobs} == {"contiguous", "masked"}
    for j in jobs:
        g = j.gemm()
        assert g.grouped and g.groups == j.groups and j.verdict == "ok" and j.schedule.startswith("--block")
        counts = j.counts()  # uneven sizes within the launch's rows, an empty group among them
        assert len(counts) == j.groups and counts.max() <= j.m and j.flops > 0
        assert (counts[1] == 0) if j.grouping == "masked" else (counts[1] == counts[0])
    llm.print_moe_plan(jobs, "sm_90")
    assert "DeepSeek-V3 gate_up contiguous G=8" in capsys.readouterr().out


def test_dry_run_command(bench):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gemm.py"), "--dry-run"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "plan for sm_90: 60 problems" in out.stdout
    assert "grouped (mixture-of-experts) plan for sm_90: 8 problems" in out.stdout
    assert "gemm.m=16" not in out.stdout  # M=16 runs with edge tiles


def test_report_helpers(bench, capsys):
    assert bench.peak_for("NVIDIA H100 80GB HBM3", None) == pytest.approx(989.4)
    assert bench.peak_for("NVIDIA H100 PCIe", None) == 756.0
    assert bench.peak_for("NVIDIA H200", None) == pytest.approx(989.4)
    assert bench.peak_for("Some GPU", None) is None and bench.peak_for("x", 123.0) == 123.0
    assert bench.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert bench.geomean([2.0, 8.0]) == pytest.approx(4.0) and bench.geomean([]) is None
    rows = [
        {"system": "ptxgen", "dtype": "f16", "m": 64, "n": 64, "k": 64, "tflops": 100.0, "schedule": "s"},
        {"system": "cublas", "dtype": "f16", "m": 64, "n": 64, "k": 64, "tflops": 200.0, "schedule": None},
        {"system": "triton", "dtype": "f16", "m": 64, "n": 64, "k": 64, "tflops": None, "status": "error",
         "schedule": None},
        {"system": "ptxgen", "dtype": "f16", "m": 16, "n": 64, "k": 64, "tflops": None,
         "status": "unsupported", "schedule": None},
    ]
    summary = bench.print_table(rows, 1000.0)
    assert summary["geomean_vs_cublas"] == pytest.approx(0.5)
    assert summary["geomean_vs_triton"] is None and summary["problems"] == 2
    text = capsys.readouterr().out
    assert "unsupported" in text and "0.50x" in text and "10.0%" in text


def test_no_gpu_exits_cleanly(bench, capsys):
    from ptxgen.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    assert bench.main(["--out", "/nonexistent"]) == 2
    assert "no GPU" in capsys.readouterr().err


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    plot = _load("plot")
    result = {"device": "Fake GPU", "date": "2026-01-01", "peak_tflops": 989.4, "rows": [
        {"system": s, "dtype": dt, "m": m, "n": 4096, "k": 4096, "tflops": t, "schedule": None}
        for dt in ("f16", "bf16") for m in (256, 2048)
        for s, t in (("ptxgen", 300.0), ("cublas", 600.0), ("triton", None))]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    assert plot.main([str(path), "-o", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 1000
    labels, by_sys = plot.series(result)["f16"]
    assert labels == ["256x4096x4096", "2048x4096x4096"] and by_sys["triton"] == [None, None]


class NumpyDevice:
    """bench.Device's interface on the CPU, so run_job's bookkeeping runs without a GPU."""

    torch = None
    cupy = None
    name = "CPU stand-in"

    def __init__(self):
        import numpy as np

        self.np = np

    def randn(self, shape, dtype, seed):
        from ptxgen.schedule.problem import numpy_dtype

        x = self.np.random.default_rng(seed).standard_normal(shape).astype(self.np.float32)
        return (x + self.np.sign(x) * 0.05).astype(numpy_dtype(dtype))

    def empty(self, shape, dtype):
        from ptxgen.schedule.problem import numpy_dtype

        return self.np.empty(shape, numpy_dtype(dtype))

    def stream_handle(self):
        return 0

    def matmul(self, a, b, out):
        r = a.astype(self.np.float32) @ b.astype(self.np.float32)
        if out is None:
            return r
        out[...] = r
        return out

    def reference(self, a, b):
        return self.matmul(a, b, None)

    def rel_err(self, c, ref):
        c32 = c.astype(self.np.float32)
        if self.np.isnan(c32).any():
            return float("inf")
        return float(self.np.linalg.norm(c32 - ref) / self.np.linalg.norm(ref))

    def sync(self):
        pass

    def events(self):
        import time

        class Ev:
            def record(self):
                self.t = time.perf_counter()

            def synchronize(self):
                pass

        return Ev(), Ev()

    def elapsed_ms(self, s, e):
        return (e.t - s.t) * 1e3

    def free(self):
        pass


def test_run_job_bookkeeping(bench, monkeypatch, capsys):
    import numpy as np

    import ptxgen.runtime as rt

    def fake_prepare(kern, a, b, c, stream=None):
        wrong = kern.schedule.stages == 4 and kern.schedule.block[0] == 128  # plant one bad schedule

        def run():
            c[...] = (a.astype(np.float32) @ b.astype(np.float32)) * (1.5 if wrong else 1.0)
        return run

    monkeypatch.setattr(rt, "prepare_launch", fake_prepare)
    monkeypatch.setitem(sys.modules, "triton_matmul", None)  # "Triton not installed"
    (job,) = bench.build_plan("sm_90", dtypes=("f16",), shapes=[(128, 256, 64, "test")])
    rows = bench.run_job(NumpyDevice(), job, "sm_90", ["ptxgen", "cublas", "triton"], runs=20)
    by = {r["system"]: r for r in rows}
    p = by["ptxgen"]
    assert p["tflops"] > 0 and p["schedule"] != "128x128x32 w2x2 s4"
    cands = {c["schedule"]: c for c in p["candidates"]}
    assert cands["128x128x32 w2x2 s4"]["status"] == "wrong"
    edge = cands["256x128x32 w4x2 s3"]  # M=128 < BM=256: an edge tile, timed like any other
    assert edge.get("status") is None and edge["tflops"] > 0
    assert "WRONG RESULT" in capsys.readouterr().out
    assert by["cublas"]["tflops"] > 0 and by["cublas"]["rel_err"] < 1e-3
    assert by["triton"]["status"] == "unavailable"
    for r in rows:
        assert {"system", "dtype", "m", "n", "k", "tflops", "schedule"} <= set(r)


SASS = """
        /*0100*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0110*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0120*/              @!PT LDS RZ, [RZ] ;
        /*0130*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0140*/               @P0 LDGSTS.E.BYPASS.128 [R3], desc[UR8][R6.64] ;
        /*0150*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0160*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0170*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0180*/                   IMAD R2, R2, 0x2, RZ ;
        /*0190*/               @P1 BRA 0x150 ;
        /*01a0*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*01b0*/                   BRA 0x110 ;
        /*01c0*/                   EXIT ;
"""


def test_sass_report_finds_the_main_loop():
    """bench/sass.py: the main loop is the innermost loop holding tensor instructions (the inner
    0x150..0x190, not the 0x110..0x1b0 around it, which holds 2 more: a tile loop around a k loop
    whose first k-tile is peeled); the assembler's never-executed `@!PT` padding is not counted."""
    sass = _load("sass")
    ops = {i.addr: i for i in sass.parse_functions(SASS)[""]}
    assert 0x120 not in ops and ops[0x190].family == "BRA" and ops[0x190].target == 0x150
    loop = sass.main_loop(list(ops.values()))
    assert loop.tensor == 2 and loop.tensor_before_barrier == 1 and loop.of("BAR") == 1
    assert loop.of("LDSM") == 0 and loop.of("LDGSTS") == 0 and loop.of("IMAD") == 1 and loop.of("BRA") == 1
    assert sass.main_loop(sass.parse_functions("/*0000*/ EXIT ;")[""]) is None


@pytest.mark.parametrize("arch,regs,smem,threads,expect", [
    ("sm_90", 231, 69632, 128, (2, "registers")),  # 232 x 128 registers a CTA: 2 fit in 64 K
    ("sm_90", 64, 98304, 128, (2, "shared memory")),  # 2 x (96 + 1) KB of 228 KB
    ("sm_80", 16, 0, 1024, (2, "threads")),
    ("sm_80", 32, 1024, 32, (32, "CTA slots")),
])
def test_sass_report_occupancy(arch, regs, smem, threads, expect):
    """bench/sass.py uses ptxgen's occupancy model (the one `ptxgen info` prints)."""
    occ = _load("sass").occupancy(arch, regs, smem, threads)
    assert (occ.ctas_per_sm, occ.limiter) == expect


def test_sass_report_runs_without_cuobjdump(monkeypatch):
    sass = _load("sass")
    monkeypatch.setattr(sass, "cuobjdump", lambda: None)
    first = sass.specs()[:1]
    monkeypatch.setattr(sass, "specs", lambda: first)
    lines = sass.report("sm_90", "f16")
    assert lines[2].startswith("128x128x32 w2x2 s3") and " 0 " in lines[2] and "registers" in lines[2]
    assert "pip install nvidia-cuda-cuobjdump" in lines[-1]
