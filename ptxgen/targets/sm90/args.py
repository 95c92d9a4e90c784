"""Arguments of ptxgen's sm_90a kernels (targets/sm90/pipeline.py) on the driver path: the
CUtensorMaps of A and B (and of C for the TMA-store epilogue) passed by value, and the check of the entry's parameter list. Apart
from launch.py, whose pointer-argument kernels are the rest of ptxgen's."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...schedule.problem import numpy_dtype
from ...runtime.operands import OperandView
from ...runtime.params import ParamDecl

if TYPE_CHECKING:
    from ...kernel import Kernel


def check_sm90_params(kernel: "Kernel", decls: list[ParamDecl]) -> list[ParamDecl]:
    """An sm_90a kernel takes its tensor maps (.b8 [128]), then C (.u64), M, N, K, ldc (.u32), then
    batch_stride_c (.u64) when batched, then the epilogue's bias and scale pointers (.u64) when it has them,
    then workspace and counters (.u64) with split-K."""
    g = kernel.gemm
    maps, vectors = len(kernel.tensor_maps), int(bool(g.epi.bias)) + int(bool(g.epi.scale))
    grouped = bool(getattr(g, "grouped", False))
    batched = int(g.batch > 1 or getattr(g, "grouping", None) == "masked")   # batch_stride_c
    scratch = 2 if kernel.workspace_elements else 0  # workspace split-K: workspace, counters
    scratch += int(grouped)  # offs / masked_m, last (grouped.py)
    pointers = decls[maps + 5:]
    strides_ok = True
    if getattr(g, "block_scale", None) is not None:  # scale_a, scale_b, then 4 (grouped: 6) .u32 strides
        at, count = batched + vectors + 2, 6 if grouped else 4
        strides_ok = all(d.type[1:] == "32" for d in pointers[at:at + count])
        pointers = pointers[:at] + pointers[at + count:]
        vectors += 2 + count
    ok = (len(decls) == maps + 5 + batched + vectors + scratch and all(d.is_array and d.nbytes == 128 for d in decls[:maps])
          and decls[maps].is_pointer_sized and all(d.type[1:] == "32" for d in decls[maps + 1:maps + 5])
          and all(d.is_pointer_sized for d in pointers) and strides_ok)
    if not ok:
        raise ValueError(f"entry {kernel.entry} declares parameters {[f'{d.name}:.{d.type}' for d in decls]}; "
                         f"ptxgen's sm_90a kernels take {maps} tensor maps (.param .align 64 .b8 [128]), "
                         "then C (.u64), M, N, K, ldc (.u32), batch_stride_c (.u64) when batched, the bias "
                         "and scale pointers (.u64) when the epilogue has them, scale_a, scale_b (.u64) and 4 strides (.u32) "
                         "when block-scaled (then sa_group_stride, sb_group_stride when grouped), workspace, counters (.u64) "
                         "with split-K, and offs / masked_m (.u64) last when grouped")
    return decls


def check_tma_batch_stride(v: OperandView) -> None:
    """A batched operand's batch stride becomes the outermost stride of its 3-D tensor map, which
    TMA needs positive and a multiple of 16 bytes (cuTensorMapEncodeTiled's globalStrides rule):
    a broadcast (stride 0) operand cannot be described, so it is refused here with the fix."""
    if v.batch == 1:
        return
    nbytes = v.batch_stride * v.itemsize
    if nbytes <= 0 or nbytes % 16:
        what = ("0 (one matrix broadcast to every batch)" if nbytes == 0 else
                f"{v.batch_stride} elements ({nbytes} bytes)")
        raise ValueError(f"{v.name}'s batch stride is {what}: an sm_90a kernel reads {v.name} through a 3-D "
                         f"tensor map, whose batch stride TMA needs positive and a multiple of 16 bytes; "
                         f"pass a copy with one matrix per batch, its matrices a multiple of 16 bytes apart "
                         f"(np.ascontiguousarray / .contiguous()), or compile for arch='sm_90' with "
                         f"instruction='m16n8k16' (the mma.sync path takes any batch stride, 0 included)")


class _DeviceMatrix:
    """A 2-D (or batched 3-D) device view (address, shape, byte strides) for `tensormaps.encode_tiled`."""

    def __init__(self, address: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: np.dtype):
        self.dtype = dtype
        self.__cuda_array_interface__ = {"data": (address, True), "shape": shape, "strides": strides,
                                         "typestr": dtype.str, "version": 3}


def sm90_tensor_maps(kernel: "Kernel", views: tuple[OperandView, ...], ptrs: list[int]) -> list[bytes]:
    """The CUtensorMaps of A's and B's contiguous-last views (then C's, which the TMA-store
    epilogue writes) at device addresses `ptrs`, with the boxes and swizzle of
    `kernel.tensor_maps` (cuTensorMapEncodeTiled through cuda-python); A's and B's are 3-D, the
    batch outermost with the operand's batch stride, for a batched GEMM."""
    from ...runtime.tensormaps import encode_tiled

    g = kernel.gemm
    out = []
    for spec, v, ptr in zip(kernel.tensor_maps, views, ptrs):
        dtype = np.dtype(numpy_dtype(g.out_dtype if spec.operand == "C" else g.dtype))
        (r, c), (sr, sc) = v.shape, v.strides
        transpose = spec.k_major == (spec.operand == "B")  # as TensorMapSpec.view
        shape, strides = ((c, r), (sc, sr)) if transpose else ((r, c), (sr, sc))
        if spec.batched:
            check_tma_batch_stride(v)
            # one matrix (a one-group GEMM's operand): the group stride is never stepped over
            outer = v.batch_stride if v.batch > 1 else shape[0] * strides[0]
            shape, strides = (v.batch, *shape), (outer, *strides)
        dev = _DeviceMatrix(ptr, shape, tuple(x * dtype.itemsize for x in strides), dtype)
        out.append(encode_tiled(dev, spec.box, swizzle=spec.swizzle).raw)
    return out
