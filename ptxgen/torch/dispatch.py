"""Run one GEMM on torch tensors: pick the kernel (cached), allocate C with PyTorch, launch.

Why two caches: a ptxgen kernel is specialised to its exact shape (the grid, and the edge guards
it leaves out when a dimension divides the block), so kernels are kept per exact problem; but
choosing a schedule (`ptxgen.compile(gemm, arch=...)` with none: the tuning cache's winner, else
the cost model's pick) costs about half a second, so the choice is made once per problem class
(dtypes, layouts, alignment, epilogue, batched or not, each dimension's power-of-two bucket) and
reused for that class's other shapes (about 10 ms to lower one). A repeated shape costs one
dictionary lookup. CUDA tensors launch on PyTorch's current stream into a C that PyTorch
allocated; CPU tensors run on ptxgen's CPU simulator (slow: for tests and CI).
"""
from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

import ptxgen
from ptxgen.schedule.targets import native_arch, target as ptxgen_target
from ptxgen.torch.convert import as_numpy, input_dtype, matrix_layout, output_dtype, pointer_alignment

#: The simulator's arch for CPU tensors: mma.sync kernels, except fp8, which only wgmma multiplies.
CPU_ARCH, CPU_FP8_ARCH = "sm_80", "sm_90a"
#: What a GPU with no target of its own runs (10.3, 12.0): sm_90's mma.sync PTX, which its driver
#: assembles for it; older GPUs with none (before 8.0) have no bf16 or tf32 mma.sync for it.
PLAIN_ARCH = "sm_90"
#: The arch whose PTX the same device also runs, for a problem the device's own lowering does not
#: build (a leading dimension TMA cannot describe, a grouped layout the wgmma kernel lacks): Hopper
#: and B200 run sm_90's mma.sync kernels (on B200 assembled for sm_100 when loaded).
SAME_DEVICE_ARCH = {"sm_90a": PLAIN_ARCH, "sm_100a": PLAIN_ARCH}

_kernels: dict[tuple, ptxgen.Kernel] = {}
_class_schedules: dict[tuple, ptxgen.Schedule] = {}
_device_arch: dict[int, str] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Vector:
    """An epilogue vector (bias or scale) as the kernel takes it: "col" (length N) or "row" (M)."""

    kind: str
    data: torch.Tensor


def schedule_text(schedule: ptxgen.Schedule | str | None) -> str | None:
    """A Schedule as the JSON text the operators take (their schema has no Schedule type)."""
    if schedule is None or isinstance(schedule, str):
        return schedule
    if not isinstance(schedule, ptxgen.Schedule):
        raise TypeError(f"schedule must be a ptxgen.Schedule (or None: ptxgen chooses), got {type(schedule).__name__}")
    return json.dumps(asdict(schedule), sort_keys=True)


