"""`check.compare` checks every element: one wrong element fails, a correctly rounded result of any
K passes, NaN/Inf that propagate like the reference's (and f16 overflow the reference shares) pass.

"Correct" results here are emulated in numpy the way the kernel computes them, but worse: one
rounding per multiply and per add in the accumulator dtype (the kernel fuses them, and mma
rounds less often; an f16 accumulator rounds once per mma's 16 products, as the kernel's does),
inputs rounded to tf32 where the dtype is tf32, then the cast to the output.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import Epilogue, Gemm
from ptxgen.check import compare, magnitude, poisoned, random_operands, reference
from ptxgen.schedule.problem import numpy_dtype


def tf32_round(x: np.ndarray) -> np.ndarray:
    """Round f32 values to 10 mantissa bits, nearest with ties away (cvt.rna.tf32.f32)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def emulated(g: Gemm, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A correct kernel's output, by sequential accumulation in the accumulator dtype."""
    acc_t = np.float16 if g.acc_dtype == "f16" else np.float32
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if g.dtype == "tf32":
        a32, b32 = tf32_round(a32), tf32_round(b32)
    acc = np.zeros((g.m, g.n), dtype=acc_t)
    if g.acc_dtype == "f16":  # each mma: 16 products summed (exactly enough), one rounding to f16
        for k0 in range(0, g.k, 16):
            group = (a32[:, k0:k0 + 16].astype(np.float64) @ b32[k0:k0 + 16, :].astype(np.float64))
            acc = (acc.astype(np.float64) + group).astype(acc_t)
        return acc.astype(np.float32).astype(numpy_dtype(g.out_dtype))
    for k in range(g.k):
        acc = (acc + (a32[:, k, None] * b32[None, k, :]).astype(acc_t)).astype(acc_t)
    return acc.astype(np.float32).astype(numpy_dtype(g.out_dtype))


def typical_index(ref: np.ndarray, draw_index: int, fraction: float = 1 / 20) -> tuple[int, int]:
    """An element of at least `fraction` of the RMS (a twentieth: about 96% of them, the RMS:
    about a third): the draw picks which."""
    rms = np.sqrt(np.mean(ref ** 2))
    candidates = np.argwhere(np.abs(ref) >= rms * fraction)
    return tuple(int(x) for x in candidates[draw_index % len(candidates)])


@settings(max_examples=15, deadline=None)
@given(k=st.sampled_from([1, 16, 128, 1000]) | st.integers(1, 300),
       pick=st.integers(0, 10 ** 6))
def test_bf16_one_sign_flipped_fails(k, pick):
    g = Gemm(128, 128, k, dtype="bf16", out_dtype="bf16")
    a, b = random_operands(g, seed=k)
    ref = reference(a, b)
    c = emulated(g, a, b)
    assert compare(c, ref, g).ok
    i = typical_index(ref, pick)
    c[i] = -c[i]
    result = compare(c, ref, g)
    assert not result.ok and result.bad == 1, str(result)
    assert result.worst[0][0] == i and f"{list(i)}: got" in str(result), str(result)
    bounded = compare(c, ref, g, bound=magnitude(a, b))
    assert not bounded.ok and bounded.bad == 1, str(bounded)


@settings(max_examples=15, deadline=None)
@given(dtype=st.sampled_from(["f16", "bf16", "tf32"]), k=st.integers(1, 600), pick=st.integers(0, 10 ** 6))
def test_f32_one_element_one_percent_off_fails(dtype, k, pick):
    """1% off an element at least as large as the RMS (about a third of them)."""
    g = Gemm(64, 64, k, dtype=dtype, out_dtype="f32")
    a, b = random_operands(g, seed=k)
    ref = reference(a, b)
    c = emulated(g, a, b)
    i = typical_index(ref, pick, fraction=1.0)
    c[i] *= np.float32(1.01)
    checks = [compare(c, ref, g)]
    if dtype != "tf32":  # the worst-case bound allows tf32 2^-10 of sum |a||b|: up to 3% of RMS here
        checks.append(compare(c, ref, g, bound=magnitude(a, b)))
    for result in checks:
        assert not result.ok and result.bad == 1 and result.worst[0][0] == i, str(result)


@settings(max_examples=15, deadline=None)
@given(k=st.integers(16, 128), pick=st.integers(0, 10 ** 6))
def test_f16_accumulation_one_element_one_percent_off_fails(k, pick):
    """The f16 accumulator's tolerance follows K and f16's precision (`f16_accumulation_error`): a
    correct result (rounded to f16 once per mma, as the kernel does) passes, 1% off one element
    as large as the RMS fails. Before: 16 sigma * u * sqrt(K) of the RMS, 9% of it (atol 1.08 at
    `run --instruction wmma --acc f16 --out f16`), so such an error passed."""
    g = Gemm(64, 64, k, dtype="f16", out_dtype="f16", acc_dtype="f16")
    a, b = random_operands(g, seed=k)
    ref = reference(a, b)
    c = emulated(g, a, b)
    assert compare(c, ref, g).ok, str(compare(c, ref, g))
    i = typical_index(ref, pick, fraction=1.0)
    c[i] = (c[i].astype(np.float64) * 1.01).astype(np.float16)
    result = compare(c, ref, g)
    assert not result.ok and result.bad == 1 and result.worst[0][0] == i, str(result)


OUTPUTS = {"f16": ["f32", "f16"], "bf16": ["f32", "bf16"], "tf32": ["f32"]}


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_correct_results_of_any_k_pass(data):
    dtype = data.draw(st.sampled_from(["f16", "bf16", "tf32"]), label="dtype")
    out = data.draw(st.sampled_from(OUTPUTS[dtype]), label="out_dtype")
    acc = data.draw(st.sampled_from(["f32", "f16"] if dtype == "f16" else ["f32"]), label="acc_dtype")
    k = data.draw(st.integers(1, 2048), label="K")
    g = Gemm(32, 48, k, dtype=dtype, out_dtype=out, acc_dtype=acc)
    a, b = random_operands(g, seed=k)
    ref = reference(a, b)
    c = emulated(g, a, b)
    for result in (compare(c, ref, g), compare(c, ref, g, bound=magnitude(a, b))):
        assert result.ok, str(result)


def test_poison_never_overwritten_fails():
    g = Gemm(16, 16, 32, dtype="f16", out_dtype="f32")
    a, b = random_operands(g)
    ref = reference(a, b)
    c = emulated(g, a, b)
    c[3, 5] = poisoned((1,), "f32")[0]
    result = compare(c, ref, g)
    assert not result.ok and result.unwritten == 1 and "1 elements never written" in str(result)


def test_s32_is_exact():
    ref = np.arange(12.0).reshape(3, 4)
    assert compare(ref.astype(np.int32), ref, "s32").ok
    off = ref.astype(np.int32)
    off[1, 2] += 1
    result = compare(off, ref, "s32")
    assert not result.ok and result.worst[0][0] == (1, 2)


def test_nan_and_inf_that_propagate_are_correct():
    """NaN where the reference is NaN and inf of the reference's sign are right, not 'never written'."""
    ref = np.array([[np.nan, np.inf], [-np.inf, 2.0]])
    c = np.array([[np.nan, np.inf], [-np.inf, 2.0]], dtype=np.float32)
    result = compare(c, ref, "f32")
    assert result.ok and result.unwritten == 0, str(result)
    assert "never written" not in str(result)
    wrong_sign = c.copy()
    wrong_sign[0, 1] = -np.inf
    assert not compare(wrong_sign, ref, "f32").ok
    finite_for_inf = c.copy()
    finite_for_inf[1, 0] = -3.0e38
    assert not compare(finite_for_inf, ref, "f32").ok
    nan_for_inf = c.copy()
    nan_for_inf[0, 1] = np.nan
    assert not compare(nan_for_inf, ref, "f32").ok
    inf_for_finite = c.copy()
    inf_for_finite[1, 1] = np.inf
    bad = compare(inf_for_finite, ref, "f32")
    assert not bad.ok and bad.worst[0][0] == (1, 1), str(bad)


@pytest.mark.parametrize("out", ["f16", "bf16"])
def test_overflow_the_reference_shares_is_correct(out):
    """f16/bf16 overflow to inf where the float64 reference is beyond the range (the cast
    overflows too) is right, and the report shows no 1.798e+308 error."""
    big = 70000.0 if out == "f16" else 4.0e38
    ref = np.array([[big, -big], [1.0, 2.0]])
    with np.errstate(over="ignore"):
        c = ref.astype(numpy_dtype(out))  # the cast: +-inf
    assert np.isinf(c.astype(np.float64)[0]).all()
    result = compare(c, ref, out)
    assert result.ok and result.unwritten == 0, str(result)
    assert "1.798e+308" not in str(result) and "inf" not in f"{result.max_abs_error}"
    below = ref.copy()
    below[0, 0] = 60000.0 if out == "f16" else 3.0e38  # representable: inf is wrong here
    assert not compare(c, below, out).ok


@pytest.mark.parametrize("out", ["f32", "f16", "bf16"])
def test_underflow_to_zero_is_right_but_a_small_error_is_not(out):
    """SiLU of a large negative sum is about -1e-137 in float64 and 0 after the f32 epilogue:
    right, whatever the (tiny) scale of the result. A real error at that output's scale is not."""
    g = Gemm(1, 2, 33, dtype="s8", out_dtype=out, epilogue=Epilogue(activation="silu"))
    ref = np.array([[-1.25e-137, 3.0]])
    ok = np.array([[-0.0, 3.0]], dtype=numpy_dtype(out))
    assert compare(ok, ref, g).ok
    bad = np.array([[-0.0, 3.01]], dtype=numpy_dtype(out))
    assert not compare(bad, ref, g).ok


def test_gelu_reference_keeps_its_precision_in_the_far_negative_tail():
    """GELU(-7) = -7 * sigmoid(2y) is about -2.3e-15: the tanh form loses it to cancellation
    (1 + tanh(-17.8) on float64's 1.1e-16 grid); the reference must not."""
    from fractions import Fraction
    import math

    from ptxgen.check import reference

    x = -7.0
    y = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    exact = x / (1 + math.exp(-2 * y))  # e^(35.65): no cancellation anywhere
    got = reference(np.array([[x]]), np.array([[1.0]]), Epilogue(activation="gelu"))[0, 0]
    assert abs(Fraction(got) - Fraction(exact)) <= abs(Fraction(exact)) * Fraction(1, 10**12)
    assert got != 0.5 * x * (1.0 + math.tanh(y))  # the cancelling form is measurably off here


def test_dequantised_int8_allows_epilogue_cancellation_at_the_terms_scale():
    """s8 -> f32 with beta: acc * scale and beta * C are each about 1 and round in f32; their sum
    may cancel to 0.0088, whose rounding error is then an ulp of the terms (6e-8), far beyond
    rtol * 0.0088. Allowed; an error of 1e-4 is not."""
    g = Gemm(1, 16, 16, dtype="s8", out_dtype="f32", epilogue=Epilogue(beta=1.0, scale="row"))
    ref = np.linspace(-2.0, 2.0, 16)[None, :]
    ref[0, 12] = 0.008779485709965229
    ok = ref.astype(np.float32)
    ok[0, 12] = np.float32(0.008779466152191162)  # what the kernel computed: 6.3e-8 off
    assert compare(ok, ref, g).ok
    bad = ok.copy()
    bad[0, 12] += np.float32(1e-4)
    assert not compare(bad, ref, g).ok
