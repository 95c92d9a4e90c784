"""s8/u8 GEMMs at any shape, in every layout: rows of any byte length (odd K, M or N, odd leading
dimensions and batch strides) narrow A/B's copies to 2- or 1-byte `ld.global` + `st.shared`.

Every kernel runs on the simulator (bounds- and alignment-checked) against the exact reference;
a 2-byte copy that straddles the end of a padded row loads its first byte only.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_epilogue_operands, random_operands, random_scale
from tests import harness

ODD = [1, 3, 5, 17, 31, 45, 63, 77, 100, 131]


def stored(x: np.ndarray, layout: str, ld: int, fill: int) -> np.ndarray:
    """Logical `x` stored row- or column-major with `ld` elements between lines; the padding
    holds `fill` (never read into a result) and the buffer ends right after the last element."""
    lines = x if layout == "row" else x.T
    flat = np.full(lines.shape[0] * ld, fill, x.dtype)
    buf = np.lib.stride_tricks.as_strided(flat, (lines.shape[0], lines.shape[1]), (ld * x.itemsize, x.itemsize))
    buf[...] = lines
    end = (lines.shape[0] - 1) * ld + lines.shape[1]  # the view spans exactly to its last element
    view = np.lib.stride_tricks.as_strided(flat[:end], lines.shape, (ld * x.itemsize, x.itemsize))
    return view if layout == "row" else view.T


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_int8_gemms_at_any_shape_and_layout_are_exact(data):
    dtype = data.draw(st.sampled_from(["s8", "u8"]), label="dtype")
    out = data.draw(st.sampled_from(["s32", "s8", "f32"]), label="out")
    m, n, k = (data.draw(st.sampled_from(ODD), label=d) for d in "MNK")
    a_layout = data.draw(st.sampled_from(["row", "col"]), label="a_layout")
    b_layout = data.draw(st.sampled_from(["row", "col"]), label="b_layout")
    pad = data.draw(st.sampled_from([0, 0, 1, 2, 3]), label="ld padding")  # odd, 2-byte, 4-byte rows
    lda = (k if a_layout == "row" else m) + pad
    ldb = (n if b_layout == "row" else k) + pad
    epi = None
    if out != "s32":
        epi = Epilogue(alpha=data.draw(st.sampled_from([1.0, 0.5]), label="alpha"),
                       bias=data.draw(st.sampled_from([None, "col"]), label="bias"),
                       scale=data.draw(st.sampled_from([None, "row"]), label="scale"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, lda=lda, ldb=ldb,
             epilogue=epi)
    s = Schedule(block=data.draw(st.sampled_from([(32, 32, 32), (64, 64, 32), (32, 64, 64)]), label="block"),
                 warps=data.draw(st.sampled_from([(1, 1), (2, 2)]), label="warps"),
                 stages=data.draw(st.integers(1, 3), label="stages"),
                 smem_layout=data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError as e:
        assert e.field.startswith("schedule."), f"{g} rejected: {e}"  # the problem itself always fits
        assume(False)
    kern = ptxgen.compile(g, s)
    seed = data.draw(st.integers(0, 1000), label="seed")
    a, b = random_operands(Gemm(m, n, k, dtype=dtype), seed)
    fill = 0x5A  # padding bytes: any that reached a dot product would show
    a, b = stored(a, a_layout, lda, fill), stored(b, b_layout, ldb, fill)
    _, bias = random_epilogue_operands(g, seed + 1)
    harness.check(kern, ops=harness.Operands(a, b, None, bias, random_scale(g, seed + 2)))


@pytest.mark.parametrize("layout", ["tn", "nt", "nn", "tt"])
def test_the_issue_shape_runs_in_every_layout(layout):
    """`ptxgen run --shape 77x131x45 --dtype s8` was rejected: K=45-byte rows are 1-byte aligned."""
    a_layout, b_layout = ("row" if layout[0] == "t" else "col"), ("col" if layout[1] == "n" else "row")
    g = Gemm(77, 131, 45, dtype="s8", out_dtype="s32", a_layout=a_layout, b_layout=b_layout)
    kern = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    assert g.alignment() == 1 and "ld.global.u8" in kern.ptx and "st.shared.u8" in kern.ptx
    a, b = random_operands(g, 3)
    harness.check(kern, ops=harness.Operands(a, b))


def test_a_2_byte_copy_straddling_the_edge_loads_one_byte():
    """K=45 in 46-byte rows (2-byte aligned): the unit holding k=44 and the padding byte k=45 is
    loaded as one byte; the last row's unit would otherwise read past the buffer's end."""
    g = Gemm(37, 40, 45, dtype="s8", out_dtype="s32", lda=46, ldb=46)
    kern = ptxgen.compile(g, Schedule(block=(32, 32, 32), warps=(1, 1)))
    assert g.alignment() == 2 and "ld.global.b16" in kern.ptx and "ld.global.u8" in kern.ptx
    a, b = random_operands(g, 4)
    harness.check(kern, ops=harness.Operands(stored(a, "row", 46, 0x7F), stored(b.T, "row", 46, 0x7F).T))


def test_batched_int8_with_odd_batch_strides():
    g = Gemm(33, 19, 45, dtype="u8", out_dtype="s8", a_layout="col", batch=3,
             epilogue=Epilogue(alpha=0.25, scale="col"))
    kern = ptxgen.compile(g, Schedule(block=(32, 32, 32), warps=(1, 1), stages=2))
    a_big, b = random_operands(Gemm(33, 45, 45, dtype="u8", a_layout="col", batch=3), 5)
    a = a_big[:, :, :45]
    b_big = random_operands(Gemm(46, 19, 45, dtype="u8", batch=3), 6)[1]
    b = b_big[:, :45, :]
    assert (a.strides[0] // a.itemsize) % 2 == 1 and (b.strides[0] // b.itemsize) % 2 == 1, "odd batch strides"
    scale = random_scale(g, 7)
    harness.check(kern, ops=harness.Operands(a, b, scale=scale), bound=False)


def test_stated_alignment_of_one_byte():
    """align=1 is a valid promise for 8-bit operands, and the fix the batch-stride check names."""
    with pytest.raises(ScheduleError, match="need 2-byte aligned"):
        ptxgen.verify(Gemm(64, 64, 64, dtype="f16", align=1), Schedule(block=(64, 64, 32)))
    flat = random_operands(Gemm(1, 1, 2 * 513, dtype="s8"), 8)[0].reshape(-1)
    a = np.lib.stride_tricks.as_strided(flat, (2, 16, 32), (513, 32, 1))  # dense rows, odd batch stride
    s = Schedule(block=(16, 32, 32), warps=(1, 1))
    dense = ptxgen.compile(Gemm(16, 16, 32, dtype="s8", out_dtype="s32", batch=2), s)
    b = random_operands(dense.gemm, 9)[1]
    with pytest.raises(ValueError, match=r"compile with Gemm\(align=...\)"):
        dense.simulate(a, b)
    g = Gemm(16, 16, 32, dtype="s8", out_dtype="s32", batch=2, align=1)
    harness.check(ptxgen.compile(g, s), ops=harness.Operands(a, b), bound=False)


def test_the_issue_command_runs(capsys):
    from ptxgen.cli.app import main

    # the old CLI default block, which the copy count below is for (no flags: the cost model chooses)
    assert main(["run", "--shape", "77x131x45", "--dtype", "s8", "--sim", "--block", "128x128x32"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "32 x 1 B per thread per k-tile (align 1: 16x the copy instructions" in out
