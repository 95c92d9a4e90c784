"""fp8 (e4m3, e5m2) as a Gemm dtype: numpy dtypes, random operands that survive the round trip,
a float64 reference that is exact for them, compare's tolerance, and the verifier's dtype table."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import accumulation_error, compare, gamma, magnitude, random_operands, random_scale, reference
from ptxgen.schedule.problem import DTYPE_BYTES, FP8_DTYPES, INPUT_DTYPES, instruction_name, numpy_dtype
from ptxgen.schedule.verify import verify_rules

FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def test_fp8_dtypes():
    assert set(FP8_DTYPES) <= set(INPUT_DTYPES)
    for name, t in FP8.items():
        assert numpy_dtype(name) == np.dtype(t) and DTYPE_BYTES[name] == 1
        assert Gemm(64, 64, 64, dtype=name).k_step == 32
        assert instruction_name(Gemm(64, 64, 64, dtype=name), "wgmma", 128) == "wgmma m64n128k32"
    assert float(ml_dtypes.finfo(numpy_dtype("e4m3")).max) == 448.0  # the "fn" variant PTX's .e4m3 is


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(FP8_DTYPES), m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 96),
       batch=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_random_fp8_operands_are_exact_nonzero_finite(dtype, m, n, k, batch, seed):
    """fp8 is K-major only on wgmma: A row-major, B column-major (the Gemm default)."""
    g = Gemm(m, n, k, dtype=dtype, batch=batch)
    a, b = random_operands(g, seed)
    lead = (batch,) if batch > 1 else ()
    assert a.shape == lead + (m, k) and b.shape == lead + (k, n)
    for x in (a, b):
        assert x.dtype == numpy_dtype(dtype)
        wide = x.astype(np.float64)
        assert np.all(np.isfinite(wide)) and np.all(wide != 0)
        assert np.all((np.abs(wide) >= 0.5) & (np.abs(wide) <= 1.5))
        # round trip: the float64 values are the fp8 values, bit for bit
        assert np.array_equal(wide.astype(numpy_dtype(dtype)).view(np.uint8), x.view(np.uint8))
    assert np.swapaxes(b, -1, -2).flags["C_CONTIGUOUS"]  # B stored column-major (N x K)


def test_random_fp8_operands_use_the_whole_grid():
    """Both signs and more than a handful of magnitudes (e4m3: 13 in [0.5, 1.5], e5m2: 7)."""
    for dtype, count in (("e4m3", 13), ("e5m2", 7)):
        a, _ = random_operands(Gemm(64, 64, 256, dtype=dtype), 3)
        values = np.unique(np.abs(a.astype(np.float64)))
        assert len(values) == count and (a.astype(np.float64) < 0).any()


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(FP8_DTYPES), m=st.integers(1, 6), n=st.integers(1, 6), k=st.integers(1, 300),
       seed=st.integers(0, 2**16))
def test_float64_reference_of_fp8_inputs_is_exact(dtype, m, n, k, seed):
    """Products of fp8 values in [0.5, 1.5] have 8 significant bits; K of them sum exactly in 53."""
    g = Gemm(m, n, k, dtype=dtype)
    a, b = random_operands(g, seed)
    ref = reference(a, b)
    fa = [[Fraction(float(v)) for v in row] for row in a.astype(np.float64)]
    fb = [[Fraction(float(v)) for v in row] for row in b.astype(np.float64)]
    for i in range(m):
        for j in range(n):
            assert Fraction(float(ref[i, j])) == sum(fa[i][p] * fb[p][j] for p in range(k))


def test_fp8_scale_vectors_and_epilogue_reference():
    g = Gemm(32, 48, 64, dtype="e4m3", out_dtype="bf16", epilogue=Epilogue(alpha=0.5, scale="col"))
    a, b = random_operands(g)
    scale = random_scale(g)
    assert scale.shape == (48,) and scale.dtype == np.float32 and np.all(scale > 0)
    want = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) * scale.astype(np.float64)[None, :]
    assert np.array_equal(reference(a, b, g.epilogue, scale=scale), want)


@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_compare_takes_f32_accumulation_and_catches_a_dropped_k_group(dtype):
    g = Gemm(64, 64, 256, dtype=dtype, out_dtype="f32")
    a, b = random_operands(g, 7)
    ref = reference(a, b)
    bound = magnitude(a, b)
    # f32 accumulation in k order (what a correct kernel does), rounded to the output
    acc = np.zeros((64, 64), np.float32)
    for p in range(g.k):
        acc += a[:, p].astype(np.float32)[:, None] * b[p, :].astype(np.float32)[None, :]
    assert compare(acc, ref, g, bound=bound).ok and compare(acc, ref, g).ok
    dropped = acc - (a[:, :32].astype(np.float32) @ b[:32].astype(np.float32))  # one wgmma k-step missing
    assert not compare(dropped, ref, g, bound=bound).ok and not compare(dropped, ref, g).ok


def test_fp8_tolerance_models_the_reported_14_bit_accumulation():
    f16, fp8 = Gemm(64, 64, 4096, dtype="f16"), Gemm(64, 64, 4096, dtype="e4m3")
    assert gamma(fp8) > gamma(f16) and accumulation_error(fp8) > accumulation_error(f16)
    assert gamma(fp8) < 0.03  # about 2% at K = 4096, as reported: still far below a wrong answer


@pytest.mark.parametrize("out", ["s8", "s32", "u8"])
def test_fp8_gives_float_outputs_only(out):
    g = Gemm(256, 256, 256, dtype="e4m3", out_dtype=out)
    with pytest.raises(ScheduleError) as info:
        verify_rules(g, Schedule(block=(128, 128, 128), instruction="wgmma"), "sm_90a")
    assert info.value.field == "gemm.out_dtype"


@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("out", ["f32", "f16", "bf16"])
def test_fp8_legal_on_sm_90a_with_scales(dtype, out):
    for e in (Epilogue(alpha=0.25), Epilogue(scale="col"), Epilogue(scale="row", bias="col", activation="relu")):
        verify_rules(Gemm(512, 512, 512, dtype=dtype, out_dtype=out, epilogue=e),
                     Schedule(block=(128, 128, 128), instruction="wgmma", stages=4), "sm_90a")


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_fp8_refused_off_sm_90a_naming_it(arch):
    with pytest.raises(ScheduleError) as info:
        verify_rules(Gemm(256, 256, 256, dtype="e5m2"), Schedule(block=(128, 128, 64)), arch)
    assert info.value.field == "gemm.dtype" and "sm_90a" in str(info.value) and "f16" in info.value.fix
