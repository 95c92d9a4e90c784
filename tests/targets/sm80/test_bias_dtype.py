"""The bias vector's dtype: f32 for every output (the epilogue adds it in f32, as CUTLASS's bias
epilogues do), or the output's own dtype for f16/bf16 outputs (`Gemm(bias_dtype=...)`).

An f32 bias with an f16 output was rejected ("bias must have dtype f16"); now an f32 numpy vector
just works, an f16/bf16 host vector is widened exactly, and a bias the kernel cannot take
unchanged is an error naming both fixes. Every kernel runs on the simulator against float64.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_operands, reference
from tests import harness

NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def bias_vector(n: int, dtype: str, seed: int) -> np.ndarray:
    """Non-zero values with bits below f16's precision, so an f32 bias read as f16 would show."""
    rng = np.random.default_rng(seed)
    return ((rng.uniform(0.5, 1.5, n) + 1 / 3) * rng.choice([-1.0, 1.0], n)).astype(NP[dtype])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_bias_of_f32_or_the_output_dtype_is_added_exactly(data):
    out = data.draw(st.sampled_from(["f16", "bf16", "f32", "s8"]), label="out")
    dtype = "s8" if out == "s8" else data.draw(st.sampled_from(["f16", "bf16"]), label="dtype")
    compiled = data.draw(st.sampled_from(["f32", out] if out in ("f16", "bf16") else ["f32"]), label="bias_dtype")
    passed = compiled if compiled != "f32" else data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="passed")
    kind = data.draw(st.sampled_from(["row", "col"]), label="kind")
    via = data.draw(st.sampled_from([None, False]), label="via_smem")
    g = Gemm(50, 72, 40, dtype=dtype, out_dtype=out, bias_dtype=compiled,
             epilogue=Epilogue(alpha=0.5, bias=kind, activation=data.draw(st.sampled_from([None, "relu"]),
                                                                           label="act")))
    k = ptxgen.compile(g, Schedule(block=(32, 64, 32), warps=(1, 2), epilogue_via_smem=via))
    assert f"bias (.u64, {compiled})" in k.ptx
    a, b = random_operands(g, 1)
    bias = bias_vector(g.n if kind == "col" else g.m, passed, 2)
    harness.check(k, ops=harness.Operands(a, b, bias=bias))


def test_an_f32_bias_with_f16_output_just_works():
    """The issue's case: Gemm(out_dtype='f16', bias='col') and an f32 numpy vector."""
    g = Gemm(64, 64, 32, out_dtype="f16", epilogue=Epilogue(bias="col"))
    assert ptxgen.verify(g, Schedule(block=(64, 64, 32))) is None and g.bias_dtype == "f32"
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    assert re.search(r"ld\.global\.f32 .*\[%rd\d+(\+\d+)?\]", k.ptx.split("Epilogue")[1])
    a, b = random_operands(g, 3)
    bias = bias_vector(64, "f32", 4)
    out = harness.check(k, ops=harness.Operands(a, b, bias=bias), bound=False).out
    wrong = reference(a, b, g.epilogue, bias=bias.astype(np.float16).astype(np.float32))
    assert not np.array_equal(out, wrong.astype(np.float16)), "the bias is used at f32 precision"


def test_an_f16_bias_kernel_takes_half_the_bytes_and_names_the_fix_for_f32():
    g = Gemm(64, 64, 32, out_dtype="f16", bias_dtype="f16", epilogue=Epilogue(bias="col"))
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    a, b = random_operands(g, 5)
    bias = bias_vector(64, "f16", 6)
    harness.check(k, ops=harness.Operands(a, b, bias=bias), bound=False)
    with pytest.raises(TypeError, match=r"compiled for a f16 bias.*Gemm\(bias_dtype='f32'\).*astype"):
        k.simulate(a, b, bias=bias.astype(np.float32))


@pytest.mark.parametrize("g,value", [
    (lambda: Gemm(64, 64, 32, out_dtype="f32", bias_dtype="f16"), "f16"),
    (lambda: Gemm(64, 64, 32, out_dtype="f16", bias_dtype="bf16"), "bf16"),
    (lambda: Gemm(64, 64, 32, dtype="s8", out_dtype="s8", bias_dtype="s8"), "s8"),
    (lambda: Gemm(64, 64, 32, out_dtype="f16", bias_dtype="float64"), "float64"),
], ids=["f16-for-f32", "bf16-for-f16", "s8", "typo"])
def test_a_bias_dtype_the_output_cannot_take_is_rejected(g, value):
    """(s8 and the typo are no bias dtype at all: they raise when the Gemm is built.)"""
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(g(), Schedule(block=(64, 64, 32)))
    assert info.value.field == "gemm.bias_dtype" and info.value.value == value
    assert "bias_dtype='f32'" in info.value.fix


def test_cli_bias_dtype(capsys):
    from ptxgen.cli.app import main

    for dt in ("f32", "f16"):
        assert main(["run", "--shape", "40x72x32", "--block", "32x64x32", "--warps", "1x2", "--out", "f16",
                     "--epilogue", "bias=col,act=relu", "--bias-dtype", dt, "--sim"]) == 0
        assert "PASS" in capsys.readouterr().out
    assert main(["emit", "--shape", "40x72x32", "--out", "f32", "--epilogue", "bias=col", "--bias-dtype", "f16"]) == 2
    assert "--bias-dtype f16" in capsys.readouterr().err
