"""Run in a fresh process by test_sm100_scale_launch.py (the stand-in's device model is fixed when
it first loads, so the B200 model needs a process of its own): launch an MXFP8 and an NVFP4 kernel
through the driver path, on one CTA and on a CTA pair, then a masked MXFP8 grouped one (each group's
scale blocks stacked in one tensor map), and print one verdict line each."""
from __future__ import annotations

import numpy as np

import ptxgen
from ptxgen import BlockScale, Epilogue
from ptxgen.check import check_kernel, random_operands
from ptxgen.schedule.block_scale import random_block_scales, random_grouped_scales

CASES = {
    "mxfp8": (ptxgen.Gemm(130, 72, 304, dtype="e4m3", out_dtype="bf16", a_layout="row", b_layout="col",
                          block_scale=BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")), 3),
    "nvfp4": (ptxgen.Gemm(130, 72, 320, dtype="e2m1", out_dtype="f32", a_layout="row", b_layout="col",
                          block_scale=BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3"), epilogue=Epilogue(alpha=0.5)), 5),
}

ONE_CTA = ptxgen.Schedule(block=(128, 64, 128), instruction="tcgen05", stages=2, sms=2)
#: the CTA pair (cta_group=2): each CTA's scale tensor maps give its own A rows and the pair's B rows
PAIR = ptxgen.Schedule(block=(256, 64, 128), instruction="tcgen05", stages=2, sms=2, cta_group=2)

#: masked MXFP8 groups (an empty, a full and a partial slot; K past the last whole k-tile), bias col
MASKED = ptxgen.Gemm(150, 72, 304, dtype="e4m3", out_dtype="bf16", groups=3, grouping="masked",
                     block_scale=BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0"), epilogue=Epilogue(bias="col"))
RUNS = [(n, ONE_CTA, c) for n, c in CASES.items()] + [(n + "-pair", PAIR, c) for n, c in CASES.items()]
RUNS.append(("mxfp8-masked", ONE_CTA, (MASKED, 7)))

for name, s, (g, seed) in RUNS:
    k = ptxgen.compile(g, s, arch="sm_100a")
    a, b = random_operands(g, seed)
    grouped = {}
    if g.grouped:
        sa, sb = random_grouped_scales(g.block_scale, g, seed + 1)
        grouped = {"masked_m": np.array([0, 150, 77], np.int32),
                   "bias": np.random.default_rng(seed).uniform(-1, 1, g.n).astype(np.float32)}
    else:
        sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=seed + 1)
    res = check_kernel(k, a, b, run=k, scale_a=sa, scale_b=sb, **grouped)
    try:
        k(a, b, scale_a=sa, **grouped)
        missing = "accepted"
    except ValueError as e:
        missing = "refused" if "pass scale_b=" in str(e) else f"other: {e}"
    print(f"{name}: {'PASS' if res.ok else 'FAIL'} {res}; without scale_b: {missing}")
