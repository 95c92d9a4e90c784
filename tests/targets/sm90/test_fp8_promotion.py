"""fp8 accumulator promotion on sm_90a (targets/sm90/promotion.py): emitted by default, absent with
fast_accum=True, correct against numpy in every design that builds fp8, refused where the doubled
accumulator cannot fit, and more accurate than the single-level kernel under the simulator's model
of Hopper's reported fp8 accumulation (PTXGEN_SIM_FP8_ACCUM=hopper)."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.cli.report import describe
from ptxgen.check import accumulation_error, compare, gamma, random_operands, reference, tolerance
from ptxgen.errors import ScheduleError
from ptxgen.schedule.verify import verify
from ptxgen.targets.sm90.promotion import Promotion
from tests import harness

ARCH = "sm_90a"
SCALE_D_ZERO = re.compile(r"wgmma\.mma_async[^;]*\}, %rd\d+, %rd\d+, 0, 1, 1;")


def wg(block, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", **kw)


def simple(block, stages=2, consumers=1, **kw) -> Schedule:
    """The non-specialised kernel: one CTA per tile (split-K), or Stream-K's persistent units."""
    return wg(block, stages=stages, warp_specialized=False, consumers=consumers, **{"persistent": False, **kw})


def promotions(ptx: str) -> int:
    return ptx.count("// fp8 promotion (")


# -- what is emitted ------------------------------------------------------------------------------
@pytest.mark.parametrize("s", [wg((128, 128, 128), consumers=2), simple((64, 64, 128), 3)],
                         ids=["ws-persistent", "one-cta-per-tile"])
