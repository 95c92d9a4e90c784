"""Properties of the static cost model that any sane model must keep, over drawn problems and
legal schedules: more work is never predicted faster, nothing beats the peak, DRAM traffic is at
least the compulsory bytes, and more registers never fit more CTAs on an SM."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from ptxgen import Gemm, Schedule, ScheduleError, verify
from ptxgen.tune.costmodel import predict
from ptxgen.schedule.devices import DEVICES, device_model
from ptxgen.schedule.streamk import stream_k_grid, stream_k_plan

SIZES = [1, 16, 33, 100, 256, 1000, 4096, 11008]


def draw_case(data) -> tuple[Gemm, Schedule, str]:
    g = Gemm(data.draw(st.sampled_from(SIZES), label="M"), data.draw(st.sampled_from(SIZES), label="N"),
             data.draw(st.sampled_from(SIZES), label="K"),
             dtype=data.draw(st.sampled_from(["f16", "tf32", "s8"]), label="dtype"),
             out_dtype="f32")
    if g.dtype == "s8":
        g = replace(g, out_dtype="s32")
    kstep = g.k_step
    s = Schedule(block=(data.draw(st.sampled_from([16, 32, 64, 128, 256]), label="BM"),
                        data.draw(st.sampled_from([16, 32, 64, 128, 256]), label="BN"),
                        kstep * data.draw(st.sampled_from([1, 2, 4]), label="BK/kstep")),
                 warps=data.draw(st.sampled_from([(1, 1), (2, 2), (1, 4), (2, 4)]), label="warps"),
                 stages=data.draw(st.integers(1, 4), label="stages"),
                 raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"),
                 split_k=data.draw(st.sampled_from([1, 1, 2, 4]), label="split_k") if g.dtype != "s8" else 1,
                 decomposition=data.draw(st.sampled_from(["tiles", "tiles", "stream-k"]), label="decomposition")
                 if g.dtype != "s8" else "tiles")
    if s.stream_k and s.split_k > 1:
        s = replace(s, split_k=1)
    arch = data.draw(st.sampled_from(sorted(DEVICES)), label="arch")
    try:
        verify(g, s, arch)
    except ScheduleError:
        assume(False)
    return g, s, arch


PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@PROPERTY
@given(st.data())
def test_more_rows_or_longer_k_is_never_predicted_faster(data):
    """More tiles (more waves, or a fuller tail) or more k-tiles never make the same schedule faster."""
    g, s, arch = draw_case(data)
    # the alignment held fixed: a longer row may allow wider copies, a real saving the model prices
    g = replace(g, align=min(g.alignment(), g.out_alignment()))
    grow = data.draw(st.sampled_from(["m", "n", "k"]), label="grown")
    factor = data.draw(st.sampled_from([2, 3]), label="factor")
    bigger = replace(g, **{grow: getattr(g, grow) * factor})
    try:
        verify(g, s, arch)
        verify(bigger, s, arch)
    except ScheduleError:
        assume(False)
    if s.stream_k:  # the same kind of work split: growing the problem can turn split tiles whole
        assume(_splits_tiles(g, s, arch) == _splits_tiles(bigger, s, arch))
    base = predict(g, s, arch).time_s
    assert predict(bigger, s, arch).time_s >= base * (1 - 1e-9), (g, bigger, s)


def _splits_tiles(g: Gemm, s: Schedule, arch: str) -> bool:
    """Whether Stream-K shares some tile's k-tiles between CTAs (partials and their fix-up)."""
    grid = stream_k_grid(g, s, device_model(arch).sms)
    return stream_k_plan(g, s, grid).sk_tiles > 0


