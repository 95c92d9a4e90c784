"""Batched GEMM operands: a (batch, rows, cols) array, checked as one matrix plus a batch stride.

Why this split: a `Gemm(batch=B)` kernel gets one matrix's pointer and leading dimension plus
`batch_stride_a/b/c` (elements; ctaid.z picks the batch), so a batched operand is usable exactly
when one of its matrices passes check_operand's rules and its batch stride is one the kernel can
step by. The 3-D description (numpy strides, CUDA array interface, DLPack) is cut down to one
matrix's and held to the same rules as a 2-D operand, for the GPU launcher and the simulator alike.
"""
from __future__ import annotations

from dataclasses import replace
from math import gcd
from typing import Any

from .operands import DIMS, OperandView, RawArray, check_matrix, check_operand, normalize_dtype, read_array

__all__ = ["check_batched_operand", "operand_shape"]


def operand_shape(batch: int, rows: int, cols: int) -> tuple[int, ...]:
    """The array shape of an operand: (rows, cols), or (batch, rows, cols) when batched."""
    return ((batch,) if batch > 1 else ()) + (int(rows), int(cols))


def check_batched_operand(x: Any, *, name: str, batch: int, shape: tuple[int, int], dtype: Any,
                          layout: str, align: int = 16, writable: bool = False,
                          device: int | None = None) -> OperandView:
    """check_operand for an operand of a `Gemm(batch=...)` kernel.

    batch 1 is the plain 2-D check. Larger batches take a (batch, *shape) array whose batch
    stride, read from its strides, is non-negative, a whole number of elements, `align`-byte
    aligned (it is kept in host copies, like the leading dimension), and not 0 for an output
    (`writable`: every batch would write the same matrix). 0 broadcasts an input, as
    `np.broadcast_to` does. The view describes one matrix plus `batch` and `batch_stride`.
    """
    if batch == 1:
        return check_operand(x, name=name, shape=shape, dtype=dtype, layout=layout, align=align,
                             writable=writable, device=device)
    want = normalize_dtype(dtype)
    raw = read_array(x, name, want)
    one, stride = _one_matrix(raw, name=name, batch=batch, shape=shape, writable=writable)
    v = check_matrix(one, x, name=name, shape=shape, dtype=want, layout=layout, align=align,
                     writable=writable, device=device)
    if align > 1 and (stride * v.itemsize) % align:
        step = align // gcd(align, v.itemsize)
        raise ValueError(f"{name}'s batch stride is {stride} elements ({stride * v.itemsize} bytes), "
                         f"not a multiple of {align} bytes, the alignment the kernel was compiled "
                         f"for: start its matrices a multiple of {step} elements apart (allocate a "
                         f"larger buffer and pass a slice of it), or compile with Gemm(align=...) "
                         f"no larger than the operands guarantee")
    return replace(v, batch=batch, batch_stride=stride,
                   nbytes=((batch - 1) * stride + v.span) * v.itemsize)


def _one_matrix(raw: RawArray, *, name: str, batch: int, shape: tuple[int, int],
                writable: bool) -> tuple[RawArray, int]:
    """(the description of matrix 0, the batch stride in elements), or a ValueError saying why not."""
    rows, cols = int(shape[0]), int(shape[1])
    full = (batch, rows, cols)
    dims = DIMS.get(name.lower(), ("rows", "cols"))
    what = (f"{name} of a batched GEMM (batch={batch}) must be a 3-D array of shape {full}, "
            f"{batch} logical {dims[0]}×{dims[1]} matrices")
    if len(raw.shape) != 3:
        fix = (f"give each batch its own matrix (e.g. np.empty({full}, ...))" if writable else
               f"stack the matrices (np.stack / torch.stack), or share one matrix across the "
               f"batches without copying: np.broadcast_to(x, {full}) / x.expand({batch}, -1, -1)")
        raise ValueError(f"{what}: got shape {raw.shape}; {fix}")
    if raw.shape[0] != batch:
        raise ValueError(f"{what}: got {raw.shape[0]} matrices (shape {raw.shape}); pass {batch}, "
                         f"or compile with Gemm(batch={raw.shape[0]})")
    if raw.shape[1:] != (rows, cols):
        hint = ("; they look transposed: pass np.swapaxes(x, 1, 2) (torch: x.transpose(1, 2))"
                if raw.shape[1:] == (cols, rows) and rows != cols else "")
        raise ValueError(f"{what}: got shape {raw.shape}{hint}")
    if raw.byte_strides is None:  # C-contiguous
        return replace(raw, shape=(rows, cols)), rows * cols
    isz, step = raw.itemsize, raw.byte_strides[0]
    if step % isz:
        raise ValueError(f"{name}'s batch stride is {step} bytes, not a multiple of its {isz}-byte "
                         f"element: pass a contiguous copy (np.ascontiguousarray / .contiguous())")
    if step < 0:
        raise ValueError(f"{name}'s batch stride is negative ({step // isz} elements: a view with "
                         f"the batches reversed): pass a contiguous copy (np.ascontiguousarray / "
                         f".contiguous())")
    if writable and step == 0:
        raise ValueError(f"{name} has batch stride 0 (one matrix broadcast to every batch): every "
                         f"batch would write the same matrix; give each batch its own matrix "
                         f"(e.g. np.empty({full}, ...))")
    return replace(raw, shape=(rows, cols), byte_strides=raw.byte_strides[1:]), step // isz
