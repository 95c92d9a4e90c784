"""tf32 (m16n8k8, inputs rounded with cvt.rna) and s8/u8 (m16n8k32) GEMMs: -> s32 (exact), or through
the f32 epilogue -> s8/u8 (quantised) or f32/f16/bf16 (dequantised); tests/targets/sm80/test_int8_scale.py
covers the scaled rows in depth."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from tests import harness


def run(g: Gemm, s: Schedule, seed: int = 0):
    """The harness's check (8-bit outputs once per poison); (kernel, C, float64 reference)."""
    checked = harness.check(g, s, seed=seed)
    return checked.kernel, checked.out, checked.ref


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_tf32_and_int8_match_numpy(data):
    dtype = data.draw(st.sampled_from(["tf32", "s8", "u8"]), label="dtype")
    bk = data.draw(st.sampled_from([32, 64]), label="BK")
    out = "f32" if dtype == "tf32" else data.draw(st.sampled_from(["s32", "s8", "u8", "f32", "bf16"]), label="out")
    epi = None if out == "s32" else Epilogue(alpha=0.5, bias="col", activation="relu",
                                             scale=data.draw(st.sampled_from([None, "col", "row"]), label="scale"))
    g = Gemm(data.draw(st.sampled_from([1, 17, 64, 100]), label="M"), data.draw(st.sampled_from([8, 63, 64]), label="N"),
             data.draw(st.sampled_from([4, 16, 64, 100]), label="K"), dtype=dtype, out_dtype=out, epilogue=epi,
             a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"))
    s = Schedule(block=(64, 64, bk), warps=data.draw(st.sampled_from([(1, 1), (2, 2)]), label="warps"),
                 stages=data.draw(st.integers(1, 3), label="stages"),
                 smem_layout=data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                 epilogue_via_smem=data.draw(st.sampled_from([None, False]), label="via_smem"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    run(g, s)


def test_int8_is_exact_and_wraps_nothing():
    k, c, ref = run(Gemm(128, 128, 256, dtype="s8", out_dtype="s32"), Schedule(block=(128, 128, 64)))
    assert c.dtype == np.int32 and np.array_equal(c, ref.astype(np.int64))
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in k.ptx


def test_tf32_rounds_inputs_ties_away():
    k, _, _ = run(Gemm(64, 64, 64, dtype="tf32"), Schedule(block=(64, 64, 32)))
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in k.ptx
    # per k-tile: 4 k-steps x (2 A x4-ldmatrix + 2 B x4-ldmatrix) x 4 registers, each rounded once,
    # plus the prologue's k-step 0 (the loop carries each next k-tile's first fragments)
    assert k.ptx.count("cvt.rna.tf32.f32") == (4 + 1) * (2 * 4 + 2 * 4)


@pytest.mark.parametrize("g,field", [
    (Gemm(64, 64, 64, dtype="f16", out_dtype="s8"), "gemm.out_dtype"),
    (Gemm(64, 64, 64, dtype="tf32", out_dtype="f16"), "gemm.out_dtype"),
    (Gemm(64, 64, 64, dtype="f16", out_dtype="s32"), "gemm.out_dtype"),
    (Gemm(64, 64, 64, dtype="s8", out_dtype="s32", epilogue=Epilogue(activation="relu")), "gemm.epilogue"),
])
def test_dtype_table_rules(g, field):
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(g, Schedule(block=(64, 64, 64)))
    assert info.value.field == field


@pytest.mark.parametrize("dtype", ["tf32", "s8", "u8"])
@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
def test_every_layout_is_lowered_for_tf32_and_int8(dtype, layout):
    from ptxgen.cli.app import LAYOUT_LETTERS
    a_layout, b_layout = LAYOUT_LETTERS[layout]
    g = Gemm(64, 64, 64, dtype=dtype, out_dtype="f32" if dtype == "tf32" else "s32", a_layout=a_layout,
             b_layout=b_layout)
    ptxgen.verify(g, Schedule(block=(64, 64, 64)))  # ldmatrix .trans limits no longer reject them


@pytest.mark.parametrize("g", [
    Gemm(127, 127, 7, dtype="tf32", align=2),  # 2-byte units would split tf32 elements
    Gemm(64, 64, 64, dtype="f16", align=1),  # 1-byte units would split f16 elements
], ids=["tf32-align2", "f16-align1"])
def test_copies_never_split_elements(g):
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(g, Schedule(block=(64, 64, 64)))
    assert info.value.field in ("gemm.lda", "gemm.align") and "pad the leading dimensions" in str(info.value)


def test_narrowest_legal_copies_for_int8_and_tf32():
    run(Gemm(64, 64, 12, dtype="s8", out_dtype="s32"), Schedule(block=(64, 64, 64)))  # 4-byte cp.async
    run(Gemm(64, 64, 7, dtype="s8", out_dtype="s32"), Schedule(block=(64, 64, 64)))  # 1-byte ld.global.u8
    run(Gemm(64, 64, 6, dtype="s8", out_dtype="s32"), Schedule(block=(64, 64, 64)))  # 2-byte ld.global.b16
    run(Gemm(50, 60, 7, dtype="tf32"), Schedule(block=(64, 64, 32)))  # 4-byte cp.async, K edge
