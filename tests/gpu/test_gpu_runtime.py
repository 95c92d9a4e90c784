"""The runtime on real hardware: context, module loading and its fallbacks, shared-memory
opt-in, errors, device memory and the launch_ptx argument convention."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import device_compile_arch, record, require_gpu

require_gpu()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

import ptx_samples as S  # noqa: E402
from ptxgen.runtime import DeviceArray, DriverError, launch_ptx  # noqa: E402
from ptxgen.runtime.assemble import assemble  # noqa: E402
from ptxgen.runtime.driver import context  # noqa: E402
from ptxgen.runtime.launch import load_function  # noqa: E402


def test_context_describes_device():
    ctx = context()
    record("runtime::device", name=ctx.name, arch=ctx.arch, sms=ctx.sm_count,
           max_smem_optin=ctx.max_smem_optin)
    assert ctx.arch.startswith("sm_") and ctx.sm_count > 0 and ctx.max_smem_optin >= 48 * 1024


def test_launch_ptx_add_one_roundtrip():
    x = np.arange(100, dtype=np.float32)
    launch_ptx(S.add_one(), "add1", grid=1, block=128, args=[x, 100])
    np.testing.assert_array_equal(x, np.arange(100, dtype=np.float32) + 1)


def test_launch_ptx_device_array_stays_on_device():
    d = DeviceArray.from_host(np.zeros(64, np.float32))
    launch_ptx(S.add_one(), "add1", grid=1, block=64, args=[d, 64])
    launch_ptx(S.add_one(), "add1", grid=1, block=64, args=[d, 64])
    np.testing.assert_array_equal(d.to_host(), np.full(64, 2, np.float32))


def test_module_cached_and_missing_entry_is_driver_error():
    cubin = assemble(S.add_one(), context().arch, "add1").cubin
    f1 = load_function(cubin, "add1")
    f2 = load_function(cubin, "add1")
    assert f1 is f2
    with pytest.raises(DriverError, match="cuModuleGetFunction failed with CUDA_ERROR_NOT_FOUND"):
        load_function(cubin, "nope")


def test_bad_cubin_falls_back_to_ptx_jit():
    from ptxgen.runtime import driver

    driver._warned.clear()  # the fallback warns once per process
    with pytest.warns(RuntimeWarning, match="PTX JIT"):
        # not ELF (a truncated ELF header could make the driver read past the buffer): the
        # driver parses it as PTX text, rejects it, and the loader falls back to the JIT
        fn = load_function(b"this is not a cubin\0", "add1", ptx=S.add_one())
    assert fn.module.source == "ptx-jit"


def test_dynamic_smem_opt_in_above_48k():
    ptx = S.dyn_smem_touch()
    n = min(context().max_smem_optin, 200 * 1024)
    out = np.zeros(1, np.float32)
    launch_ptx(ptx, "touch", grid=1, block=1, args=[out, n], dynamic_smem=n)
    assert out[0] == np.float32(np.pi)
    with pytest.raises(ValueError, match="dynamic shared memory"):
        launch_ptx(ptx, "touch", grid=1, block=1, args=[out, n], dynamic_smem=context().max_smem_optin + 16)


def test_cuda_core_stream_accepted():
    core = pytest.importorskip("cuda.core")
    Device = getattr(core, "Device", None) or pytest.importorskip("cuda.core.experimental").Device
    dev = Device(context().ordinal)
    dev.set_current()
    s = dev.create_stream()
    from ptxgen.runtime.driver import resolve_stream

    assert resolve_stream(s) == int(s.handle)


def test_module_cache_is_bounded_and_unloads(monkeypatch):
    from ptxgen.runtime import modules

    monkeypatch.setattr(modules, "MODULE_CACHE_LIMIT", 2)
    ctx = context()
    ctx.modules.clear()  # earlier tests' modules stay loaded, unreferenced by the cache
    # distinct code, so distinct cubins: variant i adds 1, 2 or 3
    variants = [S.add_one().replace("0f3F800000", c) for c in ("0f3F800000", "0f40000000", "0f40400000")]
    fns = [load_function(assemble(p, ctx.arch, "add1").cubin, "add1") for p in variants]
    assert fns[0].module.unloaded and not fns[1].module.unloaded and not fns[2].module.unloaded
    assert len({id(m) for m in ctx.modules.values()}) == 2
    x = np.zeros(32, np.float32)  # the evicted module loads again when needed
    launch_ptx(variants[0], "add1", grid=1, block=32, args=[x, 32])
    np.testing.assert_array_equal(x, np.ones(32, np.float32))
    assert fns[1].module.unloaded  # least recently used went out


class _HostPosingAsDevice:
    """A CUDA-array-interface object whose pointer is host memory (a common binding mistake)."""

    def __init__(self, host: np.ndarray):
        self.host = host
        self.shape = host.shape
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "strides": None,
                                         "data": (host.ctypes.data, False), "version": 3}


def test_host_memory_passed_as_device_memory_is_refused():
    import ptxgen

    g = ptxgen.Gemm(64, 64, 32, dtype="f16", out_dtype="f32", b_layout="row")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(64, 64, 32), warps=(2, 2), stages=1),
                          arch=device_compile_arch())
    a = _HostPosingAsDevice(np.ones((64, 32), np.float16))
    b = DeviceArray.from_host(np.ones((32, 64), np.float16))
    with pytest.raises(ValueError, match="not CUDA device memory the driver knows"):
        kern(a, b)
