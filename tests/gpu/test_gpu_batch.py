"""Batched GEMMs on hardware: numpy and device operands (ptxgen DeviceArray, torch, cupy),
strided and broadcast batches, split-K and epilogues, NaN-poisoned outputs, compared with the
float64 numpy reference at the per-dtype tolerance of ptxgen.check."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import device_compile_arch, record, require_gpu

require_gpu()

import ptxgen  # noqa: E402
from ptxgen import Epilogue, Gemm, Schedule  # noqa: E402
from ptxgen.check import (compare, poisoned, random_epilogue_operands, random_operands,  # noqa: E402
                          reference, unwritten)
from ptxgen.runtime import DeviceArray  # noqa: E402

ARCH = device_compile_arch()

CASES = {
    "edges-f16": (Gemm(192, 136, 96, batch=3, dtype="f16", out_dtype="f32", b_layout="col"),
                  Schedule(block=(128, 128, 32), warps=(2, 2), stages=3)),
    "bf16-epilogue-splitk": (Gemm(128, 128, 256, batch=4, dtype="bf16", out_dtype="bf16", a_layout="col",
                                  b_layout="row", epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col")),
                             Schedule(block=(64, 64, 32), stages=3, split_k=2)),
    "atomic-splitk": (Gemm(128, 192, 256, batch=2, dtype="f16", out_dtype="f32", b_layout="col"),
                      Schedule(block=(128, 64, 32), stages=3, split_k=2, split_k_mode="atomic")),
}


def _check(c, ref, g: Gemm, what: str) -> None:
    result = compare(np.asarray(c), ref, g)
    if not result.ok:
        record(f"batch::{what}", gemm=str(g), result=str(result))
    assert result.ok, f"{what}: {result}"


def _strided_c(g: Gemm, c0: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(store, C): a poisoned store with a padded ldc and a spare row between batches; C is the
    (batch, M, N) view of it, holding c0 when the epilogue reads C."""
    store = poisoned((g.batch, g.m + 1, g.n + 8), g.out_dtype)
    c = store[:, :g.m, :g.n]
    if c0 is not None:
        c[...] = c0
    return store, c


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_operands_into_strided_c(case):
    g, s = CASES[case]
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed=3)
    c0, bias = random_epilogue_operands(g, seed=4)
    store, c = _strided_c(g, c0)
    assert kern(a, b, c=c, bias=bias) is c
    _check(c, reference(a, b, g.epilogue, c0, bias), g, f"numpy::{case}")
    assert unwritten(store[:, g.m:]).all() and unwritten(store[:, :, g.n:]).all()  # gaps untouched


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_broadcast_b_and_fresh_c(case):
    g, s = CASES[case]
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed=5)
    c0, bias = random_epilogue_operands(g, seed=6)
    shared_b = np.broadcast_to(b[1:2], b.shape)  # one B for every batch: batch stride 0
    c = kern(a, shared_b, c=None if c0 is None else c0.copy(), bias=bias)
    assert c.shape == (g.batch, g.m, g.n)
    _check(c, reference(a, shared_b, g.epilogue, c0, bias), g, f"numpy_broadcast::{case}")


def test_ptxgen_device_arrays_with_broadcast_b():
    g, s = CASES["edges-f16"]
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed=7)
    da = DeviceArray.from_host(a)
    b_one = DeviceArray.from_host(np.ascontiguousarray(b[0].T))  # (N, K): a col-major K×N B
    db = DeviceArray(b.shape, b.dtype, buffer=b_one.buffer, strides=(0, 2, g.k * 2))
    dc = DeviceArray.from_host(poisoned((g.batch, g.m, g.n), g.out_dtype))
    assert kern(da, db, c=dc) is dc
    _check(dc.to_host(), reference(a, np.broadcast_to(b[:1], b.shape)), g, "device_array")
    fresh = kern(da, db)
    assert isinstance(fresh, DeviceArray) and fresh.shape == (g.batch, g.m, g.n)
    _check(fresh.to_host(), reference(a, np.broadcast_to(b[:1], b.shape)), g, "device_array_fresh")


def test_torch_batched_with_broadcast_b():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():  # a CPU build of torch has no device tensors
        pytest.skip("torch without CUDA (a CPU build): the torch device tests need a CUDA build and a GPU")
    g, s = CASES["edges-f16"]
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed=8)
    ta = torch.from_numpy(a).cuda()
    bt = torch.from_numpy(np.ascontiguousarray(np.swapaxes(b, 1, 2))).cuda()  # (B, N, K)
    tb = bt[2:3].transpose(1, 2).expand(g.batch, -1, -1)  # matrix 2 for every batch, stride 0
    store = torch.full((g.batch, g.m + 1, g.n + 8), float("nan"), dtype=torch.float32, device="cuda")
    tc = store[:, :g.m, :g.n]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        assert kern(ta, tb, c=tc) is tc  # on torch's current stream
        fresh = kern(ta, bt.transpose(1, 2))
    stream.synchronize()
    assert isinstance(fresh, torch.Tensor) and tuple(fresh.shape) == (g.batch, g.m, g.n)
    _check(tc.cpu().numpy(), reference(a, np.broadcast_to(b[2:3], b.shape)), g, "torch_broadcast")
    _check(fresh.cpu().numpy(), reference(a, b), g, "torch_fresh")
    assert torch.isnan(store[:, g.m:]).all() and torch.isnan(store[:, :, g.n:]).all()


def test_torch_bf16_batched_goes_through_dlpack():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():  # a CPU build of torch has no device tensors
        pytest.skip("torch without CUDA (a CPU build): the torch device tests need a CUDA build and a GPU")
    g, s = CASES["bf16-epilogue-splitk"]
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed=9)
    c0, bias = random_epilogue_operands(g, seed=10)

    def dev(x: np.ndarray):  # bf16 numpy -> torch bf16 on the GPU, keeping x's strides
        storage = torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).cuda()
        return storage.view(torch.bfloat16)

    ta = dev(np.swapaxes(a, 1, 2)).transpose(1, 2)  # col-major A
    tb, tc = dev(b), dev(c0)
    tbias = torch.from_numpy(np.ascontiguousarray(bias)).cuda()  # the bias is f32 (Gemm.bias_dtype)
    assert kern(ta, tb, c=tc, bias=tbias) is tc
    torch.cuda.synchronize()
    got = tc.float().cpu().numpy()
    _check(got, reference(a, b, g.epilogue, c0, bias), g, "torch_bf16")


def test_cupy_batched_with_broadcast_b():
    cupy = pytest.importorskip("cupy")
    g, s = CASES["atomic-splitk"]
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed=11)
    ca = cupy.asarray(a)
    bt = cupy.asarray(np.ascontiguousarray(np.swapaxes(b, 1, 2)))  # (B, N, K)
    cb = cupy.broadcast_to(cupy.swapaxes(bt[:1], 1, 2), b.shape)
    c = kern(ca, cb)
    assert isinstance(c, cupy.ndarray) and c.shape == (g.batch, g.m, g.n)
    _check(cupy.asnumpy(c), reference(a, np.broadcast_to(b[:1], b.shape)), g, "cupy_broadcast")
