"""The CUDA driver API, through `cuda.bindings.driver`, imported lazily.

Why the driver API: ptxgen already has a cubin (assembled in-process), so it needs only
module load + launch; no runtime API, no nvcc. Every call's status is checked and turned into
a `DriverError` naming the call. Nothing here runs at import time, so `import ptxgen.runtime`
works on machines with no driver.

Environment: PTXGEN_DEVICE=n picks the device (default 0); PTXGEN_SYNC=1 synchronizes after
every launch so asynchronous faults surface at the launch that caused them; PTXGEN_DRIVER=sim
runs everything on ptxgen's CPU simulator behind a stand-in libcuda (see simdriver/).
"""
from __future__ import annotations

import functools
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["DriverError", "gpu_available", "gpu_unavailable_reason", "check", "context", "Context",
           "DeviceBuffer", "DeviceArray", "resolve_stream", "binary_compatible", "device_arch"]

_SUCCESS = 0


class DriverError(RuntimeError):
    """A CUDA driver call returned an error status."""

    def __init__(self, call: str, status: int, name: str = "", description: str = "",
                 hint: str = ""):
        self.call, self.status, self.name, self.description = call, int(status), name, description
        self.hint = hint
        msg = f"{call} failed with {name or 'CUresult'} ({int(status)})"
        if description:
            msg += f": {description}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class StandInNotSelected(RuntimeError):
    """The loaded libcuda is ptxgen's stand-in, but this code did not ask for it."""


def _driver():
    """The `cuda.bindings.driver` module (imported on first use, never at import time).

    With PTXGEN_DRIVER=sim the simulator-backed stand-in libcuda is loaded first, so these same
    bindings drive it (ptxgen/runtime/simdriver)."""
    from . import simdriver

    if simdriver.selected():
        if not simdriver.active():
            simdriver.activate()
    elif simdriver.active():
        # The stand-in stays loaded once a test session or script loaded it; code that did not
        # ask for it (PTXGEN_DRIVER=sim) must not take it for a GPU.
        raise StandInNotSelected("the only CUDA driver in this process is ptxgen's simulator-backed stand-in, "
                                 "and PTXGEN_DRIVER is not 'sim'")
    from cuda.bindings import driver

    return driver


def _describe(status: Any) -> tuple[int, str, str]:
    """(code, enum name, description) for a CUresult, without needing a working driver."""
    code = int(status)
    name, desc = "", ""
    try:
        try:
            drv = _driver()
        except StandInNotSelected:  # the enum and its strings need no particular driver
            from cuda.bindings import driver as drv
        enum = drv.CUresult(code)
        name = enum.name
        try:
            err, text = drv.cuGetErrorString(enum)
            if int(err) == _SUCCESS and text:
                desc = text.decode() if isinstance(text, bytes) else str(text)
        except Exception:
            pass
    except Exception:
        pass
    return code, name or f"CUresult {code}", desc or _FALLBACK_DESC.get(code, "")


_FALLBACK_DESC = {
    1: "invalid argument", 2: "out of memory", 3: "driver not initialized",
    100: "no CUDA-capable device is detected", 101: "invalid device ordinal",
    200: "device kernel image is invalid", 201: "invalid device context",
    209: "no kernel image is available for execution on the device",
    218: "a PTX JIT compilation failed", 222: "the provided PTX was compiled with an unsupported "
    "toolchain", 400: "invalid resource handle", 500: "named symbol not found",
    700: "an illegal memory access was encountered", 701: "too many resources requested for launch",
    719: "unspecified launch failure",
}

_HINTS = {
    209: "The cubin's architecture does not match this GPU: compile for the device's arch "
         "(ptxgen.runtime.context().arch)",
    222: "The driver is older than the PTX version: update the driver or lower `.version`",
    701: "Too many registers or threads for one block: use fewer warps or a smaller tile",
    700: "The kernel read or wrote out of bounds: check operand sizes/leading dimensions; run "
         "with PTXGEN_SYNC=1 to find the launch, or compute-sanitizer",
}


