"""The sm_90a TMA-store epilogue (ptxgen/targets/sm90/epilogue_tma.py): accumulators -> epilogue math
-> cast -> swizzled shared staging (stmatrix / st.shared.v2.f32) -> fence.proxy.async -> barrier ->
one thread's TMA store per box, clipped by TMA at M and N; beta's C read through TMA on mbarriers.

Proven on the simulator against float64 numpy with never-zero inputs: C lives in a larger
NaN-poisoned allocation (padded rows, extra rows below M), so a box that is not clipped, or a
staged element that never reached C, shows. Planted bugs the simulator must catch: the proxy fence
removed, the store issued before the warpgroup barrier, a staging buffer rewritten before the
store that reads it has been waited for (cp.async.bulk.wait_group.read)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError, sim
from ptxgen.check import poisoned, random_operands, random_scale
from ptxgen.errors import LoweringNotBuilt
from ptxgen.targets.sm90.plan import WGMMA_N, hopper_plan
from ptxgen.schedule.problem import DTYPE_BYTES
from ptxgen.schedule.verify import verify
from tests import harness

ARCH = "sm_90a"
EXTRA_ROWS = 3   # poisoned rows below M in C's allocation: a box not clipped at M writes them


def tma(block, stages=2, consumers=1, **kw) -> Schedule:
    """The built sm_90a design with the TMA-store epilogue asked for explicitly."""
    return Schedule(block=block, instruction="wgmma", stages=stages, warp_specialized=False, persistent=False,
                    consumers=consumers, epilogue_via_smem=True, **kw)


def padded_c(g: Gemm) -> tuple[np.ndarray, np.ndarray]:
    """(allocation, C view): C's rows are ldc long and EXTRA_ROWS more follow, all poisoned."""
    ldc = g.leading_dims()[2]
    big = poisoned((g.m + EXTRA_ROWS, ldc), g.out_dtype)
    return big, big[:g.m, :g.n]


def check_tma_store(g: Gemm, s: Schedule, seed: int) -> None:
    """The harness's check, C a view of a padded allocation whose padding must stay poisoned."""
    k = ptxgen.compile(g, s, arch=ARCH)
    assert [t.param for t in k.tensor_maps] == ["tmapA", "tmapB", "tmapC"] and "bulk_group" in k.ptx
    big, view = padded_c(g)
    harness.check(k, seed=seed, out=view)
    wide = big.astype(np.float32)
    assert np.isnan(wide[:g.m, g.n:]).all() and np.isnan(wide[g.m:]).all(), "a TMA store wrote past M or N"


@pytest.mark.parametrize("g, s", [
    (Gemm(100, 72, 64, out_dtype="f32", a_layout="row", b_layout="col"), tma((64, 64, 64))),       # 2 boxes of 32
    (Gemm(130, 136, 72, "bf16", out_dtype="bf16", a_layout="row", b_layout="col"), tma((128, 128, 64))),
    (Gemm(200, 136, 72, out_dtype="f16", a_layout="row", b_layout="col"), tma((128, 128, 64), 2, 2)),  # 2 wgs
    (Gemm(70, 40, 96, out_dtype="f16", a_layout="row", b_layout="col"), tma((64, 40, 32), 1)),    # 80 B: no swizzle
    (Gemm(33, 24, 24, out_dtype="f32", a_layout="row", b_layout="col"), tma((64, 24, 16))),        # 32B swizzle
    (Gemm(72, 296, 64, out_dtype="f32", a_layout="col", b_layout="row"), tma((128, 256, 32), 2, 2)),  # 8 boxes
    (Gemm(64, 48, 64, out_dtype="bf16", a_layout="row", b_layout="col", ldc=56), tma((64, 48, 64))),   # padded ldc
], ids=["f32-2box", "bf16-bm128", "f16-2wg", "f16-unswizzled", "f32-swz32", "f32-nn-8box", "bf16-ldc56"])
def test_tma_store_matches_numpy_and_clips(g, s):
    check_tma_store(g, s, seed=1)


