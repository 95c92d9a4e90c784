"""Measuring one tuning candidate on the GPU: check its result first, then time it.

Why check first: a fast wrong kernel must never win, so each candidate runs once through the real
launch path (`Kernel.__call__` on host operands) and is compared with the float64 reference
(`check.check_kernel`, poisoned output) before any timing; a wrong one is dropped with the reason.

Timing: CUDA events around each launch on the device operands (`prepare_launch`, no per-call
checks), `warmup` untimed launches first, and before every timed launch a write of a buffer twice
the L2's size, so no run finds the previous run's operands in L2; the median of `repeats` launches.
A driver that cannot time (the simulator-backed stand-in refuses `cuEventElapsedTime`) is found by
timing an empty event pair first: the candidate is then reported as checked, timing unavailable.
"""
from __future__ import annotations

import ctypes
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule

#: CUDA_ERROR_NOT_SUPPORTED: what a driver that cannot time events answers.
NOT_SUPPORTED = 801
#: When the device does not say its L2 size, flush this many bytes (more than any GPU's L2 today).
DEFAULT_FLUSH_BYTES = 256 * 2**20
TIMING_UNAVAILABLE = "timing unavailable on this driver"


@dataclass(frozen=True)
class Measurement:
    """One candidate's outcome: status "ok" (checked and timed), TIMING_UNAVAILABLE (checked, not
    timed), "wrong" (result differs from the reference) or "failed" (did not run)."""

    status: str
    time_s: float | None = None
    reason: str = ""
    device: str = ""


def _to_device(x: np.ndarray) -> Any:
    """A DeviceArray with x's shape and strides over a copy of x's memory (any layout numpy views
    of a dense block have: row-major, column-major, the ldc-padded C)."""
    from ..runtime import driver as drv

    x = np.asarray(x)
    span = (sum((d - 1) * s for d, s in zip(x.shape, x.strides)) + x.itemsize) if x.size else 0
    raw = np.ctypeslib.as_array((ctypes.c_ubyte * max(span, 1)).from_address(x.ctypes.data))[:span]
    buf = drv.DeviceBuffer(max(span, 1))
    buf.upload(raw, 0)
    drv._call("cuStreamSynchronize", 0)
    return drv.DeviceArray(x.shape, x.dtype, buffer=buf, strides=tuple(x.strides))


def grouped_sizes(g: Gemm) -> dict:
    """A grouped kernel's timing sizes as its run-time argument ({} for other kernels): balanced
    groups (schedule.grouping.balanced_counts), so every candidate computes every row."""
    if not g.grouped:
        return {}
    from ..schedule.grouping import COUNTS_ARG, balanced_counts

    return {COUNTS_ARG[g.grouping]: balanced_counts(g)}


def _l2_bytes() -> int:
    from ..runtime import driver as drv

    ctx = drv.context()
    try:
        size = drv._call("cuDeviceGetAttribute", drv._driver().CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                         ctx.device)
        return int(size) or DEFAULT_FLUSH_BYTES // 2
    except drv.DriverError:
        return DEFAULT_FLUSH_BYTES // 2


def _elapsed_s(start: Any, end: Any) -> float:
    from ..runtime import driver as drv

    drv._call("cuEventSynchronize", end)
    return float(drv._call("cuEventElapsedTime", start, end)) * 1e-3


@dataclass(frozen=True)
class DeviceMeasure:
    """The default `measure` of `ptxgen.tune`: measure(gemm, schedule, arch) on this process's GPU
    (PTXGEN_DEVICE). A picklable value, so Ray workers run it on their own GPU."""

    repeats: int = 20
    warmup: int = 3
    seed: int = 0

    def __call__(self, g: Gemm, s: Schedule, arch: str) -> Measurement:
        from ..compile import compile as compile_kernel

        return self.measure_kernel(compile_kernel(g, s, arch))

    def measure_kernel(self, k: Any) -> Measurement:
        """Check the compiled kernel `k` against the reference of `k.gemm`, then time it."""
        from ..check import check_kernel, random_epilogue_operands, random_operands, random_scale
        from ..runtime import driver as drv

        g = k.gemm
        device = drv.context().name
        a, b = random_operands(g, self.seed)
        c, bias = random_epilogue_operands(g)
        scale = random_scale(g)
        groups = grouped_sizes(g)
        try:
            verdict = check_kernel(k, a, b, c, bias, scale, run=k, **groups)
        except drv.DriverError as e:
            return Measurement("failed", reason=f"launch failed: {e}", device=device)
        if not verdict.ok:
            return Measurement("wrong", reason=f"wrong result, dropped: {verdict}", device=device)
        try:
            return Measurement("ok", self.time(k, a, b, c, bias, scale, groups), device=device)
        except drv.DriverError as e:
            if e.status == NOT_SUPPORTED and e.call == "cuEventElapsedTime":
                return Measurement(TIMING_UNAVAILABLE, reason=f"checked correct; the driver refused "
                                   f"cuEventElapsedTime ({e.name})", device=device)
            return Measurement("failed", reason=f"checked correct, then timing failed: {e}", device=device)

    def time(self, k: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray | None, bias: np.ndarray | None,
             scale: np.ndarray | None, groups: dict | None = None) -> float:
        """The median seconds of `repeats` launches, each after an L2 flush (see the module doc);
        a grouped kernel's `groups` ({"offs" or "masked_m": sizes}) go to the device too."""
        from ..check import poisoned
        from ..runtime import driver as drv
        from ..schedule.grouping import PER_GROUP_C
        from ..runtime.launch import prepare_launch

        g = k.gemm
        lead = (g.batch,) if g.batch > 1 else (g.groups,) if g.grouping in PER_GROUP_C else ()
        out = poisoned(lead + (g.m, g.leading_dims()[2]), g.out_dtype)[..., :g.n]
        if c is not None:
            out[...] = c
        dev = {name: _to_device(x) for name, x in (("a", a), ("b", b), ("c", out), ("bias", bias),
                                                   ("scale", scale)) if x is not None}
        sizes = {name: _to_device(x) for name, x in (groups or {}).items()}
        run = prepare_launch(k, dev["a"], dev["b"], dev["c"], 0, bias=dev.get("bias"), scale=dev.get("scale"),
                             **sizes)
        flush = drv.DeviceBuffer(2 * _l2_bytes())
        start, end = drv._call("cuEventCreate", 0), drv._call("cuEventCreate", 0)
        try:
            drv._call("cuEventRecord", start, 0)  # can this driver time at all? (before any launch)
            drv._call("cuEventRecord", end, 0)
            _elapsed_s(start, end)
            for _ in range(self.warmup):
                run()
            times = []
            for i in range(self.repeats):
                flush.fill_bytes(i, 0)  # evicts the last run's operands from L2 (outside the events)
                drv._call("cuEventRecord", start, 0)
                run()
                drv._call("cuEventRecord", end, 0)
                times.append(_elapsed_s(start, end))
            return statistics.median(times)
        finally:
            flush.free()
            for ev in (start, end):
                drv._driver().cuEventDestroy(ev)
