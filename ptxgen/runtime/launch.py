"""Load cubins and launch ptxgen kernels (and arbitrary PTX entries) on the GPU.

`launch_kernel` is what `Kernel.__call__` runs; `launch_ptx` is the hardware twin of
`ptxgen.sim.launch`, used by the layout micro-tests to run one PTX on both.
"""
from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..schedule.problem import DTYPE_BYTES, numpy_dtype
from . import driver as drv
from ..schedule.grouping import c_shape
from .batch import check_batched_operand, operand_shape
from .launch_config import check_co_resident, cluster_slots, launch_config
from .grouped import check_not_grouped, counts_view, grouped_inputs, grouped_output
from .modules import (Function, Module, describe_run, kernel_binary, load_function, pin,  # noqa: F401
                      ptx_binary)
from .block_scales import check_block_scales, group_stride_args, stride_args
from .fp4 import as_packed, packed_shapes
from .scale_layout import blocked_scale_views, reads_scales_by_tma
from .operands import OperandView, check_no_aliasing, check_operand, normalize_dtype
from .operands import as_row as _as_row, cuda_array_interface as _cai
from .params import ParamBlock, ParamDecl, parse_params
from .spec import LaunchSpec

__all__ = ["launch_kernel", "launch_ptx", "prepare_launch", "load_function", "Function"]

_POISON = 0xFF  # all-ones bytes: NaN in f16, bf16 and f32, so unwritten outputs show


# -- modules: see modules.py ------------------------------------------------------------------
def _dim3(v: int | tuple[int, ...], what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
        raise ValueError(f"{what}={v!r}: give 1 to 3 positive sizes")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))  # type: ignore[return-value]


def _launch(fn: Function, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
            stream: int, params: ParamBlock, cluster: tuple[int, int, int] = (1, 1, 1),
            cooperative: bool = False) -> None:
    """cuLaunchKernel, or cuLaunchKernelEx with the cluster and cooperative attributes where the
    kernel needs them (launch_config.py)."""
    if cluster != (1, 1, 1) or cooperative:
        drv._call("cuLaunchKernelEx", launch_config(grid, block, smem, stream, cluster, cooperative), fn.handle,
                  params.address, 0)
        return
    drv._call("cuLaunchKernel", fn.handle, grid[0], grid[1], grid[2], block[0], block[1],
              block[2], int(smem), stream, params.address, 0)


def _sync_if_asked(stream: int) -> None:
    import os

    if os.environ.get("PTXGEN_SYNC", "0") not in ("", "0"):
        drv._call("cuStreamSynchronize", stream)


# -- architecture -------------------------------------------------------------------------------
def _ptx_target(ptx: str) -> str | None:
    m = re.search(r"^\s*\.target\s+(sm_\d+[af]?)", ptx, re.M)
    return m.group(1) if m else None


def _arch_for_ptx(ptx: str, ctx: drv.Context) -> str:
    """The device's arch, or its arch-specific variant when the PTX targets exactly that."""
    target = _ptx_target(ptx)
    if target and target[-1] in "af" and target[:-1] == ctx.arch:
        return target
    return ctx.arch


# -- framework helpers --------------------------------------------------------------------------
def _framework(x: Any) -> str:
    return type(x).__module__.split(".", 1)[0]


def _current_stream(x: Any) -> int | None:
    """The framework's current stream for its device array `x` (None if unknown)."""
    fw = _framework(x)
    try:
        if fw == "torch" and "torch" in sys.modules:
            return int(sys.modules["torch"].cuda.current_stream(x.device).cuda_stream)
        if fw == "cupy" and "cupy" in sys.modules:
            return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
    except Exception:
        return None
    return None


def _alloc_like(a: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """An uninitialised C-contiguous device array from A's framework (or a ptxgen DeviceArray)."""
    fw = _framework(a)
    try:
        if fw == "torch":
            torch = importlib.import_module("torch")
            tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                   "s32": torch.int32, "s8": torch.int8, "u8": torch.uint8}[dtype]
            return torch.empty(shape, dtype=tdt, device=a.device)
        if fw == "cupy" and dtype != "bf16":
            cupy = importlib.import_module("cupy")
            with cupy.cuda.Device(a.device.id):
                return cupy.empty(shape, dtype=numpy_dtype(dtype))
    except (ImportError, AttributeError, KeyError):
        pass
    return drv.DeviceArray(shape, numpy_dtype(dtype))