@pytest.mark.parametrize("epi, out, consumers", [
    (Epilogue(alpha=0.5, beta=1.5, bias="col", activation="relu"), "f32", 1),
    (Epilogue(beta=-1.0, bias="row", scale="col", activation="gelu"), "bf16", 2),
    (Epilogue(alpha=2.0, beta=0.5, scale="row", activation="silu"), "f16", 1),
    (Epilogue(bias="col", scale="col"), "f16", 2),
], ids=["beta-colbias-relu-f32", "beta-rowbias-colscale-gelu-bf16-2wg", "beta-rowscale-silu-f16", "vectors-f16-2wg"])
def test_fused_epilogues_through_the_tma_store(epi, out, consumers):
    """The shared epilogue math before the store; beta's C comes in through TMA loads (zero-filled
    past M and N), at edges in M, N and K."""
    g = Gemm(150, 200, 136, dtype="f16", out_dtype=out, a_layout="row", b_layout="col", epilogue=epi)
    check_tma_store(g, tma((128, 128, 64), 2, consumers), seed=7)


def test_beta_reads_c_through_tma_not_ld_global():
    g = Gemm(64, 128, 64, out_dtype="f16", a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0))
    ptx = ptxgen.compile(g, tma((64, 128, 64)), arch=ARCH).ptx
    assert "ld.global" not in ptx and "st.global" not in ptx
    assert ptx.count("mbarrier::complete_tx::bytes [") > 2 and "ldmatrix" in ptx and "stmatrix" in ptx


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data())
def test_tma_store_schedules_match_numpy(data):
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "f16", "bf16")), label="out_dtype")
    m, n = (data.draw(st.integers(1, 200), label=x) for x in ("M", "N"))
    k = data.draw(st.integers(1, 20), label="K/8") * 8
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    if a_layout == "col":
        m = -(-m // 8) * 8
    if b_layout == "row":
        n = -(-n // 8) * 8
    step = 16 // DTYPE_BYTES[out]                                    # C's rows 16-byte aligned for TMA
    ldc = -(-n // step) * step + step * data.draw(st.integers(0, 2), label="ldc pad (16 B)")
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0, -0.5)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"),
                       scale=data.draw(st.sampled_from((None, "col", "row")), label="scale"),
                       activation=data.draw(st.sampled_from((None, "relu", "gelu", "silu")), label="act"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, ldc=ldc, epilogue=epi)
    bm = data.draw(st.sampled_from((64, 128)), label="BM")
    bn = data.draw(st.sampled_from([x for x in (8, 16, 24, 40, 64, 96, 128, 256) if x in WGMMA_N[dtype]]),
                   label="BN")
    bk = data.draw(st.sampled_from((16, 32, 64)), label="BK")
    consumers = data.draw(st.sampled_from((1, 2) if bm == 128 else (1,)), label="consumers")
    s = tma((bm, bn, bk), data.draw(st.integers(1, 3), label="stages"), consumers,
            raster=data.draw(st.sampled_from(("row", "grouped")), label="raster"))
    try:
        verify(g, s, ARCH)
    except ScheduleError as e:
        assert not isinstance(e, LoweringNotBuilt), e
        assume(False)
    check_tma_store(g, s, seed=m + n + k)


@pytest.mark.parametrize("block, stages, in_ring", [((128, 128, 64), 2, True), ((64, 64, 16), 1, False)],
                         ids=["ring-reused", "ring-too-small"])
def test_staging_reuses_the_idle_ring_where_it_fits(block, stages, in_ring):
    """Without a persistent grid the ring is idle after the last wgmma, so the staging takes its
    bytes (the kernel's shared memory is the direct path's, plus the C-load barriers); a ring
    smaller than the staging keeps separate buffers. Both are correct."""
    g = Gemm(150, 136, 64, out_dtype="f16", a_layout="row", b_layout="col", epilogue=Epilogue(beta=0.5))
    s = tma(block, stages)
    k = ptxgen.compile(g, s, arch=ARCH)
    direct = ptxgen.compile(g, replace(s, epilogue_via_smem=False), arch=ARCH)
    plan = hopper_plan(g, s)
    assert (plan.smem.staging_in_ring > 0) == in_ring
    if in_ring:
        assert k.smem_bytes == direct.smem_bytes + 16 and plan.smem.epilogue_store == 0
        assert "the ring becomes the staging" in k.ptx
    else:
        assert k.smem_bytes > direct.smem_bytes + plan.smem.epilogue_store
    check_tma_store(g, s, seed=11)


# -- what TMA cannot store ---------------------------------------------------------------------------
def test_c_rows_tma_cannot_describe_are_refused_with_the_fix():
    g = Gemm(64, 70, 64, out_dtype="f16", a_layout="row", b_layout="col")        # 140-byte rows
    with pytest.raises(ScheduleError) as e:
        ptxgen.compile(g, tma((64, 64, 64)), arch=ARCH)
    assert e.value.field == "schedule.epilogue_via_smem" and "epilogue_via_smem=None or False" in str(e.value)
    assert "pad ldc to a multiple of 8" in str(e.value)


def test_box_rows_tma_cannot_move_are_refused_with_the_fix():
    """8-bit outputs with BN = 8 make 8-byte box rows: refused when asked for, direct when unset."""
    from ptxgen.schedule.verify import verify_rules

    g = Gemm(64, 64, 64, dtype="s8", out_dtype="s8", a_layout="row", b_layout="col")
    asked = Schedule(block=(64, 8, 32), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                     epilogue_via_smem=True)
    with pytest.raises(ScheduleError) as e:
        verify_rules(g, asked, ARCH)
    assert e.value.field == "schedule.epilogue_via_smem" and "make BN a multiple of 16" in str(e.value)
    unset = Schedule(block=(64, 8, 32), instruction="wgmma", stages=2, warp_specialized=False, persistent=False)
    plan = hopper_plan(g, unset)
    assert plan.epilogue == "direct" and plan.epilogue_tile is None and plan.smem.epilogue_store == 0


def test_unset_epilogue_path_picks_tma_where_c_allows_it_and_direct_stores_elsewhere():
    """A demanding user's default: the TMA store whenever C's rows are 16-byte aligned; direct
    stores (no tmapC) where they are not, still correct."""
    unset = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False)
    aligned = ptxgen.compile(Gemm(64, 72, 64, out_dtype="f16", a_layout="row", b_layout="col"), unset, arch=ARCH)
    assert [t.param for t in aligned.tensor_maps][-1] == "tmapC" and "st.global" not in aligned.ptx
    g = Gemm(50, 70, 64, out_dtype="f16", a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0))
    k = ptxgen.compile(g, unset, arch=ARCH)
    assert hopper_plan(g, unset).epilogue == "direct" and "tmapC" not in k.ptx and "st.global" in k.ptx
    harness.check(k, seed=2)


