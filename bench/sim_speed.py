"""Speed of ptxgen.sim on one 128x128 CTA tile GEMM with K=256 (f16 in, f32 out, 4 warps, 3 stages).

    PYTHONPATH=. python3 bench/sim_speed.py [--repeat 5] [--shape 128x128x256]

Target on the 2-core project machine: < 2 s per tile (sm_80 kernels), < 1 s for the Hopper kernel
(issue 12). Three workloads are timed:
  * the kernel ptxgen.compile emits for the shape (block 128x128x32, warps 2x2, 3 stages, swizzle);
  * the hand-written PTX tile kernel of the simulator's tests (tests/sim/sim_gemm_ptx.py), which
    uses BK=64 and exercises the same instruction mix independently of the emitter;
  * the Triton-written Hopper kernel of tests/sim/hopper_corpus (TMA + wgmma + mbarrier, 8 warps,
    BK=64, 3 stages) on the same shape;
  * a Blackwell (sm_100a) tcgen05 tile: the hand-written kernel of tests/sim/tcgen05_util.py (4 warps,
    BK=64 blocks copied into one 128B-swizzled stage, tcgen05.mma 128x128x16 into TMEM, commit ->
    mbarrier, 32x32b tcgen05.ld epilogue), and the Triton-written Blackwell corpus kernel
    (tests/sim/blackwell_corpus, TMA + tcgen05) where that corpus is present.
Issue 20 asks the tcgen05 tile to cost no more per MAC than the Hopper (wgmma) row.
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
BLACKWELL_ENTRY = "dot_tma_fp16_128x128x64_w4_s3"


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


def bench_hopper_corpus(m: int, n: int, k: int, repeat: int) -> float:
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
    return best / (bm * bn * k)


def bench_tcgen05(m: int, n: int, k: int, repeat: int) -> float:
    """The hand-written sm_100a tile: one 128x128 output tile, K in blocks of 64."""
    from tcgen05_util import tile_kernel, tile_operands

    if (m, n) != (128, 128) or k % 64:
        raise SystemExit("the tcgen05 tile kernel is 128x128 with K a multiple of 64")
    ptx = tile_kernel(k)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, k)).astype(np.float16)
    b = rng.standard_normal((128, k)).astype(np.float16)
    image, da, db = tile_operands(a, b)
    out = np.zeros((128, 128), dtype=np.float32)

    def run() -> int:
        return sim.launch(ptx, "tile", block=(128,), args=[out, image, da, db]).instructions
    first, best, instructions = _time_runs(run, repeat)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    if not np.allclose(out, ref, rtol=1e-5, atol=1e-4):
        raise SystemExit("tcgen05 tile kernel: simulated tile does not match numpy")
    _report(f"hand-written tcgen05 tile kernel (sm_100a, TMEM accumulator), 128x128x{k}, one CTA "
            f"({len(ptx.splitlines())} PTX lines)", first, best, instructions, target=1.0)
    return best / (128 * 128 * k)


def bench_blackwell_corpus(m: int, n: int, k: int, repeat: int) -> float | None:
    """The Triton-written sm_100a kernel (TMA + tcgen05, 4 warps) on one 128x128 tile, if the
    Blackwell corpus is in the tree."""
    import copy
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "sim", "blackwell_corpus",
                        "harness.py")
    if not os.path.exists(path):
        print(f"Triton Blackwell corpus kernel {BLACKWELL_ENTRY}: skipped (tests/sim/blackwell_corpus not present)")
        return None
    from ptxgen import check

    spec = importlib.util.spec_from_file_location("blackwell_corpus_harness", path)
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness
    spec.loader.exec_module(harness)
    entry = copy.deepcopy(next(e for e in harness.load_entries() if e.name == BLACKWELL_ENTRY))
    bm, bn = entry.meta["constexprs"]["BLOCK_M"], entry.meta["constexprs"]["BLOCK_N"]
    entry.meta["problem"] = {"M": m, "N": n, "K": k}
    case = harness.build_case(entry)
    meta = entry.meta

    def run() -> int:
        return sim.launch(entry.ptx, meta["entry"], grid=(1, 1, 1), block=tuple(meta["block"]), args=case.args,
                          dynamic_smem=meta["shared"], ctas=[(0, 0, 0)]).instructions
    first, best, instructions = _time_runs(run, repeat)
    cmp = check.compare(case.out[:bm, :bn].astype(np.float64), case.ref[:bm, :bn], case.out_dtype)
    if not cmp.ok:
        raise SystemExit(f"{BLACKWELL_ENTRY}: simulated tile does not match numpy: {cmp}")
    _report(f"Triton Blackwell corpus kernel {BLACKWELL_ENTRY} (tcgen05 + TMA, {meta['num_warps']} warps), "
            f"{m}x{n}x{k}, one CTA ({len(entry.ptx.splitlines())} PTX lines)", first, best,
            instructions, threads=meta["block"][0], target=1.0)
    return best / (bm * bn * k)


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
    hopper = bench_hopper_corpus(m, n, k, args.repeat)
    rows = {"hand-written tcgen05 tile": bench_tcgen05(m, n, k, args.repeat),
            "Triton Blackwell corpus tile": bench_blackwell_corpus(m, n, k, args.repeat)}
    print(f"per MAC: Hopper wgmma row {hopper * 1e9:.1f} ns")
    for name, per_mac in rows.items():
        if per_mac is not None:
            verdict = "no slower than wgmma: met" if per_mac <= hopper else "slower than wgmma: MISSED"
            print(f"per MAC: {name} {per_mac * 1e9:.1f} ns ({per_mac / hopper:.2f} x the wgmma row; {verdict})")


if __name__ == "__main__":
    main()
