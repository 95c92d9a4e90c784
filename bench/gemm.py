"""GEMM throughput: ptxgen (best of a fixed schedule list) vs cuBLAS (torch.matmul) vs Triton.

    PYTHONPATH=. python3 bench/gemm.py --out bench/results          # one device call (< 10 min)
    PYTHONPATH=. python3 bench/gemm.py --dry-run                     # the plan + verifier verdicts
    PYTHONPATH=. python3 bench/gemm.py --check-only    # every candidate right? (no timing; PTXGEN_DRIVER=sim: no GPU)

Problems: f16 and bf16 inputs, f32 accumulation; ptxgen's out_dtype is the input dtype, like
torch.matmul's output. A row-major (M×K), B column-major (stored N×K) for every system.
Method: each result is checked once against an f32 reference before it is timed (a failed check
marks the row "wrong"); then warm-up, and the median over >= --runs samples timed with CUDA
events, each sample a small batch of launches rotating over several input sets so L2 cannot
hold the operands. Shapes are ordered by importance; what --budget-s cuts is reported.
Decode (M = 1, 8, 64) and mixture-of-experts grouped problems: bench/llm_cases.py.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_cases import (BLACKWELL_DTYPES, DTYPES, HOPPER_DTYPES, LLM_NK, OUT_DTYPE, SCHEDULES,  # noqa: E402,F401
                        SHAPES, Spec, bench_gemm, candidates_for, chosen_spec, schedule_name)
from llm_cases import plan_moe, print_moe_plan, run_moe_jobs  # noqa: E402 (decode and MoE problems)

PEAKS = [("B200", 2250.0), ("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4), ("H800", 989.4), ("A100", 312.0)]
TARGET_GROUPS = ("square", "llm")  # issue 4's geomean target is over these
TOL = {"f16": 2e-3, "bf16": 1e-2}  # relative Frobenius error vs the f32 reference, by output dtype
PEAK_SCALE = {"e4m3": 2.0, "e5m2": 2.0}  # Hopper's dense fp8 rate is twice its 16-bit one (the --peak)


@dataclass
class Candidate:
    spec: Spec
    verdict: str = "ok"  # "ok" or the verifier's reason

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class Job:
    dtype: str
    m: int
    n: int
    k: int
    group: str
    candidates: list = field(default_factory=list)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def gemm(self):
        return bench_gemm(self.dtype, self.m, self.n, self.k)


def build_plan(arch: str, dtypes=DTYPES, shapes=None) -> list[Job]:
    """Every (shape, dtype) in importance order, each with every schedule's verifier verdict; on
    sm_90a and sm_100a also the schedule the chooser picks (`ptxgen.compile` without one)."""
    import ptxgen

    jobs = []
    for m, n, k, group in (shapes or SHAPES):
        for dt in dtypes:
            job = Job(dt, m, n, k, group)
            specs = candidates_for(m, n, k, arch, dt)
            try:
                gemm, refused = job.gemm(), ""
            except (ptxgen.ScheduleError, TypeError, ValueError) as e:  # a format ptxgen does not take yet
                gemm, refused = None, f"problem refused: {type(e).__name__}: {e}"
            chosen = chosen_spec(gemm, arch) if gemm and (arch in ("sm_90a", "sm_100a") or group == "decode") else None
            for spec in specs + ([chosen] if chosen is not None else []):
                cand = Candidate(spec, refused or "ok")
                try:
                    if gemm is not None:
                        ptxgen.verify(gemm, make_schedule(cand), arch)
                except ptxgen.ScheduleError as e:
                    cand.verdict = str(e)
                job.candidates.append(cand)
            jobs.append(job)
    return jobs


def plan_for(arch: str, dtypes, max_problems: int | None) -> list[Job]:
    """The first `max_problems` jobs, planning only the shapes they need (the chooser compiles)."""
    shapes = SHAPES if max_problems is None else SHAPES[: -(-max_problems // max(1, len(dtypes)))]
    return build_plan(arch, dtypes, shapes)[:max_problems]


def make_schedule(c: Candidate):
    return c.spec.schedule()


def print_plan(jobs: list[Job], arch: str, reasons: bool = True, brief: bool = False) -> None:
    print(f"plan for {arch}: {len(jobs)} problems x {min(len(j.candidates) for j in jobs)}-"
          f"{max(len(j.candidates) for j in jobs)} ptxgen schedules (+ cuBLAS, Triton), in run order")
    if brief:
        n_ok = sum(c.verdict == "ok" for j in jobs for c in j.candidates)
        none = [f"{j.dtype} {j.m}x{j.n}x{j.k}" for j in jobs if all(c.verdict != "ok" for c in j.candidates)]
        print(f"  {n_ok} kernels to build; no valid schedule (unsupported) for: {', '.join(none) or 'none'}")
        return
    for i, j in enumerate(jobs):
        ok = [c.name for c in j.candidates if c.verdict == "ok"]
        print(f"{i:3d}  {j.dtype:4s} {j.m:6d} x {j.n:6d} x {j.k:6d}  [{j.group}]  "
              f"{len(ok)}/{len(j.candidates)} schedules: {', '.join(ok) or 'none'}")
        for c in j.candidates if reasons else ():
            if c.verdict != "ok":
                print(f"       unsupported {c.name}: {c.verdict}")


# -- compilation (parallel, before CUDA work) ---------------------------------------------------
def _precompile_one(args) -> str | None:
    """Compile and assemble one kernel in a worker, filling the shared cubin cache."""
    dtype, m, n, k, spec, arch = args
    try:
        import ptxgen

        g = bench_gemm(dtype, m, n, k)
        ptxgen.compile(g, spec.schedule(), arch=arch).assemble()
        return None
    except Exception as e:  # reported again (and loudly) by the main process
        return f"{type(e).__name__}: {e}"


def precompile(jobs: list[Job], arch: str, workers: int) -> None:
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing as mp

    work = [(j.dtype, j.m, j.n, j.k, c.spec, arch)
            for j in jobs for c in j.candidates if c.verdict == "ok"]
    if not work or workers <= 1:
        return
    t = time.time()
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        errors = [e for e in pool.map(_precompile_one, work) if e]
    print(f"precompiled {len(work)} kernels with {workers} processes in {time.time() - t:.1f} s"
          + (f"; {len(errors)} failed (first: {errors[0]})" if errors else ""))


# -- device work --------------------------------------------------------------------------------
class Device:
    """The framework used to allocate, time and run the baselines: torch (else cupy)."""

    def __init__(self):
        try:
            import torch

            if not torch.cuda.is_available():
                raise ImportError("torch sees no GPU")
            torch.backends.cuda.matmul.allow_tf32 = False
            self.torch, self.cupy = torch, None
            self.name = torch.cuda.get_device_name()
        except ImportError:
            import cupy

            self.torch, self.cupy = None, cupy
            self.name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()

    def dt(self, name: str):
        if self.torch:
            return {"f16": self.torch.float16, "bf16": self.torch.bfloat16, "f32": self.torch.float32,
                    "e4m3": getattr(self.torch, "float8_e4m3fn", None)}[name]
        from ptxgen.schedule.problem import numpy_dtype

        return numpy_dtype(name)

    def randn(self, shape, dtype: str, seed: int):
        if self.torch:
            gen = self.torch.Generator(device="cuda").manual_seed(seed)
            x = self.torch.randn(shape, generator=gen, device="cuda", dtype=self.torch.float32)
            return (x + self.torch.sign(x) * 0.05).to(self.dt(dtype))  # keep it non-zero
        x = self.cupy.random.default_rng(seed).standard_normal(shape, dtype="float32")
        return (x + self.cupy.sign(x) * 0.05).astype(self.dt(dtype))

    def empty(self, shape, dtype: str):
        if self.torch:
            return self.torch.empty(shape, dtype=self.dt(dtype), device="cuda")
        return self.cupy.empty(shape, dtype=self.dt(dtype))

    def stream_handle(self) -> int:
        if self.torch:
            return int(self.torch.cuda.current_stream().cuda_stream)
        return int(self.cupy.cuda.get_current_stream().ptr)

    def matmul(self, a, b, out):
        if self.torch and a.dtype == self.dt("e4m3"):  # cuBLAS's fp8 GEMM (B column-major, unit scales)
            one = self.torch.ones((), device="cuda", dtype=self.torch.float32)
            return out.copy_(self.torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=out.dtype))
        return self.torch.matmul(a, b, out=out) if self.torch else self.cupy.matmul(a, b, out=out)

    def rel_err(self, c, ref) -> float:
        xp = self.torch if self.torch else self.cupy
        c32 = c.float() if self.torch else c.astype("float32")
        if bool(xp.isnan(c32).any()):
            return math.inf
        return float(xp.linalg.norm(c32 - ref) / xp.linalg.norm(ref))

    def reference(self, a, b):
        return self.matmul(a.float() if self.torch else a.astype("float32"),
                           b.float() if self.torch else b.astype("float32"), None)

    def sync(self):
        (self.torch.cuda.synchronize if self.torch else self.cupy.cuda.Device().synchronize)()

    def events(self):
        if self.torch:
            return self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        return self.cupy.cuda.Event(), self.cupy.cuda.Event()

    def elapsed_ms(self, start, end) -> float:
        return start.elapsed_time(end) if self.torch else self.cupy.cuda.get_elapsed_time(start, end)

    def free(self):
        if self.torch:
            self.torch.cuda.empty_cache()
        else:
            self.cupy.get_default_memory_pool().free_all_blocks()


def time_launches(dev: Device, fns: list, runs: int, target_ms: float = 0.5) -> float:
    """Median ms per launch over `runs` event-timed samples; each sample is a batch of launches
    (enough to last ~target_ms, at most 50), rotating through `fns` (one per input set)."""
    for i in range(max(3, len(fns))):
        fns[i % len(fns)]()
    dev.sync()
    s, e = dev.events()
    s.record()
    for i in range(len(fns)):
        fns[i]()
    e.record()
    e.synchronize()
    single = max(dev.elapsed_ms(s, e) / len(fns), 1e-4)
    batch = int(min(50, max(1, math.ceil(target_ms / single))))
    pairs = [dev.events() for _ in range(runs)]
    i = 0
    for s, e in pairs:
        s.record()
        for _ in range(batch):
            fns[i % len(fns)]()
            i += 1
        e.record()
    dev.sync()
    samples = sorted(dev.elapsed_ms(s, e) / batch for s, e in pairs)
    return samples[len(samples) // 2]


def run_job(dev: Device, job: Job, arch: str, systems: list[str], runs: int) -> list[dict]:
    import ptxgen
    from ptxgen.runtime import prepare_launch

    out = OUT_DTYPE[job.dtype]
    base = {"dtype": job.dtype, "m": job.m, "n": job.n, "k": job.k, "out_dtype": out, "group": job.group}
    set_bytes = (job.m * job.k + job.k * job.n + job.m * job.n) * 2
    nsets = int(min(8, max(1, math.ceil(256e6 / set_bytes))))  # >= ~5x the 50 MB L2
    sets = []
    for i in range(nsets):
        a = dev.randn((job.m, job.k), job.dtype, seed=1000 * i + 1)
        bt = dev.randn((job.n, job.k), job.dtype, seed=1000 * i + 2)
        b = bt.t() if dev.torch else bt.T  # logical K×N, column-major
        sets.append((a, b, dev.empty((job.m, job.n), out)))
    ref = dev.reference(sets[0][0], sets[0][1])
    rows = []

    def measure(system, make_fn, schedule=None, extra=None):
        """Check once, then time; returns the row."""
        row = dict(base, system=system, schedule=schedule, **(extra or {}))
        try:
            check_out = dev.empty((job.m, job.n), out)
            check_out.fill_(float("nan")) if dev.torch else check_out.fill(float("nan"))
            make_fn(sets[0][0], sets[0][1], check_out)()
            dev.sync()
            err = dev.rel_err(check_out, ref)
            row["rel_err"] = err
            tol = TOL[OUT_DTYPE[job.dtype]]
            if not err < tol:
                row.update(status="wrong", tflops=None)
                print(f"!!! WRONG RESULT: {system} {schedule or ''} {job.dtype} {job.m}x{job.n}x{job.k}: "
                      f"relative error {err:.3g} (tolerance {tol})", flush=True)
                return row
            ms = time_launches(dev, [make_fn(a, b, c) for a, b, c in sets], runs)
            row.update(ms=ms, tflops=job.flops / ms / 1e9)
        except Exception as e:  # a failing system must not sink the run
            row.update(status="error", tflops=None, reason=f"{type(e).__name__}: {e}"[:500])
            print(f"!!! ERROR: {system} {schedule or ''} {job.dtype} {job.m}x{job.n}x{job.k}: {row['reason']}",
                  flush=True)
        return row

    if "ptxgen" in systems:
        cands = []
        for c in job.candidates:
            if c.verdict != "ok":
                cands.append({"schedule": c.name, "status": "unsupported", "reason": c.verdict})
                continue
            kern = ptxgen.compile(job.gemm(), make_schedule(c), arch=arch)
            stream = dev.stream_handle()
            r = measure("ptxgen", lambda a, b, cc, kern=kern: prepare_launch(kern, a, b, cc, stream=stream),
                        c.name, {"resources": str(kern.resources)})
            cands.append({k: r.get(k) for k in ("schedule", "tflops", "ms", "status", "rel_err", "reason",
                                                 "resources") if r.get(k) is not None})
        ok = [c for c in cands if c.get("tflops")]
        if ok:
            best = max(ok, key=lambda c: c["tflops"])
            rows.append(dict(base, system="ptxgen", schedule=best["schedule"], tflops=best["tflops"],
                             ms=best["ms"], candidates=cands))
        else:
            status = "wrong" if any(c.get("status") == "wrong" for c in cands) else \
                "error" if any(c.get("status") == "error" for c in cands) else "unsupported"
            reasons = "; ".join(f"{c['schedule']}: {c.get('reason', c.get('status'))}" for c in cands)
            rows.append(dict(base, system="ptxgen", schedule=None, tflops=None, status=status,
                             reason=reasons, candidates=cands))
    if "cublas" in systems:
        rows.append(measure("cublas", lambda a, b, c: (lambda: dev.matmul(a, b, c))))
    if "triton" in systems:
        try:
            import triton_matmul as tm
        except Exception as e:
            rows.append(dict(base, system="triton", schedule=None, tflops=None, status="unavailable",
                             reason=f"{type(e).__name__}: {e}"[:300]))
        else:
            row = measure("triton", lambda a, b, c: (lambda: tm.matmul(a, b, out=c)))
            row["schedule"] = tm.best_config(job.m, job.n, job.k)
            rows.append(row)
    del sets, ref
    dev.free()
    return rows


# -- report ---------------------------------------------------------------------------------------
def peak_for(name: str, override: float | None) -> float | None:
    if override:
        return override
    for key, peak in PEAKS:
        if key.lower() in name.lower():
            return peak
    return None


def geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if (xs := [x for x in xs if x and x > 0]) else None


def print_table(rows: list[dict], peak: float | None) -> dict:
    by = {}
    for r in rows:
        by.setdefault((r["dtype"], r["m"], r["n"], r["k"]), {})[r["system"]] = r
    fmt = lambda r: f"{r['tflops']:7.1f}" if r and r.get("tflops") else f"{(r or {}).get('status', '-'):>7s}"  # noqa: E731
    print(f"\n{'dtype':5s} {'M':>6s} {'N':>6s} {'K':>6s} | {'ptxgen':>7s} {'%peak':>6s} {'cuBLAS':>7s} "
          f"{'Triton':>7s} | {'vs cuBLAS':>9s} {'vs Triton':>9s} | schedule")
    vs_cublas, vs_triton, pct, target = [], [], [], []
    for (dt, m, n, k), sysrows in by.items():
        p, cb, tr = sysrows.get("ptxgen"), sysrows.get("cublas"), sysrows.get("triton")
        pt = p.get("tflops") if p else None
        rc = pt / cb["tflops"] if pt and cb and cb.get("tflops") else None
        rt = pt / tr["tflops"] if pt and tr and tr.get("tflops") else None
        pp = 100 * pt / (peak * PEAK_SCALE.get(dt, 1.0)) if pt and peak else None
        vs_cublas += [rc] if rc else []
        target += [rc] if rc and next(iter(sysrows.values())).get("group") in TARGET_GROUPS else []
        vs_triton += [rt] if rt else []
        pct += [pp] if pp else []
        print(f"{dt:5s} {m:6d} {n:6d} {k:6d} | {fmt(p)} {(f'{pp:5.1f}%' if pp else '     -')} {fmt(cb)} "
              f"{fmt(tr)} | {(f'{rc:8.2f}x' if rc else '        -')} {(f'{rt:8.2f}x' if rt else '        -')} | "
              f"{(p or {}).get('schedule') or ''}")
    summary = {"geomean_vs_cublas": geomean(vs_cublas), "geomean_vs_triton": geomean(vs_triton),
               "geomean_pct_peak": geomean(pct), "problems": len(by),
               "geomean_vs_cublas_square_llm": geomean(target)}
    print(f"\ngeometric mean: ptxgen/cuBLAS {summary['geomean_vs_cublas'] or float('nan'):.3f}, "
          f"ptxgen/Triton {summary['geomean_vs_triton'] or float('nan'):.3f}, "
          f"% of peak {summary['geomean_pct_peak'] or float('nan'):.1f} (over problems where both ran); "
          f"ptxgen/cuBLAS over the square and LLM shapes (the target): "
          f"{summary['geomean_vs_cublas_square_llm'] or float('nan'):.3f}")
    return summary


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("PTXGEN_COMMIT", "unknown")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown-device"


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results", help="directory for the results JSON")
    ap.add_argument("--budget-s", type=float, default=480.0, help="stop starting new problems after this")
    ap.add_argument("--runs", type=int, default=20, help="timed samples per measurement (>= 20)")
    ap.add_argument("--peak", type=float, default=None, help="dense f16 peak TFLOP/s (default: by device)")
    ap.add_argument("--dtypes", default=None,
                    help=f"input dtypes (default {','.join(DTYPES)}; {','.join(HOPPER_DTYPES)} for sm_90a)")
    ap.add_argument("--systems", default="ptxgen,cublas,triton")
    ap.add_argument("--max-problems", type=int, default=None, help="only the first N problems")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="compile processes")
    ap.add_argument("--arch", default=None, help="arch for --dry-run (default sm_90)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and verifier verdicts; no GPU")
    ap.add_argument("--check-only", action="store_true",
                    help="run every distinct candidate once on a reduced problem through the driver and check it; "
                         "no timing, no torch (PTXGEN_DRIVER=sim: the simulator-backed driver)")
    ap.add_argument("--max-candidates", type=int, default=None, help="--check-only: the first N candidates")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    default = {"sm_90a": HOPPER_DTYPES, "sm_100a": BLACKWELL_DTYPES}.get(args.arch, DTYPES)
    dtypes = tuple(d for d in (args.dtypes or ",".join(default)).split(",") if d)
    t0 = time.time()
    if args.dry_run:
        arch = args.arch or "sm_90"
        print_plan(plan_for(arch, dtypes, args.max_problems), arch)
        print_moe_plan(plan_moe(arch, dtypes) if args.max_problems is None else [], arch)  # all problems only
        return 0
    if args.check_only:
        from gemm_check import run_check

        # gemm_check runs out_dtype = input dtype: the 16-bit dtypes only (fp8 has no fp8 output)
        return run_check(args.arch, dtypes if args.dtypes else DTYPES, args.max_candidates)
    from ptxgen.runtime import gpu_available, gpu_unavailable_reason
    from ptxgen.runtime.driver import context
    from ptxgen.schedule.targets import TARGETS

    if not gpu_available():
        if args.arch:  # everything up to the first launch: the plan, the chooser's picks, the verdicts
            print_plan(plan_for(args.arch, dtypes, args.max_problems), args.arch, brief=True)
        print(f"no GPU: {gpu_unavailable_reason()}; nothing timed (use --dry-run to see the plan)", file=sys.stderr)
        return 2
    ctx = context()
    arch = args.arch or (ctx.arch if ctx.arch in TARGETS else "sm_80")
    jobs = plan_for(arch, dtypes, args.max_problems)
    print_plan(jobs, arch, brief=True)  # reasons go to the JSON; keep the output tail short
    precompile(jobs, arch, args.jobs)
    dev = Device()
    peak = peak_for(dev.name, args.peak)
    systems = [s for s in args.systems.split(",") if s]
    rows, cut, moe = [], [], []  # moe: the grouped problems (llm_cases.py), after the dense ones
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    date = _dt.date.today().isoformat()
    path = out_dir / f"{date}-{slug(dev.name)}.json"

    def write(summary: dict | None) -> None:
        """The results so far (`"partial": true` until the table is done), so a run killed at its
        time limit (bench/on_device.sh's step budget) still leaves every problem it finished."""
        result = {"device": dev.name, "date": date, "commit": git_commit(),
                  "command": " ".join([os.path.basename(sys.executable), *sys.argv]), "arch": arch,
                  "peak_tflops": peak, "elapsed_s": round(time.time() - t0, 1),
                  "method": f"median of >= {max(args.runs, 20)} CUDA-event samples (each a batch of launches "
                            f"rotating over several input sets), after a checked run and warm-up",
                  "notes": "f32 accumulation everywhere; ptxgen out_dtype = input dtype (f16 -> f16, "
                           "bf16 -> bf16) to match torch.matmul; A row-major, B column-major",
                  "partial": summary is None, "summary": summary, "cut": cut, "rows": rows, "moe": moe}
        path.write_text(json.dumps(result, indent=1))

    for job in jobs:
        if time.time() - t0 > args.budget_s:
            cut.append({"dtype": job.dtype, "m": job.m, "n": job.n, "k": job.k})
            continue
        t = time.time()
        new = run_job(dev, job, arch, systems, max(args.runs, 20))
        rows += new
        got = ", ".join(f"{r['system']} {r['tflops']:.0f}" if r.get("tflops") else f"{r['system']} {r.get('status')}"
                        for r in new)
        print(f"[{time.time() - t0:6.1f}s] {job.dtype} {job.m}x{job.n}x{job.k}: {got} ({time.time() - t:.1f}s)",
              flush=True)
        write(None)
    if args.max_problems is None and time.time() - t0 < args.budget_s:  # the grouped MoE problems last
        moe += run_moe_jobs(dev, plan_moe(arch, dtypes), arch, systems, max(args.runs, 20), time_launches)
    summary = print_table(rows, peak)
    if cut:
        print(f"\nbudget of {args.budget_s:.0f} s reached: {len(cut)} problems not run: "
              + ", ".join(f"{c['dtype']} {c['m']}x{c['n']}x{c['k']}" for c in cut))
    wrong = [r for r in rows + moe if r.get("status") == "wrong" or
             any(c.get("status") == "wrong" for c in r.get("candidates", []))]
    if wrong:
        print(f"\n!!! {len(wrong)} rows had WRONG results (see 'status'/'candidates' in the JSON): "
              + ", ".join(f"{r['system']} {r['dtype']} {r['m']}x{r['n']}x{r['k']}" for r in wrong))
    write(summary)
    print(f"\nwrote {path}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
