"""Which rows of C each group of a grouped GEMM (schedule/grouping.py) owns, on the host: the
float64 reference computed group by group from any one-product reference, and the rows a kernel
must leave untouched. `check.reference`, `check.magnitude` and `check.compare` use these when given
`offs` / `masked_m` / `untouched` (`check.untouched_rows` is this module's).

Why the untouched rows are part of the reference: a masked launch is fixed-size and CUDA-graph
captured, and C's rows past masked_m[g] (or past offs[-1]) may hold another layer's results, so
writing them is a bug even if the value written looks harmless. The reference holds C's previous
value there (NaN for a poisoned C) and `compare` requires those elements unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from .problem import Gemm

#: reference(a, b, epilogue, c, bias, scale) of one ungrouped product (check.reference).
Product = Callable[..., np.ndarray]


def grouping_of(offs: object, masked_m: object) -> str:
    """Which kind of counts were given ("contiguous" for offs, "masked" for masked_m); offs are
    cumulative ends along M (contiguous) or K (k-contiguous), which the operands' shapes tell."""
    if (offs is None) == (masked_m is None):
        raise ValueError("pass exactly one of offs= (contiguous groups) and masked_m= (masked groups)")
    return "contiguous" if offs is not None else "masked"


def k_grouped_reference(product: Product, a: np.ndarray, b: np.ndarray, epilogue, c, bias, scale,
                        offs) -> np.ndarray:
    """float64 C (G, M, N) of a k-contiguous grouped GEMM: C_g = `product` of A[:, k0:k1] and
    B[k0:k1, :] with k0 = offs[g-1] (0 for g = 0), k1 = offs[g]; an empty slice gives the
    product's epilogue of zeros (every C_g is written)."""
    spans = group_spans("contiguous", offs)
    prev = None if c is None else np.asarray(c)
    out = [product(a[:, k0:max(k0, k1)], b[k0:max(k0, k1)], epilogue, None if prev is None else prev[g], bias, scale)
           for g, (k0, k1) in enumerate(spans)]
    return np.stack(out) if out else np.zeros((0,) + a.shape[:1] + b.shape[1:])


def group_spans(grouping: str, counts: np.ndarray) -> list[tuple[int, int]]:
    """(first row, end row) of every group: contiguous rows of A and C (offs are cumulative ends),
    masked rows 0 .. masked_m[g] of each group's slot."""
    ends = [int(v) for v in np.asarray(counts).reshape(-1)]
    if grouping == "masked":
        return [(0, e) for e in ends]
    return list(zip([0] + ends[:-1], ends))


def grouped_reference(product: Product, a: np.ndarray, b: np.ndarray, epilogue, c, bias, scale,
                      offs=None, masked_m=None, block_scale=None, scale_a=None, scale_b=None) -> np.ndarray:
    """float64 C of a grouped GEMM: each group's rows are `product` of its rows of A and its B
    (b[g]); every other row holds C's previous value (`c`; NaN when None, a poisoned C).
    Block-scaled (`scale_a`, `scale_b`): each group's product takes its rows of sa (contiguous
    (M_total, Kb): the group's rows; masked (G, max_m, Kb): sa[g]'s) and its sb[g]."""
    grouping = grouping_of(offs, masked_m)
    counts = offs if grouping == "contiguous" else masked_m
    a, b = np.asarray(a), np.asarray(b)
    if grouping == "contiguous" and b.ndim == 2:  # one B (K_total, N): the groups split K
        if scale_a is not None or scale_b is not None:
            raise ValueError("block scales are not built for k-contiguous grouped GEMMs: drop scale_a / scale_b")
        return k_grouped_reference(product, a, b, epilogue, c, bias, scale, offs)
    shape = a.shape[:-1] + (b.shape[-1],)
    out = np.full(shape, np.nan) if c is None else np.array(c, dtype=np.float64)
    for g, (start, end) in enumerate(group_spans(grouping, counts)):
        if end <= start:
            continue
        rows = slice(start, end)
        a_g = a[rows] if grouping == "contiguous" else a[g, rows]
        dst = out[rows] if grouping == "contiguous" else out[g, rows]
        prev = None if c is None else np.asarray(c)[rows] if grouping == "contiguous" else np.asarray(c)[g, rows]
        scales = {}
        if scale_a is not None or scale_b is not None:
            sa = np.asarray(scale_a)
            scales = {"block_scale": block_scale, "scale_b": np.asarray(scale_b)[g],
                      "scale_a": sa[rows] if grouping == "contiguous" else sa[g, rows]}
        dst[...] = product(a_g, b[g], epilogue, prev, bias, scale, **scales)
    return out


def untouched_rows(g: "Gemm", offs=None, masked_m=None) -> np.ndarray:
    """Boolean mask shaped like C: True where no group owns the element, which the kernel must
    leave as it was (contiguous: rows past offs[-1]; masked: rows past masked_m[g]; k-contiguous:
    none, every group's C is written)."""
    grouping = grouping_of(offs, masked_m)
    if g.grouping == "k-contiguous" and grouping == "contiguous":
        return np.zeros((g.groups, g.m, g.n), dtype=bool)
    if grouping != g.grouping:
        raise ValueError(f"the gemm is grouping={g.grouping!r}; pass "
                         f"{'masked_m' if g.grouping == 'masked' else 'offs'}=")
    counts = offs if grouping == "contiguous" else masked_m
    if grouping == "contiguous":
        mask = np.ones((g.m, g.n), dtype=bool)
        for start, end in group_spans(grouping, counts):
            mask[start:max(start, end)] = False
        return mask
    mask = np.ones((g.groups, g.m, g.n), dtype=bool)
    for i, (_, end) in enumerate(group_spans(grouping, counts)):
        mask[i, :end] = False
    return mask


def stray_writes(got: np.ndarray, before: np.ndarray, untouched: np.ndarray) -> int:
    """Elements under `untouched` that differ from `before` (a NaN poison counts as equal to NaN)."""
    g = np.asarray(got, dtype=np.float64)[untouched]
    w = np.asarray(before, dtype=np.float64)[untouched]
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    return int((~same).sum())