def _check_pointer_device(v: OperandView, dev: int) -> None:
    """For device arrays that do not say where they live, ask the driver."""
    if v.device is not None or not v.device_ptr:
        return
    attr = drv._driver().CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    try:
        found = drv._call("cuPointerGetAttribute", attr, int(v.device_ptr))
    except drv.DriverError as e:
        raise ValueError(f"{v.name}'s address {v.device_ptr:#x} is not CUDA device memory the "
                         f"driver knows ({e.name}): pass a device array or a numpy array") from None
    except Exception:  # binding quirk: the check is advisory, the launch can go on
        return
    if found is not None and int(found) != dev:
        raise ValueError(f"{v.name} is on CUDA device {int(found)} but ptxgen runs on device {dev}: "
                         f"move it there or set PTXGEN_DEVICE={int(found)}")


def _wait_for_producers(views: list[OperandView], stream: int) -> None:
    """Honour CUDA-array-interface v3 `stream`: order our launch after the producer's work."""
    for v in views:
        if v.stream is None or int(v.stream) == stream:
            continue
        ev = drv._call("cuEventCreate", 2)  # CU_EVENT_DISABLE_TIMING
        try:
            drv._call("cuEventRecord", ev, int(v.stream))
            drv._call("cuStreamWaitEvent", stream, ev, 0)
        finally:
            drv._driver().cuEventDestroy(ev)


# -- GEMM launch --------------------------------------------------------------------------------
@dataclass
class _Plan:
    """Everything one GEMM launch needs, checked once."""

    fn: Function
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    stream: int
    params: ParamBlock
    views: tuple[OperandView, OperandView, OperandView]
    c_out: Any
    host: bool
    cluster: tuple[int, int, int] = (1, 1, 1)
    cooperative: bool = False  # Stream-K: the whole grid resident at once (launch_config.py)
    buffers: list = field(default_factory=list)  # DeviceBuffers for host operands
    flats: list = field(default_factory=list)  # host staging arrays, kept alive


def _check_params(kernel: "LaunchSpec") -> list[ParamDecl]:
    """The entry's parameters, as its target's backend checks them against what the launch passes."""
    return kernel.check_params(parse_params(kernel.ptx, kernel.entry))


#: The epilogue's vector parameters: what each does to D (for messages).
_VECTORS = {"bias": "adds", "scale": "multiplies by"}


def check_epilogue_operands(kernel: "LaunchSpec", c: Any, bias: Any, scale: Any = None) -> None:
    """C must be given when beta != 0 (it is read); bias and scale exactly when the epilogue
    has them."""
    e = kernel.gemm.epi
    if e.beta != 0.0 and c is None:
        raise ValueError(f"the epilogue reads C (beta={e.beta}): pass c=, the array to update in place")
    for name, given in (("bias", bias), ("scale", scale)):
        kind = getattr(e, name)
        if kind and given is None:
            raise ValueError(f"the epilogue {_VECTORS[name]} a {kind} {name}: pass {name}=, a vector of "
                             f"length {kernel.gemm.n if kind == 'col' else kernel.gemm.m}")
        if not kind and given is not None:
            raise ValueError(f"{name}= was given but the kernel's epilogue has no {name}: compile with "
                             f"Gemm(epilogue=Epilogue({name}='col' or 'row'))")


def vector_view(kernel: "LaunchSpec", name: str, x: Any, device: int | None) -> OperandView:
    """The epilogue's `bias` (`gemm.bias_dtype`) or `scale` (f32) vector checked as a 1 x L
    row-major matrix, L = N for a "col" vector and M for a "row" one."""
    g = kernel.gemm
    length = g.n if getattr(g.epi, name) == "col" else g.m
    dtype = g.bias_dtype if name == "bias" else "f32"
    if tuple(getattr(x, "shape", ())) != (length,) or not (hasattr(x, "reshape") or _cai(x)):
        raise ValueError(f"{name} must be a 1-D array of length {length}, got {type(x).__name__} "
                         f"with shape {getattr(x, 'shape', None)}")
    if name == "bias":
        x = bias_as_compiled(g.bias_dtype, x)
    kw = {} if device is None else {"device": device}
    row = _as_row(x)
    return check_operand(row, name=name, shape=(1, length), dtype=dtype, layout="row",
                         align=DTYPE_BYTES[dtype], **kw)