def schedule_from_text(text: str) -> ptxgen.Schedule:
    fields = json.loads(text)
    return ptxgen.Schedule(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def arch_for(device: torch.device, fp8: bool, arch: str | None) -> str:
    """The arch to compile for: the caller's, else the CUDA device's, else the simulator's."""
    if arch is not None:
        return arch
    if device.type == "cpu":
        return CPU_FP8_ARCH if fp8 else CPU_ARCH
    index = device.index if device.index is not None else torch.cuda.current_device()
    found = _device_arch.get(index)
    if found is None:
        found = _device_arch[index] = capability_arch(torch.cuda.get_device_capability(index))
    return found


def capability_arch(capability: tuple[int, int]) -> str:
    """The arch ptxgen compiles for on a GPU of this compute capability: its own target where
    ptxgen has one (sm_90a on Hopper, sm_100a on B200), else sm_90's PTX (PLAIN_ARCH)."""
    return native_arch(capability) or (PLAIN_ARCH if capability >= (9, 0) else "sm_80")


def device_kernel(g: ptxgen.Gemm, target: str, schedule: str | None, arch_chosen_here: bool) -> ptxgen.Kernel:
    """The kernel for `g` on `target`; where ptxgen picked the device's own target (sm_90a,
    sm_100a) and its lowering builds no kernel for this problem, the same device runs the
    SAME_DEVICE_ARCH one. Where that builds none either (fp8 has no mma.sync kernel), the
    device's own error says why and what to change."""
    try:
        return kernel_for(g, target, schedule)
    except ptxgen.ScheduleError:
        fallback = SAME_DEVICE_ARCH.get(target)
        if not arch_chosen_here or fallback is None or schedule is not None:
            raise  # the caller's arch or schedule: their error is theirs to fix
        try:
            return kernel_for(g, fallback, None)
        except ptxgen.ScheduleError:
            pass
        raise


def _bucket(extent: int) -> int:
    return max(16, 1 << max(extent - 1, 0).bit_length())


def _compile(g: ptxgen.Gemm, arch: str, schedule: str | None) -> ptxgen.Kernel:
    if schedule is not None:
        return ptxgen.compile(g, schedule_from_text(schedule), arch)
    cls = (arch, g.dtype, g.out_dtype, g.a_layout, g.b_layout, g.alignment(), g.out_alignment(), g.epi,
           g.bias_dtype, g.fast_accum, g.batch > 1, g.groups > 1, g.grouping, g.block_scale, _bucket(g.m),
           _bucket(g.n), _bucket(g.k))
    chosen = _class_schedules.get(cls)
    if chosen is not None:
        try:
            return ptxgen.compile(g, chosen, arch)
        except ptxgen.ScheduleError:
            pass  # the class's schedule does not fit this exact shape: choose for it
    kernel = ptxgen.compile(g, arch=arch)
    _class_schedules.setdefault(cls, kernel.schedule)
    return kernel


def kernel_for(g: ptxgen.Gemm, arch: str, schedule: str | None = None) -> ptxgen.Kernel:
    """The kernel for exactly `g` on `arch` (compiled once, then a dictionary lookup)."""
    key = (g, arch, schedule)
    k = _kernels.get(key)
    if k is None:
        with _lock:
            k = _kernels.get(key)
            if k is None:
                k = _kernels[key] = _compile(g, arch, schedule)
    return k


def cached_kernels() -> list[ptxgen.Kernel]:
    """The kernels compiled so far, oldest first (`k.gemm`, `k.schedule`, `k.choice` say what and why)."""
    return list(_kernels.values())


def clear_caches() -> None:
    """Forget every kernel and class schedule (e.g. after `ptxgen tune` stored new winners)."""
    with _lock:
        signatures.clear()
        _kernels.clear()
        _class_schedules.clear()


def _address_alignment(a: torch.Tensor, b: torch.Tensor) -> int:
    """What the operands' base addresses (CUDA operands are used in place) and batch strides allow
    of 16, 8, 4, 2 bytes, on top of what their leading dimensions allow (`Gemm.alignment`)."""
    limit = pointer_alignment(a, b) if a.is_cuda else 16
    for t in (a, b):
        if t.dim() == 3 and t.shape[0] > 1:
            stride_bytes = t.stride(0) * t.element_size()
            limit = min(limit, next(x for x in (16, 8, 4, 2, 1) if stride_bytes % x == 0))
    return limit


def gemm_problem(a: torch.Tensor, b: torch.Tensor, out: torch.dtype, bias: Vector | None, activation: str | None,
                 alpha: float, beta: float, scale: Vector | None,
                 fast_accum: bool = False) -> tuple[torch.Tensor, torch.Tensor, ptxgen.Gemm]:
    """(A, B as used, the Gemm they make): layouts from strides, a copy only where neither covers.
    fast_accum: the single-level fp8 kernel (scaled_mm's use_fast_accum; the default promotes)."""
    a, la = matrix_layout(a)
    b, lb = matrix_layout(b)
    batch = a.shape[0] if a.dim() == 3 else 1
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    bias_dtype = "f32"
    if bias is not None and bias.data.dtype in (torch.float16, torch.bfloat16):
        bias_dtype = output_dtype(bias.data.dtype)
    epi = ptxgen.Epilogue(alpha=alpha, beta=beta, bias=bias.kind if bias else None, activation=activation,
                          scale=scale.kind if scale else None)
    g = ptxgen.Gemm(m, n, k, dtype=input_dtype(a, "a"), out_dtype=output_dtype(out), a_layout=la.layout,
                    b_layout=lb.layout, lda=la.ld, ldb=lb.ld, epilogue=None if epi.is_identity else epi, batch=batch,
                    bias_dtype=bias_dtype, fast_accum=fast_accum)
    limit = _address_alignment(a, b)
    if limit < g.alignment():  # narrower copies for operands whose addresses are less aligned
        g = replace(g, align=max(limit, a.element_size()))
    return a, b, g


@dataclass
class Prepared:
    """What one call signature (device, shapes, strides, dtypes, epilogue, address alignment) runs:
    its kernel, whether A or B must be copied to a layout the kernel covers, and (CUDA) the launch
    checked on the first call, which later calls repeat on their own addresses."""

    kernel: ptxgen.Kernel
    copy_a: bool
    copy_b: bool
    launcher: Any = None


#: Calls whose arguments were checked, by signature (`signature`): what the checks found (C's shape
#: and dtype, the bias and scale kinds) and the Prepared to run; a repeated call looks it up.
signatures: dict[tuple, tuple] = {}


def signature(a: torch.Tensor, b: torch.Tensor, *rest: Any) -> tuple:
    """Everything a call's checks and kernel depend on: A's and B's dtype, shape, strides and
    device, the address alignment below 16 bytes (CUDA operands are used in place), and `rest`."""
    low_bits = (a.data_ptr() | b.data_ptr()) & 15 if a.is_cuda else 0
    return (a.dtype, a.shape, a.stride(), b.dtype, b.shape, b.stride(), a.device, b.device, low_bits, *rest)


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.dtype, bias: Vector | None, activation: str | None,
            alpha: float, beta: float, scale: Vector | None, schedule: str | None, arch: str | None,
            fp8: bool, fast_accum: bool = False) -> Prepared:
    """The kernel and copies for a call with checked arguments (compiling on a new problem)."""
    target = arch_for(a.device, fp8, arch)
    # fast accumulation is a wgmma kernel's choice (no promotion step); tcgen05 accumulates fp8
    # in f32 in tensor memory at full rate, so there the flag has nothing to select
    fast_accum = fast_accum and ptxgen_target(target).wgmma
    a2, b2, g = gemm_problem(a, b, out, bias, activation, alpha, beta, scale, fast_accum)
    return Prepared(device_kernel(g, target, schedule, arch is None), a2 is not a, b2 is not b)


