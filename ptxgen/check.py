"""Correctness checking shared by the tests, the CLI and the benchmarks.

Inputs are random and never zero (a zero would hide a dropped element), the output is poisoned
before a run, and results are compared with a float64 numpy reference at a per-dtype tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .schedule.problem import Gemm, numpy_dtype

#: Relative Frobenius error allowed per output dtype: f32 accumulation error, plus the
#: output's own rounding (f16 keeps 11 significant bits, bf16 8).
TOLERANCE = {"f32": 1e-3, "f16": 2e-3, "bf16": 1e-2}


def random_operands(g: Gemm, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Logical A (M x K) and B (K x N) in the gemm's storage layouts, values in ±[0.5, 1.5)."""
    rng = np.random.default_rng(seed)

    def draw(rows: int, cols: int, layout: str) -> np.ndarray:
        mag = rng.uniform(0.5, 1.5, size=(rows, cols))
        x = (mag * rng.choice([-1.0, 1.0], size=(rows, cols))).astype(numpy_dtype(g.dtype))
        return x if layout == "row" else np.asfortranarray(x)

    return draw(g.m, g.k, g.a_layout), draw(g.k, g.n, g.b_layout)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


@dataclass(frozen=True)
class Comparison:
    max_abs_error: float
    rel_frobenius: float
    tolerance: float
    unwritten: int  # NaN-poisoned elements the kernel never wrote

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.rel_frobenius < self.tolerance

    def __str__(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        extra = f", {self.unwritten} elements never written" if self.unwritten else ""
        return (f"{verdict}: max abs error {self.max_abs_error:.3e}, relative Frobenius error "
                f"{self.rel_frobenius:.3e} (tolerance {self.tolerance:.0e}){extra}")


def compare(c: np.ndarray, ref: np.ndarray, out_dtype: str, rows=None, cols=None) -> Comparison:
    """Compare C with the reference, optionally only on the given row/column index arrays."""
    got = np.asarray(c).astype(np.float64)
    if rows is not None:
        got, ref = got[np.ix_(rows, cols)], ref[np.ix_(rows, cols)]
    unwritten = int(np.isnan(got).sum())
    diff = np.nan_to_num(got - ref, nan=0.0)
    norm = float(np.linalg.norm(ref)) or 1.0
    return Comparison(float(np.abs(diff).max(initial=0.0)), float(np.linalg.norm(diff)) / norm,
                      TOLERANCE[out_dtype], unwritten)
