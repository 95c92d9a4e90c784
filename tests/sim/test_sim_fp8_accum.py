"""The simulator's opt-in model of Hopper's reported fp8 wgmma accumulation (sim/ops_wgmma.py,
PTXGEN_SIM_FP8_ACCUM=hopper; DeepSeek-V3 technical report §3.3.2, reported, not measured here):
each k32 group's add into the f32 accumulator keeps 14 significant bits, towards zero."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.check import random_operands
from ptxgen.sim.ops_wgmma import FP8_ACCUM_BITS, truncate_significand

SINGLE_LEVEL = Schedule(block=(64, 64, 128), instruction="wgmma", stages=2, warp_specialized=False,
                        persistent=False, consumers=1)


def test_truncation_keeps_the_leading_bits_towards_zero():
    x = np.array([1 + 2.0 ** -13, 1 + 2.0 ** -14, -(1 + 3 * 2.0 ** -14), 3.0, 0.0, np.inf, -np.inf])
    got = truncate_significand(x, 14)
    assert got[:5].tolist() == [1 + 2.0 ** -13, 1.0, -(1 + 2.0 ** -13), 3.0, 0.0]
    assert np.isposinf(got[5]) and np.isneginf(got[6]) and np.isnan(truncate_significand(np.array([np.nan]), 14))[0]


def _model(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The single-level kernel under the model, in numpy: acc = trunc14(acc + exact k32 group)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]))
    for k0 in range(0, a.shape[1], 32):
        acc = truncate_significand(acc + a64[:, k0:k0 + 32] @ b64[k0:k0 + 32], FP8_ACCUM_BITS)
    return acc.astype(np.float32)


def test_the_hopper_model_is_opt_in_and_matches_its_definition(monkeypatch):
    g = Gemm(64, 64, 2048, dtype="e4m3", out_dtype="f32", fast_accum=True)
    a, b = random_operands(g, 7)
    k = ptxgen.compile(g, SINGLE_LEVEL, arch="sm_90a")
    monkeypatch.delenv("PTXGEN_SIM_FP8_ACCUM", raising=False)
    exact = k.simulate(a, b)
    monkeypatch.setenv("PTXGEN_SIM_FP8_ACCUM", "hopper")
    modelled = k.simulate(a, b)
    want = _model(a, b)
    assert np.array_equal(modelled, want)                     # bit for bit: every step is exact in float64
    assert not np.array_equal(modelled, exact)                # and it does lose bits at this K
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(exact - ref).max() < np.abs(modelled - ref).max()
    monkeypatch.setenv("PTXGEN_SIM_FP8_ACCUM", "exact")
    assert np.array_equal(k.simulate(a, b), exact)


def test_the_model_leaves_other_types_alone(monkeypatch):
    g = Gemm(64, 64, 512, dtype="bf16", out_dtype="f32")
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                 consumers=1)
    a, b = random_operands(g, 2)
    k = ptxgen.compile(g, s, arch="sm_90a")
    plain = k.simulate(a, b)
    monkeypatch.setenv("PTXGEN_SIM_FP8_ACCUM", "hopper")
    assert np.array_equal(k.simulate(a, b), plain)


def test_an_unknown_model_is_refused_naming_the_variable(monkeypatch):
    g = Gemm(64, 64, 128, dtype="e4m3", out_dtype="f32")
    a, b = random_operands(g, 1)
    monkeypatch.setenv("PTXGEN_SIM_FP8_ACCUM", "h100")
    with pytest.raises(Exception, match=r"PTXGEN_SIM_FP8_ACCUM='h100'.*exact, hopper"):
        ptxgen.compile(g, SINGLE_LEVEL, arch="sm_90a").simulate(a, b)