def bias_as_compiled(want: str, x: Any) -> Any:
    """The bias in the dtype the kernel was compiled for: a host f16/bf16 vector is widened exactly
    for an f32-bias kernel; any other dtype mismatch is an error naming both fixes."""
    try:
        found = normalize_dtype(getattr(x, "dtype", None))
    except TypeError:
        return x  # not a dtype ptxgen knows: check_operand says so
    if found == want:
        return x
    if want == "f32" and found in ("f16", "bf16") and isinstance(x, np.ndarray):
        return x.astype(np.float32)  # exact
    if want == "f32":
        fix = "pass it as f32 (numpy: bias.astype(np.float32); torch: bias.float())"
    else:
        fix = (f"compile with Gemm(bias_dtype='f32') (the default), or pass bias.astype("
               f"ptxgen.schedule.problem.numpy_dtype({want!r})) if rounding it to {want} is acceptable")
    raise TypeError(f"bias has dtype {found} but the kernel was compiled for a {want} bias "
                    f"(Gemm(bias_dtype={want!r})): {fix}")


def bias_view(kernel: "LaunchSpec", bias: Any, device: int | None) -> OperandView:
    """The bias vector checked as a 1 x L row-major matrix of `gemm.bias_dtype`."""
    return vector_view(kernel, "bias", bias, device)


