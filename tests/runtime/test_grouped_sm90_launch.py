"""An sm_90a grouped kernel launched through the driver path (`k(a, b, offs=...)`,
`k(a, b, masked_m=..., scale_a=..., scale_b=...)`) on the simulator-backed stand-in libcuda: the
3-D tensor maps encoded with the group stride (one group: the matrix's span), masked C's group
stride after ldc, the scales' group strides after their strides and the counts last, as the entry
declares them (targets/sm90/grouped.py)."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen.check import check_kernel, random_operands
from ptxgen.schedule.block_scale import random_grouped_scales

S = ptxgen.Schedule(block=(64, 64, 64), instruction="wgmma", consumers=1, stages=2, sms=2)


@pytest.mark.parametrize("groups, b_layout, offs", [(3, "row", [20, 20, 90]), (1, "col", [57])])
def test_contiguous_launch_through_the_driver(standin, groups, b_layout, offs):
    g = ptxgen.Gemm(100, 72, 80, dtype="bf16", out_dtype="f32", b_layout=b_layout, groups=groups,
                    grouping="contiguous")
    k = ptxgen.compile(g, S, arch="sm_90a")
    a, b = random_operands(g)
    res = check_kernel(k, a, b, run=k, offs=np.array(offs, np.int32))
    assert res.ok, res


def test_masked_block_scaled_launch_through_the_driver(standin):
    g = ptxgen.Gemm(70, 64, 272, dtype="e4m3", out_dtype="bf16", groups=3, grouping="masked",
                    block_scale=ptxgen.BlockScale())
    k = ptxgen.compile(g, S.__class__(block=(64, 64, 128), instruction="wgmma", consumers=1, stages=2, sms=2),
                       arch="sm_90a")
    a, b = random_operands(g)
    sa, sb = random_grouped_scales(g.block_scale, g)
    res = check_kernel(k, a, b, run=k, masked_m=np.array([70, 0, 9], np.int32), scale_a=sa, scale_b=sb)
    assert res.ok, res
    with pytest.raises(ValueError, match=r"scale_b=, a f32 array of shape \(3, 3, 1\)"):
        k(a, b, masked_m=np.array([70, 0, 9], np.int32), scale_a=sa)