def test_stream_k_can_be_faster_when_growth_makes_its_tiles_whole():
    """Why the property above compares Stream-K only within one kind of split: 64 two-k-tile tiles
    on a 128-CTA Stream-K grid are split in halves (each half published, then fixed up), while 128
    tiles go one whole tile per CTA with no partials, which the model prices faster, as it should."""
    s = Schedule(block=(64, 16, 8), warps=(1, 1), stages=1, decomposition="stream-k")
    small, big = (Gemm(m, 1, 16, dtype="tf32", out_dtype="f32", align=4) for m in (4096, 8192))
    assert _splits_tiles(small, s, "sm_89") and not _splits_tiles(big, s, "sm_89")
    assert predict(big, s, "sm_89").time_s < predict(small, s, "sm_89").time_s


@PROPERTY
@given(st.data())
def test_nothing_is_predicted_faster_than_the_peak(data):
    g, s, arch = draw_case(data)
    p = predict(g, s, arch)
    assert 0 < p.efficiency <= 1.0
    dev = device_model(arch)
    assert p.time_s >= g.flops * g.batch / dev.peak_flops(g.dtype)


@PROPERTY
@given(st.data())
def test_dram_traffic_is_at_least_the_compulsory_bytes(data):
    g, s, arch = draw_case(data)
    p = predict(g, s, arch)
    compulsory = (g.m * g.k + g.k * g.n) * g.in_bytes + g.m * g.n * g.out_bytes
    assert p.dram_bytes >= compulsory
    assert 0 <= p.edge_waste < 1


@PROPERTY
@given(st.data())
def test_more_registers_never_raise_occupancy_and_one_wave_is_not_sped_up(data):
    """More registers per thread never fit more CTAs on an SM; and while the grid fits one wave
    either way, they never make it faster. (Over several waves they can: a smaller wave can leave
    a fuller tail, the wave quantisation the model prices on purpose.)"""
    g, s, arch = draw_case(data)
    regs = data.draw(st.sampled_from([32, 64, 96, 128, 168, 200, 255]), label="registers")
    more = data.draw(st.sampled_from([8, 32, 64]), label="extra registers")
    fewer = predict(g, s, arch, registers=regs)
    many = predict(g, s, arch, registers=min(255, regs + more))
    assert many.ctas_per_sm <= fewer.ctas_per_sm
    if many.waves <= 1.0:
        assert many.time_s >= fewer.time_s * (1 - 1e-9)


def test_a_stream_k_grid_smaller_than_a_wave_is_priced_the_same_at_any_occupancy():
    """The draw CI found: an 84-CTA Stream-K grid on sm_86 priced its DRAM traffic as if a whole
    wave (12 or 8 CTAs per SM) walked the tiles at once, so 64 registers came out 2.7e-6 faster
    than 32. Its 84 resident CTAs walk the tiles 84 wide at either occupancy."""
    g = Gemm(4096, 100, 256, dtype="tf32", out_dtype="f32")
    s = Schedule(block=(16, 32, 16), warps=(1, 4), stages=1, decomposition="stream-k")
    fewer, more = (predict(g, s, "sm_86", registers=r) for r in (32, 64))
    assert more.ctas_per_sm < fewer.ctas_per_sm and more.waves <= 1.0
    assert more.dram_bytes == fewer.dram_bytes and more.time_s >= fewer.time_s


def test_a_second_cta_on_an_sm_does_not_shorten_the_first_ones_k_tile():
    """The draw CI found: doubling M turned a 63-CTA tail (one CTA per SM) into a 125-CTA one (two
    on some SMs), whose CTAs were each fed by more warps and hid half of each other's barrier, so
    twice the work was predicted 0.08% faster. A CTA's own k-tile and barrier wait now bound the
    SM's round (sm80/cost.py `_wave_clocks`)."""
    s = Schedule(block=(16, 16, 8), warps=(1, 1), stages=1)
    small = Gemm(1000, 1, 100, dtype="tf32", out_dtype="f32", align=4)
    big = replace(small, m=2000)
    assert predict(big, s, "sm_80").time_s >= predict(small, s, "sm_80").time_s
