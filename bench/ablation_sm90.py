"""Which sm_90a schedule choices cost what on a GPU: tile shape x cluster x epilogue, measured.

Why: the first hardware run (bench/results/2026-11-26-on-device-6080041) found the chooser's own
picks at 0.46-0.87x of the best listed candidate. Every pick combined a multicast cluster, the
direct (register-to-global) epilogue and a tile the fixed list lacks, so one run cannot say which
choice lost. This times each factor apart on the same problems, next to the cost model's
prediction for every candidate, so the model can be corrected from numbers, not guesses.

    PYTHONPATH=. python bench/ablation_sm90.py [--out DIR] [--problems f16:4096,e4m3:4096,bf16:8192]
                                               [--ranked N] [--budget-s S] [--dry-run]

Per problem: each tile of TILES[dtype] on clusters 1x1, 1x2, 2x1 with the TMA-store and the
direct epilogue, each at the deepest ring up to the listed one that fits beside its epilogue, the chooser's top N ranked
distinct schedules and its pick (`ptxgen.compile` without a schedule), and cuBLAS (torch).
Writes DIR/<date>-ablation-sm90-<device>.json and prints a table sorted by measured time with the
predicted time and rank. --dry-run (no GPU): the plan with each candidate's prediction.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm as G  # noqa: E402
from gemm_cases import Spec  # noqa: E402

#: (BM, BN, consumers, stages) per input width: the fixed list's winners and the chooser's picks.
TILES = {2: [(128, 256, 2, 4), (256, 128, 2, 4), (256, 192, 2, 4), (128, 128, 2, 4)],
         1: [(128, 192, 2, 4), (256, 128, 2, 4), (128, 128, 2, 4), (128, 128, 2, 7)]}
CLUSTERS = [(1, 1), (1, 2), (2, 1)]


_NAME = re.compile(r"(\d+)x(\d+)x(\d+) wgmma c(\d) s(\d+) (ws-persistent|one-cta-per-tile)"
                   r"(?: cluster(\d)x(\d))?( direct-store)?( grouped-raster)?$")


def schedule_from_name(name: str):
    """The ptxgen.Schedule a measured candidate's name stands for (bench/gemm_cases.py names them),
    so committed results can be priced again by today's cost model (tests/tune)."""
    import ptxgen

    m = _NAME.search(name)
    if m is None:
        raise ValueError(f"not an sm_90a candidate name: {name!r}")
    bm, bn, bk, consumers, stages = (int(x) for x in m.groups()[:5])
    ws = m.group(6) == "ws-persistent"
    cluster = (int(m.group(7)), int(m.group(8))) if m.group(7) else (1, 1)
    grouped = {"raster": "grouped", "group_m": 8} if m.group(10) else {}
    return ptxgen.Schedule(block=(bm, bn, bk), instruction="wgmma", consumers=consumers, stages=stages,
                           warp_specialized=ws, persistent=ws, cluster=cluster,
                           epilogue_via_smem=False if m.group(9) else None, **grouped)


def _schedules(job: G.Job, ranked: int) -> list[tuple[str, object]]:
    import ptxgen
    from ptxgen.tune.choose import rank

    g = job.gemm()
    bk = 128 // g.in_bytes
    out, seen = [], set()

    def add(label, s):
        if s not in seen:
            seen.add(s)
            out.append((label, s))

    for bm, bn, consumers, stages in TILES[g.in_bytes]:
        for cluster in CLUSTERS:
            for via in (None, False):
                for depth in range(stages, 1, -1):  # the deepest ring that fits beside this epilogue
                    s = ptxgen.Schedule(block=(bm, bn, bk), instruction="wgmma", consumers=consumers, stages=depth,
                                        cluster=cluster, epilogue_via_smem=via)
                    try:
                        ptxgen.verify(g, s, "sm_90a")
                    except ptxgen.ScheduleError:
                        if depth > 2:
                            continue
                    add("grid", s)
                    break
        for via in (None, False):  # the non-specialised one-CTA-per-tile kernel, same tile, no cluster
            s = ptxgen.Schedule(block=(bm, bn, bk), instruction="wgmma", consumers=consumers, stages=stages,
                                warp_specialized=False, persistent=False, epilogue_via_smem=via)
            add("grid", s)
    for r in rank(g, "sm_90a")[:ranked]:
        add("ranked", r.schedule)
    add("chosen", ptxgen.compile(g, arch="sm_90a").schedule)
    return out


