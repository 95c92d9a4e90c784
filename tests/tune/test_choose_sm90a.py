"""`compile(gemm, arch="sm_90a")` without a schedule: the chooser picks among the built sm_90a kernels
(warp-specialised persistent, also over batches; the non-specialised one, split-K and Stream-K; TMA-store or
direct epilogue) with the cost model; the pick is legal, assembles without spills and matches numpy on
the simulator; a problem the built slice cannot run is refused with arch='sm_90' as the fix."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.cli import main
from ptxgen.check import compare, magnitude, random_operands, reference
from ptxgen.cli.app import main
from ptxgen.errors import LoweringNotBuilt
from dataclasses import replace

from ptxgen.tune.choose import rank
from ptxgen.tune.costmodel import predict
from ptxgen.targets.sm90.plan import hopper_plan
from ptxgen.schedule.devices import device_model
from tests import harness

ARCH = "sm_90a"
#: Extents along a dimension that is no operand's row stride: anything, odd ones included.
ANY = [1, 7, 17, 40, 63, 100, 130]
#: Extents that are a 16-bit operand's row stride: TMA needs 16-byte aligned rows (multiples of 8).
ALIGNED = [8, 24, 40, 72, 136]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_chosen_wgmma_schedule_is_legal_spill_free_and_correct(data):
    a_layout = data.draw(st.sampled_from(["row", "col"]), label="a_layout")
    b_layout = data.draw(st.sampled_from(["row", "col"]), label="b_layout")
    # A row-major strides by K, column-major by M; B column-major strides by K, row-major by N
    m = data.draw(st.sampled_from(ALIGNED if a_layout == "col" else ANY), label="M")
    n = data.draw(st.sampled_from(ALIGNED if b_layout == "row" else ANY), label="N")
    k_aligned = a_layout == "row" or b_layout == "col"
    k = data.draw(st.sampled_from(ALIGNED if k_aligned else ANY), label="K")
    g = Gemm(m, n, k, dtype=data.draw(st.sampled_from(["f16", "bf16"]), label="dtype"),
             out_dtype=data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
             a_layout=a_layout, b_layout=b_layout, batch=data.draw(st.sampled_from([1, 1, 2]), label="batch"))
    kern = ptxgen.compile(g, arch=ARCH)
    s = kern.schedule
    assert s.instruction == "wgmma", s
    assert not s.warp_specialized or (s.persistent and s.split_k == 1), s  # what is built
    ptxgen.verify(g, s, ARCH)
    assert kern.choice is not None and kern.choice.schedule == s and kern.choice.registers_checked
    assert kern.resources.spill_bytes == 0, f"{g}: chosen {s} spills"
    harness.check(kern, seed=m + 7 * n + 31 * k)


#: K-major dtypes (tf32, fp8, int8) and the outputs the built epilogues give them.
K_MAJOR_OUT = {"tf32": ["f32"], "e4m3": ["bf16", "f32"], "e5m2": ["f16"], "s8": ["s32"], "u8": ["s32"]}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_chosen_schedule_for_k_major_dtypes_is_legal_and_correct(data):
    dtype = data.draw(st.sampled_from(sorted(K_MAJOR_OUT)), label="dtype")
    g = Gemm(data.draw(st.sampled_from(ANY), label="M"), data.draw(st.sampled_from(ANY), label="N"),
             data.draw(st.sampled_from([16, 48, 144, 272]), label="K"),  # 16-byte rows for every dtype
             dtype=dtype, out_dtype=data.draw(st.sampled_from(K_MAJOR_OUT[dtype]), label="out"))
    kern = ptxgen.compile(g, arch=ARCH)
    s = kern.schedule
    ptxgen.verify(g, s, ARCH)
    assert s.bk * g.in_bytes == 128 and kern.resources.spill_bytes == 0, s
    harness.check(kern, seed=g.m + 7 * g.n + 31 * g.k)


def test_every_ranked_candidate_is_a_legal_built_wgmma_schedule():
    g = Gemm(300, 520, 256)
    ranked = rank(g, ARCH)
    assert len(ranked) > 20
    for r in ranked:
        ptxgen.verify(g, r.schedule, ARCH)  # LoweringNotBuilt for any unbuilt feature
        assert r.schedule.bk == 64 and r.schedule.swizzle == 128 and 2 <= r.schedule.stages <= 8
    assert {r.schedule.consumers for r in ranked} == {1, 2}
    kinds = {(r.schedule.warp_specialized, r.schedule.persistent, r.schedule.split_k > 1, r.schedule.stream_k,
              r.schedule.epilogue_via_smem) for r in ranked}
    # both kernels, both epilogues of the specialised one, split-K and Stream-K of the other
    assert {(True, True, False, False, None), (True, True, False, False, False),
            (False, False, False, False, None)} <= kinds, kinds
    assert any(split for _, _, split, _, _ in kinds) and any(sk for _, _, _, sk, _ in kinds), kinds


def test_large_square_bf16_gets_a_large_two_consumer_tile():
    g = Gemm(8192, 8192, 8192, dtype="bf16", out_dtype="bf16")
    best = rank(g, ARCH)[0]
    s = best.schedule
    # a tile of at least 128x256 (256x192 carries less L2 traffic per flop, which the model prices)
    assert s.consumers == 2 and s.bm * s.bn >= 128 * 256, s
    assert best.prediction.efficiency > 0.8, best.prediction.summary()
    # where both kernels fit 4 stages beside the TMA-store staging (128x256), the non-specialised
    # one is predicted slower (fill per tile, its bar.sync), as the H200 measured at 128x128
    ws = Schedule(block=(128, 256, 64), instruction="wgmma", consumers=2, stages=4)
    flat = replace(ws, warp_specialized=False, persistent=False, producer_regs=None, consumer_regs=None)
    ptxgen.verify(g, flat, ARCH)
    assert predict(g, flat, ARCH).time_s > predict(g, ws, ARCH).time_s


def test_tiny_problem_gets_one_small_tile_and_a_batch_both_kernels():
    tiny = rank(Gemm(64, 64, 64), ARCH)[0].schedule
    assert tiny.block == (64, 64, 64) and tiny.consumers == 1, tiny
    batched = rank(Gemm(128, 128, 128, batch=4), ARCH)
    kinds = {(r.schedule.warp_specialized, r.schedule.persistent) for r in batched}
    assert kinds == {(True, True), (False, False)}, kinds  # the persistent walk covers batch x tiles
    big = rank(Gemm(2048, 2048, 2048, batch=8), ARCH)[0].schedule   # many tiles: the persistent walk wins
    assert big.warp_specialized and big.persistent, big
    # skinny M x N with a long K: more CTAs than tiles (split-K or Stream-K) beats one CTA per tile
    skinny = rank(Gemm(64, 64, 16384), ARCH)[0].schedule
    assert skinny.split_k > 1 or skinny.stream_k, skinny


def test_planted_wave_blind_model_would_pick_the_tail_heavy_tile(monkeypatch):
    """896 x 4864: 128x256 tiles make 133 tiles on 132 SMs, so one CTA walks two of them while the
    rest idle; 128x128 (266 tiles, 3 per CTA of half the work) or 128x192 finish sooner. A model
    that charged fractional waves (tiles / SMs, as if work spread evenly) picks 128x256; the real
    model must not."""
    g = Gemm(896, 4864, 4096, dtype="bf16", out_dtype="bf16")
    chosen = rank(g, ARCH)[0].schedule
    assert chosen.block[:2] != (128, 256), chosen
    rounds = -(-(-(-896 // chosen.bm) * -(-4864 // chosen.bn)) // 132)  # tiles per persistent CTA
    assert rounds * chosen.bm * chosen.bn < 2 * 128 * 256, chosen  # less work on the busiest SM

    from ptxgen.targets.sm90 import choose as choose_hopper

    real_work = choose_hopper._work

    def wave_blind(g, s, dev):  # the planted mispricing: tiles spread evenly, no whole-tile rounds
        ctas, kt, units, partial = real_work(g, s, dev)
        if s.persistent and not s.stream_k:
            tiles = g.batch * -(-g.m // s.bm) * -(-g.n // s.bn)
            share = tiles / ctas
            return ctas, round(share * -(-g.k // s.bk)), share, partial
        return ctas, kt, units, partial

    monkeypatch.setattr(choose_hopper, "_work", wave_blind)
    blind = rank(g, ARCH)[0].schedule
    assert blind.block[:2] == (128, 256), blind  # so the test above can fail


def test_sm90a_device_model_prices_wgmma_at_the_full_peak():
    dev = device_model(ARCH)
    assert dev.sms == 132 and dev.mma_sync_share == 0.5  # mma.sync on Hopper still reaches half
    assert dev.peak_flops("f16", instruction_share=False) == pytest.approx(989e12, rel=0.01)
    big = ptxgen.compile(Gemm(4096, 4096, 4096), arch=ARCH).choice
    # a big square problem gets a big tile, and the model says wgmma gets most of the 989 TFLOPS
    assert big.schedule.bm * big.schedule.bn >= 128 * 128, big.schedule
    assert 0.5 < big.prediction.efficiency <= 1.0, big.prediction.summary()
    # the same problem on sm_90 (mma.sync) is predicted slower than on sm_90a (wgmma)
    sm90 = ptxgen.compile(Gemm(4096, 4096, 4096), arch="sm_90").choice
    assert big.prediction.time_s < sm90.prediction.time_s


@pytest.mark.parametrize("g, field", [
    (Gemm(256, 256, 256, acc_dtype="f16", out_dtype="f16"), "gemm.accumulator"),
    (Gemm(77, 131, 45), "lda"),                                        # rows not 16-byte aligned for TMA
], ids=["f16-acc", "unaligned"])
def test_problem_outside_the_built_slice_names_sm90_as_the_fix(g, field):
    with pytest.raises(LoweringNotBuilt, match=field) as info:
        ptxgen.compile(g, arch=ARCH)
    assert "arch='sm_90'" in str(info.value)


def test_cli_info_and_run_choose_for_sm90a(capsys):
    assert main(["info", "--arch", ARCH, "--shape", "256x256x256"]) == 0
    out = capsys.readouterr().out
    assert "chosen     --instruction wgmma --block" in out and "runner-up" in out and "H100" in out
    assert "--warp-specialized --persistent" in out  # the chosen line names the kernel design
    assert "0 B spill stores" in out
    assert main(["run", "--arch", ARCH, "--shape", "100x72x200", "--sim"]) == 0
    out = capsys.readouterr().out
    assert "chosen     --instruction wgmma" in out and "PASS" in out
    assert main(["info", "--arch", ARCH, "--shape", "256x256x256", "--acc", "f16", "--out", "f16"]) == 2
    captured = capsys.readouterr()
    err = captured.err + captured.out
    assert "sm_90" in err and "Traceback" not in err
