"""s8/u8 GEMMs with a scaled epilogue: quantised (s8/u8) and dequantised (f32/f16/bf16) outputs.

D = round_sat(act(alpha * scale[i] * acc + beta * C + bias)), evaluated in f32 after an exact
cvt.rn.f32.s32 of the s32 accumulator. Every kernel runs on the simulator against the float64
reference; 8-bit results must be exact except one LSB right at a rounding tie (check.TIE_WINDOW),
and run twice with different output poisons (an unwritten byte cannot pass by luck).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import compare, quantize, random_epilogue_operands, random_operands, random_scale, reference
from ptxgen.simulate import run_simulation
from tests import harness

EDGES = [1, 7, 17, 63, 64, 100]


def padded_operands(g: Gemm, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B as strided views of zero-padded buffers with the gemm's lda/ldb (16-byte lines keep
    the fast cp.async copies; odd rows are test_int8_any_shape's)."""
    a, b = random_operands(Gemm(g.m, g.n, g.k, dtype=g.dtype), seed)
    lda, ldb, _ = g.leading_dims()

    def store(x: np.ndarray, layout: str, ld: int) -> np.ndarray:
        """x (logical) stored row- or column-major with `ld` elements between lines."""
        lines = x if layout == "row" else x.T
        buf = np.zeros((lines.shape[0], ld), x.dtype)
        buf[:, :lines.shape[1]] = lines
        view = buf[:, :lines.shape[1]]
        return view if layout == "row" else view.T

    return store(a, g.a_layout, lda), store(b, g.b_layout, ldb)