def _plan(kernel: "LaunchSpec", a: Any, b: Any, c: Any, stream: Any, bias: Any = None, scale: Any = None,
          offs: Any = None, masked_m: Any = None, scale_a: Any = None, scale_b: Any = None) -> _Plan:
    g = kernel.gemm
    check_epilogue_operands(kernel, c, bias, scale)
    check_not_grouped(g, offs, masked_m)
    if getattr(g, "block_scale", None) is None:
        check_block_scales(kernel, scale_a, scale_b)  # refuses scales the kernel does not take
    ctx = drv.context()
    dev = ctx.ordinal
    align = g.alignment()
    if g.grouped:  # A and B here; C below, once a fresh one exists
        av, bv = grouped_inputs(g, a, b, device=dev)
    else:
        (a_shape, b_shape), in_dtype = ((g.m, g.k), (g.k, g.n)), g.dtype
        if g.dtype == "e2m1":  # packed two per byte along K (runtime/fp4.py)
            a, b, (a_shape, b_shape), in_dtype = as_packed(a, "A"), as_packed(b, "B"), packed_shapes(g), "u8"
        av = check_batched_operand(a, name="A", batch=g.batch, shape=a_shape, dtype=in_dtype,
                                   layout=g.a_layout, device=dev, align=align)
        bv = check_batched_operand(b, name="B", batch=g.batch, shape=b_shape,
                                   dtype=g.in_dtype_b if in_dtype == g.dtype else in_dtype,
                                   layout=g.b_layout, device=dev, align=align)
    if av.is_host != bv.is_host:
        raise TypeError(f"A is {'a host numpy' if av.is_host else 'a device'} array but B is "
                        f"{'a host numpy' if bv.is_host else 'a device'} array: pass both on the "
                        f"host (numpy) or both on the GPU")
    host = av.is_host
    if c is None:
        shape = c_shape(g) if g.grouped else operand_shape(g.batch, g.m, g.n)
        c = np.empty(shape, dtype=numpy_dtype(g.out_dtype)) if host else \
            _alloc_like(a, shape, g.out_dtype)
        fresh = True
    else:
        fresh = False
    if g.grouped:
        cv = grouped_output(g, c, device=dev)
    else:
        cv = check_batched_operand(c, name="C", batch=g.batch, shape=(g.m, g.n), dtype=g.out_dtype,
                                   layout="row", writable=True, device=dev, align=g.out_alignment())
    if cv.is_host != host:
        raise TypeError(f"C is {'a host numpy' if cv.is_host else 'a device'} array but A and B "
                        f"are {'host numpy' if host else 'device'} arrays: pass C where A and B are")

    s = drv.resolve_stream(stream)
    if stream is None and not host:
        s = _current_stream(a) or 0

    cubin, runs, why_jit = kernel_binary(kernel, ctx)
    fn = load_function(cubin, kernel.entry, kernel.ptx, kernel.smem_bytes, why_jit)
    kernel.__dict__["_runs"] = describe_run(fn, runs, kernel.ptx)  # what k.resources reports
    decls = _check_params(kernel)

    grid = device_grid(kernel, fn, ctx)
    plan = _Plan(fn, _dim3(grid, "grid"), _dim3(kernel.block, "block"),
                 int(kernel.smem_bytes), s, None, (av, bv, cv), c, host,  # type: ignore[arg-type]
                 kernel.cluster_dims, kernel.needs_co_residency)
    if plan.cooperative:  # refused here, with the fix, rather than by the launch
        check_co_resident(plan.grid, fn, plan.block, plan.smem, ctx.sm_count)
    vectors = tuple(vector_view(kernel, name, x, dev) for name, x in (("bias", bias), ("scale", scale))
                    if x is not None)
    block_scales = check_block_scales(kernel, scale_a, scale_b, dev) if getattr(g, "block_scale", None) else None
    scale_views = ()  # sm_100a: the scales in the 128x4 block layout, passed as tensor maps (scale_layout.py)
    if block_scales is not None and reads_scales_by_tma(kernel):
        groups = g.groups if g.grouped else None   # masked: each group's blocks stacked
        scale_views, block_scales = blocked_scale_views(g.block_scale, scale_a, scale_b, dev, groups), None
    vectors += tuple(block_scales or ())
    if g.grouped:  # the kernel's last parameter: the groups' sizes, read on the device
        vectors += (counts_view(g, offs, masked_m, dev),)
    for v in vectors:  # a host vector's pointer would be null on the device path, and vice versa
        if v.is_host != host:
            raise TypeError(f"{v.name} is {'a host numpy' if v.is_host else 'a device'} array but A and B "
                            f"are {'host numpy' if host else 'device'} arrays: pass {v.name} where A and B are")
    check_no_aliasing(cv, [av, bv, *vectors])
    views = (av, bv, cv) + vectors + scale_views
    if host:
        ptrs = []
        for v in views:
            buf = drv.DeviceBuffer(v.nbytes)
            if v is cv and kernel.zeroes_c_first:
                buf.fill_bytes(0, s)  # atomic split-K adds its partial sums into C
            elif v is cv and fresh:
                buf.fill_bytes(_POISON, s)
            else:  # C too: elements the kernel skips keep the caller's values (e.g. NaN poison)
                flat = v.pack_host()
                plan.flats.append(flat)
                buf.upload(flat, s)
            plan.buffers.append(buf)
            ptrs.append(buf.ptr)
    else:
        for v in views:
            _check_pointer_device(v, dev)
        ptrs = [int(v.device_ptr or 0) for v in views]
        if kernel.zeroes_c_first:
            if not cv.dense:
                batched = f", batch stride {cv.batch_stride} (dense: {g.m * g.n})" if g.batch > 1 else ""
                raise ValueError("atomic split-K zeroes C's memory before the launch and needs a C "
                                 f"without gaps: got leading dimension {cv.ld} (dense: {g.n}){batched}; "
                                 f"pass a contiguous C")
            drv._call("cuMemsetD8Async", ptrs[2], 0, cv.nbytes, s)
    scale_ptrs = ptrs[len(ptrs) - len(scale_views):]  # into the scales' tensor maps, not the parameters
    plan.flats.extend(scale_views)  # a device path's blocked copies live until the launch is done
    ptrs = ptrs[:len(ptrs) - len(scale_views)]
    if block_scales is not None:  # the scales' element strides follow their pointers
        strides = stride_args(block_scales) + group_stride_args(g, block_scales)
        # a grouped kernel's offs / masked_m stays its last parameter
        ptrs = ptrs[:-1] + strides + ptrs[-1:] if g.grouped else ptrs + strides
    if kernel.scratch_sizes(grid)[0]:
        ptrs += [buf.ptr for buf in _split_k_scratch(kernel, grid, s)]
    views = (av, bv, cv)  # tensor maps by value where the kernel takes them (an sm_90a kernel's A and B)
    maps = kernel.tensor_map_args(views + scale_views, ptrs[:3] + scale_ptrs)
    plan.params = ParamBlock(decls, kernel.arguments(views, ptrs[:3], maps) + ptrs[3:])
    return plan


