"""Run a compiled Kernel on ptxgen's CPU simulator (`ptxgen.sim`) with logical operands."""
from __future__ import annotations

from typing import Any

import numpy as np

from .kernel import Kernel
from .schedule.problem import numpy_dtype

#: Grids up to this many CTAs are simulated whole by default in `ptxgen run`.
WHOLE_GRID_CTAS = 16


def cta_tile(kernel: Kernel, cta: tuple[int, int, int]) -> tuple[int, int]:
    """The (m-tile, n-tile) a CTA computes, mirroring the kernel's raster order."""
    g, s = kernel.gemm, kernel.schedule
    if s.raster == "row":
        return cta[1], cta[0]
    num_m, num_n = -(-g.m // s.bm), -(-g.n // s.bn)
    in_group = s.group_m * num_n
    first_m = cta[0] // in_group * s.group_m
    size_m = min(num_m - first_m, s.group_m)
    pos = cta[0] % in_group
    return first_m + pos % size_m, pos // size_m


def sample_ctas(kernel: Kernel) -> list[tuple[int, int, int]] | None:
    """None (the whole grid) for small grids, else the corner CTAs and one interior CTA."""
    gx, gy, _ = kernel.grid
    if gx * gy <= WHOLE_GRID_CTAS:
        return None
    picks = {(0, 0, 0), (gx - 1, 0, 0), (0, gy - 1, 0), (gx - 1, gy - 1, 0), (gx // 2, gy // 2, 0)}
    return sorted(picks)


def covered(kernel: Kernel, ctas) -> np.ndarray:
    """Boolean M x N mask of the C elements the given CTAs (None = all) compute."""
    g, s = kernel.gemm, kernel.schedule
    mask = np.zeros((g.m, g.n), dtype=bool)
    gx, gy, gz = kernel.grid
    every = [(x, y, 0) for y in range(gy) for x in range(gx)]
    for cta in (every if ctas is None else ctas):
        tm, tn = cta_tile(kernel, cta)
        mask[tm * s.bm:(tm + 1) * s.bm, tn * s.bn:(tn + 1) * s.bn] = True  # numpy clips at the edge
    return mask


def run_simulation(kernel: Kernel, a: Any, b: Any, ctas=None, c: Any = None, bias: Any = None):
    """Simulate; return (C, sim result). A new C is NaN where no simulated CTA wrote."""
    from . import sim
    from .runtime.launch import bias_view, check_epilogue_operands
    from .runtime.operands import check_operand

    g = kernel.gemm
    align = g.alignment()
    va = check_operand(a, name="A", shape=(g.m, g.k), dtype=g.dtype, layout=g.a_layout, align=align)
    vb = check_operand(b, name="B", shape=(g.k, g.n), dtype=g.dtype, layout=g.b_layout, align=align)
    if va.host is None or vb.host is None:
        raise TypeError("Kernel.simulate takes numpy arrays; copy device arrays to the host first")
    check_epilogue_operands(kernel, c, bias)
    if c is None:
        c = np.full((g.m, g.n), np.nan, dtype=numpy_dtype(g.out_dtype))
    vc = check_operand(c, name="C", shape=(g.m, g.n), dtype=g.out_dtype, layout="row", align=align,
                       writable=True)
    if vc.host is None:
        raise TypeError("Kernel.simulate takes a numpy C; copy device arrays to the host first")
    # The simulator takes each operand's memory as one contiguous buffer spanning the matrix.
    args = [span(va.host, g.a_layout), span(vb.host, g.b_layout), span(vc.host, "row"),
            g.m, g.n, g.k, va.ld, vb.ld, vc.ld]
    if bias is not None:
        args.append(span(bias_view(kernel, np.asarray(bias), None).host, "row"))
    res = sim.launch(kernel.ptx, kernel.entry, grid=kernel.grid, block=kernel.block, args=args,
                     dynamic_smem=kernel.smem_bytes, ctas=ctas)
    return c, res


def span(x: np.ndarray, layout: str) -> np.ndarray:
    """A 1-D view of the memory a (possibly strided) matrix spans, sharing its buffer."""
    outer, inner = (0, 1) if layout == "row" else (1, 0)
    ld = x.strides[outer] // x.itemsize
    count = (x.shape[outer] - 1) * ld + x.shape[inner] if x.size else 0
    return np.lib.stride_tricks.as_strided(x, shape=(count,), strides=(x.itemsize,))


def simulate_kernel(kernel: Kernel, a: Any, b: Any, c: Any = None, bias: Any = None, ctas=None) -> np.ndarray:
    return run_simulation(kernel, a, b, ctas, c=c, bias=bias)[0]