def run(g: Gemm, s: Schedule, seed: int = 0) -> ptxgen.Kernel:
    """The harness's check with A and B in padded buffers (C gets the gemm's ldc from the harness)."""
    a, b = padded_operands(g, seed)
    ops = harness.operands(g, seed)
    return harness.check(g, s, ops=harness.Operands(a, b, ops.c, ops.bias, ops.scale)).kernel


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_scaled_int8_gemms_match_float64(data):
    dtype = data.draw(st.sampled_from(["s8", "u8"]), label="dtype")
    out = data.draw(st.sampled_from(["s8", "s8", "u8", "f32", "f16", "bf16"]), label="out")
    m, n, k = (data.draw(st.sampled_from(EDGES), label=d) for d in "MNK")
    epi = Epilogue(alpha=data.draw(st.sampled_from([1.0, 0.5, -2.0]), label="alpha"),
                   beta=data.draw(st.sampled_from([0.0, 0.0, 0.5, -1.0]), label="beta"),
                   bias=data.draw(st.sampled_from([None, "row", "col"]), label="bias"),
                   activation=data.draw(st.sampled_from([None, "relu", "gelu", "silu"]), label="act"),
                   scale=data.draw(st.sampled_from([None, "col", "col", "row"]), label="scale"))
    a_layout = data.draw(st.sampled_from(["row", "row", "col"]), label="a_layout")
    b_layout = data.draw(st.sampled_from(["col", "col", "row"]), label="b_layout")
    pad16 = lambda w: -(-w // 16) * 16  # noqa: E731 - 16-byte lines: odd widths are stored padded
    ldc = data.draw(st.sampled_from([None, None, n + 5]), label="ldc")  # n + 5: unaligned 8-bit rows
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout,
             lda=pad16(k if a_layout == "row" else m), ldb=pad16(n if b_layout == "row" else k), ldc=ldc,
             epilogue=epi)
    s = Schedule(block=data.draw(st.sampled_from([(64, 64, 32), (32, 64, 64), (64, 128, 32), (16, 32, 32)]),
                                 label="block"),
                 warps=data.draw(st.sampled_from([(1, 1), (2, 2), (2, 1)]), label="warps"),
                 stages=data.draw(st.integers(1, 3), label="stages"),
                 smem_layout=data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                 epilogue_via_smem=data.draw(st.sampled_from([None, True, False]), label="via_smem"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    run(g, s, seed=data.draw(st.integers(0, 1000), label="seed"))


@pytest.mark.parametrize("via_smem", [True, False], ids=["staged", "registers"])
@pytest.mark.parametrize("epi", [Epilogue(scale="col"), Epilogue(alpha=0.03125), Epilogue(scale="row", alpha=2.0),
                                 Epilogue(scale="col", beta=0.5, bias="col", activation="relu")],
                         ids=["per-column", "per-tensor", "per-row", "full"])
def test_s8_output_per_tensor_and_per_vector_scales(epi, via_smem):
    k = run(Gemm(100, 128, 64, dtype="s8", out_dtype="s8", epilogue=epi),
            Schedule(block=(64, 64, 32), epilogue_via_smem=via_smem))
    ops = set(re.findall(r"(cvt\.rn\.f32\.s32|cvt\.rni\.sat\.s8\.f32|prmt\.b32|st\.global[.\w]*)",
                         k.ptx.split("Epilogue")[1]))
    stores = {"st.global.v4.b32"} if via_smem else {"st.global.b16"}  # 16 bytes, or packed column pairs
    assert ops == {"cvt.rn.f32.s32", "cvt.rni.sat.s8.f32", "prmt.b32"} | stores


def test_staged_and_register_epilogues_give_identical_bytes():
    g = Gemm(63, 100, 96, dtype="s8", out_dtype="s8", ldc=112,
             epilogue=Epilogue(alpha=0.5, scale="col", bias="row", beta=-1.0, activation="silu"))
    a, b = random_operands(g, 5)
    c0, bias = random_epilogue_operands(g, 6)
    scale = random_scale(g, 7)
    outs = []
    for via in (True, False):
        k = ptxgen.compile(g, Schedule(block=(64, 64, 32), epilogue_via_smem=via))
        store = np.zeros((g.m, 112), np.int8)
        store[:, :g.n] = c0
        outs.append(k.simulate(a, b, c=store[:, :g.n], bias=bias, scale=scale).copy())
        assert not store[:, g.n:].any(), "bytes past N are untouched"
    assert np.array_equal(outs[0], outs[1])
    _, result = harness.judge(g, outs[0], harness.Operands(a, b, c0, bias, scale), bound=False)
    assert result.ok, str(result)


@pytest.mark.parametrize("out,lo,hi", [("s8", -128, 127), ("u8", 0, 255)])
@pytest.mark.parametrize("via_smem", [True, False], ids=["staged", "registers"])
def test_rounding_is_to_nearest_even_and_saturates(out, lo, hi, via_smem):
    """acc[i, j] = v[i] exactly (A's first column holds v, B's first row ones); scale[j] turns it
    into exact ties, fractions and values far past both ends of the range."""
    v = np.array([-128, -101, -7, -5, -3, -1, 1, 3, 5, 7, 9, 63, 64, 101, 126, 127], np.int64)
    scale = np.array([0.5, 1.5, 0.25, 0.75, 10.0, 3.0, -0.5, 100.0], np.float32)
    g = Gemm(16, 8, 32, dtype="s8", out_dtype=out, epilogue=Epilogue(scale="col"))
    a = np.zeros((16, 32), np.int8)
    a[:, 0] = v
    b = np.zeros((8, 32), np.int8)
    b[:, 0] = 1
    k = ptxgen.compile(g, Schedule(block=(16, 32, 32), warps=(1, 1), epilogue_via_smem=via_smem))
    got = k.simulate(a, b.T, scale=scale).astype(np.int64)
    x = v[:, None] * scale.astype(np.float64)[None, :]  # exact in binary
    frac = x - np.floor(x)
    even = np.where(np.floor(x) % 2 == 0, np.floor(x), np.floor(x) + 1)
    nearest = np.where(frac < 0.5, np.floor(x), np.where(frac > 0.5, np.floor(x) + 1, even))
    want = np.clip(nearest, lo, hi).astype(np.int64)
    assert np.array_equal(got, want)
    assert (want == lo).any() and (want == hi).any(), "both rails are hit"
    assert got[list(v).index(5), 0] == 2 and got[list(v).index(7), 0] == 4, "2.5 -> 2, 3.5 -> 4"


def test_8_bit_comparison_allows_one_lsb_only_at_ties():
    ref = np.array([2.5 + 1e-6, -3.5, 0.4, 1000.0, -1000.0, 126.7])
    exact = np.array([3, -4, 0, 127, -128, 127], np.int8)
    assert compare(exact, ref, "s8").ok and compare(exact, ref, "s8").at_ties == 0
    tie = exact.copy()
    tie[:2] = [2, -3]  # the f32 value may land on the other side of a tie
    assert compare(tie, ref, "s8").ok and compare(tie, ref, "s8").at_ties == 2
    for i, wrong in [(2, 1), (5, 126), (0, 4), (3, 126)]:  # off by one away from ties, past a tie, unsaturated
        bad = exact.copy()
        bad[i] = wrong
        r = compare(bad, ref, "s8")
        assert not r.ok and r.mismatches == 1, (i, r)
    assert compare(np.array([0, 255], np.uint8), np.array([-7.0, 300.0]), "u8").ok


def test_dequantised_outputs_convert_the_accumulator_exactly():
    g = Gemm(64, 64, 256, dtype="s8", out_dtype="f32")
    a, b = random_operands(g, 3)
    out = ptxgen.compile(g, Schedule(block=(64, 64, 64))).simulate(a, b)
    assert np.array_equal(out, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


def test_random_scales_make_outputs_span_the_range():
    """The generators tests rely on: scaled s8 outputs cover the range and a share saturates."""
    g = Gemm(64, 128, 256, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="col"))
    a, b = random_operands(g)
    q = quantize(reference(a, b, g.epilogue, scale=random_scale(g)), "s8")
    assert q.min() == -128 and q.max() == 127
    assert 0.02 < np.mean(np.abs(q) >= 127) < 0.4 and len(np.unique(q)) > 200


def test_scale_on_float_gemms_and_atomic_split_k():
    """The scale vector is one f32 multiply: float inputs take it too, and, being linear, so does
    atomic split-K (each partial sum is scaled before it is added)."""
    for s in (Schedule(block=(64, 64, 32)), Schedule(block=(64, 64, 32), split_k=2, split_k_mode="atomic"),
              Schedule(block=(64, 64, 32), split_k=2)):
        g = Gemm(100, 72, 128, dtype="bf16", epilogue=Epilogue(alpha=-0.5, scale="col"))
        a, b = random_operands(g)
        harness.check(ptxgen.compile(g, s), ops=harness.Operands(a, b, scale=random_scale(g)))


def test_alignment_of_c_no_longer_narrows_the_copies():
    g = Gemm(64, 7, 64, dtype="s8", out_dtype="s8")  # 7-byte C rows
    assert (g.alignment(), g.out_alignment()) == (16, 1)
    k = run(g, Schedule(block=(64, 64, 32)))
    assert "cp.async.cg.shared.global" in k.ptx and "st.global.b8" in k.ptx
    assert Gemm(64, 7, 64, dtype="f16", out_dtype="f16").alignment() == 16


def test_staged_8_bit_drain_is_conflict_free():
    g = Gemm(128, 128, 64, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="col", beta=0.5))
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64)))
    a, b = random_operands(g)
    c0, _ = random_epilogue_operands(g)
    c, res = run_simulation(k, a, b, c=c0.copy(), scale=random_scale(g))
    lines = k.ptx.splitlines()
    extra = sum(w - ideal for line, (w, ideal) in res.smem_wavefronts.items()
                if re.search(r"(ld|st)\.shared", lines[line - 1]))
    assert extra == 0
    assert "ld.global.v4.b32" in k.ptx, "C is read back 16 bytes at a time"