def check(call: str, result: Any) -> Any:
    """Unpack a cuda.bindings result tuple `(status, *values)`; raise DriverError on failure."""
    if isinstance(result, tuple):
        status, values = result[0], result[1:]
    else:
        status, values = result, ()
    if int(status) != _SUCCESS:
        code, name, desc = _describe(status)
        raise DriverError(call, code, name, desc, _HINTS.get(code, ""))
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _call(name: str, *args: Any) -> Any:
    from . import simdriver

    fn = getattr(_driver(), name)
    simdriver.clear_reason()
    try:
        return check(name, fn(*args))
    except DriverError as e:
        why = simdriver.reason()  # the stand-in names the rule a bare CUresult hides
        if not why:
            raise
        hint = f"{e.hint}. " if e.hint else ""
        raise DriverError(name, e.status, e.name, e.description,
                          f"{hint}The simulator-backed driver says: {why}") from None


# -- availability ------------------------------------------------------------------------------
def _device_ordinal() -> int:
    raw = os.environ.get("PTXGEN_DEVICE", "0").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"PTXGEN_DEVICE={raw!r} is not a device number") from None


@functools.lru_cache(maxsize=None)
def _probe(ordinal: int, driver_choice: str = "") -> str:
    """'' if a usable device `ordinal` exists with the driver PTXGEN_DRIVER chooses, else why not."""
    from . import simdriver

    try:
        sim = simdriver.selected()
    except ValueError as e:
        return str(e)
    if sim and simdriver.compiler_unavailable_reason():
        return simdriver.compiler_unavailable_reason()
    try:
        drv = _driver()
    except StandInNotSelected as e:
        return str(e)
    except Exception as e:
        if sim:
            return f"the simulator-backed CUDA driver could not be set up: {type(e).__name__}: {e}"
        return f"cuda-python is not installed ({e}): pip install cuda-python"
    try:
        status = drv.cuInit(0)[0]
    except Exception as e:  # libcuda.so missing: no NVIDIA driver on this machine
        return f"the CUDA driver library (libcuda) could not be loaded: no NVIDIA driver here ({e})"
    if int(status) != _SUCCESS:
        code, name, desc = _describe(status)
        return f"cuInit failed with {name} ({code}): {desc}"
    try:
        status, count = drv.cuDeviceGetCount()
    except Exception as e:
        return f"cuDeviceGetCount raised {e}"
    if int(status) != _SUCCESS or count == 0:
        return "the CUDA driver found no GPU"
    if not 0 <= ordinal < count:
        return f"PTXGEN_DEVICE={ordinal} but only {count} GPU(s) exist"
    return ""


def gpu_unavailable_reason() -> str:
    """Why no GPU can be used ('' if one can). Never raises."""
    try:
        # Keyed by the driver choice too: a process may ask for the stand-in only part of the time.
        return _probe(_device_ordinal(), os.environ.get("PTXGEN_DRIVER", "").strip().lower())
    except Exception as e:
        return f"GPU probe failed: {e}"


def gpu_available() -> bool:
    """True if the CUDA driver loads and the chosen device exists. Never raises."""
    return gpu_unavailable_reason() == ""


# -- architecture -------------------------------------------------------------------------------
def device_arch(major: int, minor: int) -> str:
    return f"sm_{major}{minor}"


def binary_compatible(cubin_arch: str, dev_arch: str) -> bool:
    """Can SASS built for `cubin_arch` run on a `dev_arch` GPU? (same major, minor <= device's;
    arch-specific 'a'/'f' targets only on exactly their own device)."""
    def split(a: str) -> tuple[int, int, str]:
        num = a[3:]
        suffix = num[-1] if num[-1].isalpha() else ""
        num = num.rstrip("af")
        return int(num[:-1]), int(num[-1]), suffix

    cm, cn, cs = split(cubin_arch)
    dm, dn, _ = split(dev_arch)
    if cs == "a":
        return (cm, cn) == (dm, dn)
    return cm == dm and cn <= dn


