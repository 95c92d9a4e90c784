"""Grouped GEMMs through the runtime (`k(a, b, offs=...)` / `k(a, b, masked_m=...)`): on a GPU when
one is present, else through the simulator-backed stand-in driver; compared group by group with
the float64 reference, rows outside every group required untouched."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import device_compile_arch, record, require_gpu

require_gpu()

import ptxgen  # noqa: E402
from ptxgen import Gemm, Schedule  # noqa: E402
from ptxgen.check import compare, poisoned, random_operands, reference, untouched_rows  # noqa: E402

ARCH = device_compile_arch()

CASES = {
    "contiguous-f16": (Gemm(200, 72, 80, groups=5, grouping="contiguous", b_layout="col"),
                       {"offs": np.array([0, 61, 61, 130, 190], np.int32)}),
    "masked-bf16": (Gemm(96, 64, 72, dtype="bf16", out_dtype="bf16", b_layout="row", groups=4, grouping="masked"),
                    {"masked_m": np.array([96, 0, 17, 65], np.int32)}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_grouped_numpy_operands(case):
    g, counts = CASES[case]
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32), stages=3), arch=ARCH)
    a, b = random_operands(g, 5)
    lead = (g.groups,) if g.grouping == "masked" else ()
    c = poisoned(lead + (g.m, g.n), g.out_dtype)
    k(a, b, c=c, **counts)
    result = compare(c, reference(a, b, **counts), g, untouched=untouched_rows(g, **counts))
    if not result.ok:
        record(f"grouped::{case}", gemm=str(g), result=str(result))
    assert result.ok, f"{case}: {result}"


def test_grouped_launch_refuses_a_missing_offs():
    g, _ = CASES["contiguous-f16"]
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)), arch=ARCH)
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="needs offs="):
        k(a, b)