def device_grid(kernel: "LaunchSpec", fn: Function, ctx: drv.Context) -> tuple[int, int, int]:
    """The grid for this device: Stream-K and the persistent sm_90a grid with `sms=None` fill it,
    a cluster kernel's with as many whole clusters as cuOccupancyMaxActiveClusters says run at once
    (floor(SMs / cluster size) where the driver cannot say); which rule sized it is kept on the
    kernel (`grid_source`, shown by `ptxgen info`)."""
    cluster = kernel.cluster_dims
    if not kernel.grid_follows_device:
        return kernel.launch_grid(ctx.sm_count)
    slots, source = None, f"{ctx.sm_count} SMs of {ctx.name}"
    if cluster != (1, 1, 1):
        slots, source = cluster_slots(fn, _dim3(kernel.block, "block"), int(kernel.smem_bytes), cluster)
    grid = kernel.launch_grid(ctx.sm_count, cluster_slots=slots)
    kernel.__dict__["_grid_source"] = f"grid {grid} on {ctx.name}, sized by {source}"
    return grid


def _split_k_scratch(kernel: "LaunchSpec", grid: tuple[int, int, int], stream: int) -> tuple[Any, Any]:
    """The workspace and counters (or flags) of a split-K / Stream-K kernel for `grid`, allocated
    once per (device, context, grid) and kept on the kernel: the kernel leaves its counters at
    zero, and partials are rewritten every launch. Launches of one such kernel on concurrent streams share them, so
    serialize those."""
    cache = kernel.__dict__.setdefault("_split_k_scratch", {})
    ctx = drv.context()
    key = (ctx.ordinal, ctx.key, grid)  # device memory belongs to one device's context
    scratch = cache.get(key)
    if scratch is None:
        elements, count = kernel.scratch_sizes(grid)
        workspace = drv.DeviceBuffer(elements * 4)
        counters = drv.DeviceBuffer(count * 4)
        counters.fill_bytes(0, stream)
        scratch = (workspace, counters)
        cache[key] = scratch
    return scratch


def _finish_host(plan: _Plan) -> None:
    cv = plan.views[2]
    flat = np.empty(max(cv.span, 1), dtype=cv.host.dtype)
    plan.buffers[2].download(flat, plan.stream)
    drv._call("cuStreamSynchronize", plan.stream)
    cv.unpack_to_host(flat)
    for buf in plan.buffers:
        buf.free()


def launch_kernel(kernel: "LaunchSpec", a: Any, b: Any, c: Any = None, bias: Any = None, stream: Any = None,
                  scale: Any = None, offs: Any = None, masked_m: Any = None, scale_a: Any = None,
                  scale_b: Any = None) -> Any:
    """Run a compiled GEMM on the GPU and return C.

    numpy inputs: copied to the device, C copied back (into `c` if given) and synchronized.
    Batched kernels take (batch, rows, cols) operands with any batch strides (0 broadcasts A or
    B; see ptxgen.runtime.batch) and return a (batch, M, N) C. Grouped kernels take `offs` or
    `masked_m` (ptxgen.runtime.grouped; rows outside the groups keep C's values).
    Device inputs (CUDA array interface / DLPack): C is a device array from A's framework
    when `c` is None; the launch is asynchronous on `stream` (default: the framework's current
    stream, else the legacy default stream).
    """
    plan = _plan(kernel, a, b, c, stream, bias, scale, offs, masked_m, scale_a, scale_b)
    if not plan.host:
        _wait_for_producers(list(plan.views), plan.stream)
    _launch(plan.fn, plan.grid, plan.block, plan.smem, plan.stream, plan.params, plan.cluster, plan.cooperative)
    if plan.host:
        _finish_host(plan)
    else:
        _sync_if_asked(plan.stream)
    return plan.c_out


