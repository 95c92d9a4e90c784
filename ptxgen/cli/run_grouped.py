"""`ptxgen run --groups G --grouping contiguous|masked|k-contiguous`: draw random group sizes (empty groups
included: `schedule.grouping.random_counts`), run every CTA (a grouped CTA's tile depends on the
sizes read on the device, so no tile sample can be picked on the host), and compare all of C with
the group-by-group reference, rows outside every group required untouched."""
from __future__ import annotations

import argparse

import numpy as np

from ..check import (compare, magnitude, random_epilogue_operands, random_operands, random_scale, reference,
                     untouched_rows)
from ..kernel import Kernel
from ..schedule.grouping import COUNTS_ARG, random_counts
from .report import group_walk_text

#: Group sizes shown in full up to this many groups.
SHOWN_GROUPS = 16


def counts_line(name: str, counts: np.ndarray) -> str:
    values = counts.tolist()
    shown = values if len(values) <= SHOWN_GROUPS else values[:SHOWN_GROUPS] + ["..."]
    return f"groups     {name} = [{', '.join(map(str, shown))}] (random, seed from --seed)"


def run_grouped(k: Kernel, args: argparse.Namespace, on_gpu: bool, workers, progress, trace_path) -> int:
    """Run and check a grouped kernel; the exit status (0: every element right)."""
    g = k.gemm
    name = COUNTS_ARG[g.grouping]
    counts = random_counts(g, np.random.default_rng(args.seed))
    kw = {name: counts}
    print(counts_line(name, counts))
    a, b = random_operands(g, seed=args.seed)
    c0, bias = random_epilogue_operands(g, seed=args.seed + 1)
    scale = random_scale(g, seed=args.seed + 2)
    block = {}  # block-scaled fp8 (sm_90a): random never-zero scales over two decades, per group
    if g.block_scale is not None:
        from ..schedule.block_scale import random_grouped_scales

        sa, sb = random_grouped_scales(g.block_scale, g, seed=args.seed + 3, decades=2.0)
        block = {"scale_a": sa, "scale_b": sb}
    c_in = None if c0 is None else c0.copy()
    if on_gpu:
        from ..runtime import simdriver

        c = k(a, b, c=c_in, bias=bias, scale=scale, **kw, **block)
        where = "through the simulator-backed driver (PTXGEN_DRIVER=sim)" if simdriver.active() else "on the GPU"
        print(f"executed   {where}, every CTA; runs {k.resources.binary}")
    else:
        from ..simulate import run_simulation

        c, res = run_simulation(k, a, b, c=c_in, bias=bias, scale=scale, progress=progress, workers=workers,
                                trace=trace_path, **kw, **block)
        print(f"executed   on the CPU simulator: every CTA ({group_walk_text(k)}), "
              f"{res.instructions} thread-instructions")
    untouched = untouched_rows(g, **kw)
    scaled = {"block_scale": g.block_scale, **block} if block else {}
    ref = reference(a, b, g.epilogue, c0, bias, scale, **kw, **scaled)
    result = compare(np.asarray(c), ref, g, bound=magnitude(a, b, g.epilogue, c0, bias, scale, **kw, **scaled),
                     untouched=untouched)
    if g.grouping == "k-contiguous":  # no rows outside the groups: every group's C is written
        print(f"{result}; checked every group's C (an empty group's: the epilogue of a zero product)")
        return 0 if result.ok else 1
    rows = int(untouched.any(axis=-1).sum())
    print(f"{result}; checked every group's rows, and {rows} rows outside the groups left untouched")
    return 0 if result.ok else 1
