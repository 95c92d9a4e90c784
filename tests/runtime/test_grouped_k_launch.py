"""A k-contiguous grouped kernel (schedule/grouping.py) launched through the driver path
(`k(a, b, offs=...)`, runtime/launch.py and runtime/grouped.py's operand checks) on the
simulator-backed stand-in libcuda: C (G, M, N) from A (M, K_total) column-major and B (K_total, N)."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen.check import check_kernel, random_epilogue_operands, random_operands


def test_k_contiguous_launch_through_the_driver(standin):
    g = ptxgen.Gemm(40, 24, 72, groups=3, grouping="k-contiguous", a_layout="col", b_layout="row",
                    dtype="bf16", out_dtype="f32", epilogue=ptxgen.Epilogue(beta=0.5, bias="col"))
    k = ptxgen.compile(g, ptxgen.Schedule(block=(32, 32, 32)), arch="sm_90")
    a, b = random_operands(g)
    c, bias = random_epilogue_operands(g)
    before = standin.launches
    result = check_kernel(k, a, b, c, bias, run=k, offs=np.array([0, 30, 61], np.int32))
    assert result.ok, str(result)
    assert standin.launches > before
    offs = np.array([0, 30, 61], np.int32)
    with pytest.raises(ValueError, match=r"C of .* must be a 3-D array of shape \(3, 40, 24\)"):
        k(a, b, c=np.zeros((40, 24), np.float32), bias=bias, offs=offs)
    with pytest.raises(ValueError, match="built only for a column-major A"):
        k(np.ascontiguousarray(a), b, c=c.copy(), bias=bias, offs=offs)