# -- what is rejected, and how to fix it -------------------------------------------------------------
@pytest.mark.parametrize("g,s,field,fix", [
    (Gemm(64, 64, 64, dtype="f16", out_dtype="s8"), None, "gemm.out_dtype", "use out_dtype 'f32'"),
    (Gemm(64, 64, 64, dtype="tf32", out_dtype="u8"), None, "gemm.out_dtype", "use out_dtype 'f32'"),
    (Gemm(64, 64, 64, dtype="s8", out_dtype="s32", epilogue=Epilogue(scale="col")), None, "gemm.epilogue",
     "use out_dtype='s8'"),
    (Gemm(64, 64, 64, dtype="u8", out_dtype="s32", epilogue=Epilogue(alpha=0.5)), None, "gemm.epilogue",
     "use out_dtype='s8'"),
    (lambda: Gemm(64, 64, 64, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="diag")), None, "epilogue.scale",
     "set epilogue.scale to one of them"),
    (Gemm(64, 64, 64, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="col")),
     Schedule(block=(64, 64, 32), split_k=2), "schedule.split_k", "use split_k=1"),
    (Gemm(64, 100, 64, dtype="s8", out_dtype="s8", align=16), None, "gemm.ldc", "or pad ldc to 112"),
    (Gemm(64, 64, 64, dtype="s8", out_dtype="s8"), Schedule(block=(64, 64, 32), instruction="wmma"),
     "schedule.instruction", "use instruction='m16n8k16'"),
    (Gemm(64, 64, 64, dtype="f16", epilogue=Epilogue(scale="col", bias="col")),
     Schedule(block=(64, 64, 32), split_k=2, split_k_mode="atomic"), "schedule.split_k_mode", "workspace"),
], ids=["f16-to-s8", "tf32-to-u8", "s32-scale", "s32-alpha", "bad-kind", "split-k", "ldc-align", "wmma",
        "atomic-bias"])
