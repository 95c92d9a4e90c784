"""Epilogue math (ex2, lg2, tanh, rcp, sqrt, div, copysign, fma .relu on x2 halves), the int8 / tf32
conversions (int <-> float with rounding and saturation) and byte/bit packing (prmt, shf, bfe).

.rn results are compared bit for bit with exact rational rounding (sim_util.round_to); .approx
results within the error bound the PTX ISA documents for the hardware (see ops_math.py).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import sim
from sim_util import elementwise, f32_bits, from_f32_bits, kernel, line_of, round_to

N = 32
SUB = 2.0 ** -140                      # an f32 subnormal
finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


def f32s(xs) -> np.ndarray:
    return np.array(list(xs) + [1.0] * (N - len(xs)), dtype=np.float32)


def as_f32(xs) -> list[float]:
    """The values the kernel actually sees (inputs are rounded to f32 on the way in)."""
    return [float(np.float32(x)) for x in xs]


def unary(body: str, xs) -> np.ndarray:
    return elementwise(body, ["f32"], "f32", [f32s(xs)], np.float32)[:len(xs)]


def exact_f32(x: Fraction) -> float:
    return float(np.float32(round_to(x, "f32")))


def assert_rel(got, ref, bound):
    for g, r in zip(got, ref):
        if math.isnan(r):
            assert math.isnan(g)
        elif math.isinf(r) or r == 0:
            assert g == r
        else:
            assert abs(g - r) <= bound * abs(r), (g, r)


# ------------------------------------------------------------------ transcendental approximations
def test_ex2_approx_within_documented_error_and_ftz():
    xs = [0.0, 1.0, -1.0, 0.5, 10.3, -20.7, 127.9, 128.0, -126.0, -140.0, -149.5, -160.0,
          math.inf, -math.inf, math.nan, SUB, 3.3e-3]
    got = unary("    ex2.approx.f32 %d, %a0;", xs)
    xs = as_f32(xs)
    ref = [float(np.float32(2.0 ** x)) if not math.isnan(x) and x < 128 else (math.inf if x >= 128 else x)
           for x in xs]
    assert_rel(got[:8], ref[:8], 2.0 ** -22)
    assert got[9] == 2.0 ** -140 and got[10] > 0 and got[11] == 0          # subnormal results kept
    assert got[12] == math.inf and got[13] == 0 and math.isnan(got[14]) and got[15] == 1.0
    assert f32_bits(got[14]) == 0x7FFFFFFF                                 # canonical NaN
    ftz = unary("    ex2.approx.ftz.f32 %d, %a0;", xs)
    assert ftz[9] == 0 and ftz[10] == 0 and ftz[15] == 1.0 and list(ftz[:8]) == list(got[:8])


def test_lg2_and_tanh_approx_within_documented_error():
    xs = [1.0, 2.0, 0.75, 1.0 + 2 ** -20, 3e30, 1e-30, SUB, 0.0, -1.0, math.inf]
    got = unary("    lg2.approx.f32 %d, %a0;", xs)
    xs = as_f32(xs)
    for g, x in zip(got[:7], xs[:7]):
        ref = math.log2(x)
        assert abs(g - ref) <= 2.0 ** -22 * max(1.0, abs(ref)), (x, g, ref)
    assert got[7] == -math.inf and math.isnan(got[8]) and got[9] == math.inf
    assert unary("    lg2.approx.ftz.f32 %d, %a0;", [SUB])[0] == -math.inf      # flushed to 0 first
    xs = [0.0, -0.0, 0.1, -0.5, 1.0, 3.0, -9.0, 20.0, 1e-20, math.inf, -math.inf, math.nan]
    got = unary("    tanh.approx.f32 %d, %a0;", xs)
    xs = as_f32(xs)
    assert_rel(got[:9], [math.tanh(x) for x in xs[:9]], 2.0 ** -11)
    assert f32_bits(got[1]) == 0x80000000 and got[9] == 1.0 and got[10] == -1.0 and math.isnan(got[11])


# ------------------------------------------------------------------ IEEE rcp / sqrt / div
@settings(max_examples=8, deadline=None)
@given(a=st.lists(finite_f32.map(lambda v: v or 1.0), min_size=N, max_size=N),
       b=st.lists(finite_f32.map(lambda v: v or -3.0), min_size=N, max_size=N))
def test_rcp_rn_and_div_rn_are_correctly_rounded(a, b):
    got = unary("    rcp.rn.f32 %d, %a0;", a)
    assert [f32_bits(g) for g in got] == [f32_bits(exact_f32(1 / Fraction(x))) for x in a]
    out = elementwise("    div.rn.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [f32s(a), f32s(b)], np.float32)
    assert [f32_bits(g) for g in out] == [f32_bits(exact_f32(Fraction(x) / Fraction(y))) for x, y in zip(a, b)]
    got = unary("    rcp.approx.f32 %d, %a0;", a)
    assert_rel(got, [exact_f32(1 / Fraction(x)) for x in a], 2.0 ** -23)


def test_div_and_rcp_special_values_and_approx_forms():
    a = [1.0, -1.0, 0.0, math.inf, 6.0, 1.0, 3.0, math.inf, 1e-38]
    b = [0.0, 0.0, 0.0, math.inf, 3.0, 2.0 ** 127, 2.0 ** 127, 2.0 ** 127, 1e10]
    rn = elementwise("    div.rn.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [f32s(a), f32s(b)], np.float32)
    assert list(rn[:2]) == [math.inf, -math.inf] and math.isnan(rn[2]) and math.isnan(rn[3])
    assert f32_bits(rn[2]) == 0x7FFFFFFF
    assert rn[4] == 2.0 and rn[5] == 2.0 ** -127                             # subnormal result kept
    approx = elementwise("    div.approx.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [f32s(a), f32s(b)],
                         np.float32)
    assert approx[4] == 2.0 and approx[5] == 0 and approx[6] == 0 and math.isnan(approx[7])  # |b| > 2^126
    full = elementwise("    div.full.ftz.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [f32s(a), f32s(b)],
                       np.float32)
    assert full[4] == 2.0 and full[5] == 0 and full[8] == 0                  # .ftz flushes the subnormal
    got = unary("    rcp.rn.f32 %d, %a0;", [0.0, -0.0, math.inf, 2.0 ** 127, 4.0])
    assert list(got) == [math.inf, -math.inf, 0.0, 2.0 ** -127, 0.25]
    assert unary("    rcp.rn.ftz.f32 %d, %a0;", [2.0 ** 127])[0] == 0
    xs = np.array([1.5, 1e300, -2.0, 7.0] * 8)
    out = elementwise("    div.rn.f64 %d, %a0, %a1;", ["f64", "f64"], "f64", [xs, xs[::-1].copy()], np.float64)
    assert out.tolist() == [x / y for x, y in zip(xs.tolist(), xs[::-1].tolist())]


@settings(max_examples=8, deadline=None)
@given(xs=st.lists(finite_f32.map(abs), min_size=N, max_size=N))
def test_sqrt_rn_is_correctly_rounded(xs):
    got = unary("    sqrt.rn.f32 %d, %a0;", xs)
    for g, x in zip(got, as_f32(xs)):
        if x == 0:
            assert g == 0
            continue
        # correctly rounded iff the exact root lies between the midpoints to g's two neighbours
        prev = np.nextafter(g, np.float32(0))
        nxt = np.nextafter(g, np.float32(np.inf))
        lo, hi = (Fraction(float(prev)) + Fraction(float(g))) / 2, (Fraction(float(g)) + Fraction(float(nxt))) / 2
        assert lo * lo <= Fraction(x) <= hi * hi, (x, g)
    got = unary("    sqrt.approx.f32 %d, %a0;", xs)
    assert_rel(got, [math.sqrt(x) for x in xs], 2.0 ** -23)


def test_sqrt_special_values_and_copysign():
    got = unary("    sqrt.rn.f32 %d, %a0;", [-1.0, -0.0, math.inf, 4.0])
    assert math.isnan(got[0]) and f32_bits(got[1]) == 0x80000000 and got[2] == math.inf and got[3] == 2.0
    a = f32s([1.0, -1.0, -0.0, 2.0, math.nan])
    b = f32s([-3.0, 3.0, 5.0, -math.inf, 1.0])
    out = elementwise("    copysign.f32 %d, %a0, %a1;", ["f32", "f32"], "f32", [a, b], np.float32)
    assert [f32_bits(v) for v in out[:5]] == [f32_bits(3.0), f32_bits(-3.0), f32_bits(-5.0), f32_bits(math.inf),
                                              f32_bits(1.0) | (f32_bits(math.nan) & 0x80000000)]


def test_fma_relu_on_packed_halves():
    def halves(vals, typ):
        if typ == "f16":
            return np.array(vals, dtype=np.float16).view(np.uint16)
        return (np.array(vals, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    a, b, c = [1.5, -2.0, 3.0, -0.5], [2.0, 2.0, -1.0, 0.25], [0.25, 1.0, 1.0, -1.0]
    for typ in ("f16", "bf16"):
        pack = [halves(v, typ).view(np.uint32) for v in (a, b, c)]
        ins = [np.tile(p, N // 2) for p in pack]
        out = elementwise(f"    fma.rn.relu.{typ}x2 %d, %a0, %a1, %a2;", ["b32"] * 3, "b32", ins, np.uint32)
        want = [max(x * y + z, 0.0) for x, y, z in zip(a, b, c)]
        assert out[:2].view(np.uint16).tolist() == halves(want, typ).tolist(), typ


# ------------------------------------------------------------------ conversions
def ints(typ, xs):
    return np.array(xs, dtype={"s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64}[typ])


@pytest.mark.parametrize("typ,xs", [
    ("s32", [0, 1, -1, 16777217, -16777219, 2 ** 31 - 1, -2 ** 31, 33554435, 123456789]),
    ("u32", [0, 16777217, 16777219, 2 ** 32 - 1, 2 ** 31 + 129, 4294967040]),
    ("s64", [2 ** 53 + 1, -(2 ** 62) - 2 ** 38 - 1, 2 ** 63 - 1, 2 ** 24 + 1]),
    ("u64", [2 ** 64 - 1, 2 ** 63 + 2 ** 39 + 1, 2 ** 40 + 2 ** 16, 2 ** 63 + 2 ** 39]),
])
def test_cvt_rn_integer_to_float_rounds_to_nearest_even(typ, xs):
    xs = xs * (N // len(xs)) + xs[:N % len(xs)]
    out = elementwise(f"    cvt.rn.f32.{typ} %d, %a0;", [typ], "f32", [ints(typ, xs)], np.float32)
    assert [f32_bits(v) for v in out] == [f32_bits(round_to(Fraction(x), "f32")) for x in xs]
    if typ in ("s32", "u32"):
        out = elementwise(f"    cvt.rn.f64.{typ} %d, %a0;", [typ], "f64", [ints(typ, xs)], np.float64)
        assert out.tolist() == [float(x) for x in xs]
        half = elementwise(f"    cvt.rn.f16.{typ} %d, %a0;", [typ], "b16", [ints(typ, xs)], np.uint16)
        assert half.view(np.float16).astype(np.float64).tolist() == [round_to(Fraction(x), "f16") for x in xs]
        bf = elementwise(f"    cvt.rn.bf16.{typ} %d, %a0;", [typ], "b16", [ints(typ, xs)], np.uint16)
        assert [from_f32_bits(int(v) << 16) for v in bf] == [round_to(Fraction(x), "bf16") for x in xs]


def ref_float_to_int(x: float, mode: str, lo: int, hi: int) -> int:
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    f = Fraction(x)
    if mode == "rzi":
        r = math.trunc(f)
    elif mode == "rmi":
        r = math.floor(f)
    elif mode == "rpi":
        r = math.ceil(f)
    else:
        r = round(f)                       # Fraction.__round__: ties to even
    return min(max(r, lo), hi)


FLOAT_INPUTS = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 127.5, 128.5, -128.5, -129.0, 255.5, 1e10,
                -1e10, 3e9, -3e9, math.nan, math.inf, -math.inf, 2.0 ** 31, -2.0 ** 31, 2.0 ** 32 - 256,
                1e-3, -1e-3, SUB, -SUB, 7.0, -7.75, 65535.5, 0.0, -0.0]


@pytest.mark.parametrize("mode", ["rni", "rzi", "rmi", "rpi"])
@pytest.mark.parametrize("dtyp,lo,hi,out_t", [("s32", -2 ** 31, 2 ** 31 - 1, "s32"), ("u32", 0, 2 ** 32 - 1, "u32"),
                                              ("s8", -128, 127, "s32"), ("u8", 0, 255, "u32"),
                                              ("s64", -2 ** 63, 2 ** 63 - 1, "s64")])
def test_cvt_float_to_integer_rounds_and_saturates(mode, dtyp, lo, hi, out_t):
    dt = {"s32": np.int32, "u32": np.uint32, "s64": np.int64}[out_t]
    sat = ".sat" if dtyp in ("s8", "u8") else ""
    out = elementwise(f"    cvt.{mode}{sat}.{dtyp}.f32 %d, %a0;", ["f32"], out_t, [f32s(FLOAT_INPUTS)], dt)
    assert [int(v) for v in out] == [ref_float_to_int(x, mode, lo, hi) for x in FLOAT_INPUTS]


def test_cvt_float_to_integer_ftz_and_f16_source():
    got = elementwise("    cvt.rpi.ftz.s32.f32 %d, %a0;", ["f32"], "s32", [f32s([SUB, -SUB, 0.25])], np.int32)
    assert got[:3].tolist() == [0, 0, 1]
    got = elementwise("    cvt.rpi.s32.f32 %d, %a0;", ["f32"], "s32", [f32s([SUB, -SUB])], np.int32)
    assert got[:2].tolist() == [1, 0]
    with np.errstate(over="ignore"):  # 70000 is meant to overflow f16 (to inf, which saturates to 127)
        h = np.array([2.5, -3.5, 70000.0, -0.75] * 8, dtype=np.float32).astype(np.float16).view(np.uint16)
    got = elementwise("    cvt.rni.s8.f16 %d, %a0;", ["b16"], "s32", [h], np.int32)
    assert got[:4].tolist() == [2, -4, 127, -1]


def test_cvt_integer_saturation_and_wrapping_for_int8_packing():
    """The 32-bit destination register gets the result sign-extended (.s8/.s16) or zero-extended."""
    xs = [0, 127, 128, -128, -129, 300, -300, 255, 256, 2 ** 31 - 1, -2 ** 31, -1] * 2 + [5] * 8
    clamp = lambda v, lo, hi: max(lo, min(hi, v))   # noqa: E731
    for body, src, ref in [
        ("cvt.sat.s8.s32", "s32", lambda x: clamp(x, -128, 127)),
        ("cvt.s8.s32", "s32", lambda x: (x + 128) % 256 - 128),
        ("cvt.sat.u8.s32", "s32", lambda x: clamp(x, 0, 255)),
        ("cvt.u8.u32", "u32", lambda x: (x % 2 ** 32) % 256),
        ("cvt.sat.s16.s32", "s32", lambda x: clamp(x, -32768, 32767)),
        ("cvt.sat.u32.s32", "s32", lambda x: max(0, x)),
    ]:
        a = ints("s32", xs).view(np.uint32 if src == "u32" else np.int32)
        out = elementwise(f"    {body} %d, %a0;", [src], "b32", [a], np.uint32)
        assert out.tolist() == [ref(x) % 2 ** 32 for x in xs], body
    big = ints("u64", [2 ** 64 - 1, 2 ** 31, 5, 2 ** 63] * 8)
    out = elementwise("    cvt.sat.s32.u64 %d, %a0;", ["u64"], "s32", [big], np.int32)
    assert out[:4].tolist() == [2 ** 31 - 1, 2 ** 31 - 1, 5, 2 ** 31 - 1]
    out = elementwise("    cvt.sat.u32.s64 %d, %a0;", ["s64"], "u32", [big.view(np.int64)], np.uint32)
    assert out[:4].tolist() == [0, 2 ** 31, 5, 0]


# ------------------------------------------------------------------ prmt / shf / bfe
def ref_prmt(a: int, b: int, c: int) -> int:
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = src[sel & 7]
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


u32s = st.integers(0, 2 ** 32 - 1)


@settings(max_examples=6, deadline=None)
@given(a=st.lists(u32s, min_size=N, max_size=N), b=st.lists(u32s, min_size=N, max_size=N),
       c=st.lists(u32s, min_size=N, max_size=N))
def test_prmt_shf_bfe_match_the_isa_pseudocode(a, b, c):
    A, B, C = (np.array(v, dtype=np.uint32) for v in (a, b, c))
    out = elementwise("    prmt.b32 %d, %a0, %a1, %a2;", ["b32"] * 3, "b32", [A, B, C], np.uint32)
    assert [int(v) for v in out] == [ref_prmt(x, y, z) for x, y, z in zip(a, b, c)]
    n = C % 40
    for mode in ("l.wrap", "r.wrap", "l.clamp", "r.clamp"):
        out = elementwise(f"    shf.{mode}.b32 %d, %a0, %a1, %a2;", ["b32"] * 3, "b32", [A, B, n], np.uint32)
        want = []
        for x, y, k in zip(a, b, n.tolist()):
            k = min(k, 32) if "clamp" in mode else k & 31
            joined = (y << 32) | x
            want.append(((joined << k) >> 32) & 0xFFFFFFFF if mode[0] == "l" else (joined >> k) & 0xFFFFFFFF)
        assert [int(v) for v in out] == want, mode
    pos, length = C & 0xFF, (C >> 8) & 0x3F
    for typ in ("u32", "s32"):
        src = A.view(np.int32) if typ == "s32" else A
        out = elementwise(f"    bfe.{typ} %d, %a0, %a1, %a2;", [typ, "u32", "u32"], typ, [src, pos, length],
                          np.uint32 if typ == "u32" else np.int32)
        want = []
        for x, p, ln in zip(a, pos.tolist(), length.tolist()):
            sbit = 0 if typ == "u32" or ln == 0 else (x >> min(p + ln - 1, 31)) & 1
            bits = [((x >> (p + i)) & 1) if (i < ln and p + i <= 31) else sbit for i in range(32)]
            v = sum(bit << i for i, bit in enumerate(bits))
            want.append(v - (1 << 32) if typ == "s32" and v >> 31 else v)
        assert [int(v) for v in out] == want, typ


def test_prmt_packs_four_int8_results():
    """The int8 epilogue idiom: saturate four s32 values to s8 and pack them low byte first."""
    body = """
    cvt.sat.s8.s32 %r20, %a0;
    add.s32 %r21, %a0, 100;
    cvt.sat.s8.s32 %r21, %r21;
    sub.s32 %r22, %a0, 200;
    cvt.sat.s8.s32 %r22, %r22;
    mul.lo.s32 %r23, %a0, -3;
    cvt.sat.s8.s32 %r23, %r23;
    prmt.b32 %r24, %r20, %r21, 0x0040;       // bytes: r20.b0, r21.b0
    prmt.b32 %r25, %r22, %r23, 0x0040;
    prmt.b32 %d, %r24, %r25, 0x5410;         // {r24.lo16, r25.lo16}"""
    xs = np.arange(-16, 16, dtype=np.int32) * 9
    out = elementwise(body, ["s32"], "b32", [xs], np.uint32)
    sat = lambda v: max(-128, min(127, v)) & 0xFF   # noqa: E731
    assert [int(v) for v in out] == [sat(x) | sat(x + 100) << 8 | sat(x - 200) << 16 | sat(-3 * x) << 24
                                     for x in xs.tolist()]


