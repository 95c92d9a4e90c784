"""The sm_90a GEMM (ptxgen/emit/sm90) through the CUDA driver API: `k(a, b)` encodes A's and B's
CUtensorMaps with cuTensorMapEncodeTiled (ptxgen/runtime/launch.py: sm90_tensor_maps), passes
them by value and launches; checked against float64 numpy. On a CPU it runs through the
simulator-backed stand-in driver, whose cuTensorMapEncodeTiled rules are the driver's."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.check import random_operands, tolerance
from gpu_helpers import record, rel_fro, require_gpu

require_gpu()

from ptxgen.runtime.driver import context  # noqa: E402


@pytest.fixture(autouse=True)
def _needs_sm90():
    if context().arch != "sm_90":
        pytest.skip(f"the wgmma kernels are sm_90a; this device is {context().arch}")


@pytest.mark.parametrize("shape, block, stages, out, layouts", [((100, 72, 200), (64, 64, 64), 3, "f32", "tn"),
                                                                ((130, 136, 72), (128, 128, 64), 2, "bf16", "tn"),
                                                                ((104, 72, 200), (64, 64, 64), 2, "f32", "nt")])
def test_sm90_gemm_through_the_driver(shape, block, stages, out, layouts):
    dtype = "bf16" if out == "bf16" else "f16"
    major = {"t": "row", "n": "col"}
    g = Gemm(*shape, dtype=dtype, out_dtype=out, a_layout=major[layouts[0]], b_layout=major[layouts[1]])
    s = Schedule(block=block, instruction="wgmma", stages=stages, warp_specialized=False, persistent=False,
                 consumers=1)
    k = ptxgen.compile(g, s, arch="sm_90a")
    a, b = random_operands(g, 3)
    c = np.full((g.m, g.n), np.nan, dtype=np.float32 if out == "f32" else np.asarray(a).dtype)
    k(a, b, c=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = rel_fro(c.astype(np.float64), ref)
    record("sm90_gemm::driver", shape=shape, block=block, err=err)
    assert not np.isnan(c.astype(np.float32)).any() and err < tolerance(g)


def test_sm90_fused_epilogue_through_the_driver():
    from ptxgen import Epilogue
    from ptxgen.check import random_epilogue_operands, random_scale, reference

    epi = Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row", activation="relu")
    g = Gemm(90, 70, 136, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col", epilogue=epi)
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                 consumers=1)
    k = ptxgen.compile(g, s, arch="sm_90a")
    a, b = random_operands(g, 4)
    c_in, bias = random_epilogue_operands(g)
    scale = random_scale(g)
    c = c_in.copy()
    k(a, b, c=c, bias=bias, scale=scale)
    ref = reference(a, b, epi, c_in, bias, scale)
    err = rel_fro(c.astype(np.float64), ref)
    record("sm90_gemm::driver_epilogue", err=err)
    assert err < tolerance(g)


@pytest.mark.parametrize("shape, block, sms", [((300, 200, 200), (128, 128, 64), None),   # the defaults
                                               ((300, 200, 136), (64, 64, 64), 3)])       # 20 tiles, 3 CTAs
def test_warp_specialized_persistent_gemm_through_the_driver(shape, block, sms):
    """The default sm_90a kernel (producer warpgroup + consumers, persistent grid): launched with
    min(tiles, the device's SM count) CTAs, or `sms`, each walking its tiles."""
    g = Gemm(*shape, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=block, instruction="wgmma", stages=4, sms=sms), arch="sm_90a")
    tiles = -(-g.m // block[0]) * -(-g.n // block[1])
    assert k.launch_grid(context().sm_count) == (min(tiles, sms or context().sm_count), 1, 1)
    a, b = random_operands(g, 5)
    c = np.full((g.m, g.n), np.nan, dtype=np.float32)
    k(a, b, c=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = rel_fro(c, ref)
    record("sm90_gemm::driver_ws_persistent", shape=shape, block=block, err=err)
    assert not np.isnan(c).any() and err < tolerance(g)


@pytest.mark.parametrize("shape, layouts, cluster", [((300, 200, 136), "tn", (2, 1)),    # odd m-tile count
                                                     ((136, 264, 104), "nt", (1, 2))])
def test_cluster_multicast_gemm_launches_through_cuLaunchKernelEx(shape, layouts, cluster, monkeypatch):
    """A cluster kernel (emit/sm90/cluster.py) goes through cuLaunchKernelEx with the cluster-
    dimension attribute (the same (CM*CN, 1, 1) its .reqnctapercluster states), never cuLaunchKernel."""
    from ptxgen.runtime import launch as launch_mod

    calls: list[str] = []
    real = launch_mod.drv._call

    def spy(name, *args):
        calls.append(name)
        return real(name, *args)

    monkeypatch.setattr(launch_mod.drv, "_call", spy)
    major = {"t": "row", "n": "col"}
    g = Gemm(*shape, dtype="f16", out_dtype="f32", a_layout=major[layouts[0]], b_layout=major[layouts[1]])
    k = ptxgen.compile(g, Schedule(block=(64, 64, 64), instruction="wgmma", stages=3, consumers=1, sms=2,
                                   cluster=cluster), arch="sm_90a")
    assert k.cluster_dims == (2, 1, 1) and ".reqnctapercluster 2, 1, 1" in k.ptx
    a, b = random_operands(g, 6)
    c = np.full((g.m, g.n), np.nan, dtype=np.float32)
    k(a, b, c=c)
    assert "cuLaunchKernelEx" in calls and "cuLaunchKernel" not in calls
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = rel_fro(c, ref)
    record("sm90_gemm::driver_cluster", shape=shape, cluster=cluster, err=err)
    assert not np.isnan(c).any() and err < tolerance(g)