def test_promotion_is_emitted_by_default_and_absent_with_fast_accum(s):
    g = Gemm(512, 512, 1024, dtype="e4m3", out_dtype="bf16")
    promoted = ptxgen.compile(g, s, arch=ARCH).ptx
    fast = ptxgen.compile(dataclasses.replace(g, fast_accum=True), s, arch=ARCH).ptx
    regs = (s.bm // s.consumers) * s.bn // 128
    assert promotions(promoted) == 1 and "promotion" in promoted.splitlines()[1]
    # one add.f32 per accumulator register, acc += temporary, and each k-tile's first wgmma restarts it
    assert len(re.findall(r"add\.f32 (%f\d+), \1, %f\d+;", promoted)) == regs
    assert len(SCALE_D_ZERO.findall(promoted)) == s.bm // s.consumers // 64
    assert "wgmma.wait_group.sync.aligned 1;" not in promoted
    assert promotions(fast) == 0 and "fast_accum=True" in fast.splitlines()[1]
    assert not SCALE_D_ZERO.findall(fast) and "add.f32" not in fast.split("Epilogue")[0]


def test_a_wide_k_tile_promotes_every_128_of_k():
    """BK = 256: the k-tile's wgmmas split into two chunks, each committed, retired and promoted."""
    k = ptxgen.compile(Gemm(128, 64, 512, dtype="e4m3"), simple((64, 64, 256)), arch=ARCH)
    loop = k.ptx.split("$L_main_loop:")[1]
    assert promotions(loop) == 2 and len(SCALE_D_ZERO.findall(loop)) == 2
    assert loop.index("within the k-tile, before k+128") < loop.index("end of the k-tile")


def test_header_and_info_name_the_accumulation():
    g = Gemm(256, 256, 256, dtype="e5m2", out_dtype="f16")
    k = ptxgen.compile(g, wg((128, 128, 128), consumers=2), arch=ARCH)
    assert "fp8 promotion" in k.ptx.splitlines()[1]
    text = "\n".join(describe(k))
    assert "fp8 promotion" in text and "x2 with the fp8 promotion's temporary: 128" in text
    fast = ptxgen.compile(dataclasses.replace(g, fast_accum=True), wg((128, 128, 128), consumers=2), arch=ARCH)
    assert "fast_accum=True" in "\n".join(describe(fast))


@pytest.mark.parametrize("dtype, out, acc", [("s8", "s32", "s32"), ("u8", "s8", "s32"), ("bf16", "bf16", "f32")])
def test_header_and_info_name_the_accumulator_of_other_dtypes(dtype, out, acc):
    """s8/u8 wgmma accumulates in s32, not f32 (the header said f32 for every non-fp8 kernel)."""
    k = ptxgen.compile(Gemm(256, 256, 256, dtype=dtype, out_dtype=out), wg((128, 128, 64), consumers=2), arch=ARCH)
    assert k.ptx.splitlines()[1].endswith(f"col-major), {acc} accumulation")
    assert f"col-major, {acc} accumulation" in "\n".join(describe(k))


# -- against numpy, every design that builds fp8 (K: a multiple of 16, TMA's 16-byte rows) --------
@pytest.mark.parametrize("g, s", [
    (Gemm(200, 136, 336, dtype="e4m3", out_dtype="bf16"), wg((128, 64, 128), consumers=2, stages=3)),
    (Gemm(130, 72, 208, dtype="e5m2"), wg((64, 64, 64), stages=2, sms=2)),                # BK 64, K % 64 != 0
    (Gemm(96, 80, 400, dtype="e4m3", out_dtype="f16"), simple((64, 80, 256), 2)),          # BK 256, K % 128 != 0
    (Gemm(70, 40, 208, dtype="e4m3", out_dtype="f16"), simple((64, 40, 128), 1)),          # one stage
    (Gemm(150, 100, 592, dtype="e4m3"), simple((64, 64, 64), 3, split_k=3)),               # split-K
    (Gemm(160, 96, 720, dtype="e5m2"), simple((64, 48, 128), 2, decomposition="stream-k", persistent=True,
                                               sms=3)),                                     # Stream-K
    (Gemm(256, 192, 208, dtype="e4m3", out_dtype="bf16"), wg((128, 64, 128), consumers=2, cluster=(2, 1))),
], ids=["ws-persistent", "ws-bk64", "bk256", "one-stage", "split-k", "stream-k", "cluster-2x1"])
def test_promoted_kernels_match_numpy(g, s):
    assert "fp8 promotion" in ptxgen.compile(g, s, arch=ARCH).ptx
    r = harness.run(g, s, ARCH, seed=g.k).result
    assert r.ok, f"{g} {s}: {r}"


# -- refusals --------------------------------------------------------------------------------------
def test_a_promoted_accumulator_that_cannot_fit_is_refused_with_the_fix():
    g = Gemm(512, 512, 512, dtype="e4m3", out_dtype="bf16")
    s = wg((128, 256, 128), consumers=2)
    with pytest.raises(ScheduleError) as e:
        verify(g, s, ARCH)
    assert e.value.field == "gemm.fast_accum" and "2 x 128 registers" in str(e.value)
    assert "BN (<= 192)" in str(e.value) and "fast_accum=True" in str(e.value)
    verify(dataclasses.replace(g, fast_accum=True), s, ARCH)               # the single-level kernel fits
    verify(g, wg((128, 192, 128), consumers=2), ARCH)                        # and so does the BN named


def test_fast_accum_where_it_changes_nothing_is_refused():
    with pytest.raises(ScheduleError) as e:
        verify(Gemm(256, 256, 256, dtype="f16", fast_accum=True), wg((128, 128, 64)), ARCH)
    assert e.value.field == "gemm.fast_accum" and "f16 GEMMs" in str(e.value) and "drop fast_accum" in str(e.value)


@pytest.mark.parametrize("s, arch", [(Schedule(block=(128, 128, 32)), "sm_90"), (None, "sm_89"),
                                     (Schedule(block=(64, 64, 32)), ARCH)], ids=["sm_90", "sm_89-chooser", "mma-sync"])
def test_fast_accum_fp8_off_wgmma_names_the_fp8_refusal_not_the_flag(s, arch):
    """fp8 is not multiplied off sm_90a's wgmma at all: the error says so (and the fix), not that
    the flag would change nothing (dropping it would only meet the fp8 refusal next)."""
    g = Gemm(256, 256, 256, dtype="e4m3", fast_accum=True)
    with pytest.raises(ScheduleError) as e:
        verify(g, s, arch) if s is not None else ptxgen.compile(g, arch=arch)
    assert e.value.field == "gemm.dtype" and "multiplied only by wgmma" in str(e.value)


def test_fast_accum_must_be_a_bool():
    with pytest.raises(ScheduleError, match="fast_accum"):
        Gemm(64, 64, 64, dtype="e4m3", fast_accum="yes")


# -- the precision model: promotion keeps the f32 bound at K = 8192, fast_accum does not -------------
def _f32_bound(g: Gemm) -> Gemm:
    """The same problem judged by compare's f32-accumulation bound (no fp8 term at all)."""
    return dataclasses.replace(g, dtype="bf16", fast_accum=False)


def test_promotion_stays_within_the_f32_bound_at_k8192_where_fast_accum_does_not(monkeypatch):
    monkeypatch.setenv("PTXGEN_SIM_FP8_ACCUM", "hopper")
    s = simple((64, 64, 128), 4)
    got = {}
    for fast in (False, True):
        g = Gemm(64, 64, 8192, dtype="e4m3", out_dtype="f32", fast_accum=fast)
        a, b = random_operands(g, 3)
        c = ptxgen.compile(g, s, arch=ARCH).simulate(a, b)
        got[fast] = (g, c, reference(a, b))
    g, c, ref = got[False]
    assert compare(c, ref, _f32_bound(g)).ok and compare(c, ref, g).ok
    g, c, ref = got[True]
    assert not compare(c, ref, _f32_bound(g)).ok, "the model loses nothing: it no longer tests promotion"
    assert compare(c, ref, g).ok                                        # within fast_accum's wide bound
    assert np.abs(c - ref).max() > 10 * np.abs(got[False][1] - ref).max()


def test_compare_bound_is_tight_for_promotion_and_wide_only_for_fast_accum():
    g = Gemm(64, 64, 8192, dtype="e4m3")
    fast = dataclasses.replace(g, fast_accum=True)
    assert accumulation_error(g) < accumulation_error(fast) / 10 and gamma(g) < gamma(fast) / 10
    assert tolerance(g) == tolerance(_f32_bound(g)) < tolerance(fast)
    short = Gemm(64, 64, 128, dtype="e4m3")                              # one chunk: nothing to promote across
    assert accumulation_error(short) == accumulation_error(dataclasses.replace(short, fast_accum=True))


# -- planted bugs ----------------------------------------------------------------------------------
def _skipped(self, acc, where):
    self.b.comment(f"fp8 promotion ({where}): planted bug, no add")


def _twice(self, acc, where, add=Promotion.add):
    add(self, acc, where)
    add(self, acc, where)


@pytest.mark.parametrize("plant", [
    ("add", _skipped), ("add", _twice), ("starts_chunk", lambda self, kk: False),   # never restarted: re-added
], ids=["promotion-skipped", "added-twice", "temporary-not-restarted"])
@pytest.mark.parametrize("s", [wg((128, 64, 128), consumers=2), simple((64, 64, 64), 2)], ids=["ws", "simple"])
def test_planted_promotion_bugs_are_caught(monkeypatch, plant, s):
    g = Gemm(128, 64, 384, dtype="e4m3", out_dtype="f32")
    monkeypatch.setattr(Promotion, *plant)
    assert not harness.run(g, s, ARCH, seed=5).result.ok


# -- the chooser prices promotion ------------------------------------------------------------------
def test_the_cost_model_prices_the_promotion_and_its_registers():
    from ptxgen.schedule.devices import device_model
    from ptxgen.targets.sm90.choose import hopper_ktile_cost, hopper_register_need, predict_hopper

    dev = device_model(ARCH)
    g = Gemm(8192, 8192, 8192, dtype="e4m3", out_dtype="bf16")
    fast = dataclasses.replace(g, fast_accum=True)
    s = wg((128, 128, 128), consumers=2, stages=4)
    promoted, single = hopper_ktile_cost(g, s, dev), hopper_ktile_cost(fast, s, dev)
    assert promoted.issue - single.issue == 4 * 2 * 64 / dev.schedulers_per_sm   # an add per accumulator register
    assert promoted.mma > single.mma                                          # the drained wgmma pipeline
    assert predict_hopper(g, s, ARCH).time_s > predict_hopper(fast, s, ARCH).time_s
    assert hopper_register_need(g, s) - hopper_register_need(fast, s) == 64
    # BK 64 promotes once per k-tile as BK 128 does: the same adds per k-tile, twice the k-tiles per K
    s64 = wg((128, 128, 64), consumers=2, stages=4)
    assert hopper_ktile_cost(g, s64, dev).issue - hopper_ktile_cost(fast, s64, dev).issue == \
        pytest.approx(promoted.issue - single.issue)
