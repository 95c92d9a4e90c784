"""Checks every target's grouped kernel must pass (tests/targets/*/test_*grouped.py share them)."""
from __future__ import annotations

from typing import Callable

import numpy as np

import ptxgen
from ptxgen import Epilogue, Gemm
from ptxgen.check import Comparison, check_kernel, random_operands
from ptxgen.schedule.grouping import COUNTS_ARG


def counts_kw(g: Gemm, counts) -> dict:
    """The run-time group counts as the kernel takes them: `offs` (contiguous, k-contiguous) or
    `masked_m` (masked)."""
    counts = np.array(counts, np.int32)
    return {COUNTS_ARG[g.grouping]: counts}


def epilogue_outside_groups(grouping: str, shape: tuple[int, int, int], epilogue: Epilogue,
                            compile_for: Callable[[Gemm], ptxgen.Kernel], offs: tuple[int, int, int]) -> Comparison:
    """Three groups with a bias and beta (each group's C read under the same guard as the stores),
    contiguous at `offs` (cumulative row ends short of M) or masked with counts (offs[0], 0, M):
    the comparison, in which rows no group owns must keep C's previous values, not poison."""
    m, n, k = shape
    g = Gemm(m, n, k, groups=3, grouping=grouping, out_dtype="bf16", b_layout="row", epilogue=epilogue)
    kernel = compile_for(g)
    a, b = random_operands(g, 3)
    rng = np.random.default_rng(4)
    c_shape = (m, n) if grouping == "contiguous" else (3, m, n)
    c = rng.uniform(-1, 1, c_shape).astype(ptxgen.schedule.problem.numpy_dtype("bf16"))
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    counts = offs if grouping == "contiguous" else (offs[0], 0, m)
    return check_kernel(kernel, a, b, c, bias, run=kernel.simulate, **counts_kw(g, counts))
