"""sm_100a MXFP8 and NVFP4 kernels launched through the driver path (`k(a, b, scale_a=, scale_b=)`) on the
simulator-backed stand-in libcuda with its B200 model: the runtime lays the logical scales out in
the 128x4 block layout (runtime/scale_layout.py), uploads them and passes their tensor maps after A's
and B's, as the entry declares them."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import BlockScale
from ptxgen.check import check_kernel, random_operands
from ptxgen.schedule.block_scale import random_block_scales


@pytest.fixture
def b200(monkeypatch):
    """The stand-in's B200 model (set before `standin` starts the driver)."""
    monkeypatch.setenv("PTXGEN_SIM_DEVICE", "b200")


def test_mxfp8_launch_through_the_driver(b200, standin):
    g = ptxgen.Gemm(130, 72, 304, dtype="e4m3", out_dtype="bf16", a_layout="row", b_layout="col",
                    block_scale=BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0"))
    k = ptxgen.compile(g, ptxgen.Schedule(block=(128, 64, 128), instruction="tcgen05", stages=2, sms=2),
                       arch="sm_100a")
    a, b = random_operands(g, 3)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=4)
    res = check_kernel(k, a, b, run=k, scale_a=sa, scale_b=sb)
    assert res.ok, res
    with pytest.raises(ValueError, match="pass scale_b="):
        k(a, b, scale_a=sa)


def test_nvfp4_launch_through_the_driver(b200, standin):
    """e2m1 operands one value per byte, packed by the runtime; uint8 tensor maps over the packed rows;
    the NVFP4 kernel's .version 8.7 assembled for the B200 model."""
    g = ptxgen.Gemm(130, 72, 320, dtype="e2m1", out_dtype="f32", a_layout="row", b_layout="col",
                    block_scale=BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3"), epilogue=ptxgen.Epilogue(alpha=0.5))
    k = ptxgen.compile(g, ptxgen.Schedule(block=(128, 64, 128), instruction="tcgen05", stages=2, sms=2),
                       arch="sm_100a")
    a, b = random_operands(g, 5)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=6)
    res = check_kernel(k, a, b, run=k, scale_a=sa, scale_b=sb)
    assert res.ok, res
