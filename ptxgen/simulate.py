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


def run_simulation(kernel: Kernel, a: Any, b: Any, ctas=None):
    """Simulate; return (C poisoned with NaN where no simulated CTA wrote, sim result)."""
    from . import sim
    from .runtime.operands import check_operand

    g = kernel.gemm
    align = g.alignment()
    va = check_operand(a, name="A", shape=(g.m, g.k), dtype=g.dtype, layout=g.a_layout, align=align)
    vb = check_operand(b, name="B", shape=(g.k, g.n), dtype=g.dtype, layout=g.b_layout, align=align)
    if va.host is None or vb.host is None:
        raise TypeError("Kernel.simulate takes numpy arrays; copy device arrays to the host first")
    c = np.full((g.m, g.n), np.nan, dtype=numpy_dtype(g.out_dtype))
    # The simulator takes each operand's memory as one C-contiguous buffer.
    buf_a = va.host if g.a_layout == "row" else va.host.T
    buf_b = vb.host if g.b_layout == "row" else vb.host.T
    args = [buf_a, buf_b, c, g.m, g.n, g.k, va.ld, vb.ld, g.n]
    res = sim.launch(kernel.ptx, kernel.entry, grid=kernel.grid, block=kernel.block, args=args,
                     dynamic_smem=kernel.smem_bytes, ctas=ctas)
    return c, res


def simulate_kernel(kernel: Kernel, a: Any, b: Any, ctas=None) -> np.ndarray:
    return run_simulation(kernel, a, b, ctas)[0]
