"""The run-time scales of a block-scaled fp8 kernel (schedule/block_scale.py): `scale_a` and
`scale_b` checked against the Gemm and turned into the kernel's arguments (pointers, then the
element strides `sa_row_stride, sa_k_stride, sb_k_stride, sb_n_stride`, then a grouped GEMM's
`sa_group_stride, sb_group_stride`).

Orientation: sa is the logical (M, ceil(K/128)) array and sb the logical (ceil(K/128), ceil(N/128))
one, stored row-major or column-major. The kernel reads them through the strides, so the
TMA-friendly storage DeepGEMM uses (sa kept as a (ceil(K/128), M) row-major array, M contiguous)
is passed as its transpose, `sa_storage.T`, a column-major (M, ceil(K/128)) view: no copy.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..schedule.block_scale import UE8M0_RANGE
from .operands import OperandView, check_operand

#: The ptxgen dtype each scale dtype's arrays have.
SCALE_ARRAY_DTYPE = {"f32": "f32", "ue8m0": "u8", "ue4m3": "u8"}


def check_block_scales(kernel: Any, scale_a: Any, scale_b: Any,
                       device: int | None = None) -> tuple[OperandView, OperandView] | None:
    """The views of sa and sb (None for a kernel without block scaling, which takes neither)."""
    g = kernel.gemm
    bs = g.block_scale
    if bs is None:
        if scale_a is not None or scale_b is not None:
            raise ValueError("scale_a=/scale_b= were given but the kernel is not block-scaled: compile with "
                             "Gemm(dtype='e4m3', block_scale=ptxgen.BlockScale()), or drop them (a per-row or "
                             "per-column scale is Epilogue(scale='row'/'col') and scale=)")
        return None
    if getattr(g, "grouped", False):
        return grouped_block_scales(g, scale_a, scale_b, device)
    shapes = bs.shapes(g.m, g.n, g.k)
    views = []
    gk = bs.group_k
    b_what = "(ceil(K/128), ceil(N/128))" if bs.family == "deepseek" else f"(ceil(K/{gk}), N)"
    for name, x, shape, what in (("scale_a", scale_a, shapes[0], f"(M, ceil(K/{gk}))"),
                                 ("scale_b", scale_b, shapes[1], b_what)):
        if x is None:
            raise ValueError(f"the kernel is block-scaled ({bs}): pass {name}=, a {bs.dtype} array of shape "
                             f"{shape} {what} in the logical orientation (ptxgen.schedule.block_scale."
                             "random_block_scales draws some)")
        views.append(_view(name, x, shape, SCALE_ARRAY_DTYPE[bs.dtype], device))
        _check_scale_codes(bs, name, x)
    return views[0], views[1]


def grouped_block_scales(g: Any, scale_a: Any, scale_b: Any,
                         device: int | None = None) -> tuple[OperandView, OperandView]:
    """A grouped GEMM's scales (schedule/grouping.py): contiguous sa (M_total, Kb), masked sa (G, max_m, Kb);
    sb (G, Kb, Nb) for both. Each matrix row-major or column-major (its group stride any)."""
    from .grouped import group_operand

    bs = g.block_scale
    (_, kb), sb_shape = bs.shapes(g.m, g.n, g.k)
    masked = g.grouping == "masked"
    views = []
    for name, x, per_group, shape in (("scale_a", scale_a, masked, (g.m, kb)), ("scale_b", scale_b, True, sb_shape)):
        full = ((g.groups,) if per_group else ()) + shape
        if x is None:
            raise ValueError(f"the kernel is a block-scaled {g.grouping} grouped GEMM ({bs}): pass {name}=, a "
                             f"{bs.dtype} array of shape {full} (ptxgen.schedule.block_scale.random_grouped_scales "
                             "draws some)")
        kw = dict(name=name, g=g, per_group=per_group, shape=shape, dtype=SCALE_ARRAY_DTYPE[bs.dtype], align=1,
                  device=device)
        try:
            views.append(group_operand(x, layout="row", **kw))
        except ValueError as row_error:
            try:
                views.append(group_operand(x, layout="col", **kw))
            except ValueError:
                raise row_error from None
        _check_scale_codes(bs, name, x)
    return views[0], views[1]


def _check_scale_codes(bs: Any, name: str, x: Any) -> None:
    """Scale codes no kernel can use, refused with the fix: ue8m0 0 and 255, ue4m3 signs and NaN."""
    if bs.dtype == "ue8m0" and isinstance(x, np.ndarray):
        lo, hi = UE8M0_RANGE
        if x.size and (x.min() < lo or x.max() > hi):
            raise ValueError(f"{name} holds ue8m0 exponents outside {lo}..{hi} (0 is 2^-127 and 255 NaN, which "
                             "the kernel's e << 23 cannot make a normal f32): clip them, np.clip(x, 1, 254)")
    if bs.dtype == "ue4m3" and isinstance(x, np.ndarray) and x.size and ((x & 0x80).any() or (x == 0x7F).any()):
        raise ValueError(f"{name} holds ue4m3 codes with the sign bit (0x80) set or the NaN code 0x7F: ue4m3 is "
                         "e4m3 without a sign (sm100_formats.md §1); pass np.abs of the e4m3 scales' codes")


def _view(name: str, x: Any, shape: tuple[int, int], dtype: str, device: int | None) -> OperandView:
    """`x` as a row-major view, else a column-major one (the transposed storage); the row-major
    error where neither describes it."""
    kw = {} if device is None else {"device": device}
    try:
        return check_operand(x, name=name, shape=shape, dtype=dtype, layout="row", align=1, **kw)
    except ValueError as row_error:
        try:
            return check_operand(x, name=name, shape=shape, dtype=dtype, layout="col", align=1, **kw)
        except ValueError:
            raise row_error from None


def stride_args(views: tuple[OperandView, OperandView]) -> list[int]:
    """sa_row_stride, sa_k_stride, sb_k_stride, sb_n_stride: each view's element strides."""
    out: list[int] = []
    for v in views:
        out += [v.ld, 1] if v.layout == "row" else [1, v.ld]
    return out


def group_stride_args(g: Any, views: tuple[OperandView, OperandView]) -> list[int]:
    """sa_group_stride, sb_group_stride of a grouped GEMM's scales (0 for a contiguous sa, which
    has no group dimension, and for one group); [] for other kernels."""
    if not getattr(g, "grouped", False):
        return []
    return [v.batch_stride if v.batch > 1 else 0 for v in views]