def test_rejected_combinations_say_how_to_fix_them(g, s, field, fix):
    with pytest.raises(ScheduleError) as info:  # a lambda: a bad value on its own raises when built
        ptxgen.verify(g() if callable(g) else g, s or Schedule(block=(64, 64, 32)))
    assert info.value.field == field and fix in info.value.fix, info.value


def test_scale_vectors_are_checked_like_bias():
    g = Gemm(64, 64, 64, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="row"))
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="pass scale=, a vector of length 64"):
        k.simulate(a, b)
    with pytest.raises(ValueError, match="scale must be a 1-D array of length 64"):
        k.simulate(a, b, scale=np.ones((64, 1), np.float32))
    with pytest.raises((ValueError, TypeError), match="scale"):
        k.simulate(a, b, scale=np.ones(64, np.float16))  # f32 only
    plain = ptxgen.compile(Gemm(64, 64, 64, dtype="s8", out_dtype="s8"), Schedule(block=(64, 64, 32)))
    with pytest.raises(ValueError, match="has no scale"):
        plain.simulate(a, b, scale=np.ones(64, np.float32))


def test_kernel_parameters_and_header_name_the_scale():
    g = Gemm(64, 64, 64, dtype="s8", out_dtype="s8", epilogue=Epilogue(alpha=0.5, bias="col", scale="col"))
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32), split_k=1))
    params = [p.name for p in k.function.params]
    assert params[-2:] == ["bias", "scale"]
    assert "scale[n] * 0.5 * acc + bias[n] in f32, rounded to s8 (nearest even, saturated)" in k.ptx
    assert "bias (.u64, f32); scale (.u64, f32)" in k.ptx
    assert g.bias_dtype == "f32" and Gemm(1, 1, 1, out_dtype="bf16").bias_dtype == "f32"


ASSEMBLED = [
    (Gemm(512, 512, 256, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="col")), Schedule(block=(128, 128, 64))),
    (Gemm(512, 512, 256, dtype="u8", out_dtype="u8", epilogue=Epilogue(alpha=0.5, scale="row", beta=1.0, bias="col",
                                                                     activation="gelu")),
     Schedule(block=(256, 128, 64), warps=(4, 2), epilogue_via_smem=False)),
    (Gemm(500, 100, 200, dtype="s8", out_dtype="s8", ldc=100, epilogue=Epilogue(scale="col", beta=0.5)),
     Schedule(block=(128, 64, 128), warps=(2, 2), stages=4)),  # edge tiles, 4-byte C rows
    (Gemm(512, 512, 256, dtype="s8", out_dtype="bf16", epilogue=Epilogue(scale="col", activation="silu")),
     Schedule(block=(128, 256, 64), warps=(2, 4))),
]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("g,s", ASSEMBLED, ids=["s8-staged", "u8-registers-full", "s8-edges", "s8-to-bf16"])
def test_quantised_kernels_assemble_without_spills(g, s, arch):
    r = ptxgen.compile(g, s, arch).resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0, str(r)
    assert 0 < r.registers <= 255
