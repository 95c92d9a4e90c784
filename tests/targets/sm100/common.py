"""The shorthands the sm_100a kernel tests share: a tcgen05 schedule on a small persistent grid, a
TN (A row-major, B column-major) problem, an epilogue that uses every fused part, and one
block-scaled run on the simulator."""
from __future__ import annotations

import dataclasses

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import check_simulated, random_epilogue_operands, random_operands
from ptxgen.schedule.block_scale import random_block_scales


def tc(block, stages=2, sms=2, **kw) -> Schedule:
    """A tcgen05 schedule of `block` on `sms` persistent CTAs (2: each walks several tiles)."""
    return Schedule(block=block, instruction="tcgen05", stages=stages, sms=sms, **kw)


def tn(m, n, k, dtype="f16", out="f32", **kw) -> Gemm:
    """An M x N x K problem with K-major A and B (the layout every tcgen05 kind reads)."""
    return Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col", **kw)


GELU = Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row", activation="gelu")


def run_block_scaled(g: Gemm, s: Schedule, seed: int = 0, ptx: str | None = None):
    """(kernel, (a, b, c, bias, sa, sb), the simulator's check) of the block-scaled `g` under `s`
    on sm_100a, with random never-zero scales; the PTX replaced by `ptx` if given (a plant)."""
    k = ptxgen.compile(g, s, arch="sm_100a")
    if ptx is not None:
        k = dataclasses.replace(k, ptx=ptx)
    a, b = random_operands(g, seed)
    c, bias = random_epilogue_operands(g, seed + 1)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=seed + 7)
    return k, (a, b, c, bias, sa, sb), check_simulated(k, a, b, c, bias, scale_a=sa, scale_b=sb)
