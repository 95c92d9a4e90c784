"""Swap-AB for decode (schedule/swap_ab.py): the kernel lowers Cᵀ = Bᵀ·Aᵀ and stores C transposed
into the caller's row-major C, on the mma.sync path (targets/sm80/epilogue.py) and sm_90a's direct
epilogue (targets/sm90/epilogue.py).

Proven on the simulator against float64 numpy through the shared harness (never-zero inputs,
poisoned C, elementwise `compare`): M = 1, 8, 17, 64 against N of a few hundred, both operand
layouts, f16/bf16 (and e4m3 on sm_90a) inputs with their outputs, the epilogues, C's leading
dimension padded, split-K and Stream-K; a planted wrong leading dimension in the transposed store
must be caught; what swap-AB does not build is refused by name."""
from __future__ import annotations

import dataclasses

import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule
from ptxgen.errors import ScheduleError
from ptxgen.schedule.swap_ab import swapped
from ptxgen.schedule.verify import verify
from tests import harness

SM80 = "sm_80"
SM90 = "sm_90a"


def sm80_schedule(m: int, bk: int = 32, **fields) -> Schedule:
    """A decode tile for the swapped problem: 64 rows of the caller's N, the caller's M in 16-64 columns."""
    bn = 16 if m <= 16 else 32 if m <= 32 else 64
    return Schedule(block=(64, bn, bk), warps=(2, 1), swap_ab=True, **fields)


def sm90_schedule(m: int, narrowest: int = 8, **fields) -> Schedule:
    """The wgmma decode tile; `narrowest` N for a column-major A (B' then N-major: a TMA box of BN
    2-byte elements must span a 32-byte swizzle row)."""
    bn = max(narrowest, 8 if m <= 8 else 32 if m <= 32 else 64)
    return Schedule(block=(64, bn, 64), instruction="wgmma", stages=2, swap_ab=True, **fields)


@pytest.mark.parametrize("m", [1, 8, 17, 64])
@pytest.mark.parametrize("dtype,out,layouts", [("f16", "f32", ("row", "col")), ("bf16", "bf16", ("col", "row")),
                                               ("f16", "f16", ("row", "row"))])
def test_sm80_swap_ab_matches_the_reference(m, dtype, out, layouts):
    g = Gemm(m, 200, 96, dtype=dtype, out_dtype=out, a_layout=layouts[0], b_layout=layouts[1])
    k = harness.check(g, sm80_schedule(m), SM80).kernel
    assert k.lowered_gemm == swapped(g) and k.gemm == g


@pytest.mark.parametrize("m", [1, 8, 17, 64])
@pytest.mark.parametrize("dtype,out,layouts", [("f16", "f32", ("row", "col")), ("bf16", "bf16", ("row", "row")),
                                               ("f16", "f16", ("col", "col")), ("e4m3", "bf16", ("row", "col"))])
def test_sm90_swap_ab_matches_the_reference(m, dtype, out, layouts):
    if layouts[0] == "col" and m % 8:
        pytest.skip("TMA needs A's column stride (M) 16-byte aligned")
    g = Gemm(m, 136, 128, dtype=dtype, out_dtype=out, a_layout=layouts[0], b_layout=layouts[1])
    harness.check(g, sm90_schedule(m, 16 if layouts[0] == "col" else 8), SM90)


@pytest.mark.parametrize("arch", [SM80, SM90])
def test_epilogues_padded_ldc_and_integer_outputs(arch):
    make = sm80_schedule if arch == SM80 else sm90_schedule
    epi = Epilogue(alpha=0.75, beta=-1.5, bias="col", scale="row", activation="silu")
    harness.check(Gemm(8, 72, 128, out_dtype="bf16", ldc=88, epilogue=epi), make(8), arch)
    harness.check(Gemm(17, 80, 128, dtype="s8", out_dtype="s32", ldc=96), make(17), arch)
    harness.check(Gemm(8, 64, 128, dtype="s8", out_dtype="s8", epilogue=Epilogue(alpha=0.01)), make(8, 64), arch)


