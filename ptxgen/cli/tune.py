"""`ptxgen tune`: the problem flags in, the tuning table out (`ptxgen.tune.tuner.tune` does the work)."""
from __future__ import annotations

import argparse

from .build import SCHEDULE_FLAGS, UsageError, problem
from .flags import flag_text
from ..tune.tuner import tune


def cmd_tune(args: argparse.Namespace) -> int:
    given = [f"--{flag.replace('_', '-')}" for flag in SCHEDULE_FLAGS if getattr(args, flag) is not None]
    if given:
        raise UsageError(f"tune chooses the schedule, but {', '.join(given)} was given: drop the schedule flags "
                         "(--arch aside), or use `ptxgen run` to check one schedule")
    gemm = problem(args, (4096, 4096, 4096))
    progress = {"auto": None, "on": True, "off": False}[args.progress]
    try:
        result = tune(gemm, args.arch, top=args.top, repeats=args.repeats, warmup=args.warmup,
                      ray_address=args.ray, progress=progress, save=not args.no_save)
    except RuntimeError as e:
        if args.ray is None or type(e) is not RuntimeError:  # only scaleout's "no GPUs in the cluster"
            raise
        raise UsageError(f"--ray: the cluster cannot measure ({e}). For tune, fix: point --ray at a cluster "
                         "with GPU nodes, or drop --ray to measure on this machine's GPU") from None
    print(flag_text("\n".join(result.lines())))
    return 0
