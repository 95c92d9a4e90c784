"""The warp-specialised sm_90a kernel (ptxgen/emit/sm90/warp_specialized.py): a producer warpgroup's
elected thread fills a full/empty mbarrier ring with TMA, one or two consumer warpgroups run wgmma
and release each stage after the wgmma reading it retired. Proven on the simulator against float64
numpy with never-zero inputs and a NaN-poisoned C; planted bugs (a stage released before its wgmma
retired, accumulators read before wait_group 0, a missing expect_tx, a missing phase flip, an
arrival count the init does not match) must be reported by the simulator, not hang or pass."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, sim
from ptxgen.check import random_operands
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.schedule.hopper import WGMMA_N
from ptxgen.schedule.verify import verify

from .test_sm90_gemm import check_epilogue, tn

ARCH = "sm_90a"


def ws(block, stages=3, consumers=1, persistent=False, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, consumers=consumers, persistent=persistent,
                    **kw)


GELU = Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row", activation="gelu")


@pytest.mark.parametrize("g, s", [
    (tn(100, 72, 200), ws((64, 64, 64), 3)),                                   # edges in M, N, K
    (tn(130, 136, 72, "bf16", "bf16"), ws((128, 128, 64), 2)),                 # two m64 blocks per consumer
    (tn(200, 136, 200), ws((128, 128, 64), 4, consumers=2)),                   # two consumers
    (tn(70, 40, 96, "f16", "f16"), ws((64, 40, 32), 1)),                       # one stage: wait_group 0
    (tn(33, 17, 24, "bf16"), ws((64, 16, 16), 2, raster="grouped", group_m=2)),
    (Gemm(104, 72, 200, a_layout="row", b_layout="row"), ws((64, 64, 64), 3)),         # B MN-major
    (Gemm(136, 136, 72, dtype="bf16", a_layout="col", b_layout="col"), ws((128, 128, 64), 2, consumers=2)),
    (Gemm(72, 80, 264, a_layout="col", b_layout="row", out_dtype="f16"), ws((64, 64, 32), 5)),
    (tn(264, 136, 72), ws((256, 128, 64), 2, consumers=2)),
], ids=["edges-s3", "bm128-bf16", "2c-s4", "s1", "swz32-grouped", "nn", "tt-2c", "nt-s5", "256x128-2c"])
def test_warp_specialized_gemm_matches_numpy(g, s):
    check_epilogue(g, s, seed=g.m + g.k)


@pytest.mark.parametrize("epi, out, consumers", [
    (Epilogue(alpha=0.5, beta=1.5, bias="col", activation="relu"), "f32", 1),
    (Epilogue(bias="row", scale="col", activation="gelu"), "bf16", 2),
    (Epilogue(alpha=2.0, scale="row", activation="silu", beta=-1.0), "f16", 2),
], ids=["alpha-beta-colbias-relu", "rowbias-colscale-gelu-2c", "rowscale-silu-beta-2c"])
def test_warp_specialized_fused_epilogues_match_numpy(epi, out, consumers):
    g = Gemm(136, 72, 136, dtype="f16", out_dtype=out, a_layout="row", b_layout="col", epilogue=epi)
    check_epilogue(g, ws((128, 64, 32), 3, consumers), seed=5)


def test_kernel_has_roles_and_no_bar_sync_in_the_loops():
    k = ptxgen.compile(tn(256, 256, 256), ws((128, 128, 64), 4, consumers=2), arch=ARCH)
    assert ".maxnreg 168" in k.ptx and k.block == (384, 1, 1)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in k.ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in k.ptx
    # the only bar.sync is the one after the barriers' initialisation, before the roles split
    assert k.ptx.count("bar.sync") == 1
    assert k.ptx.index("bar.sync") < k.ptx.index("setmaxnreg")
    assert "mbarrier.init.shared::cta.b64 [%r" in k.ptx and ", 8;" in k.ptx   # empty: one arrival per consumer warp


# -- planted bugs the simulator must catch ------------------------------------------------------------
G_PLANT = tn(128, 128, 512)


def _plant_kernel(stages: int = 2):
    return ptxgen.compile(G_PLANT, ws((128, 128, 64), stages, consumers=2), arch=ARCH)


def _run(ptx: str, k) -> float:
    g = k.gemm
    a, b = random_operands(g)
    c = np.full((g.m, g.n), np.nan, np.float32)
    maps = [sim.TensorMap(v, t.box, swizzle=t.swizzle) for v, t in zip((a, b.T), k.tensor_maps)]
    sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=[*maps, c, g.m, g.n, g.k, g.n],
               dynamic_smem=k.smem_bytes)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


def _without(ptx: str, marker: str) -> str:
    bad = "\n".join(line for line in ptx.split("\n") if marker not in line)
    assert bad != ptx, marker
    return bad


def test_the_unplanted_kernel_runs_through_sim_launch():
    k = _plant_kernel()
    assert _run(k.ptx, k) < 1e-5


def test_stage_released_before_its_wgmma_retired_is_caught():
    """No wait_group 1 before the release: the producer's TMA overwrites a stage a wgmma still reads."""
    k = _plant_kernel()
    with pytest.raises(sim.HazardError) as e:
        _run(_without(k.ptx, "k-tile kt-1's wgmma group has retired"), k)
    assert e.value.kind == "async-pending" and "wgmma still in flight" in e.value.detail