@pytest.mark.parametrize("arch,fields", [(SM80, {"split_k": 2}), (SM80, {"split_k": 2, "split_k_mode": "atomic"}),
                                         (SM80, {"decomposition": "stream-k", "sms": 3}),
                                         (SM90, {"split_k": 2}), (SM90, {"decomposition": "stream-k", "sms": 3})])
def test_swap_ab_with_split_k_and_stream_k(arch, fields):
    make = sm80_schedule if arch == SM80 else sm90_schedule
    harness.check(Gemm(8, 136, 512, epilogue=Epilogue(alpha=0.5)), make(8, **fields), arch)


def test_batched_swap_ab_on_the_mma_sync_path():
    harness.check(Gemm(8, 72, 64, batch=2), sm80_schedule(8), SM80)


@pytest.mark.parametrize("arch", [SM80, SM90])
def test_a_transposed_store_with_the_wrong_leading_dimension_is_caught(arch):
    """Planted: C's element (r, c) of Cᵀ stored at c * M' + r (M' = the caller's N, what a dense ldc
    would be) instead of c * ldc + r; with C's rows padded the comparison must fail."""
    make = sm80_schedule if arch == SM80 else sm90_schedule
    k = ptxgen.compile(Gemm(8, 136, 128, ldc=152), make(8), arch)
    assert harness.run(k).ok
    planted = k.ptx.replace("[ldc];", "[M];")
    assert planted != k.ptx
    assert not harness.run(k, ptx=planted).ok


def test_the_header_says_swap_ab_and_plain_schedules_print_as_before():
    k = ptxgen.compile(Gemm(8, 96, 64), sm80_schedule(8), SM80)
    assert "swap-AB: the caller's 8x96x64" in k.ptx.splitlines()[1]
    assert "swap_ab" not in repr(Schedule(block=(128, 128, 32)))
    assert "swap_ab=True" in repr(sm80_schedule(8)) and sm80_schedule(8).epilogue_via_smem is False


@pytest.mark.parametrize("g,s,arch,field", [
    (Gemm(8, 96, 64), Schedule(block=(64, 16, 16), instruction="wmma", swap_ab=True), SM80, "schedule.instruction"),
    (Gemm(96, 64, 64), sm80_schedule(8), SM80, "gemm.m"),
    (Gemm(8, 96, 64), sm80_schedule(8, epilogue_via_smem=True), SM80, "schedule.epilogue_via_smem"),
    (Gemm(8, 96, 64, groups=2, grouping="contiguous"), sm80_schedule(8), SM80, "gemm.grouping"),
    (Gemm(8, 128, 256, dtype="e4m3", out_dtype="bf16", block_scale=BlockScale()), sm90_schedule(8), SM90,
     "gemm.block_scale"),
])
def test_what_swap_ab_does_not_build_is_refused_by_name(g, s, arch, field):
    with pytest.raises(ScheduleError) as e:
        verify(g, s, arch)
    assert e.value.field == field and "swap_ab" in str(e.value)


def test_fp8_k_major_rule_follows_the_swapped_roles():
    """fp8 wgmma wants both operands K-major. Swapped, A row-major becomes B' column-major (still K-
    major) and B column-major becomes A' row-major: the legal pair stays legal; B row-major (N-major)
    becomes A' column-major (M-major) and is refused with the swapped roles named."""
    s = sm90_schedule(8)
    verify(Gemm(8, 128, 128, dtype="e4m3", out_dtype="bf16"), s, SM90)
    with pytest.raises(ScheduleError) as e:
        verify(Gemm(8, 128, 128, dtype="e4m3", out_dtype="bf16", b_layout="row"), s, SM90)
    assert "its A is your B" in str(e.value) and "drop swap_ab" in str(e.value)
    with pytest.raises(ScheduleError):
        verify(Gemm(8, 128, 128, dtype="e4m3", out_dtype="bf16", b_layout="row"), dataclasses.replace(s, swap_ab=False),
               SM90)


def test_stream_k_swap_ab_over_two_worker_processes():
    """The scale-out simulation groups Stream-K CTAs by the tiles they share: the swapped problem's."""
    harness.check(Gemm(8, 136, 512), sm80_schedule(8, decomposition="stream-k", sms=3), SM80, workers=2)
