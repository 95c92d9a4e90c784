"""`ptxgen.runtime.rebind.Rebindable`: a launch checked once and repeated on operands at other
addresses (how ptxgen.torch launches on CUDA tensors). Each relaunch must compute from the new
addresses (the packed pointers, or the re-encoded sm_90a tensor maps, really change) and write
only the new C. Runs on a GPU, or on the simulator behind the stand-in driver."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import compare, poisoned, random_operands, reference
from gpu_helpers import device_compile_arch, require_gpu

require_gpu()

from ptxgen.runtime import DeviceArray  # noqa: E402
from ptxgen.runtime.rebind import Rebindable  # noqa: E402


def device(x: np.ndarray) -> DeviceArray:
    """A device copy keeping x's layout: a transposed (column-major) array stays column-major."""
    if x.flags.c_contiguous:
        return DeviceArray.from_host(x)
    store = DeviceArray.from_host(np.ascontiguousarray(x.T))
    return DeviceArray(x.shape, x.dtype, buffer=store.buffer, strides=(x.itemsize, x.shape[0] * x.itemsize))


def operands(g: Gemm, seed: int):
    a, b = random_operands(g, seed)
    bias = np.random.default_rng(seed).uniform(-1, 1, g.n).astype(np.float32)
    c = DeviceArray.from_host(poisoned((g.m, g.n), g.out_dtype))
    return (device(a), device(b), c, DeviceArray.from_host(bias)), (a, b, bias)


@pytest.mark.parametrize("hopper", [False, True])
def test_relaunch_on_new_addresses(hopper):
    arch = device_compile_arch()
    if hopper and arch != "sm_90":
        pytest.skip(f"the wgmma kernels are sm_90a; this device is {arch}")
    g = Gemm(64, 96, 64, dtype="f16", out_dtype="f32", b_layout="col", epilogue=Epilogue(bias="col"))
    s = (Schedule(block=(64, 32, 64), instruction="wgmma", stages=2, persistent=False) if hopper
         else Schedule(block=(32, 32, 32), warps=(2, 2), stages=2))
    k = ptxgen.compile(g, s, arch="sm_90a" if hopper else arch)
    first, _ = operands(g, 1)
    launch = Rebindable(k, *first)
    for seed in (2, 3):
        (a, b, c, bias), (ha, hb, hbias) = operands(g, seed)
        launch.launch(a.ptr, b.ptr, c.ptr, bias.ptr, 0, stream=0)
        got = c.to_host()
        result = compare(got, reference(ha, hb, g.epi, bias=hbias), g)
        assert result.ok, result
    assert np.isnan(first[2].to_host()).all()  # the first C was checked, never written


def test_checks_once_like_a_call():
    g = Gemm(64, 64, 64, dtype="f16", out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32), warps=(2, 2), stages=2), arch=device_compile_arch())
    (a, b, c, _), _ = operands(g, 4)
    with pytest.raises(ValueError, match="B must be stored column-major"):
        Rebindable(k, a, DeviceArray.from_host(np.ones((64, 64), np.float16)), c)
    with pytest.raises(TypeError, match="device arrays"):
        Rebindable(k, np.ones((64, 64), np.float16), np.ones((64, 64), np.float16).T, np.empty((64, 64), np.float32))