def test_accumulators_read_before_wait_group_0_are_caught():
    k = _plant_kernel()
    with pytest.raises(sim.HazardError) as e:
        _run(_without(k.ptx, "the accumulators may be read"), k)
    assert e.value.kind == "async-pending"


def test_missing_expect_tx_is_caught():
    """A plain arrival completes the full barrier's phase before the bytes land."""
    k = _plant_kernel()
    bad = re.sub(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, (\[[^\]]*\]), \d+;",
                 r"mbarrier.arrive.shared::cta.b64 _, \1;", k.ptx)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind == "async-pending"


@pytest.mark.parametrize("role, kind", [("consumer", "deadlock"), ("producer", "race")])
def test_missing_phase_flip_is_caught(role, kind):
    """Without its parity flip at the ring's wrap, a consumer waits for a phase that never comes
    (deadlock, reported, not hung); a producer refills a stage nobody released (extra arrival)."""
    k = _plant_kernel()
    lines = k.ptx.split("\n")
    consumer_at = next(i for i, line in enumerate(lines) if "consumer_start:" in line)
    flips = [i for i, line in enumerate(lines) if line.strip().startswith("xor.b32")]
    drop = next(i for i in flips if (i > consumer_at) == (role == "consumer"))
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(line for i, line in enumerate(lines) if i != drop), k)
    assert e.value.kind == kind, e.value


def test_empty_barrier_count_not_matching_the_arrivals_is_a_deadlock():
    k = _plant_kernel()
    bad = re.sub(r"(mbarrier\.init\.shared::cta\.b64 \[[^\]]*\]), 8;", r"\1, 16;", k.ptx)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind == "deadlock"


# -- property test over the warp-specialised schedule space -----------------------------------------
def draw_ws_case(data, persistent: bool | None = None) -> tuple[Gemm, Schedule]:
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "f16", "bf16")), label="out_dtype")
    m, n = (data.draw(st.integers(1, 300), label=x) for x in ("M", "N"))
    k = data.draw(st.integers(1, 40), label="K/8") * 8                 # 16-byte aligned rows (TMA)
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"),
                       scale=data.draw(st.sampled_from((None, "col", "row")), label="scale"),
                       activation=data.draw(st.sampled_from((None, "relu", "gelu", "silu")), label="act"))
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    if a_layout == "col":
        m = -(-m // 8) * 8
    if b_layout == "row":
        n = -(-n // 8) * 8
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, epilogue=epi)
    bm = data.draw(st.sampled_from((64, 128)), label="BM")
    bn = data.draw(st.sampled_from([x for x in (8, 16, 24, 40, 64, 128) if x in WGMMA_N[dtype]]), label="BN")
    bk = data.draw(st.sampled_from((16, 32, 64, 128)), label="BK")
    swizzle = data.draw(st.sampled_from((None,) + tuple(w for w in (128, 64, 32) if bk * 2 % w == 0)),
                        label="swizzle")
    consumers = data.draw(st.sampled_from((1, 2) if bm == 128 else (1,)), label="consumers")
    if persistent is None:
        persistent = data.draw(st.booleans(), label="persistent")
    extra = {}
    if persistent:
        extra["sms"] = data.draw(st.sampled_from((None, 1, 2, 3)), label="sms")   # small grids: CTAs loop
    s = ws((bm, bn, bk), data.draw(st.integers(1, 5), label="stages"), consumers, persistent=persistent,
           swizzle=swizzle, raster=data.draw(st.sampled_from(("row", "grouped")), label="raster"),
           group_m=data.draw(st.sampled_from((1, 2, 8)), label="group_m"), **extra)
    return g, s


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data())
def test_warp_specialized_schedules_match_numpy(data):
    g, s = draw_ws_case(data, persistent=False)
    try:
        verify(g, s, ARCH)
    except ScheduleError as e:
        assert not isinstance(e, LoweringNotBuilt), e   # the drawn space is built
        return                                           # illegal (smem, box): the verifier's to explain
    check_epilogue(g, s, seed=g.m * g.n + g.k)


# -- ptxas: setmaxnreg honoured, no spills ------------------------------------------------------------
@pytest.mark.parametrize("block, consumers, stages", [((128, 128, 64), 1, 4), ((128, 128, 64), 2, 4),
                                                      ((128, 256, 64), 2, 3)])
def test_ptxas_honours_setmaxnreg_without_spills(block, consumers, stages, monkeypatch):
    """Whole-program ptxas with the kernel's `.maxnreg` cap: no C7508 (no cap), C7504 (relocatable
    compilation, which nvJitLink always does) or C7515 (serialised wgmma), and no spills; the
    reported register count is the cap, the sign that setmaxnreg was kept."""
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, ws(block, stages, consumers), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
    log = r.log.lower()
    assert not any(code in log for code in ("c7508", "c7504", "c7515", "c7509", "warning")), r.log
    assert r.resources.registers == (248 if consumers == 1 else 168), r.resources
