"""bench/fuzz_draws_sm100.py (`fuzz.py --arch sm_100a`): every draw but the probes passes the
verifier, every probe is refused for the reason it names, and the draws reach every built sm_100a
design (issue 25): 1-CTA, CTA pairs, multicast clusters, cluster launch control, batches, walks,
every dense dtype and both majors, MXFP8/MXFP4/NVFP4 with scales of the right shapes, both store
paths, padded leading dimensions and K edges; a few draws of each kind run correct on the
simulator and a probe comes back "rejected"."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import ptxgen

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import fuzz_draws_sm100 as draws  # noqa: E402

SEEDS = range(800)


@pytest.fixture(scope="module")
def drawn():
    return [draws.draw(np.random.default_rng(seed)) for seed in SEEDS]


def test_draws_are_legal_and_probes_are_refused_naming_their_field(drawn):
    probes = 0
    for seed, d in zip(SEEDS, drawn):
        assert d.arch == "sm_100a" and d.schedule.instruction == "tcgen05"
        if not d.design.startswith("probe "):
            ptxgen.verify(d.gemm, d.schedule, d.arch)  # raises ScheduleError naming the broken rule
            assert d.design == draws.design(d.gemm, d.schedule)
            continue
        probes += 1
        with pytest.raises(ptxgen.ScheduleError) as e:
            ptxgen.verify(d.gemm, d.schedule, d.arch)
        assert e.value.field == draws.PROBES[d.design.removeprefix("probe ")], (seed, d.design, str(e.value))
    assert 0.02 * len(SEEDS) <= probes <= 0.1 * len(SEEDS)


def test_draws_reach_every_family_kind_and_probe(drawn):
    seen: set[str] = set()
    for d in drawn:
        g, s = d.gemm, d.schedule
        seen |= set(d.design.split()) | {d.design}
        seen |= {g.dtype, f"{g.dtype} {g.a_layout}/{g.b_layout}", f"via_smem {s.epilogue_via_smem}"}
        seen |= {"mixed fp8"} if g.b_dtype else set()
        seen |= {"k edge"} if g.k % s.bk else set()
        seen |= {"lda"} if g.lda is not None else set()
        seen |= {"ldc"} if g.ldc is not None else set()
        seen |= {"epilogue"} if g.epilogue is not None and (g.epilogue.bias or g.epilogue.beta) else set()
        seen |= {f"out {g.out_dtype}"}
        if g.block_scale is not None:
            sa, sb = d.arrays["scale_a"], d.arrays["scale_b"]
            assert (sa.shape, sb.shape) == g.block_scale.shapes(g.m, g.n, g.k)
            assert (g.block_scale.values(sa) > 0).all() and (g.block_scale.values(sb) > 0).all()
            if g.block_scale.family == "nv" and not d.design.startswith("probe "):
                assert g.epilogue is not None and g.epilogue.alpha != 1.0  # the per-tensor scale
        else:
            assert not d.arrays
    families = {"1cta", "2cta", "clc", "batched", "walk", "cluster", "2x1", "1x2", "2x2", "4x1", "1x4"}
    kinds = {"dense", "mxf8f6f4", "mxf4", "mxf4nvf4"} | {f"{k} {f}" for k in ("mxf8f6f4", "mxf4", "mxf4nvf4")
                                                         for f in ("1cta", "2cta", "clc", "cluster 2x1")}
    dtypes = {"f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8", "e2m1"} | {
        f"f16 {a}/{b}" for a in ("row", "col") for b in ("row", "col")}
    rest = {"mixed fp8", "k edge", "lda", "ldc", "epilogue", "via_smem None", "via_smem False", "via_smem True",
            "out s32", "out s8", "out u8", "dense 2cta batched", "dense clc batched", "dense 1cta walk"}
    probes = {f"probe {p}" for p in draws.PROBES}
    missing = (families | kinds | dtypes | rest | probes) - seen
    assert not missing, missing


def _load_fuzz():
    spec = importlib.util.spec_from_file_location("bench_fuzz_sm100", ROOT / "bench" / "fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("prefix", ["dense cluster 2x2", "dense 2cta", "dense clc batched", "mxf8f6f4 cluster",
                                    "mxf4 1cta", "mxf4nvf4 clc", "mxf4nvf4 2cta", "probe "])
def test_a_draw_of_each_kind_runs_correct_or_is_rejected(drawn, prefix):
    seed = next(seed for seed, d in zip(SEEDS, drawn) if d.design.startswith(prefix))
    outcome, detail, _, design = _load_fuzz().run_one(seed, None, "sm_100a")
    assert design.startswith(prefix)
    assert outcome == ("rejected" if prefix == "probe " else "correct"), detail
