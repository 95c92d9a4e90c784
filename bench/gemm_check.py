"""`bench/gemm.py --check-only`: is every benchmark candidate right on this driver? No timing.

Each distinct candidate schedule of the plan (block, warps, stages, split-K, Stream-K, raster) runs
once per dtype through the CUDA driver API, `k(a, b)`, on a reduced problem of the same kind: two
output tiles and an edge in M and N (M = 2*BM + 17, N = BN + 9) and a K with a remainder that gives
every split-K slice work. Results are checked against the float64 reference with
`ptxgen.check.compare` (every element). Real GPU or not, the launch goes through cuda-python:

    PYTHONPATH=. python3 bench/gemm.py --check-only                    # on the GPU
    PTXGEN_DRIVER=sim PYTHONPATH=. python3 bench/gemm.py --check-only  # the simulator-backed driver

Exit status: 0 all right, 1 any wrong or failed launch, 2 no driver.
"""
from __future__ import annotations

import time

from gemm_cases import DTYPES, SHAPES, Spec, candidates_for


def distinct_candidates(arch: str | None = None) -> list[Spec]:
    """Every candidate schedule of the benchmark plan for `arch` once, in plan order."""
    seen: dict[str, Spec] = {}
    for m, n, k, _group in SHAPES:
        for spec in candidates_for(m, n, k, arch):
            seen.setdefault(spec.name, spec)
    return list(seen.values())


def reduced_shape(spec: Spec) -> tuple[int, int, int]:
    """A small problem that still takes the candidate's paths: several tiles, M and N edges, a K
    remainder (kept a multiple of 8 so the operands stay 16-byte aligned), every split busy."""
    bm, bn, bk = spec.block
    return 2 * bm + 17, bn + 9, max(spec.split_k, 2) * bk + 8


def check_candidate(spec: Spec, dtype: str, arch: str, seed: int = 0) -> dict:
    import ptxgen
    from ptxgen.check import compare, random_operands, reference

    m, n, k = reduced_shape(spec)
    g = ptxgen.Gemm(m, n, k, dtype=dtype, out_dtype=dtype, a_layout="row", b_layout="col")
    row = {"schedule": spec.name, "dtype": dtype, "shape": f"{m}x{n}x{k}"}
    try:
        kern = ptxgen.compile(g, spec.schedule(), arch=arch)
    except ptxgen.ScheduleError as e:
        return dict(row, status="unsupported", detail=str(e))
    a, b = random_operands(g, seed=seed)
    t = time.time()
    try:
        c = kern(a, b)
    except Exception as e:  # a failed launch is a result to report, not a crash of the whole check
        return dict(row, status="error", detail=f"{type(e).__name__}: {e}", seconds=round(time.time() - t, 2))
    result = compare(c, reference(a, b), g)
    return dict(row, status="ok" if result.ok else "wrong", detail=str(result), seconds=round(time.time() - t, 2),
                grid=kern.grid)


def run_check(arch: str | None, dtypes=DTYPES, max_candidates: int | None = None) -> int:
    from ptxgen.runtime import gpu_available, gpu_unavailable_reason
    from ptxgen.runtime.driver import context
    from ptxgen.runtime import simdriver
    from ptxgen.schedule.targets import TARGETS

    if not gpu_available():
        print(f"no CUDA driver: {gpu_unavailable_reason()} (PTXGEN_DRIVER=sim runs the check through "
              "ptxgen's simulator-backed stand-in driver)")
        return 2
    ctx = context()
    arch = arch or (ctx.arch if ctx.arch in TARGETS else "sm_80")
    specs = distinct_candidates(arch)[:max_candidates]
    print(f"checking {len(specs)} candidate schedules x {len(dtypes)} dtypes on {ctx.arch} ({arch} code) "
          f"through {simdriver.driver_description()}")
    bad = 0
    for spec in specs:
        for dtype in dtypes:
            r = check_candidate(spec, dtype, arch)
            bad += r["status"] in ("wrong", "error")
            took = f" {r['seconds']:.1f}s" if "seconds" in r else ""
            print(f"  {r['status']:<11s} {dtype:4s} {r['shape']:>14s}  {r['schedule']:<36s}{took}  {r['detail']}",
                  flush=True)
    print(f"{'FAIL' if bad else 'PASS'}: {bad} of {len(specs) * len(dtypes)} candidate runs wrong or failed")
    return 1 if bad else 0
