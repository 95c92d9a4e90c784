"""Wall time of a whole-grid simulation, serial against CTAs spread over local processes (or Ray).

    PYTHONPATH=. python3 bench/sim_workers.py [--shape 512x512x512] [--block 128x128x32] [--workers 2]
                                              [--split-k 1] [--ray]

Every CTA of the grid runs; the spread result must be byte-identical to the serial one (checked
here). Also printed: the CPU seconds the run used (this process and its workers; Ray's workers
are not children, so not counted) and the load average before it: the project machine's 2 cores
are shared, so a speed-up below the worker count may be other processes' doing.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

import ptxgen
from ptxgen.check import compare, random_operands, reference
from ptxgen.simulate import run_simulation


def dims(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.lower().split("x"))


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=dims, default=(512, 512, 512))
    ap.add_argument("--block", type=dims, default=(128, 128, 32))
    ap.add_argument("--split-k", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ray", action="store_true", help="also time Ray (a local instance, one CPU per task)")
    args = ap.parse_args()
    g = ptxgen.Gemm(*args.shape)
    k = ptxgen.compile(g, ptxgen.Schedule(block=args.block, split_k=args.split_k))
    a, b = random_operands(g)
    ctas = k.grid[0] * k.grid[1] * k.grid[2]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"sim_workers: {g.m}x{g.n}x{g.k} f16->f32, block {args.block}, split_k {args.split_k}, grid {k.grid} "
          f"({ctas} CTAs, all simulated); {platform.machine()}, {os.cpu_count()} cores, commit {commit or '?'}")
    runs = [("serial (workers=1)", 1)] + [(f"workers={args.workers}", args.workers)]
    if args.ray:
        import ray

        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        runs.append(("Ray, local instance", "ray"))
    first = None
    for name, workers in runs:
        load = os.getloadavg()[0]
        cpu0 = cpu_seconds()
        t0 = time.perf_counter()
        c, res = run_simulation(k, a, b, workers=workers)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds() - cpu0
        same = "" if first is None else ("  bytes identical to serial" if c.tobytes() == first[0].tobytes()
                                         else "  DIFFERENT BYTES")
        speedup = "" if first is None else f"  speed-up {first[1] / wall:.2f}x"
        print(f"  {name:<22} {wall:7.1f} s wall, {cpu:6.1f} s CPU  ({res.instructions:,} thread-instructions, "
              f"load avg before {load:.1f}){speedup}{same}")
        if first is None:
            first = (c, wall)
            print(f"  {'':<22} {compare(c, reference(a, b), g)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