# -- context ------------------------------------------------------------------------------------
@dataclass
class Context:
    """The device's primary context, retained and current on the calling thread."""

    ordinal: int
    device: Any
    handle: Any
    name: str
    cc: tuple[int, int]
    max_smem_optin: int
    sm_count: int
    modules: dict = field(default_factory=dict)  # (kind, bytes) -> Module

    @property
    def arch(self) -> str:
        return device_arch(*self.cc)

    @property
    def key(self) -> int:
        return int(self.handle)

    def make_current(self) -> None:
        _call("cuCtxSetCurrent", self.handle)

    def synchronize(self) -> None:
        _call("cuCtxSynchronize")


_contexts: dict[int, Context] = {}
_lock = threading.Lock()


def context() -> Context:
    """The (cached) context for PTXGEN_DEVICE, made current; RuntimeError if there is no GPU."""
    ordinal = _device_ordinal()
    with _lock:
        ctx = _contexts.get(ordinal)
        reason = gpu_unavailable_reason()  # cached; asked each time since PTXGEN_DRIVER may change
        if reason:
            raise RuntimeError(f"no GPU to run on: {reason}. Use Kernel.simulate() to run on "
                               f"ptxgen's CPU simulator instead, or set PTXGEN_DRIVER=sim to run "
                               f"this GPU path on it through a stand-in CUDA driver")
        if ctx is None:
            drv = _driver()
            dev = _call("cuDeviceGet", ordinal)
            handle = _call("cuDevicePrimaryCtxRetain", dev)
            attr = drv.CUdevice_attribute
            major = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
            minor = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
            optin = _call("cuDeviceGetAttribute",
                          attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)
            sms = _call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
            raw_name = _call("cuDeviceGetName", 256, dev)
            name = raw_name.split(b"\0", 1)[0].decode() if isinstance(raw_name, bytes) else str(raw_name)
            ctx = Context(ordinal, dev, handle, name, (int(major), int(minor)), int(optin), int(sms))
            _contexts[ordinal] = ctx
    ctx.make_current()
    return ctx


# -- memory -------------------------------------------------------------------------------------
class DeviceBuffer:
    """Raw device memory (cuMemAlloc), freed when garbage-collected."""

    def __init__(self, nbytes: int):
        self.ctx = context()
        self.nbytes = int(nbytes)
        self.ptr = int(_call("cuMemAlloc", max(self.nbytes, 1)))

    def upload(self, host: np.ndarray, stream: int = 0) -> None:
        host = np.ascontiguousarray(host)
        assert host.nbytes <= self.nbytes, (host.nbytes, self.nbytes)
        if host.nbytes:
            self.ctx.make_current()  # the calling thread may not be the one that allocated
            _call("cuMemcpyHtoDAsync", self.ptr, host.ctypes.data, host.nbytes, stream)

    def download(self, host: np.ndarray, stream: int = 0) -> None:
        assert host.flags.c_contiguous and host.nbytes <= self.nbytes
        if host.nbytes:
            self.ctx.make_current()
            _call("cuMemcpyDtoHAsync", host.ctypes.data, self.ptr, host.nbytes, stream)

    def fill_bytes(self, value: int, stream: int = 0) -> None:
        if self.nbytes:
            self.ctx.make_current()
            _call("cuMemsetD8Async", self.ptr, value & 0xFF, self.nbytes, stream)

    def free(self) -> None:
        if getattr(self, "ptr", 0):
            try:  # from another thread (or the garbage collector's) without this, the free leaks
                self.ctx.make_current()
                _driver().cuMemFree(self.ptr)
            except Exception:  # interpreter shutdown, or the context is gone: nothing to free
                pass
            self.ptr = 0

    def __del__(self) -> None:
        self.free()


