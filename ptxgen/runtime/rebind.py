"""`Rebindable`: a GEMM launch checked once, then repeated with new operand addresses and streams.

Why: `Kernel.__call__` checks every operand, loads the module and packs the parameters on each
call (milliseconds of Python), which a framework op called per layer per step cannot afford. A
framework that keeps one Rebindable per (kernel, operand shapes, strides, dtypes, alignment) pays
that once; each later call writes the new addresses into the packed parameters (re-encoding the
sm_90a tensor maps, whose addresses are inside them; a small cache keeps recent ones) and calls
cuLaunchKernel on the given stream. No allocation, no host synchronisation: the call can be
captured in a CUDA graph (split-K's workspace is allocated when the Rebindable is made, by the
first call's checks).

The caller guarantees what the first call checked: the same shapes, strides, dtypes, device and
at least the same address alignment, and no overlap between C and the inputs.
"""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import driver as drv
from .launch import _check_params, _plan
from .launch_config import launch_config

if TYPE_CHECKING:
    from .spec import LaunchSpec

__all__ = ["Rebindable"]

#: Tensor maps kept per Rebindable, by operand addresses (weights keep theirs; PyTorch's caching
#: allocator hands activations the same few addresses step after step).
MAP_CACHE_SIZE = 64


class Rebindable:
    """`Rebindable(kernel, a, b, c, bias=None, scale=None)` checks the device operands as
    `kernel(a, b, c=c, ...)` would (raising the same errors); `launch(a_ptr, b_ptr, c_ptr,
    bias_ptr, scale_ptr, stream)` then runs the kernel on operands laid out exactly like those."""

    def __init__(self, kernel: "LaunchSpec", a: Any, b: Any, c: Any, bias: Any = None, scale: Any = None):
        plan = _plan(kernel, a, b, c, None, bias, scale)
        if plan.host:
            raise TypeError("Rebindable needs device arrays (numpy inputs are copied per call: use kernel(a, b))")
        self.kernel = kernel
        self.fn, self.grid, self.block, self.smem = plan.fn, plan.grid, plan.block, plan.smem
        self.params = plan.params
        self._address = plan.params.address  # the packed block stays put; only its values change
        self.cluster, self.cooperative = plan.cluster, plan.cooperative
        # the views' shapes and strides, without the arrays they came from (kept alive otherwise)
        self.views = tuple(replace(v, source=None, keepalive=None) for v in plan.views[:3])
        self.c_bytes = plan.views[2].nbytes
        # where each address goes, by the entry's parameter names (every target names its pointer
        # parameters A, B, C, bias, scale; tensor maps are the .b8 arrays, which hold A's, B's
        # and, for a TMA store, C's address): no target knowledge here
        decls = _check_params(kernel)
        slot = {d.name: i for i, d in enumerate(decls)}
        self.map_slots = [i for i, d in enumerate(decls) if d.is_array]
        self.n_maps = len(self.map_slots)
        self.pointer_slots = {name: slot[name] for name in ("A", "B", "C") if name in slot}
        self.vector_slots = {name: slot[name] for name in ("bias", "scale") if name in slot}
        self._maps: dict[tuple[int, ...], list[bytes]] = {}
        self._lock = threading.Lock()
        #: Threads on which the context was made current (it is the primary context, which PyTorch
        #: and ptxgen share and nothing replaces on a thread, so once per thread is enough).
        self._threads = threading.local()
        ctx = drv.context()
        self._context, self._set_current = ctx.handle, drv._driver().cuCtxSetCurrent  # raw: ~1 us, not ~8
        self._launch = drv._driver().cuLaunchKernel
        self._memset = drv._driver().cuMemsetD8Async

    def _set(self, slot: int, value: int) -> None:
        self.params.storage[slot][0] = value

    def _tensor_maps(self, ptrs: tuple[int, ...]) -> list[bytes]:
        maps = self._maps.get(ptrs)
        if maps is None:
            maps = self.kernel.tensor_map_args(self.views, list(ptrs))
            if len(self._maps) >= MAP_CACHE_SIZE:
                self._maps.pop(next(iter(self._maps)))
            self._maps[ptrs] = maps
        return maps

    def launch(self, a_ptr: int, b_ptr: int, c_ptr: int, bias_ptr: int = 0, scale_ptr: int = 0,
               stream: int = 0) -> None:
        """Run the kernel on the operands at these device addresses, on `stream` (asynchronous)."""
        with self._lock:  # one packed parameter block: fill and launch as one step
            if getattr(self._threads, "current", False) is not True:  # once per calling thread
                drv.check("cuCtxSetCurrent", self._set_current(self._context))
                self._threads.current = True
            if self.map_slots:
                maps = self._tensor_maps((a_ptr, b_ptr, c_ptr)[:self.n_maps])
                for slot, raw in zip(self.map_slots, maps):
                    self.params.storage[slot][:] = np.frombuffer(raw, dtype=np.uint8)
            for name, ptr in (("A", a_ptr), ("B", b_ptr), ("C", c_ptr)):
                if name in self.pointer_slots:
                    self._set(self.pointer_slots[name], ptr)
            for name, ptr in (("bias", bias_ptr), ("scale", scale_ptr)):
                if name in self.vector_slots:
                    self._set(self.vector_slots[name], ptr)
            if self.kernel.zeroes_c_first:  # atomic split-K adds its partial sums into C
                drv.check("cuMemsetD8Async", self._memset(c_ptr, 0, self.c_bytes, stream))
            if self.cluster != (1, 1, 1) or self.cooperative:
                config = launch_config(self.grid, self.block, self.smem, stream, self.cluster, self.cooperative)
                drv._call("cuLaunchKernelEx", config, self.fn.handle, self._address, 0)
                return
            g, b = self.grid, self.block
            drv.check("cuLaunchKernel", self._launch(self.fn.handle, g[0], g[1], g[2], b[0], b[1], b[2], self.smem,
                                                     stream, self._address, 0))
