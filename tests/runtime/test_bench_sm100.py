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
        else:  # the block-scaled kinds are built: their fixed schedules verify, and the chooser picks one
            assert all(c.spec.dtype == j.dtype for c in j.candidates if not c.name.startswith("chosen "))
            assert all(c.verdict == "ok" for c in j.candidates), [c.verdict for c in j.candidates]
            assert sum(c.name.startswith("chosen ") for c in j.candidates) <= 1
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


SASS_SNIPPET = """
        /*0100*/                   ELECT P1, URZ, PT ;
        /*0110*/                   @!UP0 UTCHMMA gdesc[UR10], gdesc[UR12], tmem[UR24], tmem[UR22], idesc[UR23], UPT ;
        /*0120*/               @P1 BRA.U.ANY 0x100 ;
        /*0130*/                   ELECT P1, URZ, PT ;
        /*0140*/                   @!UP0 UTCHMMA gdesc[UR10], gdesc[UR12], tmem[UR24], tmem[UR22], idesc[UR23], UPT ;
        /*0150*/               @P1 BRA.U.ANY 0x130 ;
        /*0160*/                   @!UP0 UTCBAR [UR10], URZ ;
        /*0170*/                   UIADD3 UR4, UPT, UPT, UR4, 0x1, URZ ;
        /*0180*/                   BRA.U !UP0, 0x100 ;
        /*0190*/                   LDTM.x32 R40, tmem[UR5] ;
        /*01a0*/                   LDTM.x32 R20, tmem[UR5+0x20] ;
        /*01b0*/                   STG.E desc[UR4][R2.64], R40 ;
        /*01c0*/                   EXIT ;
"""


def test_tcgen05_sass_analysis_skips_elect_loops_and_counts_the_drain():
    sb = _load("sass_blackwell")
    h = sb.analyse(SASS_SNIPPET)
    assert h.mma is not None and h.mma.hot[0].addr == 0x100 and h.mma.classes["utcmma"] == 2
    ktiles, per = sb.per_ktile(h.mma, 2)
    assert ktiles == 1 and per["utcmma"] == 2 and per["tc_commit"] == 1 and per["total"] == 9
    assert (h.ldtm, h.ldtm_width, h.stg, h.tma_stores) == (2, "x32", 1, 0)
    assert h.mma_kinds == {"UTCHMMA": 2}


def test_tcgen05_kernel_sass_under_ptxas():
    sb = _load("sass_blackwell")
    sass = _load("sass")
    tool, paths = sass.cuobjdump(), sb.ptxas_paths([]) if Path(sb.PTXAS_130).exists() else []
    if tool is None or not paths:
        pytest.skip("needs ptxas 13 at /usr/local/bin and cuobjdump (bench-only tools)")
    import ptxgen

    g = ptxgen.Gemm(256, 512, 256, dtype="bf16", out_dtype="bf16")
    k = ptxgen.compile(g, ptxgen.Schedule(block=(128, 256, 64), instruction="tcgen05", stages=4), arch="sm_100a")
    a = sb.assemble_with(paths[0], k.ptx)
    assert a.cubin is not None and a.spill == 0 and a.registers > 0
    h = sb.analyse(sass.sass_text(a.cubin, tool), k.entry)
    _, per = sb.per_ktile(h.mma, 64 // 16)
    assert per["utcmma"] == 4 and per["tc_commit"] >= 1 and per["mbarrier"] >= 1
    assert h.producer is not None and h.mma_kinds.keys() == {"UTCHMMA"}
    assert (h.ldtm, h.ldtm_width) == (8, "x32")  # 256 f32 columns per tile, 32 per tcgen05.ld


@pytest.mark.parametrize("entry, kind", [("dot_ptr_fp8e5_128x64x64_w4_s2", "UTCQMMA"),
                                         ("dot_ptr_int8_128x64x64_w4_s2", "UTCIMMA"),
                                         ("dot_scaled_e2m1_128x128x128_w4_s2", "UTCOMMA")])
def test_tcgen05_mma_kinds_are_classified(entry, kind):
    """The other MMA kinds' SASS names (Triton's corpus kernels, tests/sim/blackwell_corpus/) count
    as tcgen05 MMAs, so fp8/int8/block-scaled kernels get their MMA loop found the day they land."""
    sb = _load("sass_blackwell")
    sass = _load("sass")
    ptxas = sb.PTXAS_135 if Path(sb.PTXAS_135).exists() else None
    if sass.cuobjdump() is None or ptxas is None:
        pytest.skip("needs ptxas 13.5 (PTX ISA 9.x) and cuobjdump (bench-only tools)")
    ptx = (ROOT / "tests" / "sim" / "blackwell_corpus" / f"{entry}.ptx").read_text()
    a = sb.assemble_with(ptxas, ptx)
    h = sb.analyse(sass.sass_text(a.cubin, sass.cuobjdump()))
    assert h.mma is not None and set(h.mma_kinds) == {kind} and h.mma.classes["utcmma"] >= 1
