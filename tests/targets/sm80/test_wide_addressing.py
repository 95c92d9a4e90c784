"""Global addresses past 2^32 bytes: leading dimensions whose rows are 4 GiB or more apart.

A 32-bit `ld * element_bytes` (or `row * ld`) wraps at 2^32 and silently aliases rows.
The operands here are strided views of lazily zeroed buffers: only the pages the kernel touches
become memory, and the simulator reads the caller's buffers in place, so each run is cheap.
Every run is on the simulator with its bounds checks on.
"""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.check import numpy_dtype, poisoned
from tests import harness

FOUR_GIB = 2**32
SMALL = Schedule(block=(16, 8, 32), warps=(1, 1), stages=1)


def strided(shape: tuple[int, int], strides_bytes: tuple[int, int], dtype: str,
            values: np.ndarray | None) -> np.ndarray:
    """A (rows, cols) view with the given byte strides over a zeroed buffer just long enough."""
    dt = numpy_dtype(dtype)
    span = ((shape[0] - 1) * strides_bytes[0] + (shape[1] - 1) * strides_bytes[1]) // dt.itemsize + 1
    view = np.lib.stride_tricks.as_strided(np.zeros(span, dt), shape, strides_bytes, writeable=True)
    if values is not None:
        view[...] = values
    return view


def nonzero(rng: np.random.Generator, shape: tuple[int, int], dtype: str) -> np.ndarray:
    """Never-zero values, different in every row (so aliased rows show), exact in `dtype`."""
    mag = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    return mag.astype(numpy_dtype(dtype)).astype(np.float64)


def check(k: ptxgen.Kernel, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> None:
    """The harness's check on these operands; `c`, if given, is the poisoned C to write."""
    harness.check(k, ops=harness.Operands(a, b), out=c)


def check_rows(g: Gemm, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Rows of C (written by a sampled CTA) against the same rows of A times B, element by element."""
    _, result = harness.judge(g, c, harness.Operands(a, b))
    assert result.ok, str(result)


@pytest.mark.parametrize("via_smem", [False, True])
def test_a_rows_four_gib_apart(via_smem):
    """The issue's repro: with lda * 2 = 2^32 row 1 of A read row 0."""
    rng = np.random.default_rng(1)
    g = Gemm(2, 8, 32)
    s = Schedule(block=(16, 8, 32), warps=(1, 1), stages=1, epilogue_via_smem=via_smem)
    a = strided((2, 32), (FOUR_GIB, 2), "f16", nonzero(rng, (2, 32), "f16"))
    b = np.ascontiguousarray(nonzero(rng, (8, 32), "f16").astype(np.float16)).T
    check(ptxgen.compile(g, s), a, b)


@pytest.mark.parametrize("via_smem", [False, True])
def test_c_rows_four_gib_apart(via_smem):
    """ldc * 4 = 2^32: row 1 of C stored over row 0, for both epilogues."""
    rng = np.random.default_rng(2)
    g = Gemm(2, 8, 32)
    s = Schedule(block=(16, 8, 32), warps=(1, 1), stages=1, epilogue_via_smem=via_smem)
    a = np.ascontiguousarray(nonzero(rng, (2, 32), "f16").astype(np.float16))
    b = np.ascontiguousarray(nonzero(rng, (8, 32), "f16").astype(np.float16)).T
    c = strided((2, 8), (FOUR_GIB, 4), "f32", poisoned((2, 8), "f32"))
    check(ptxgen.compile(g, s), a, b, c)


@pytest.mark.parametrize("dtype,a_layout,b_layout", [("f16", "row", "row"), ("tf32", "col", "col")])
def test_k_rows_four_gib_apart(dtype, a_layout, b_layout):
    """Operands stored with K along rows (B row-major, A column-major): k-row 1 is 4 GiB past
    k-row 0. K = 2 keeps each buffer at one 4 GiB span."""
    rng = np.random.default_rng(3)
    g = Gemm(2, 8, 2, dtype=dtype, a_layout=a_layout, b_layout=b_layout)
    eb = numpy_dtype(dtype).itemsize
    a_vals, b_vals = nonzero(rng, (2, 2), dtype), nonzero(rng, (2, 8), dtype)
    a = (strided((2, 2), (eb, FOUR_GIB), dtype, a_vals) if a_layout == "col"
         else np.ascontiguousarray(a_vals.astype(numpy_dtype(dtype))))
    b = (strided((2, 8), (FOUR_GIB, eb), dtype, b_vals) if b_layout == "row"
         else np.ascontiguousarray(b_vals.T.astype(numpy_dtype(dtype))).T)
    s = Schedule(block=(16, 8, 32 if dtype == "f16" else 16), warps=(1, 1), stages=1)
    check(ptxgen.compile(g, s), a, b)


def test_column_origin_past_four_gib():
    """A stored column-major (M contiguous) with M > 2^30 tf32 elements: the last CTA's first
    row sits 2^32 bytes into each column, which a 32-bit `bm0 * 4` wrapped to byte 0."""
    rng = np.random.default_rng(4)
    m = 2**30 + 16
    g = Gemm(m, 1, 1, dtype="tf32", a_layout="col", b_layout="col")
    s = Schedule(block=(16, 8, 16), warps=(1, 1), stages=1, raster="grouped")
    k = ptxgen.compile(g, s)
    a = strided((m, 1), (4, 4 * m), "tf32", None)
    last = slice(m - 16, m)
    a[last] = nonzero(rng, (16, 1), "tf32")
    a[:16] = nonzero(rng, (16, 1), "tf32")  # what a wrapped address would read
    b = np.array([[1.25]], dtype=np.float32)
    c = strided((m, 1), (4, 4), "f32", None)
    c[last] = np.nan
    pid = (m - 16) // 16  # grouped raster with one n-tile: CTA x = m-tile
    k.simulate(a, b, c=c, ctas=[(pid, 0, 0)])
    check_rows(g, c[last], a[last], b)


def test_edge_bytes_left_past_two_to_the_31():
    """A column-major tf32 A with an M edge: each copy's src-size is the bytes of M left, which a
    32-bit `(M - first) * 4` turned negative (clamped to 0: a zero A) 2^29 elements from the end."""
    rng = np.random.default_rng(5)
    m = 2**29 + 17
    g = Gemm(m, 1, 1, dtype="tf32", a_layout="col", b_layout="col")
    s = Schedule(block=(16, 8, 16), warps=(1, 1), stages=1, raster="grouped")
    a = strided((m, 1), (4, 4 * m), "tf32", None)
    a[:16] = nonzero(rng, (16, 1), "tf32")
    b = np.array([[1.25]], dtype=np.float32)
    c = strided((m, 1), (4, 4), "f32", None)
    c[:16] = np.nan
    ptxgen.compile(g, s).simulate(a, b, c=c, ctas=[(0, 0, 0)])
    check_rows(g, c[:16], a[:16], b)
