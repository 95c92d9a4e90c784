"""Wall time of schedule -> PTX (verify, lower, allocate, render) and PTX -> cubin for one kernel.

    python bench/compile_time.py [--repeat 20] [--block 128x128x32 ...]

Targets on the 2-core project machine: emission < 100 ms, assembly < 500 ms. Assembly is timed
with the cubin cache off, so each repeat really assembles.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time

os.environ["PTXGEN_CACHE"] = "0"

import ptxgen  # noqa: E402
from ptxgen.runtime.assemble import assemble  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--block", default="128x128x32")
    ap.add_argument("--warps", default="2x2")
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--arch", default="sm_80")
    args = ap.parse_args()
    m, n, k = map(int, args.shape.split("x"))
    g = ptxgen.Gemm(m, n, k)
    s = ptxgen.Schedule(block=tuple(map(int, args.block.split("x"))), warps=tuple(map(int, args.warps.split("x"))),
                        stages=args.stages)
    ptxgen.compile(g, s, args.arch)  # warm imports
    emit, asm = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        kern = ptxgen.compile(g, s, args.arch)
        t1 = time.perf_counter()
        out = assemble(kern.ptx, args.arch, kern.entry)
        t2 = time.perf_counter()
        emit.append(t1 - t0)
        asm.append(t2 - t1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"kernel   {kern.entry} ({len(kern.ptx.splitlines())} PTX lines), {args.arch}")
    print(f"machine  {platform.processor() or platform.machine()}, {os.cpu_count()} cores; commit {commit or '?'}")
    print(f"{'stage':<32}{'median ms':>10}{'min ms':>10}{'target ms':>11}")
    for name, xs, target in (("schedule -> PTX", emit, 100), (f"PTX -> cubin ({out.assembler})", asm, 500)):
        med = statistics.median(xs) * 1e3
        print(f"{name:<32}{med:>10.1f}{min(xs) * 1e3:>10.1f}{target:>11}  {'ok' if med < target else 'OVER'}")


if __name__ == "__main__":
    main()
