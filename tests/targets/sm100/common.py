"""The shorthands the sm_100a kernel tests share: a tcgen05 schedule on a small persistent grid, a
TN (A row-major, B column-major) problem, and an epilogue that uses every fused part."""
from __future__ import annotations

from ptxgen import Epilogue, Gemm, Schedule


def tc(block, stages=2, sms=2, **kw) -> Schedule:
    """A tcgen05 schedule of `block` on `sms` persistent CTAs (2: each walks several tiles)."""
    return Schedule(block=block, instruction="tcgen05", stages=stages, sms=sms, **kw)


def tn(m, n, k, dtype="f16", out="f32", **kw) -> Gemm:
    """An M x N x K problem with K-major A and B (the layout every tcgen05 kind reads)."""
    return Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col", **kw)


GELU = Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row", activation="gelu")