class DeviceArray:
    """A minimal row-major device matrix exposing __cuda_array_interface__ (no framework needed)."""

    def __init__(self, shape: tuple[int, ...], dtype: Any, buffer: DeviceBuffer | None = None,
                 strides: tuple[int, ...] | None = None):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = strides  # bytes; None = C-contiguous
        n = int(np.prod(self.shape)) * self.dtype.itemsize
        self.buffer = buffer if buffer is not None else DeviceBuffer(n)

    @classmethod
    def from_host(cls, host: np.ndarray, stream: int = 0) -> "DeviceArray":
        """A device copy of `host` in the same order: a column-major matrix (F-contiguous, or a
        batch of them: the last two axes swapped) stays column-major, with its strides, so a B for
        the default `b_layout="col"` (`b.T` of an (N, K) array, np.asfortranarray(b)) goes to
        `k(a, b)` as it is; anything else is copied C-contiguous."""
        host = np.asarray(host)
        if _is_column_major(host):
            arr = cls(host.shape, host.dtype, strides=host.strides)
            arr.buffer.upload(np.swapaxes(host, -1, -2), stream)  # a C-contiguous view of the same bytes
        else:
            host = np.ascontiguousarray(host)
            arr = cls(host.shape, host.dtype)
            arr.buffer.upload(host, stream)
        _call("cuStreamSynchronize", stream)
        return arr

    @property
    def ptr(self) -> int:
        return self.buffer.ptr

    @property
    def __cuda_array_interface__(self) -> dict:
        typestr = self.dtype.str if self.dtype.kind != "V" else "<V2"
        return {"shape": self.shape, "typestr": typestr, "data": (self.ptr, False),
                "strides": self.strides, "version": 3, "stream": None}

    def to_host(self, stream: int = 0) -> np.ndarray:
        """The array on the host, in its device order (column-major ones stay column-major)."""
        swapped = (*self.shape[:-2], self.shape[-1], self.shape[-2]) if len(self.shape) >= 2 else self.shape
        column_major = (len(self.shape) >= 2 and self.strides is not None
                        and self.strides == np.swapaxes(np.empty(swapped, self.dtype), -1, -2).strides)
        out = np.empty(swapped if column_major else self.shape, self.dtype)
        self.buffer.download(out, stream)  # makes the buffer's context current on this thread
        _call("cuStreamSynchronize", stream)
        return np.swapaxes(out, -1, -2) if column_major else out

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr={self.ptr:#x})"


def _is_column_major(host: np.ndarray) -> bool:
    """A matrix, or a stack of them, stored column-major: the last two axes swapped make it
    C-contiguous (and it is not C-contiguous already)."""
    return (host.ndim >= 2 and not host.flags.c_contiguous and host.shape[-1] > 1 and host.shape[-2] > 1
            and np.swapaxes(host, -1, -2).flags.c_contiguous)


# -- streams ------------------------------------------------------------------------------------
def resolve_stream(stream: Any) -> int:
    """A raw CUstream handle from None, an int, a cuda.core/cuda.bindings stream, or a
    torch/cupy stream object (`.cuda_stream` / `.ptr`)."""
    if stream is None:
        return 0
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        return int(stream)
    proto = getattr(stream, "__cuda_stream__", None)
    if callable(proto):  # cuda.core protocol: returns (version, handle)
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if v is not None:
            try:
                return int(v)
            except (TypeError, ValueError):
                pass
    if not isinstance(stream, (str, bytes, float, bool)):
        try:
            return int(stream)  # cuda.bindings CUstream supports int()
        except (TypeError, ValueError):
            pass
    raise TypeError(f"cannot use {type(stream).__name__} as a CUDA stream: pass an int handle, "
                    f"a cuda.core Stream, a torch.cuda.Stream, a cupy Stream or None")


_warned: set[str] = set()


def warn_once(tag: str, message: str) -> None:
    """Warn about a degraded path once per process (fallbacks repeat on every launch)."""
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