def prepare_launch(kernel: "LaunchSpec", a: Any, b: Any, c: Any, stream: Any = None, bias: Any = None,
                   scale: Any = None, offs: Any = None, masked_m: Any = None) -> Callable[[], None]:
    """Check everything once and return a zero-argument function that only launches.

    For benchmarks: device operands only, no per-call checks, allocation or synchronization.
    """
    plan = _plan(kernel, a, b, c, stream, bias, scale, offs, masked_m)
    if plan.host:
        raise TypeError("prepare_launch needs device arrays (numpy inputs are copied per call)")
    fn, grid, block, smem, s, params = plan.fn, plan.grid, plan.block, plan.smem, plan.stream, \
        plan.params
    launch = drv._driver().cuLaunchKernel
    check = drv.check
    addr = params.address
    make_current = drv.context().make_current

    extended = plan.cluster != (1, 1, 1) or plan.cooperative
    config = launch_config(grid, block, smem, s, plan.cluster, plan.cooperative) if extended else None
    launch_ex = drv._driver().cuLaunchKernelEx if config is not None else None

    def run() -> None:
        make_current()  # run may be called from another thread than the one that prepared it
        if config is not None:  # cuLaunchKernelEx with the cluster / cooperative attributes
            check("cuLaunchKernelEx", launch_ex(config, fn.handle, addr, 0))
            return
        check("cuLaunchKernel", launch(fn.handle, grid[0], grid[1], grid[2], block[0], block[1],
                                       block[2], smem, s, addr, 0))

    pin(run, fn)  # the module stays loaded while the prepared launch exists
    run.params = params  # type: ignore[attr-defined]  # keep the parameter storage alive
    run.plan = plan  # type: ignore[attr-defined]
    return run


# -- arbitrary PTX ------------------------------------------------------------------------------
def _device_pointer(x: Any) -> int | None:
    """The device address of a CUDA array (any 1-D/2-D/... layout), or None if not one."""
    try:
        cai = x.__cuda_array_interface__
    except Exception:  # absent, or refused (torch bf16): try DLPack
        cai = None
    if cai is not None:
        return int(cai["data"][0])
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__") and \
            int(x.__dlpack_device__()[0]) != 1:
        from .operands import _capsule_pointer, _DLManagedTensor

        addr, versioned = _capsule_pointer(x.__dlpack__())
        if versioned:
            from .operands import _DLManagedTensorVersioned

            t = _DLManagedTensorVersioned.from_address(addr).dl_tensor
        else:
            t = _DLManagedTensor.from_address(addr).dl_tensor
        return int(t.data or 0) + int(t.byte_offset)
    return None


def launch_ptx(ptx: str, entry: str, grid: int | tuple[int, ...], block: int | tuple[int, ...],
               args: list | tuple, dynamic_smem: int = 0, arch: str | None = None) -> None:
    """Assemble and run one PTX entry on the GPU, synchronously; the twin of `ptxgen.sim.launch`.

    `args` follow the entry's `.param` list: numpy arrays for pointer parameters are copied to
    the device and their contents copied back into the same arrays afterwards (read-only arrays
    are not written back); device arrays pass their address; ints/floats are typed by the
    declarations; bytes fill `.b8 name[N]` parameters.
    """
    ctx = drv.context()
    decls = parse_params(ptx, entry)
    if len(args) != len(decls):
        names = ", ".join(f"{d.name}:.{d.type}" for d in decls)
        raise ValueError(f"entry {entry} takes {len(decls)} parameters ({names}): got "
                         f"{len(args)} args")
    target_arch = arch or _arch_for_ptx(ptx, ctx)
    cubin, _, why_jit = ptx_binary(ptx, target_arch, entry, ctx)  # setmaxnreg: whole-program
    fn = load_function(cubin, entry, ptx, int(dynamic_smem), why_jit)

    values: list[object] = []
    back: list[tuple[np.ndarray, drv.DeviceBuffer]] = []
    bufs: list[drv.DeviceBuffer] = []
    for d, v in zip(decls, args):
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v.item()
        if isinstance(v, np.ndarray):
            if not d.is_pointer_sized:
                raise TypeError(f"parameter {d.name} is .{d.type}: a numpy array needs a .u64 "
                                f"pointer parameter")
            if not v.flags.c_contiguous:
                raise ValueError(f"argument for {d.name} must be C-contiguous: pass "
                                 f"np.ascontiguousarray(x)")
            buf = drv.DeviceBuffer(max(v.nbytes, 256))
            buf.upload(v, 0)
            bufs.append(buf)
            if v.flags.writeable:
                back.append((v, buf))
            values.append(buf.ptr)
        elif (ptr := _device_pointer(v)) is not None:
            values.append(ptr)
        else:
            values.append(v)
    params = ParamBlock(decls, values)
    _launch(fn, _dim3(grid, "grid"), _dim3(block, "block"), int(dynamic_smem), 0, params)
    drv._call("cuStreamSynchronize", 0)
    for host, buf in back:
        buf.download(host, 0)
    drv._call("cuStreamSynchronize", 0)
    for buf in bufs:
        buf.free()