# -- planted bugs ------------------------------------------------------------------------------------
def _launch(ptx: str, k, g: Gemm) -> np.ndarray:
    """Run `ptx` (the kernel's, possibly edited) with the kernel's tensor maps on sim.launch."""
    a, b = random_operands(g)
    c = poisoned((g.m, g.n), g.out_dtype)
    maps = [sim.TensorMap(v, t.box, swizzle=t.swizzle) for v, t in zip((a, b.T, c), k.tensor_maps)]
    sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=[*maps, c, g.m, g.n, g.k, g.n],
               dynamic_smem=k.smem_bytes)
    _, result = harness.judge(g, c, harness.Operands(a, b))
    assert result.ok, str(result)
    return c


PLANT_G = Gemm(64, 128, 64, out_dtype="f32", a_layout="row", b_layout="col")     # 4 boxes of 32 f32 columns
PLANT_16 = Gemm(64, 192, 64, out_dtype="f16", a_layout="row", b_layout="col")    # 3 boxes of 64 f16 columns


@pytest.mark.parametrize("g, block", [(PLANT_G, (64, 128, 64)), (PLANT_16, (64, 192, 64))], ids=["f32", "f16"])
def test_the_unplanted_kernel_runs_through_sim_launch(g, block):
    k = ptxgen.compile(g, tma(block), arch=ARCH)
    _launch(k.ptx, k, g)


def _lines(ptx: str) -> list[str]:
    return ptx.split("\n")


@pytest.mark.parametrize("g, block", [(PLANT_G, (64, 128, 64)), (PLANT_16, (64, 192, 64))], ids=["f32", "f16"])
def test_a_missing_proxy_fence_is_caught(g, block):
    k = ptxgen.compile(g, tma(block), arch=ARCH)
    bad = "\n".join(line for line in _lines(k.ptx) if "fence.proxy.async" not in line)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError, match="fence.proxy.async"):
        _launch(bad, k, g)


