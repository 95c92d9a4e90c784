"""A block-scaled fp8 kernel launched through the driver path (`k(a, b, scale_a=, scale_b=)`) on the
simulator-backed stand-in libcuda: the scales are uploaded with their storage (row- or
column-major) and the strides passed after the pointers, as the entry declares them."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen.check import check_kernel, random_operands
from ptxgen.schedule.block_scale import random_block_scales


@pytest.mark.parametrize("dtype", ["f32", "ue8m0"])
def test_block_scaled_launch_through_the_driver(standin, dtype):
    g = ptxgen.Gemm(136, 128, 272, dtype="e4m3", out_dtype="bf16", block_scale=ptxgen.BlockScale(dtype=dtype))
    k = ptxgen.compile(g, ptxgen.Schedule(block=(64, 64, 128), instruction="wgmma", consumers=1, stages=2,
                                          sms=2), arch="sm_90a")
    a, b = random_operands(g)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k)
    res = check_kernel(k, a, b, run=k, scale_a=np.asfortranarray(sa), scale_b=sb)
    assert res.ok, res
    with pytest.raises(ValueError, match="pass scale_b="):
        k(a, b, scale_a=sa)
