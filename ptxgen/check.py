"""Correctness checking shared by the tests, the CLI and the benchmarks.

Inputs are random and never zero (a zero would hide a dropped element), the output is poisoned
before a run, and results are compared with a float64 numpy reference at a per-dtype tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .schedule.problem import Epilogue, Gemm, numpy_dtype

#: Relative Frobenius error allowed per output dtype: f32 accumulation error, plus the
#: output's own rounding (f16 keeps 11 significant bits, bf16 8).
TOLERANCE = {"f32": 1e-3, "f16": 2e-3, "bf16": 1e-2, "s32": 0.0}
#: tf32 keeps 10 mantissa bits of each f32 input (cvt.rna), so products err by about 2^-11.
TF32_TOLERANCE = 5e-3
#: f16 accumulation rounds the running sum to 11 bits after every mma (K/16 roundings).
F16_ACC_TOLERANCE = 1e-2
#: GELU and SiLU use ex2.approx.f32 (about 2^-22 relative) and f32 arithmetic on the way.
APPROX_ACTIVATION_TOLERANCE = 2e-3


def tolerance(g: Gemm) -> float:
    """The relative Frobenius error a correct kernel for `g` stays under."""
    tol = TOLERANCE[g.out_dtype]
    if g.dtype == "tf32":
        tol = max(tol, TF32_TOLERANCE)
    if g.acc_dtype == "f16":
        tol = max(tol, F16_ACC_TOLERANCE)
    if g.epi.activation in ("gelu", "silu"):
        tol = max(tol, APPROX_ACTIVATION_TOLERANCE)
    return tol


#: Poison for outputs before a run: NaN for floats, INT32_MIN for s32 (our exact integer
#: results stay far from it), so an element the kernel never wrote is always detectable.
S32_POISON = np.iinfo(np.int32).min


def poisoned(shape: tuple[int, ...], out_dtype: str) -> np.ndarray:
    dt = numpy_dtype(out_dtype)
    return np.full(shape, S32_POISON if out_dtype == "s32" else np.nan, dtype=dt)


def unwritten(c: np.ndarray) -> np.ndarray:
    """Mask of poisoned (never written) elements."""
    c = np.asarray(c)
    return c == S32_POISON if c.dtype.kind in "iu" else np.isnan(c.astype(np.float64))


def random_operands(g: Gemm, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Logical A (M x K) and B (K x N) in the gemm's storage layouts, values in ±[0.5, 1.5).

    Batched problems get (batch, M, K) and (batch, K, N) arrays, each matrix in its layout.
    """
    rng = np.random.default_rng(seed)
    lead = (g.batch,) if g.batch > 1 else ()

    def draw(rows: int, cols: int, layout: str) -> np.ndarray:
        store = (rows, cols) if layout == "row" else (cols, rows)
        if g.dtype in ("s8", "u8"):  # non-zero integers; u8 stays positive
            mag = rng.integers(1, 12, size=lead + store)
            sign = rng.choice([-1, 1], size=lead + store) if g.dtype == "s8" else 1
            x = (mag * sign).astype(numpy_dtype(g.dtype))
            return x if layout == "row" else np.swapaxes(x, -1, -2)
        mag = rng.uniform(0.5, 1.5, size=lead + store)
        x = (mag * rng.choice([-1.0, 1.0], size=lead + store)).astype(numpy_dtype(g.dtype))
        return x if layout == "row" else np.swapaxes(x, -1, -2)

    return draw(g.m, g.k, g.a_layout), draw(g.k, g.n, g.b_layout)


def reference(a: np.ndarray, b: np.ndarray, epilogue: Epilogue | None = None, c: np.ndarray | None = None,
              bias: np.ndarray | None = None) -> np.ndarray:
    """float64 act(alpha * A @ B + beta * C + bias), the formulas Epilogue documents."""
    x = a.astype(np.float64) @ b.astype(np.float64)
    e = epilogue or Epilogue()
    x = e.alpha * x
    if e.beta != 0.0:
        x = x + e.beta * np.asarray(c, dtype=np.float64)
    if e.bias == "col":
        x = x + np.asarray(bias, dtype=np.float64)[None, :]
    elif e.bias == "row":
        x = x + np.asarray(bias, dtype=np.float64)[:, None]
    if e.activation == "relu":
        x = np.maximum(x, 0.0)
    elif e.activation == "gelu":
        x = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    elif e.activation == "silu":
        x = x / (1.0 + np.exp(-x))
    return x


def random_epilogue_operands(g: Gemm, seed: int = 1) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(C, bias) the epilogue reads: C when beta != 0, bias when requested; non-zero values."""
    rng = np.random.default_rng(seed)
    dt = numpy_dtype(g.out_dtype)
    lead = (g.batch,) if g.batch > 1 else ()
    c = rng.uniform(-1.5, 1.5, size=lead + (g.m, g.n)).astype(dt) if g.epi.beta != 0.0 else None
    n = {"col": g.n, "row": g.m, None: 0}[g.epi.bias]
    bias = (rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n)).astype(dt) if g.epi.bias else None
    return c, bias


@dataclass(frozen=True)
class Comparison:
    max_abs_error: float
    rel_frobenius: float
    tolerance: float
    unwritten: int  # NaN-poisoned elements the kernel never wrote

    @property
    def ok(self) -> bool:
        exact = self.tolerance == 0.0 and self.max_abs_error == 0.0  # integer results are exact
        return self.unwritten == 0 and (self.rel_frobenius < self.tolerance or exact)

    def __str__(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        extra = f", {self.unwritten} elements never written" if self.unwritten else ""
        return (f"{verdict}: max abs error {self.max_abs_error:.3e}, relative Frobenius error "
                f"{self.rel_frobenius:.3e} (tolerance {self.tolerance:.0e}){extra}")


def compare(c: np.ndarray, ref: np.ndarray, out_dtype: str | Gemm, rows=None, cols=None) -> Comparison:
    """Compare C with the reference (tolerance by out dtype, or by `tolerance(gemm)`)."""
    raw = np.asarray(c)
    missing = unwritten(raw)
    got = np.where(missing, np.nan, raw.astype(np.float64))
    if rows is not None:
        got, ref = got[np.ix_(rows, cols)], ref[np.ix_(rows, cols)]
    unwritten_count = int(np.isnan(got).sum())
    diff = np.nan_to_num(got - ref, nan=0.0)
    norm = float(np.linalg.norm(ref)) or 1.0
    return Comparison(float(np.abs(diff).max(initial=0.0)), float(np.linalg.norm(diff)) / norm,
                      tolerance(out_dtype) if isinstance(out_dtype, Gemm) else TOLERANCE[out_dtype],
                      unwritten_count)
