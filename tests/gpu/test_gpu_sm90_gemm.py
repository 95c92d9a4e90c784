"""The sm_90a GEMM (ptxgen/targets/sm90) through the CUDA driver API: `k(a, b)` encodes A's and B's
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


@pytest.mark.parametrize("layouts", ["tn", "nt"])
def test_batched_sm90_gemm_through_the_driver(layouts):
    """3-D tensor maps (batch outermost, the operand's batch stride) encoded by cuTensorMapEncodeTiled,
    C moved by batch_stride_c; checked per batch."""
    major = {"t": "row", "n": "col"}
    g = Gemm(72, 80, 136, dtype="f16", out_dtype="f32", a_layout=major[layouts[0]], b_layout=major[layouts[1]],
             batch=3)
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                 consumers=1)
    k = ptxgen.compile(g, s, arch="sm_90a")
    a, b = random_operands(g, 5)
    c = np.full((g.batch, g.m, g.n), np.nan, dtype=np.float32)
    k(a, b, c=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    errs = [rel_fro(c[i].astype(np.float64), ref[i]) for i in range(g.batch)]
    record("sm90_gemm::driver_batched", layouts=layouts, err=max(errs))
    assert not np.isnan(c).any() and max(errs) < tolerance(g)


@pytest.mark.parametrize("layouts", ["tn", "nt"])
def test_batched_warp_specialized_persistent_gemm_through_the_driver(layouts):
    """The default schedule on a batch: 3-D maps encoded by cuTensorMapEncodeTiled, a persistent grid
    of 3 CTAs walking 3 batches x 4 tiles (CTAs cross batch boundaries), C moved by batch_stride_c."""
    major = {"t": "row", "n": "col"}
    g = Gemm(72, 80, 136, dtype="f16", out_dtype="f32", a_layout=major[layouts[0]], b_layout=major[layouts[1]],
             batch=3)
    k = ptxgen.compile(g, Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, sms=3), arch="sm_90a")
    assert k.schedule.warp_specialized and k.schedule.persistent
    assert k.launch_grid(context().sm_count) == (3, 1, 1)
    a, b = random_operands(g, 8)
    c = np.full((g.batch, g.m, g.n), np.nan, dtype=np.float32)
    k(a, b, c=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    errs = [rel_fro(c[i].astype(np.float64), ref[i]) for i in range(g.batch)]
    record("sm90_gemm::driver_ws_batched", layouts=layouts, err=max(errs))
    assert not np.isnan(c).any() and max(errs) < tolerance(g)


def test_split_k_sm90_gemm_through_the_driver():
    """Workspace split-K: the workspace and counters the launcher allocates reach the kernel after
    the tensor maps; the epilogue (beta, bias) runs once on the sum; a second launch reuses them."""
    from ptxgen import Epilogue
    from ptxgen.check import random_epilogue_operands, reference

    g = Gemm(100, 72, 264, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col", batch=2,
             epilogue=Epilogue(beta=1.0, bias="col"))
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                 consumers=1, split_k=3)
    k = ptxgen.compile(g, s, arch="sm_90a")
    a, b = random_operands(g, 6)
    c_in, bias = random_epilogue_operands(g, 7)
    ref = reference(a, b, g.epi, c_in, bias, None)
    for _ in range(2):
        c = c_in.copy()
        k(a, b, c=c, bias=bias)
        err = rel_fro(c.astype(np.float64), ref)
        assert err < tolerance(g)
    record("sm90_gemm::driver_split_k", err=err)


def test_stream_k_sm90_gemm_through_the_driver():
    """Stream-K over a persistent grid of 5 CTAs: the per-CTA workspace and flags reach the kernel
    after the tensor maps; two launches (the flags left at zero) give the right C."""
    from ptxgen import Epilogue
    from ptxgen.check import random_epilogue_operands, reference

    g = Gemm(200, 136, 192, dtype="bf16", out_dtype="f32", a_layout="row", b_layout="col",
             epilogue=Epilogue(beta=1.0, bias="row"))
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, consumers=1,
                 decomposition="stream-k", sms=5)
    k = ptxgen.compile(g, s, arch="sm_90a")
    a, b = random_operands(g, 8)
    c_in, bias = random_epilogue_operands(g, 9)
    ref = reference(a, b, g.epi, c_in, bias, None)
    for _ in range(2):
        c = c_in.copy()
        k(a, b, c=c, bias=bias)
        err = rel_fro(c.astype(np.float64), ref)
        assert err < tolerance(g)
    record("sm90_gemm::driver_stream_k", err=err)


def test_sm90_tma_store_epilogue_through_the_driver():
    """The TMA-store epilogue: tmapC encoded by cuTensorMapEncodeTiled for C's padded rows (ldc >
    N), C for beta read through it and the results stored through it, clipped at M and N."""
    from ptxgen import Epilogue
    from ptxgen.check import poisoned, random_epilogue_operands, reference

    epi = Epilogue(alpha=0.5, beta=1.0, bias="col", activation="silu")
    g = Gemm(150, 200, 136, dtype="bf16", out_dtype="bf16", ldc=216, a_layout="row", b_layout="col", epilogue=epi)
    s = Schedule(block=(128, 128, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False,
                 consumers=2, epilogue_via_smem=True)
    k = ptxgen.compile(g, s, arch="sm_90a")
    assert [(t.param, t.box, t.swizzle) for t in k.tensor_maps][-1] == ("tmapC", (64, 64), "128B")
    a, b = random_operands(g, 5)
    c_in, bias = random_epilogue_operands(g, 6)
    big = poisoned((g.m, 216), "bf16")
    c = big[:, :g.n]
    c[...] = c_in
    k(a, b, c=c, bias=bias)
    ref = reference(a, b, epi, c_in, bias, None)
    err = rel_fro(c.astype(np.float64), ref)
    record("sm90_gemm::driver_tma_store", err=err)
    assert err < tolerance(g) and np.isnan(big[:, g.n:].astype(np.float32)).all()


@pytest.mark.parametrize("dtype, out, block", [("tf32", "f32", (64, 64, 32)), ("e4m3", "bf16", (64, 64, 128)),
                                               ("e5m2", "f32", (64, 48, 64)), ("s8", "s32", (64, 64, 128)),
                                               ("u8", "u8", (64, 64, 64))])
def test_sm90_tf32_fp8_int8_through_the_driver(dtype, out, block):
    """The K-major tf32 / fp8 / int8 kernels (targets/sm90/operand_types.py): maps of 4- and 1-byte
    elements (FLOAT32 / UINT8 TMA types) encoded by cuTensorMapEncodeTiled, every output checked."""
    from ptxgen.check import check_kernel, random_epilogue_operands, random_scale
    from ptxgen import Epilogue

    epi = Epilogue(scale="col", bias="col") if out == "u8" else None
    g = Gemm(100, 72, 208, dtype=dtype, out_dtype=out, epilogue=epi)
    s = Schedule(block=block, instruction="wgmma", stages=2, warp_specialized=False, persistent=False, consumers=1)
    k = ptxgen.compile(g, s, arch="sm_90a")
    a, b = random_operands(g, 6)
    c_in, bias = random_epilogue_operands(g, 7)
    result = check_kernel(k, a, b, c_in, bias, random_scale(g, 8), run=k)
    record("sm90_gemm::driver_dtypes", dtype=dtype, out=out, result=str(result))
    assert result.ok, result


@pytest.mark.parametrize("shape, layouts, cluster", [((300, 200, 136), "tn", (2, 1)),    # odd m-tile count
                                                     ((136, 264, 104), "nt", (1, 2))])
def test_cluster_multicast_gemm_launches_through_cuLaunchKernelEx(shape, layouts, cluster, monkeypatch):
    """A cluster kernel (targets/sm90/cluster.py) goes through cuLaunchKernelEx with the cluster-
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
