"""Any M, N, K >= 1: edge tiles zero-fill their copies and predicate their stores.

Every run is on the simulator with its bounds checks on, so a kernel that read or wrote a byte
outside its operands fails with an out-of-bounds HazardError, not a tolerance miss.
"""
from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, ScheduleError
from ptxgen.check import random_operands, reference
from ptxgen.schedule.geometry import operand_tiles
from tests import harness

from tests.draws import draw_gemm, draw_small_schedule

SIZES = [1, 2, 7, 15, 16, 17, 63, 100, 127, 129]


def run(g: Gemm, s: Schedule):
    """The harness's check, per element within compare's RMS bound for the output dtype."""
    return harness.check(g, s, seed=g.m * 131 + g.n * 7 + g.k, bound=False).kernel


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_odd_shapes_match_numpy(data):
    g = draw_gemm(data, SIZES)
    s = draw_small_schedule(data)
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    run(g, s)


def test_decode_m1_and_k_below_one_tile():
    run(Gemm(1, 256, 512, out_dtype="f16"), Schedule(block=(64, 128, 64), warps=(1, 2), stages=4))
    run(Gemm(128, 64, 9), Schedule(block=(64, 64, 32), stages=3))  # K/BK < 1 < stages


def test_each_copy_width_is_used():
    widths = {}
    for k_dim, want in ((64, 16), (100, 8), (98, 4), (7, 2)):
        kern = run(Gemm(64, 64, k_dim), Schedule(block=(64, 64, 32)))
        widths[k_dim] = operand_tiles(kern.gemm, kern.schedule)[0].copy_bytes
        assert widths[k_dim] == want
        ops = set(re.findall(r"(cp\.async\.\w+\.shared\.global|ld\.global\.b16)", kern.ptx))
        assert ops == ({"ld.global.b16"} if want == 2 else {"cp.async.cg.shared.global" if want == 16
                                                            else "cp.async.ca.shared.global"})


def test_aligned_problems_carry_no_bounds_code():
    aligned = ptxgen.compile(Gemm(256, 256, 128), Schedule(block=(128, 128, 32))).ptx
    assert not re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, ", aligned)
    assert "selp" not in aligned and "@%p" not in aligned.split("Epilogue")[1]
    edged = ptxgen.compile(Gemm(250, 248, 120), Schedule(block=(128, 128, 32))).ptx  # 16-byte aligned
    # a src-size register, or (units wholly in or out) an ignore-src predicate
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16, %[rp]\d+;", edged)
    assert re.search(r"@%p\d+ st\.global", edged.split("Epilogue")[1])


def test_nothing_outside_the_operands_is_touched():
    """Operands embedded in NaN-filled buffers: a stray read would poison C, a stray write is caught."""
    g = Gemm(17, 15, 9, b_layout="row")
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    harness.check(k, bound=False)


def main_loop_lines(ptx: str) -> list[str]:
    body = ptx.split("$L_main_loop:", 1)[1]
    return [line.split("//")[0].strip() for line in body.split("bra.uni $L_main_loop")[0].splitlines()]


def test_k_edge_copies_take_one_setp_when_units_cannot_straddle():
    """K * 2 bytes a multiple of 16 (4008): each 16-byte unit is wholly in or out of K, so the
    main loop zero-fills with cp.async's ignore-src predicate, one setp per distinct limit and no
    clamp (min/max) arithmetic; the M/N edge is folded into each copy's loop-invariant limit."""
    g, s = Gemm(4000, 4000, 4008), Schedule(block=(128, 128, 32), warps=(2, 2), stages=3)
    loop = main_loop_lines(ptxgen.compile(g, s).ptx)
    copies = [line for line in loop if "cp.async.cg" in line]
    assert len(copies) == 8 and all(re.search(r", 16, %p\d+;$", c) for c in copies), copies
    assert not any(re.match(r"(min|max|selp)\.", line) for line in loop)
    assert sum(line.startswith("setp.ge.s32") for line in loop) == 8  # one per copy (M edge: per row)
    # Without an M/N edge a thread's copies of one operand share one k limit (one k offset).
    loop = main_loop_lines(ptxgen.compile(Gemm(4096, 4096, 4008), s).ptx)
    assert sum(line.startswith("setp.ge.s32") for line in loop) == 2


def test_k_edge_units_that_can_straddle_keep_the_clamp():
    """lda padded to 4008 but K = 4001: a 16-byte unit can hold the end of K, so its src-size is
    clamped to the bytes inside; the simulation proves the partial units are zero-filled."""
    g = Gemm(40, 24, 41, lda=48, ldb=48)
    s = Schedule(block=(32, 16, 32), warps=(1, 1), stages=2)
    loop = main_loop_lines(ptxgen.compile(g, s).ptx)
    assert any(line.startswith("min.s32") for line in loop)
    a, b = random_operands(Gemm(40, 24, 41), seed=5)
    a_padded = np.full((40, 48), np.nan, np.float16)  # a stray read past K would poison C
    a_padded[:, :41] = a
    b_padded = np.full((24, 48), np.nan, np.float16)
    b_padded[:, :41] = b.T
    checked = harness.run(ptxgen.compile(g, s), ops=harness.Operands(a_padded[:, :41], b_padded[:, :41].T),
                          bound=False)
    assert checked.ok and np.array_equal(checked.ref, reference(a, b)), checked.explain()