@pytest.mark.parametrize("dtyp,lo,hi,ext", [("s8", -128, 127, "s32"), ("u8", 0, 255, "u32")])
def test_8_bit_output_idiom_rounds_packs_and_unpacks(dtyp, lo, hi, ext):
    """What ptxgen's 8-bit epilogue emits: cvt.rni.sat into 32-bit registers, prmt-packed low byte
    first; and back: bfe of each byte, extended, then an exact cvt.rn.f32 (beta != 0 reads C)."""
    xs = [FLOAT_INPUTS[(i * 7 + j) % len(FLOAT_INPUTS)] for i in range(N) for j in range(4)]
    cols = [f32s(xs[j::4]) for j in range(4)]
    body = "\n".join(f"    cvt.rni.sat.{dtyp}.f32 %r{20 + j}, %a{j};" for j in range(4)) + """
    prmt.b32 %r24, %r20, %r21, 0x0040;
    prmt.b32 %r25, %r22, %r23, 0x0040;
    prmt.b32 %d, %r24, %r25, 0x5410;"""
    words = elementwise(body, ["f32"] * 4, "b32", cols, np.uint32)
    want = [ref_float_to_int(float(np.float32(x)), "rni", lo, hi) for x in xs]
    assert [int(w) for w in words] == [sum((want[4 * i + j] & 0xFF) << (8 * j) for j in range(4))
                                       for i in range(len(words))]
    for j in range(4):
        back = elementwise(f"    bfe.{ext} %r20, %a0, {8 * j}, 8;\n    cvt.rn.f32.{ext} %d, %r20;",
                           ["b32"], "f32", [words], np.float32)
        assert back.tolist() == [float(w) for w in want[j::4]]


@pytest.mark.parametrize("text", ["ex2.f32 %f1, %f2;", "ex2.approx.f64 %fd1, %fd2;", "tanh.approx.ftz.f32 %f1, %f2;",
                                  "div.f32 %f1, %f2, %f3;", "rcp.rz.f32 %f1, %f2;", "cvt.f32.s32 %f1, %r1;",
                                  "cvt.rz.f32.s32 %f1, %r1;", "cvt.s32.f32 %r1, %f1;", "cvt.rni.rzi.s32.f32 %r1, %f1;",
                                  "cvt.rn.f16.s64 %h1, %rd1;", "copysign.f16 %h1, %h2, %h3;", "bfe.b32 %r1, %r2, 1, 2;",
                                  "shf.l.b32 %r1, %r2, %r3, %r4;", "cvt.sat.rni.s32.s64 %r1, %rd1;"])
def test_invalid_math_and_conversion_forms_are_unsupported(text):
    ptx = kernel(f"    {text}   // BAD\n    ret;", regs="    .reg .f64 %fd<4>;\n")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", args=[np.zeros(1)])
    assert (err.value.kind, err.value.line) == ("unsupported", line_of(ptx, "// BAD"))