def current_stream(device: torch.device) -> int:
    """PyTorch's current CUDA stream on `device` as a CUstream handle (the raw getter Inductor's
    generated code uses: no Stream object per call; the public API where it is missing)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return int(raw(index)) if raw is not None else int(torch.cuda.current_stream(index).cuda_stream)


def run(p: Prepared, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bias: Vector | None,
        scale: Vector | None) -> None:
    """Compute into `c` (allocated by PyTorch, updated in place): on the GPU on PyTorch's current
    stream for CUDA tensors (asynchronous, no host synchronisation, no allocation), else on the
    simulator."""
    if p.copy_a:
        a = a.contiguous()
    if p.copy_b:
        b = b.contiguous()
    vb = bias.data if bias is not None else None
    vs = scale.data if scale is not None else None
    if c.is_cuda:
        if p.launcher is None:  # every check of kernel(a, b, c=c), once; allocates split-K scratch
            from ptxgen.runtime.rebind import Rebindable

            # detached: the array protocols refuse tensors that require grad (only addresses are read)
            p.launcher = Rebindable(p.kernel, *(None if t is None else t.detach() for t in (a, b, c, vb, vs)))
        p.launcher.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), 0 if vb is None else vb.data_ptr(),
                          0 if vs is None else vs.data_ptr(), current_stream(c.device))
        return
    arrays = [None if t is None else as_numpy(t) for t in (vb, vs)]
    p.kernel.simulate(as_numpy(a), as_numpy(b), c=as_numpy(c), bias=arrays[0], scale=arrays[1])


def run_checked(kernel: ptxgen.Kernel, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                bias: torch.Tensor | None = None, **arrays: torch.Tensor | None) -> None:
    """Compute into `c` with the run-time arrays the `Rebindable` fast path does not carry (a
    grouped kernel's `offs` / `masked_m`, a block-scaled one's `scale_a` / `scale_b`): CUDA
    tensors through `kernel(...)` on PyTorch's current stream (every operand checked per call,
    the arrays read on the device), CPU tensors on the simulator."""
    given = {name: t.detach() for name, t in arrays.items() if t is not None}
    if bias is not None:
        given["bias"] = bias.detach()
    if c.is_cuda:
        kernel(a.detach(), b.detach(), c=c, stream=current_stream(c.device), **given)
        return
    kernel.simulate(as_numpy(a), as_numpy(b), c=as_numpy(c), **{name: as_numpy(t) for name, t in given.items()})


def describe(t: Any) -> str:
    return f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} on {t.device}" if isinstance(t, torch.Tensor) else repr(t)