def plan(problems: list[tuple[str, int]], ranked: int) -> list[G.Job]:
    import ptxgen
    from ptxgen.tune.costmodel import predict

    jobs = []
    for dtype, n in problems:
        job = G.Job(dtype, n, n, n, "square")
        for label, s in _schedules(job, ranked):
            cand = G.Candidate(Spec(s.block, (), s.stages, consumers=s.consumers or 0, fixed=s, label=label))
            try:
                ptxgen.verify(job.gemm(), s, "sm_90a")
                cand.predicted_ms = predict(job.gemm(), s, "sm_90a").time_s * 1e3
            except ptxgen.ScheduleError as e:
                cand.verdict = str(e)
            job.candidates.append(cand)
        jobs.append(job)
    return jobs


def report(job: G.Job, row: dict) -> list[dict]:
    """The job's candidates measured, each with its prediction and predicted rank."""
    pred = {c.name: getattr(c, "predicted_ms", None) for c in job.candidates}
    order = sorted((p, n) for n, p in pred.items() if p is not None)
    pred_rank = {n: i + 1 for i, (_, n) in enumerate(order)}
    out = []
    for c in row.get("candidates", []):
        out.append(dict(c, predicted_ms=pred.get(c["schedule"]), predicted_rank=pred_rank.get(c["schedule"])))
    return sorted(out, key=lambda c: -(c.get("tflops") or 0))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--problems", default="f16:4096,e4m3:4096,bf16:8192")
    ap.add_argument("--ranked", type=int, default=6)
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    try:
        problems = [(p.split(":")[0], int(p.split(":")[1])) for p in args.problems.split(",")]
    except (IndexError, ValueError):
        print(f"ablation_sm90.py: --problems {args.problems!r}: give dtype:size pairs, e.g. f16:4096,e4m3:4096",
              file=sys.stderr)
        return 2
    jobs = plan(problems, args.ranked)
    for job in jobs:
        ok = [c for c in job.candidates if c.verdict == "ok"]
        print(f"{job.dtype} {job.m}^3: {len(ok)} candidates, {len(job.candidates) - len(ok)} refused")
        for c in job.candidates:
            p = getattr(c, "predicted_ms", None)
            print(f"   {c.name:70s} " + (f"predicted {p:.3f} ms" if p else f"refused: {c.verdict[:80]}"))
    if args.dry_run:
        return 0
    t0 = time.time()
    G.precompile(jobs, "sm_90a", 16)
    dev = G.Device()
    results = []
    for job in jobs:
        if time.time() - t0 > args.budget_s:
            print(f"budget of {args.budget_s} s spent: {job.dtype} {job.m}^3 not run")
            break
        rows = G.run_job(dev, job, "sm_90a", ["ptxgen", "cublas"], args.runs)
        ours = next(r for r in rows if r["system"] == "ptxgen")
        cublas = next((r.get("tflops") for r in rows if r["system"] == "cublas"), None)
        cands = report(job, ours)
        results.append({"dtype": job.dtype, "n": job.m, "cublas_tflops": cublas, "candidates": cands})
        print(f"\n{job.dtype} {job.m}^3 (cuBLAS {cublas or float('nan'):.0f} TFLOP/s)")
        for c in cands:
            t, p = c.get("tflops"), c.get("predicted_ms")
            print(f"  {(f'{t:7.1f}' if t else c.get('status', '-')):>7s}  {c['schedule']:70s} "
                  f"ms {c.get('ms') or float('nan'):.3f} pred {p or float('nan'):.3f} (#{c.get('predicted_rank')})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{_dt.date.today()}-ablation-sm90-{G.slug(dev.name)}.json"
    path.write_text(json.dumps({"device": dev.name, "commit": G.git_commit(), "command": " ".join(sys.argv),
                                "results": results}, indent=1, default=str))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
