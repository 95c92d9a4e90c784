"""Fused epilogues D = act(alpha*scale*acc + beta*C + bias) and f16 accumulation, on the simulator."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_epilogue_operands, random_operands
from tests import harness

SIZES = [1, 16, 17, 63, 64, 100, 129]


def run(g: Gemm, s: Schedule, seed: int = 0) -> None:
    """The harness's check (8-bit outputs over both poisons), per element within compare's RMS bound."""
    harness.check(g, s, seed=seed, bound=False)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_epilogues_match_numpy(data):
    epi = Epilogue(alpha=data.draw(st.sampled_from([1.0, 0.5, -2.0]), label="alpha"),
                   beta=data.draw(st.sampled_from([0.0, 1.0, -0.75]), label="beta"),
                   bias=data.draw(st.sampled_from([None, "row", "col"]), label="bias"),
                   activation=data.draw(st.sampled_from([None, "relu", "gelu", "silu"]), label="act"),
                   scale=data.draw(st.sampled_from([None, None, "row", "col"]), label="scale"))
    dtype = data.draw(st.sampled_from(["f16", "bf16", "s8"]), label="dtype")
    g = Gemm(data.draw(st.sampled_from(SIZES), label="M"), data.draw(st.sampled_from(SIZES), label="N"),
             data.draw(st.sampled_from([16, 33, 64]), label="K"), dtype=dtype,
             out_dtype=data.draw(st.sampled_from(["f32", "f16", "bf16"] + (["s8", "u8"] if dtype == "s8" else [])),
                                 label="out"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"), epilogue=epi)
    s = Schedule(block=(64, 64, 32), warps=data.draw(st.sampled_from([(1, 1), (2, 2)]), label="warps"),
                 stages=data.draw(st.integers(1, 3), label="stages"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    run(g, s, seed=data.draw(st.integers(0, 1000), label="seed"))


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_each_activation(act):
    run(Gemm(64, 64, 32, epilogue=Epilogue(activation=act, bias="col")), Schedule(block=(64, 64, 32)))


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_activations_keep_relative_accuracy_for_large_negative_inputs(act):
    """Found by fuzzing: 0.5x(1 + tanh(.)) cancels in f32 for x << 0; x*sigmoid(z) does not."""
    g = Gemm(1, 1, 127, dtype="bf16", epilogue=Epilogue(alpha=-2.0, bias="row", activation=act), align=2,
             lda=130, ldb=130, ldc=4)
    s = Schedule(block=(32, 64, 64), warps=(2, 1), stages=5, frag_double_buffer=False)
    k = ptxgen.compile(g, s)
    for seed in range(6):
        ops = harness.operands(g, seed)
        big_a = np.zeros((1, 130), ops.a.dtype)
        big_a[:, :127] = ops.a
        big_b = np.zeros((1, 130), ops.b.dtype)
        big_b[:, :127] = ops.b.T
        c = np.full((1, 4), np.nan, np.float32)[:, :1]
        harness.check(k, ops=harness.Operands(big_a[:, :127], big_b[:, :127].T, ops.c, ops.bias), out=c,
                      bound=False)


@pytest.mark.parametrize("shape", [(128, 128, 64), (100, 72, 40), (1, 64, 129)])
def test_f16_accumulation(shape):
    g = Gemm(*shape, dtype="f16", out_dtype="f16", acc_dtype="f16")
    run(g, Schedule(block=(64, 64, 32), stages=3))
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32), epilogue_via_smem=False))
    assert "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16" in k.ptx
    if g.alignment() >= 4:  # register pair stores: the f16x2 accumulators are stored as they are
        assert k.peak_live["f32"] == 0


def test_f16_accumulation_halves_accumulator_registers():
    s = Schedule(block=(128, 128, 32), epilogue_via_smem=False)
    f32 = ptxgen.compile(Gemm(256, 256, 64, out_dtype="f16"), s)
    f16 = ptxgen.compile(Gemm(256, 256, 64, out_dtype="f16", acc_dtype="f16"), s)
    assert f32.peak_live["f32"] == 128 and f16.peak_live["f32"] == 0
    assert f16.resources.registers < f32.resources.registers


def test_in_place_update_with_beta_and_strided_c():
    g = Gemm(40, 48, 32, epilogue=Epilogue(alpha=2.0, beta=1.0), ldc=64)
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    a, b = random_operands(g)
    big = np.random.default_rng(3).uniform(-1, 1, (40, 64)).astype(np.float32)
    before = big.copy()
    c = big[:, :48]  # a strided view: leading dimension 64
    out = k.simulate(a, b, c=c)
    assert np.shares_memory(out, big)
    _, result = harness.judge(g, big[:, :48], harness.Operands(a, b, before[:, :48]), bound=False)
    assert result.ok, str(result)
    assert np.array_equal(big[:, 48:], before[:, 48:]), "columns past N are untouched"


@pytest.mark.parametrize("kwargs,match", [
    ({"epilogue": Epilogue(beta=1.0)}, "reads C"),
    ({"epilogue": Epilogue(bias="col")}, "pass bias="),
])
def test_missing_epilogue_operands_are_clear_errors(kwargs, match):
    g = Gemm(64, 64, 32, **kwargs)
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    a, b = random_operands(g)
    with pytest.raises(ValueError, match=match):
        k.simulate(a, b)


def test_wrong_bias_and_unexpected_bias_are_clear_errors():
    g = Gemm(64, 64, 32, epilogue=Epilogue(bias="row"))
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="bias"):
        k.simulate(a, b, bias=np.ones(63, np.float32))
    plain = ptxgen.compile(Gemm(64, 64, 32), Schedule(block=(64, 64, 32)))
    with pytest.raises(ValueError, match="has no bias"):
        plain.simulate(a, b, bias=np.ones(64, np.float32))


@pytest.mark.parametrize("gemm,field", [
    (lambda: Gemm(64, 64, 32, acc_dtype="f16"), "gemm.acc_dtype"),  # f16 acc needs f16 output
    (lambda: Gemm(64, 64, 32, dtype="bf16", out_dtype="f16", acc_dtype="f16"), "gemm.acc_dtype"),
    (lambda: Gemm(64, 64, 32, epilogue=Epilogue(activation="tanh")), "epilogue.activation"),  # raises when built
    (lambda: Gemm(64, 64, 32, epilogue=Epilogue(bias="diag")), "epilogue.bias"),  # raises when built
    (lambda: Gemm(64, 64, 32, epilogue=Epilogue(alpha=float("nan"))), "epilogue.alpha"),
])
def test_invalid_epilogues_are_schedule_errors(gemm, field):
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(gemm(), Schedule(block=(64, 64, 32)))
    assert info.value.field == field


@pytest.mark.parametrize("out", ["f32", "f16", "bf16"])
def test_staged_epilogue_is_conflict_free_with_16_byte_stores(out):
    from ptxgen.simulate import run_simulation

    g = Gemm(128, 128, 64, out_dtype=out, epilogue=Epilogue(bias="col", beta=0.5))
    staged = ptxgen.compile(g, Schedule(block=(128, 128, 32)))
    direct = ptxgen.compile(g, Schedule(block=(128, 128, 32), epilogue_via_smem=False))
    assert staged.smem_plan.offsets["C_stage"] == 0, "the staging tile reuses the A/B stage bytes"
    stores = [l for l in staged.ptx.split("Epilogue")[1].splitlines() if "st.global" in l]
    assert stores and all(".v4." in l for l in stores), "one 16-byte store per chunk"
    assert all(".v4." not in l for l in direct.ptx.splitlines() if "st.global" in l)
    for k in (staged, direct):
        harness.check(k, bound=False)
    a, b = random_operands(g)
    c0, bias = random_epilogue_operands(g)
    lines = staged.ptx.splitlines()
    extra = {op: 0 for op in ("st.shared", "ld.shared")}
    _, res = run_simulation(staged, a, b, c=c0.copy(), bias=bias)
    for line, (w, ideal) in res.smem_wavefronts.items():
        for op in extra:
            if op in lines[line - 1]:
                extra[op] += w - ideal
    assert extra == {"st.shared": 0, "ld.shared": 0}


def test_forced_staging_that_cannot_split_is_a_schedule_error():
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(Gemm(64, 40, 64), Schedule(block=(64, 40, 64), warps=(2, 1), epilogue_via_smem=True))
    assert info.value.field == "schedule.epilogue_via_smem"
    # the default picks the register epilogue instead, and the kernel is correct
    g = Gemm(64, 40, 64)
    k = ptxgen.compile(g, Schedule(block=(64, 40, 64), warps=(2, 1)))
    assert "C_stage" not in k.smem_plan.offsets
    harness.check(k, bound=False)
