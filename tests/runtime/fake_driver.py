"""A pure-Python stand-in for `cuda.bindings.driver`, so launch plumbing runs without a GPU.

"Device memory" is host memory (numpy buffers), so device pointers are real addresses and
copies are `ctypes.memmove`; every device range touched is bounds-checked against the fake
allocations. Kernels are Python functions registered by entry name with their parameter types.

The simulator-backed stand-in driver (ptxgen/runtime/simdriver, PTXGEN_DRIVER=sim) runs the runtime
through the real bindings with ptxgen's real kernels: tests/gpu, test_simdriver*.py,
test_runtime_launch_standin.py and test_runtime_tensormaps.py use it. This fake remains only where
a test needs what the stand-in cannot give:

- test_runtime_launch_fake.py: Python "kernels" that report exactly which pointers, leading
  dimensions, grid, block and shared memory reached them (48 layout cases in milliseconds), and
  deliberately broken kernels (writing nothing, or half of C) for the poisoning rules: the stand-in
  runs only PTX ptxgen assembled. The recorded call sequence (the producer's stream waited on
  before the launch, the opt-in made once, prepare_launch's run being only cuCtxSetCurrent +
  cuLaunchKernel, no synchronisation on the device path), which the stand-in does not record.
  Injected failures (`fail`: a refused cubin falling back to the PTX JIT, a driver error naming
  its call, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). Other device models inside one process (an sm_80
  device for re-assembly, Stream-K grids over three SM counts): the stand-in's model is fixed
  per process.
- test_runtime_launch_batched.py: the per-batch strides each launch received and that staging
  buffers are freed (`launches`, `allocs`), which the stand-in does not expose; its kernels are
  ptxgen's real PTX on the simulator.
- test_runtime_review.py: the split-K/Stream-K workspace cache keyed by device and context needs
  two devices and two contexts (the stand-in has one of each), and choosing ptxas or the JIT by
  cuDriverGetVersion needs the version to change within a test (the stand-in fixes it per
  process; test_simdriver.py runs a 12.4 driver in a subprocess for the JIT fallback itself).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from cuda.bindings import driver as real

S = real.CUresult.CUDA_SUCCESS


@dataclass
class Launch:
    name: str
    grid: tuple
    block: tuple
    smem: int
    stream: int
    args: list
    cooperative: bool = False


@dataclass
class FakeDriver:
    cc: tuple[int, int] = (9, 0)
    optin: int = 227 * 1024
    fail: dict = field(default_factory=dict)  # call name -> CUresult to return
    kernels: dict = field(default_factory=dict)  # entry -> (param dtypes, impl)
    launches: list = field(default_factory=list)
    calls: list = field(default_factory=list)
    allocs: dict = field(default_factory=dict)  # addr -> backing numpy buffer (size = len)
    func_attrs: dict = field(default_factory=dict)
    modules: dict = field(default_factory=dict)
    freed: int = 0
    driver_version: int = 13000
    ctas_per_sm: int = 1   # what cuOccupancyMaxActiveBlocksPerMultiprocessor answers

    CUresult = real.CUresult
    CUdevice_attribute = real.CUdevice_attribute
    CUfunction_attribute = real.CUfunction_attribute
    CUpointer_attribute = real.CUpointer_attribute
    CUjit_option = real.CUjit_option
    CUlaunchConfig = real.CUlaunchConfig
    CUlaunchAttribute = real.CUlaunchAttribute
    CUlaunchAttributeID = real.CUlaunchAttributeID
    CUstream = real.CUstream

    def register(self, entry: str, types: list[str], impl: Callable) -> None:
        self.kernels[entry] = ([np.dtype(t) for t in types], impl)

    # -- helpers -----------------------------------------------------------------------------
    def _ret(self, name: str, *vals: Any) -> tuple:
        self.calls.append(name)
        if name in self.fail:
            return (self.fail[name],) + tuple(None for _ in vals)
        return (S,) + vals

    def _owner(self, addr: int, nbytes: int) -> int:
        for base, buf in self.allocs.items():
            if base <= addr and addr + nbytes <= base + len(buf):
                return base
        raise AssertionError(f"device range [{addr:#x}, +{nbytes}) is outside every allocation")

    def view(self, addr: int, nbytes: int, dtype: Any = np.uint8) -> np.ndarray:
        self._owner(addr, nbytes)
        raw = (ctypes.c_char * nbytes).from_address(addr)
        return np.frombuffer(raw, dtype=np.uint8).view(dtype)

    # -- the driver API subset ptxgen uses -----------------------------------------------------
    def cuInit(self, flags):
        return self._ret("cuInit")

    def cuDeviceGetCount(self):
        return self._ret("cuDeviceGetCount", 1)

    def cuDeviceGet(self, ordinal):
        return self._ret("cuDeviceGet", ordinal)

    def cuDevicePrimaryCtxRetain(self, dev):
        return self._ret("cuDevicePrimaryCtxRetain", 0xC0FFEE)

    def cuCtxSetCurrent(self, ctx):
        return self._ret("cuCtxSetCurrent")

    def cuCtxSynchronize(self):
        return self._ret("cuCtxSynchronize")

    def cuDeviceGetAttribute(self, attr, dev):
        A = real.CUdevice_attribute
        table = {A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: self.cc[0],
                 A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: self.cc[1],
                 A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: self.optin,
                 A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 132}
        return self._ret("cuDeviceGetAttribute", table[attr])

    def cuDeviceGetName(self, n, dev):
        return self._ret("cuDeviceGetName", b"Fake H100\0\0\0")

    def cuGetErrorString(self, err):
        return (S, f"fake description of {real.CUresult(int(err)).name}".encode())

    def cuMemAlloc(self, n):
        buf = np.zeros(n + 512, np.uint8)
        start = (-buf.ctypes.data) % 256
        region = buf[start:start + n]
        self.allocs[region.ctypes.data] = region
        return self._ret("cuMemAlloc", region.ctypes.data)

    def cuMemFree(self, ptr):
        self.allocs.pop(int(ptr))
        self.freed += 1
        return self._ret("cuMemFree")

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        self._owner(int(dst), n)
        ctypes.memmove(int(dst), int(src), n)
        return self._ret("cuMemcpyHtoDAsync")

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        self._owner(int(src), n)
        ctypes.memmove(int(dst), int(src), n)
        return self._ret("cuMemcpyDtoHAsync")

    def cuMemsetD8Async(self, ptr, value, n, stream):
        self.view(int(ptr), n)[:] = value
        return self._ret("cuMemsetD8Async")

    def cuStreamSynchronize(self, stream):
        return self._ret("cuStreamSynchronize")

    def cuDriverGetVersion(self):
        return self._ret("cuDriverGetVersion", self.driver_version)

    def cuModuleUnload(self, mod):
        self.modules.pop(mod, None)
        return self._ret("cuModuleUnload")

    def cuModuleLoadData(self, image):
        assert isinstance(image, bytes) and image[:4] == b"\x7fELF", "not a cubin"
        r = self._ret("cuModuleLoadData", 1000 + len(self.modules))
        if r[0] == S:
            self.modules[r[1]] = "cubin"
        return r

    def cuModuleLoadDataEx(self, image, n, opts, vals):
        assert isinstance(image, bytes) and image.endswith(b"\0") and b".entry" in image
        assert n == len(opts) == len(vals)
        r = self._ret("cuModuleLoadDataEx", 2000 + len(self.modules))
        if r[0] == S:
            self.modules[r[1]] = "ptx"
        return r

    def cuModuleGetFunction(self, mod, name):
        name = name.decode()
        if name not in self.kernels:
            return (real.CUresult.CUDA_ERROR_NOT_FOUND, None)
        return self._ret("cuModuleGetFunction", (mod, name))

    def cuFuncGetAttribute(self, attr, fn):  # NUM_REGS of a JIT-compiled kernel: the fake has none
        return self._ret("cuFuncGetAttribute", self.func_attrs.get((fn, int(attr)), 0))

    def cuFuncSetAttribute(self, fn, attr, value):
        self.func_attrs[(fn, int(attr))] = value
        return self._ret("cuFuncSetAttribute")

    def cuPointerGetAttribute(self, attr, ptr):
        try:
            self._owner(int(ptr), 1)
        except AssertionError:
            return (real.CUresult.CUDA_ERROR_INVALID_VALUE, None)
        return self._ret("cuPointerGetAttribute", 0)

    def cuEventCreate(self, flags):
        return self._ret("cuEventCreate", 77)

    def cuEventRecord(self, ev, stream):
        return self._ret("cuEventRecord")

    def cuStreamWaitEvent(self, stream, ev, flags):
        return self._ret("cuStreamWaitEvent")

    def cuEventDestroy(self, ev):
        return self._ret("cuEventDestroy")

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        mod, name = fn
        types, impl = self.kernels[name]
        ptrs = np.frombuffer((ctypes.c_uint64 * len(types)).from_address(int(params)), np.uint64)
        args = []
        for p, t in zip(ptrs, types):
            raw = (ctypes.c_char * t.itemsize).from_address(int(p))
            args.append(np.frombuffer(raw, t)[0].item())
        r = self._ret("cuLaunchKernel")
        if r[0] == S:
            self.launches.append(Launch(name, (gx, gy, gz), (bx, by, bz), smem, int(stream), args))
            impl(self, args)
        return r


    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, threads, smem):
        return self._ret("cuOccupancyMaxActiveBlocksPerMultiprocessor", self.ctas_per_sm)

    def cuLaunchKernelEx(self, cfg, fn, params, extra):
        """Stream-K's cooperative launch (no clusters here): the launch as cuLaunchKernel, recorded
        with its cooperative attribute."""
        cooperative = any(int(a.id) == int(real.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
                          and a.value.cooperative for a in cfg.attrs)
        r = self.cuLaunchKernel(fn, cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY,
                                cfg.blockDimZ, cfg.sharedMemBytes, int(cfg.hStream), params, extra)
        if r[0] == S:
            self.launches[-1].cooperative = cooperative
        return r


def gemm_impl(dtype_in, dtype_out, a_layout: str, b_layout: str):
    """A "kernel" computing C = A @ B from device memory exactly as ptxgen's kernels address it."""
    def run(fake: FakeDriver, args):
        pa, pb, pc, m, n, k, lda, ldb, ldc = args
        isz, osz = np.dtype(dtype_in).itemsize, np.dtype(dtype_out).itemsize

        def mat(ptr, rows, cols, ld, layout, dt, size):
            span = ((rows - 1) * ld + cols) if layout == "row" else ((cols - 1) * ld + rows)
            flat = fake.view(ptr, span * size, dt)
            strides = (ld * size, size) if layout == "row" else (size, ld * size)
            return np.lib.stride_tricks.as_strided(flat, (rows, cols), strides)

        a = mat(pa, m, k, lda, a_layout, dtype_in, isz).astype(np.float64)
        b = mat(pb, k, n, ldb, b_layout, dtype_in, isz).astype(np.float64)
        c = mat(pc, m, n, ldc, "row", dtype_out, osz)
        c[...] = (a @ b).astype(dtype_out)
    return run


#: The pointer parameters of ptxgen's GEMM kernels (every other .u64 is a batch stride).
GEMM_POINTERS = ("A", "B", "C", "bias", "workspace", "counters")


def sim_impl(ptx: str, entry: str):
    """A "kernel" that runs real ptxgen PTX on ptxgen's simulator over the fake device memory its
    pointer arguments name (from each pointer to the end of its allocation, so the simulator
    faults on any access past it), with the grid, block and shared memory of the launch."""
    from ptxgen import sim
    from ptxgen.runtime.params import parse_params

    names = [d.name for d in parse_params(ptx, entry)]

    def run(fake: FakeDriver, args):
        launch = fake.launches[-1]
        sim_args = []
        for name, value in zip(names, args):
            if name in GEMM_POINTERS:
                base = fake._owner(int(value), 1)
                value = fake.view(int(value), base + len(fake.allocs[base]) - int(value))
            sim_args.append(value)
        sim.launch(ptx, entry, grid=launch.grid, block=launch.block, args=sim_args,
                   dynamic_smem=launch.smem)
    return run