@pytest.mark.parametrize("g, block", [(PLANT_G, (64, 128, 64)), (PLANT_16, (64, 192, 64))], ids=["f32", "f16"])
def test_a_store_issued_before_the_warpgroup_barrier_is_caught(g, block):
    """The barrier moved below the leader's store and commit: the store reads rows other warps
    have not written yet (or are writing)."""
    k = ptxgen.compile(g, tma(block), arch=ARCH)
    lines = _lines(k.ptx)
    moved = 0
    for i, line in enumerate(list(lines)):
        if "staged chunks are complete" in line:
            j = next(n for n in range(i, len(lines)) if "cp.async.bulk.commit_group" in lines[n])
            lines.insert(j, lines.pop(i))
            moved += 1
    assert moved >= 3
    with pytest.raises(sim.HazardError, match="store.* reads shared byte .* no bar.sync in between"):
        _launch("\n".join(lines), k, g)


@pytest.mark.parametrize("g, block", [(PLANT_G, (64, 128, 64)), (PLANT_16, (64, 192, 64))], ids=["f32", "f16"])
def test_a_staging_buffer_rewritten_before_wait_group_read_is_caught(g, block):
    k = ptxgen.compile(g, tma(block), arch=ARCH)
    bad = "\n".join(line for line in _lines(k.ptx) if not ("wait_group.read" in line and "which chunk" in line))
    assert bad != k.ptx
    with pytest.raises(sim.HazardError, match="async-pending.*(st.shared|stmatrix) writes shared byte"):
        _launch(bad, k, g)


# -- ptxas (through nvJitLink): no spills, no warnings ------------------------------------------------
GELU_BETA = Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row", activation="gelu")


@pytest.mark.parametrize("block, stages, consumers, out, epi", [
    ((64, 64, 64), 3, 1, "f32", None), ((128, 128, 64), 3, 2, "f16", None), ((128, 256, 64), 3, 2, "bf16", None),
    ((128, 256, 64), 3, 2, "bf16", GELU_BETA), ((64, 256, 64), 3, 1, "f32", GELU_BETA),
    ((128, 128, 64), 4, 1, "f16", GELU_BETA), ((64, 40, 64), 3, 1, "f16", None)])
def test_tma_store_kernels_assemble_without_spills_or_warnings(block, stages, consumers, out, epi):
    from ptxgen.runtime.assemble import assemble

    g = Gemm(4096, 4096 if block[1] != 40 else 4000, 4096, dtype="f16", out_dtype=out, a_layout="row",
             b_layout="col", epilogue=epi)
    k = ptxgen.compile(g, tma(block, stages, consumers), arch=ARCH)
    r = assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
    log = r.log.lower()
    assert "warning" not in log and "c7515" not in log and "serializ" not in log, r.log


@pytest.mark.parametrize("dtype, out, block", [("u8", "s8", (128, 128, 128)), ("s8", "u8", (64, 128, 256)),
                                               ("u8", "u8", (128, 16, 128))])
def test_one_byte_outputs_store_directly_and_refuse_the_staged_path(dtype, out, block):
    """Quantised s8/u8 outputs: the staged epilogue writes 2- and 4-byte elements only, so the unset
    path stores directly (fuzz.py --arch sm_90a found races when it staged 1-byte outputs as f32
    pairs: seeds 267, 426, 1186), and asking for the TMA store is refused with the fix."""
    g = Gemm(129, 128, 208, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col",
             epilogue=Epilogue(scale="col"))
    s = Schedule(block=block, instruction="wgmma", stages=2, sms=2)
    k = ptxgen.compile(g, s, arch=ARCH)
    assert hopper_plan(g, s).epilogue == "direct" and "tmapC" not in k.ptx
    a, b = random_operands(g, 4)
    harness.check(k, ops=harness.Operands(a, b, scale=random_scale(g, 5)))
    with pytest.raises(LoweringNotBuilt, match="epilogue_via_smem=None or False"):
        ptxgen.compile(g, replace(s, epilogue_via_smem=True), arch=ARCH)
