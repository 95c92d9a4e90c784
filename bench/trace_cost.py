"""What tracing costs (issue 26): the simulation time of a run with `trace=` next to the same run
without, and the size of the trace file, for the README's Hopper example, a warp-specialised
kernel walking several tiles, a 128x128x4096 tile (warp-specialised sm_90a and mma.sync sm_80) and
the mma.sync path. The target: traced time at most 2x the plain time; the README example's trace
under 5 MB; a 128x128x4096 tile's under a few MB.

Both runs use already compiled programs (the plain and the traced one are cached separately), and
each time is the best of `--repeat` runs, so the ratio is the recording's own cost.

Usage: python bench/trace_cost.py [-o bench/results/DATE-trace-cost.txt] [--repeat 2] [--quick]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import ptxgen  # noqa: E402
from ptxgen import Gemm, Schedule  # noqa: E402
from ptxgen.check import random_operands  # noqa: E402


def cases(quick: bool):
    tn = dict(a_layout="row", b_layout="col")
    out = [
        ("README Hopper example 200x136x104, 128x128x64, 2 consumers, 4 stages (4 CTAs)",
         Gemm(200, 136, 104, dtype="f16", **tn), Schedule(block=(128, 128, 64), instruction="wgmma", stages=4),
         "sm_90a"),
        ("sm_90a WS 512x256x512, 128x128x64, sms=2 (4 tiles per CTA)",
         Gemm(512, 256, 512, **tn), Schedule(block=(128, 128, 64), instruction="wgmma", stages=4, sms=2), "sm_90a"),
        ("sm_80 mma.sync 256x256x512, 64x64x32, 2x2 warps (16 CTAs)",
         Gemm(256, 256, 512), Schedule(block=(64, 64, 32), warps=(2, 2), instruction="m16n8k16", stages=3),
         "sm_80"),
    ]
    if not quick:
        out += [
            ("sm_90a WS one 128x128x4096 tile (64 k-tiles)",
             Gemm(128, 128, 4096, **tn), Schedule(block=(128, 128, 64), instruction="wgmma", stages=4), "sm_90a"),
            ("sm_80 mma.sync one 128x128x4096 tile, 2x4 warps (128 k-tiles)",
             Gemm(128, 128, 4096), Schedule(block=(128, 128, 32), warps=(2, 4), instruction="m16n8k16", stages=3),
             "sm_80"),
        ]
    return out


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="skip the 128x128x4096 tiles")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"# bench/trace_cost.py at {commit}, python {sys.version.split()[0]}, numpy {np.__version__}",
             "# case | plain s | traced s | ratio | trace MB | events"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, g, s, arch in cases(args.quick):
            k = ptxgen.compile(g, s, arch=arch)
            a, b = random_operands(g, seed=0)
            path = os.path.join(tmp, "t.json")
            k.simulate(a, b)                        # compile both programs first
            k.simulate(a, b, trace=path)
            plain = best(lambda: k.simulate(a, b), args.repeat)
            traced = best(lambda: k.simulate(a, b, trace=path), args.repeat)
            size = os.path.getsize(path) / 1e6
            import json
            with open(path) as f:
                events = len(json.load(f)["traceEvents"])
            ratio = traced / plain
            ok &= ratio <= 2.0
            if name.startswith("README"):
                ok &= size < 5.0
            lines.append(f"{name} | {plain:.2f} | {traced:.2f} | {ratio:.2f} | {size:.2f} | {events}")
            print(lines[-1], flush=True)
    lines.append(f"# targets (traced <= 2x plain, README example < 5 MB): {'met' if ok else 'NOT met'}")
    text = "\n".join(lines) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    print(lines[-1])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
