"""Speed of ptxgen.sim on one 128x128 CTA tile GEMM with K=256 (f16 in, f32 out, 4 warps, 3 stages).

    PYTHONPATH=. python3 bench/sim_speed.py [--repeat 5] [--shape 128x128x256]

Target on the 2-core project machine: < 2 s per tile. Two workloads are timed:
  * the kernel ptxgen.compile emits for the shape (block 128x128x32, warps 2x2, 3 stages, swizzle);
  * the hand-written PTX tile kernel of the simulator's tests (tests/sim/sim_gemm_ptx.py), which
    uses BK=64 and exercises the same instruction mix independently of the emitter.
"First" includes parsing and compiling the PTX text (cached afterwards); "best" is the best warm run.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "sim"))

import ptxgen  # noqa: E402
from ptxgen import sim  # noqa: E402


def _time_runs(run, repeat: int) -> tuple[float, float, int]:
    sim.machine.compile_entry.cache_clear()
    t0 = time.perf_counter()
    instructions = run()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return first, best, instructions


def _report(name: str, first: float, best: float, instructions: int) -> None:
    print(f"{name}:")
    print(f"  thread-instructions   {instructions:,} ({instructions // 128:,} per thread)")
    print(f"  wall time, first run  {first:.3f} s (includes parse + compile)")
    print(f"  wall time, best run   {best:.3f} s")
    print(f"  thread-instructions/s {instructions / best:,.0f}")
    print(f"  target < 2 s per tile: {'met' if best < 2.0 else 'MISSED'}")


def bench_compiled(m: int, n: int, k: int, repeat: int) -> None:
    from ptxgen.check import random_operands
    from ptxgen.simulate import run_simulation

    gemm = ptxgen.Gemm(m=m, n=n, k=k, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col")
    sched = ptxgen.Schedule(block=(128, 128, 32), warps=(2, 2), stages=3, smem_layout="swizzle")
    kernel = ptxgen.compile(gemm, sched, arch="sm_80")
    a, b = random_operands(gemm)
    ctas = [(0, 0, 0)]
    first, best, instructions = _time_runs(lambda: run_simulation(kernel, a, b, ctas)[1].instructions, repeat)
    _report(f"ptxgen.compile kernel, {m}x{n}x{k}, one CTA ({len(kernel.ptx.splitlines())} PTX lines)",
            first, best, instructions)


def bench_handwritten(m: int, n: int, k: int, repeat: int) -> None:
    from sim_gemm_ptx import gemm_dynamic_smem, gemm_ptx

    ptx = gemm_ptx(m, n, k)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((m, k)).astype(np.float16)
    Bt = rng.standard_normal((n, k)).astype(np.float16)
    C = np.zeros((m, n), dtype=np.float32)

    def run() -> int:
        return sim.launch(ptx, "gemm_tile", grid=(n // 128, m // 128), block=(128,), args=[A, Bt, C],
                          dynamic_smem=gemm_dynamic_smem(), ctas=[(0, 0)]).instructions
    first, best, instructions = _time_runs(run, repeat)
    _report(f"hand-written tile kernel, {m}x{n}x{k}, one CTA ({len(ptx.splitlines())} PTX lines)",
            first, best, instructions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shape", default="128x128x256")
    args = ap.parse_args()
    m, n, k = map(int, args.shape.split("x"))
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}")
    bench_compiled(m, n, k, args.repeat)
    bench_handwritten(m, n, k, args.repeat)


if __name__ == "__main__":
    main()
