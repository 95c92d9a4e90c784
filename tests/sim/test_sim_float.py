"""Floating point: cvt rounding and packing, f32 and f16x2 arithmetic.

Expected values come from exact rational arithmetic (fractions.Fraction) rounded by the
first-principles rounding in sim_util.round_to, and from hand-picked tie cases.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings, strategies as st

from sim_util import (bf16_bits, bf16_value, elementwise, f16_bits, f16_value, f32_bits,
                      from_f32_bits, round_to)

N = 32
finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def f32s(xs) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


def cvt(body: str, xs, out_type: str, out_dtype) -> list[int]:
    return [int(v) for v in elementwise(body, ["f32"], out_type, [f32s(xs)], out_dtype)]


# ------------------------------------------------------------------ cvt to 16-bit formats
def test_cvt_f16_ties_round_to_even():
    one = 1.0
    xs = [one + 2 ** -11,            # halfway between 1 and 1+2^-10 -> even (1.0)
          one + 3 * 2 ** -11,        # halfway between 1+2^-10 and 1+2^-9 -> even (1+2^-9)
          one + 2 ** -11 + 2 ** -20,  # above the tie -> up
          -(one + 2 ** -11),
          65520.0,                   # halfway between 65504 and 65536 (inf) -> inf
          65519.0, 2.0 ** -25, 3 * 2.0 ** -25, math.inf]  # subnormal ties: 0.5 and 1.5 ulp
    out = cvt("    cvt.rn.f16.f32 %d, %a0;", xs, "b16", np.uint16)
    assert out == [0x3C00, 0x3C02, 0x3C01, 0xBC00, 0x7C00, 0x7BFF, 0x0000, 0x0002, 0x7C00]


def test_cvt_bf16_ties_round_to_even_and_nan():
    xs = [1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -(1 + 2 ** -8), math.nan,
          from_f32_bits(0x7F7FFFFF), -math.inf, from_f32_bits(0x7FC00001)]
    out = cvt("    cvt.rn.bf16.f32 %d, %a0;", xs, "b16", np.uint16)
    assert out[:4] == [0x3F80, 0x3F82, 0x3F81, 0xBF80]
    assert (out[4] & 0x7F80) == 0x7F80 and (out[4] & 0x7F) != 0          # NaN stays NaN
    assert out[5] == 0x7F80                                               # max f32 rounds to inf
    assert out[6] == 0xFF80
    assert (out[7] & 0x7F80) == 0x7F80 and (out[7] & 0x7F) != 0           # NaN with low payload


@settings(max_examples=15, deadline=None)
@given(xs=st.lists(finite_f32, min_size=N, max_size=N))
def test_cvt_f16_and_bf16_match_exact_rounding(xs):
    f16 = cvt("    cvt.rn.f16.f32 %d, %a0;", xs, "b16", np.uint16)
    bf16 = cvt("    cvt.rn.bf16.f32 %d, %a0;", xs, "b16", np.uint16)
    for x, h, b in zip(xs, f16, bf16):
        x32 = float(np.float32(x))
        assert h == f16_bits(math.copysign(round_to(Fraction(x32), "f16"), x32)), x32
        assert b == bf16_bits(math.copysign(round_to(Fraction(x32), "bf16"), x32)), x32


def test_cvt_x2_puts_a_in_the_high_half():
    a = f32s([1.0, -2.0, 0.5] + [3.0] * (N - 3))
    b = f32s([2.0, 0.25, -1.5] + [4.0] * (N - 3))
    out = elementwise("    cvt.rn.f16x2.f32 %d, %a0, %a1;", ["f32", "f32"], "b32", [a, b], np.uint32)
    assert [int(v) for v in out[:3]] == [(f16_bits(x) << 16) | f16_bits(y) for x, y in zip(a[:3], b[:3])]
    assert int(out[0]) == 0x3C004000                        # hi = 1.0 (a), lo = 2.0 (b)
    out = elementwise("    cvt.rn.bf16x2.f32 %d, %a0, %a1;", ["f32", "f32"], "b32", [a, b], np.uint32)
    assert int(out[0]) == 0x3F804000 and int(out[1]) == (bf16_bits(-2.0) << 16) | bf16_bits(0.25)


def test_cvt_relu_and_satfinite():
    xs = [-1.5, 2.5, 1e6, -1e6, math.nan]
    out = cvt("    cvt.rn.relu.f16.f32 %d, %a0;", xs, "b16", np.uint16)
    assert out[:4] == [0, f16_bits(2.5), 0x7C00, 0]
    assert (out[4] & 0x7C00) == 0x7C00 and out[4] & 0x3FF
    out = cvt("    cvt.rn.satfinite.f16.f32 %d, %a0;", xs, "b16", np.uint16)
    assert out[:4] == [f16_bits(-1.5), f16_bits(2.5), 0x7BFF, 0xFBFF]


def test_cvt_tf32_rounds_ties_away_and_clears_low_bits():
    xs = [1 + 2 ** -11, -(1 + 2 ** -11), 1 + 2 ** -12, 1 + 3 * 2 ** -11, 1 + 2 ** -11 - 2 ** -23, math.inf]
    out = cvt("    cvt.rna.tf32.f32 %d, %a0;", xs, "b32", np.uint32)
    assert out == [f32_bits(1 + 2 ** -10), f32_bits(-(1 + 2 ** -10)), f32_bits(1.0),
                   f32_bits(1 + 2 ** -9), f32_bits(1.0), 0x7F800000]


@settings(max_examples=15, deadline=None)
@given(xs=st.lists(finite_f32, min_size=N, max_size=N))
def test_cvt_tf32_matches_exact_rounding(xs):
    out = cvt("    cvt.rna.tf32.f32 %d, %a0;", xs, "b32", np.uint32)
    for x, bits in zip(xs, out):
        assert bits & 0x1FFF == 0
        x32 = float(np.float32(x))
        assert bits == f32_bits(math.copysign(round_to(Fraction(x32), "tf32", ties_away=True), x32)), x


def test_cvt_f16_and_bf16_to_f32_is_exact():
    h = np.array([0x3C01, 0x0001, 0xFBFF, 0x7C00] + [0] * (N - 4), dtype=np.uint16)
    out = elementwise("    cvt.f32.f16 %d, %a0;", ["b16"], "f32", [h], np.float32)
    assert list(out[:4]) == [1 + 2 ** -10, 2.0 ** -24, -65504.0, math.inf]
    out = elementwise("    cvt.f32.bf16 %d, %a0;", ["b16"], "f32", [h], np.float32)
    assert [float(v) for v in out[:3]] == [bf16_value(0x3C01), bf16_value(1), bf16_value(0xFBFF)]


# ------------------------------------------------------------------ f32 arithmetic
def exact_f32(value: Fraction) -> float:
    return round_to(value, "f32")


@settings(max_examples=15, deadline=None)
@given(a=st.lists(finite_f32, min_size=N, max_size=N), b=st.lists(finite_f32, min_size=N, max_size=N),
       c=st.lists(finite_f32, min_size=N, max_size=N))
def test_f32_add_mul_fma_are_correctly_rounded(a, b, c):
    A, B, C = f32s(a), f32s(b), f32s(c)
    add = elementwise("    add.rn.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [A, B], np.float32)
    mul = elementwise("    mul.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [A, B], np.float32)
    fma = elementwise("    fma.rn.f32 %d, %a0, %a1, %a2;", ["f32"] * 3, "f32", [A, B, C], np.float32)
    for i in range(N):
        x, y, z = Fraction(float(A[i])), Fraction(float(B[i])), Fraction(float(C[i]))
        assert float(add[i]) == exact_f32(x + y)
        assert float(mul[i]) == exact_f32(x * y)
        assert float(fma[i]) == exact_f32(x * y + z)


def test_fma_rounds_once_where_mul_then_add_would_round_twice():
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is exactly halfway between two f32 values; a tiny c decides
    # the direction. Rounding a*b+c to float64 first would lose c and round the tie to even.
    a = f32s([1 + 2 ** -12] * 3)
    c = f32s([2.0 ** -70, -(2.0 ** -70), 0.0])
    out = elementwise("    fma.rn.f32 %d, %a0, %a1, %a2;", ["f32"] * 3, "f32", [a, a, c], np.float32)
    assert [float(v) for v in out] == [1 + 2 ** -11 + 2 ** -23, 1 + 2 ** -11, 1 + 2 ** -11]


def test_f32_min_max_nan_and_signed_zero():
    a = f32s([math.nan, 1.0, -0.0, 0.0, math.nan, -3.0])
    b = f32s([2.0, math.nan, 0.0, -0.0, math.nan, 5.0])
    mx = elementwise("    max.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [a, b], np.float32)
    mn = elementwise("    min.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [a, b], np.float32)
    assert list(mx[:2]) == [2.0, 1.0] and list(mn[:2]) == [2.0, 1.0]
    assert f32_bits(mx[2]) == 0 and f32_bits(mx[3]) == 0                 # +0 > -0
    assert f32_bits(mn[2]) == 0x80000000 and f32_bits(mn[3]) == 0x80000000
    assert math.isnan(mx[4]) and mx[5] == 5.0 and mn[5] == -3.0
    nan_max = elementwise("    max.NaN.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [a, b], np.float32)
    assert math.isnan(nan_max[0]) and math.isnan(nan_max[1]) and nan_max[5] == 5.0


def test_f32_neg_abs_sub():
    a = f32s([1.5, -2.0, 0.0, -0.0, math.inf])
    b = f32s([0.5, 0.5, 0.0, 0.0, 1.0])
    assert [f32_bits(v) for v in elementwise("    neg.f32 %d, %a0;", ["f32"], "f32", [a], np.float32)] == \
        [f32_bits(-1.5), f32_bits(2.0), 0x80000000, 0, 0xFF800000]
    assert list(elementwise("    abs.f32 %d, %a0;", ["f32"], "f32", [a], np.float32)) == [1.5, 2.0, 0.0, 0.0, math.inf]
    assert list(elementwise("    sub.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [a, b], np.float32)) == \
        [1.0, -2.5, 0.0, -0.0, math.inf]


# ------------------------------------------------------------------ f16x2
def pack(hi: float, lo: float) -> int:
    return (f16_bits(hi) << 16) | f16_bits(lo)


f16_values = st.integers(0, 0xFFFF).map(f16_value).filter(lambda v: math.isfinite(v))


@settings(max_examples=15, deadline=None)
@given(vals=st.lists(st.tuples(f16_values, f16_values, f16_values, f16_values, f16_values, f16_values),
                     min_size=N, max_size=N))
def test_f16x2_arithmetic_rounds_each_half_once(vals):
    a = np.array([pack(v[0], v[1]) for v in vals], dtype=np.uint32)
    b = np.array([pack(v[2], v[3]) for v in vals], dtype=np.uint32)
    c = np.array([pack(v[4], v[5]) for v in vals], dtype=np.uint32)
    res = {op: elementwise(body, ["b32"] * n, "b32", [a, b, c][:n], np.uint32) for op, body, n in (
        ("add", "    add.rn.f16x2 %d, %a0, %a1;", 2), ("mul", "    mul.f16x2 %d, %a0, %a1;", 2),
        ("fma", "    fma.rn.f16x2 %d, %a0, %a1, %a2;", 3), ("max", "    max.f16x2 %d, %a0, %a1;", 2),
        ("min", "    min.f16x2 %d, %a0, %a1;", 2), ("neg", "    neg.f16x2 %d, %a0;", 1))}
    for i, v in enumerate(vals):
        for half, (x, y, z) in ((1, (v[0], v[2], v[4])), (0, (v[1], v[3], v[5]))):
            X, Y, Z = Fraction(x), Fraction(y), Fraction(z)
            want = {"add": round_to(X + Y, "f16"), "mul": round_to(X * Y, "f16"),
                    "fma": round_to(X * Y + Z, "f16"), "max": max(x, y), "min": min(x, y), "neg": -x}
            for op, value in want.items():
                got = f16_value((int(res[op][i]) >> (16 * half)) & 0xFFFF)
                assert got == value, (op, x, y, z)   # == ignores the sign of zero (tested separately)


def test_f16x2_min_max_signed_zero_and_nan():
    nan = 0x7E00
    a = np.array([pack(0.0, -0.0), (nan << 16) | f16_bits(1.0)], dtype=np.uint32)
    b = np.array([pack(-0.0, 0.0), (f16_bits(2.0) << 16) | nan], dtype=np.uint32)
    mx = elementwise("    max.f16x2 %d, %a0, %a1;", ["b32", "b32"], "b32", [a, b], np.uint32)
    mn = elementwise("    min.f16x2 %d, %a0, %a1;", ["b32", "b32"], "b32", [a, b], np.uint32)
    assert int(mx[0]) == 0x00000000 and int(mn[0]) == 0x80008000
    assert int(mx[1]) == pack(2.0, 1.0) and int(mn[1]) == pack(2.0, 1.0)


bf16_values = st.integers(0, 0xFFFF).map(bf16_value).filter(lambda v: math.isfinite(v))


@settings(max_examples=10, deadline=None)
@given(vals=st.lists(st.tuples(bf16_values, bf16_values, bf16_values), min_size=N, max_size=N))
def test_bf16x2_fma_and_scalar_f16_add(vals):
    a = np.array([(bf16_bits(x) << 16) | bf16_bits(y) for x, y, _ in vals], dtype=np.uint32)
    b = np.array([(bf16_bits(y) << 16) | bf16_bits(z) for _, y, z in vals], dtype=np.uint32)
    c = np.array([(bf16_bits(z) << 16) | bf16_bits(x) for x, _, z in vals], dtype=np.uint32)
    out = elementwise("    fma.rn.bf16x2 %d, %a0, %a1, %a2;", ["b32"] * 3, "b32", [a, b, c], np.uint32)
    for (x, y, z), got in zip(vals, out):
        hi = round_to(Fraction(x) * Fraction(y) + Fraction(z), "bf16")
        lo = round_to(Fraction(y) * Fraction(z) + Fraction(x), "bf16")
        assert bf16_value(int(got) >> 16) == hi and bf16_value(int(got) & 0xFFFF) == lo, (x, y, z)
    h = np.array([f16_bits(round_to(Fraction(x), "f16")) if abs(x) < 60000 else 0 for x, _, _ in vals], np.uint16)
    g = np.array([f16_bits(round_to(Fraction(z), "f16")) if abs(z) < 60000 else 0 for _, _, z in vals], np.uint16)
    out = elementwise("    add.f16 %d, %a0, %a1;", ["b16", "b16"], "b16", [h, g], np.uint16)
    for p, q, got in zip(h, g, out):
        assert f16_value(int(got)) == round_to(Fraction(f16_value(int(p))) + Fraction(f16_value(int(q))), "f16")
