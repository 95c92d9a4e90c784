"""Speed of ptxgen.sim on one 128x128 CTA tile GEMM with K=256 (f16 in, f32 out, 4 warps, 3 stages).

    PYTHONPATH=. python3 bench/sim_speed.py [--repeat 5] [--shape 128x128x256]

Target on the 2-core project machine: < 2 s per tile (sm_80 kernels), < 1 s for the Hopper kernel
(issue 12). Three workloads are timed:
  * the kernel ptxgen.compile emits for the shape (block 128x128x32, warps 2x2, 3 stages, swizzle);
  * the hand-written PTX tile kernel of the simulator's tests (tests/sim/sim_gemm_ptx.py), which
    uses BK=64 and exercises the same instruction mix independently of the emitter;
  * the Triton-written Hopper kernel of tests/sim/hopper_corpus (TMA + wgmma + mbarrier, 8 warps,
    BK=64, 3 stages) on the same shape.
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


HOPPER_ENTRY = "dot_tma_fp16_128x128x64_w8_s3"


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


def _report(name: str, first: float, best: float, instructions: int, threads: int = 128,
            target: float = 2.0) -> None:
    print(f"{name}:")
    print(f"  thread-instructions   {instructions:,} ({instructions // threads:,} per thread)")
    print(f"  wall time, first run  {first:.3f} s (includes parse + compile)")
    print(f"  wall time, best run   {best:.3f} s")
    print(f"  thread-instructions/s {instructions / best:,.0f}")
    print(f"  target < {target:g} s per tile: {'met' if best < target else 'MISSED'}")


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


def bench_hopper_corpus(m: int, n: int, k: int, repeat: int) -> None:
    """The Triton-written Hopper kernel of the corpus (TMA loads into 128B-swizzled stages, wgmma
    m64n128k16 from shared descriptors, mbarrier waits; 8 warps) on one 128x128 output tile."""
    import copy

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "sim",
                                    "hopper_corpus"))
    from harness import build_case, load_entries
    from ptxgen import check

    entry = copy.deepcopy(next(e for e in load_entries() if e.name == HOPPER_ENTRY))
    bm, bn = entry.meta["constexprs"]["BLOCK_M"], entry.meta["constexprs"]["BLOCK_N"]
    entry.meta["problem"] = {"M": m, "N": n, "K": k}
    case = build_case(entry)
    meta = entry.meta

    def run() -> int:
        return sim.launch(entry.ptx, meta["entry"], grid=(1, 1, 1), block=tuple(meta["block"]), args=case.args,
                          dynamic_smem=meta["shared"], ctas=[(0, 0, 0)]).instructions
    first, best, instructions = _time_runs(run, repeat)
    got = case.out[:bm, :bn].astype(np.float64)
    cmp = check.compare(got, case.ref[:bm, :bn], case.out_dtype)
    if not cmp.ok:
        raise SystemExit(f"{HOPPER_ENTRY}: simulated tile does not match numpy: {cmp}")
    _report(f"Triton Hopper corpus kernel {HOPPER_ENTRY} (wgmma + TMA, {meta['num_warps']} warps), "
            f"{m}x{n}x{k}, one CTA ({len(entry.ptx.splitlines())} PTX lines)", first, best,
            instructions, threads=meta["block"][0], target=1.0)


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
    bench_hopper_corpus(m, n, k, args.repeat)


if __name__ == "__main__":
    main()
