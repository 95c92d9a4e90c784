"""The operands of a grouped GEMM (schedule/grouping.py), checked for the GPU launcher and the
simulator alike: A, B and C with or without their group dimension, and the `offs` / `masked_m`
array the kernel reads on the device (passed as its last parameter).

Contiguous: A (M_total, K) and C (M_total, N) are plain matrices; B (G, K, N) has one matrix per
group (its group stride is the kernel's `batch_stride_b`). Masked: A (G, max_m, K), B and
C (G, max_m, N) each have one matrix per group (strides `batch_stride_a/b/c`). K-contiguous:
A (M, K_total) column-major and B (K_total, N) row-major are plain matrices (each group a slice of
K); C (G, M, N) has one matrix per group (its stride `batch_stride_c`). A 3-D operand is
checked as a batched one (ptxgen.runtime.batch), with G = 1 allowed too (its one matrix).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..schedule.grouping import check_counts
from .batch import check_batched_operand
from .operands import OperandView, as_row, check_operand

if TYPE_CHECKING:
    from ..schedule.problem import Gemm


def _one_group(x: Any, name: str, shape: tuple[int, int]) -> Any:
    """A (1, rows, cols) operand of a one-group GEMM as its matrix (the batch check wants 2-D)."""
    got = tuple(getattr(x, "shape", ()))
    if len(got) != 3 or got[0] != 1:
        raise ValueError(f"{name} of a grouped GEMM with groups=1 must be a 3-D array of shape (1, {shape[0]}, "
                         f"{shape[1]}), one matrix per group: got shape {got}; pass x[None] "
                         f"(torch: x.unsqueeze(0))")
    return x[0]


def group_operand(x: Any, *, name: str, g: "Gemm", per_group: bool, shape: tuple[int, int], dtype: str,
                  layout: str, align: int, writable: bool = False, device: int | None = None) -> OperandView:
    """One operand: a (G, *shape) array when `per_group` (its view carries the group stride as its
    batch stride), else a plain matrix."""
    kw: dict[str, Any] = {} if device is None else {"device": device}
    if not per_group:
        return check_operand(x, name=name, shape=shape, dtype=dtype, layout=layout, align=align,
                             writable=writable, **kw)
    if g.groups == 1:
        return check_operand(_one_group(x, name, shape), name=name, shape=shape, dtype=dtype, layout=layout,
                             align=align, writable=writable, **kw)
    return check_batched_operand(x, name=name, batch=g.groups, shape=shape, dtype=dtype, layout=layout,
                                 align=align, writable=writable, **kw)


def grouped_inputs(g: "Gemm", a: Any, b: Any, device: int | None = None) -> tuple[OperandView, OperandView]:
    """(A, B) views of a grouped GEMM's inputs, with the fixes their errors name."""
    masked = g.grouping == "masked"
    align = g.alignment()
    try:
        va = group_operand(a, name="A", g=g, per_group=masked, shape=(g.m, g.k), dtype=g.dtype, layout=g.a_layout,
                           align=align, device=device)
        vb = group_operand(b, name="B", g=g, per_group=g.grouping != "k-contiguous", shape=(g.k, g.n),
                           dtype=g.dtype, layout=g.b_layout, align=align, device=device)
    except ValueError as e:
        if g.grouping != "k-contiguous" or "must be stored" not in str(e):
            raise
        raise ValueError(f"{e} (a k-contiguous grouped GEMM is built only for a column-major A and a row-major B: "
                         f"pass A as x.T of a C-contiguous (K_total, M) array x, B C-contiguous (K_total, N))") from e
    return va, vb


def grouped_output(g: "Gemm", c: Any, device: int | None = None) -> OperandView:
    """C's view: (M_total, N) contiguous, (G, max_m, N) masked, (G, M, N) k-contiguous."""
    return group_operand(c, name="C", g=g, per_group=g.grouping in ("masked", "k-contiguous"), shape=(g.m, g.n), dtype=g.out_dtype,
                         layout="row", align=g.out_alignment(), writable=True, device=device)


def counts_view(g: "Gemm", offs: Any, masked_m: Any, device: int | None = None) -> OperandView:
    """The checked `offs` / `masked_m` (schedule.grouping.check_counts) as a 1 x G int32 row."""
    counts = check_counts(g, offs=offs, masked_m=masked_m)
    name = "masked_m" if g.grouping == "masked" else "offs"
    row = as_row(counts)
    kw: dict[str, Any] = {} if device is None else {"device": device}
    return check_operand(row, name=name, shape=(1, g.groups), dtype="s32", layout="row", align=4, **kw)


def check_not_grouped(g: "Gemm", offs: Any, masked_m: Any) -> None:
    """offs= / masked_m= given to a kernel that is not grouped: say how to compile one."""
    if not g.grouped and (offs is not None or masked_m is not None):
        which = "offs" if offs is not None else "masked_m"
        grouping = "contiguous" if which == "offs" else "masked"
        raise ValueError(f"{which}= was given but the kernel is not a grouped GEMM: compile with "
                         f"Gemm(..., groups=G, grouping={grouping!r})")


__all__ = ["check_not_grouped", "counts_view", "group_operand", "grouped_inputs", "grouped_output"]
