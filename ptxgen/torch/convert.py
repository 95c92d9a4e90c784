"""torch tensors seen as ptxgen operands: dtype names, storage layouts read from strides, and CPU
tensors as numpy arrays for the simulator (bf16 and fp8 through same-size integer views, since
numpy has no such dtypes of its own and ml_dtypes supplies them)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ptxgen.schedule.problem import numpy_dtype

#: torch dtype -> ptxgen input dtype. f32 inputs are multiplied as tf32 (10-bit mantissas, f32
#: accumulation), the precision `torch.backends.cuda.matmul.allow_tf32 = True` gives cuBLAS.
INPUT_DTYPES: dict[torch.dtype, str] = {
    torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "tf32", torch.int8: "s8", torch.uint8: "u8",
    torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
#: torch dtype -> ptxgen output dtype.
OUTPUT_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "s32", torch.int8: "s8",
    torch.uint8: "u8"}
#: The output dtype when the caller gives none: the input's own for 16-bit floats and f32, s32 for
#: 8-bit integers, f32 for fp8 (as torch._scaled_mm's widest choice).
DEFAULT_OUT: dict[torch.dtype, torch.dtype] = {
    torch.float16: torch.float16, torch.bfloat16: torch.bfloat16, torch.float32: torch.float32,
    torch.int8: torch.int32, torch.uint8: torch.int32, torch.float8_e4m3fn: torch.float32,
    torch.float8_e5m2: torch.float32}
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
#: Same-size integer dtypes through which numpy sees torch's bf16 and fp8 storage.
_RAW_VIEW = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8, torch.float8_e5m2: torch.uint8}
_RAW_NAME = {torch.bfloat16: "bf16", torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}


def input_dtype(t: torch.Tensor, name: str) -> str:
    """The ptxgen input dtype of `t`, or a TypeError listing the ones ptxgen multiplies."""
    try:
        return INPUT_DTYPES[t.dtype]
    except KeyError:
        known = ", ".join(str(d).removeprefix("torch.") for d in INPUT_DTYPES)
        raise TypeError(f"ptxgen.torch: {name} has dtype {t.dtype}, which ptxgen kernels do not multiply: "
                        f"convert it to one of {known} (e.g. {name}.half())") from None


def output_dtype(dtype: torch.dtype) -> str:
    """The ptxgen output dtype of a torch dtype, or a TypeError listing the ones kernels write."""
    try:
        return OUTPUT_DTYPES[dtype]
    except KeyError:
        known = ", ".join(str(d).removeprefix("torch.") for d in OUTPUT_DTYPES)
        raise TypeError(f"ptxgen.torch: out_dtype={dtype} is not an output ptxgen kernels write: use one of "
                        f"{known}") from None


@dataclass(frozen=True)
class Layout:
    """How one logical (rows, cols) matrix (the last two dims) is stored: "row" (last index
    contiguous) or "col", its leading dimension in elements (None: dense), and whether the tensor
    had to be copied to get either."""

    layout: str
    ld: int | None
    copied: bool


def matrix_layout(t: torch.Tensor) -> tuple[torch.Tensor, Layout]:
    """(`t` or a row-major copy, its Layout). A transposed view (`w.t()`, `x.mT`) is a "col"
    layout, not a copy; only strides neither layout covers (a step in the contiguous dimension,
    a broadcast row, overlapping rows) are copied."""
    rows, cols = t.shape[-2], t.shape[-1]
    s_row, s_col = t.stride(-2), t.stride(-1)
    if cols == 1 or s_col == 1:
        if rows == 1 or (s_row >= cols and s_row > 0):
            return t, Layout("row", None if rows == 1 or s_row == cols else s_row, False)
    if rows == 1 or s_row == 1:
        if cols == 1 or (s_col >= rows and s_col > 0):
            return t, Layout("col", None if cols == 1 or s_col == rows else s_col, False)
    return t.contiguous(), Layout("row", None, True)


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor sharing its memory and strides (writes show in `t`). A view
    that is neither C- nor F-contiguous (a permuted 3-D operand) is made over the whole storage as
    a 1-D array, so its `.base` chain ends in one dense buffer, as the simulator's global memory
    and tensor maps want (numpy's own view of such a tensor has no ndarray base)."""
    t = t.detach()
    raw = _RAW_VIEW.get(t.dtype)
    dtype = None if raw is None else numpy_dtype(_RAW_NAME[t.dtype])
    view = t.numpy() if raw is None else t.view(raw).numpy().view(dtype)
    if view.flags.c_contiguous or view.flags.f_contiguous:
        return view
    flat = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).numpy()
    size = t.element_size()
    return np.ndarray(tuple(t.shape), dtype=view.dtype, buffer=flat, offset=t.storage_offset() * size,
                      strides=tuple(x * size for x in t.stride()))


def pointer_alignment(*tensors: torch.Tensor) -> int:
    """The largest of 16, 8, 4, 2, 1 bytes dividing every tensor's data address (device operands
    are used in place, so their base addresses bound the copy width)."""
    bits = 0
    for t in tensors:
        bits |= t.data_ptr()
    return next(a for a in (16, 8, 4, 2, 1) if bits % a == 0)
