"""Why the sm_90a multicast cluster kernel is slow on hardware: its synchronisation, varied in PTX text.

Why: on an H200 every 1x2 / 2x1 cluster candidate lost to the same tile alone, its k-tile taking
1600-2100 clocks however deep the ring (bench/results/2026-11-26-ablation-sm90-3eb197e), i.e. a
per-k-tile cost the pipeline does not hide. ptxgen's cluster kernel differs from CUTLASS's
(`ClusterBarrier::wait` / `arrive(cta_id, pred)` in cutlass/arch/barrier.h) in the scope of its
barrier operations: the producer waits with `mbarrier.try_wait.parity.acquire.cluster` and the
consumers release a peer's stage with `mbarrier.arrive.release.cluster.shared::cluster`, where
CUTLASS waits and arrives at the default (CTA) scope. This times, on the same operands, the
emitted kernel and variants of its text:
  as-emitted   ptxgen's PTX
  cta-scope    the waits without .acquire.cluster and the remote arrivals without .release.cluster
  no-hint      every try_wait without its suspend-time hint
  both         cta-scope and no-hint
each checked against torch's product before it is timed (a variant that computes a wrong result is
reported, not timed). A GPU is needed; the results go to DIR/<date>-cluster-probe-<device>.json.

    PYTHONPATH=. python bench/cluster_probe.py [--out DIR] [--runs N] [--dry-run]

--dry-run (no GPU): every variant of every case is made and assembled, and its registers printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemm as G  # noqa: E402

VARIANTS = {
    "as-emitted": [],
    "cta-scope": [("mbarrier.try_wait.parity.acquire.cluster.", "mbarrier.try_wait.parity."),
                  ("mbarrier.arrive.release.cluster.shared::cluster.", "mbarrier.arrive.shared::cluster.")],
    "no-hint": [(", 10000000;", ";")],
}
VARIANTS["both"] = VARIANTS["cta-scope"] + VARIANTS["no-hint"]
#: (dtype, size, block, consumers, stages, cluster): the ablation's worst losers and a 1x1 control.
CASES = [("bf16", 8192, (128, 128, 64), 2, 4, (1, 2)), ("bf16", 8192, (128, 128, 64), 2, 4, (1, 1)),
         ("f16", 4096, (128, 256, 64), 2, 4, (2, 1)), ("e4m3", 4096, (128, 128, 128), 2, 6, (1, 2))]


def variant_ptx(ptx: str, name: str) -> str:
    """`ptx` with the variant's substitutions; each must apply (a probe of nothing would mislead)."""
    for old, new in VARIANTS[name]:
        if old not in ptx:
            raise ValueError(f"variant {name}: {old!r} is not in the kernel's PTX")
        ptx = ptx.replace(old, new)
    return ptx


def _case_kernel(dtype: str, n: int, block, consumers: int, stages: int, cluster):
    import ptxgen

    job = G.Job(dtype, n, n, n, "square")
    s = ptxgen.Schedule(block=block, instruction="wgmma", consumers=consumers, stages=stages, cluster=cluster)
    return job, ptxgen.compile(job.gemm(), s, arch="sm_90a")


def dry_run() -> int:
    """Each case's variants made and assembled (no GPU): what the timed run will launch."""
    for case in CASES:
        _, base = _case_kernel(*case)
        for name in VARIANTS:
            try:
                k = dataclasses.replace(base, ptx=variant_ptx(base.ptx, name), _assembled=None)
            except ValueError as e:
                print(f"{case[0]} {case[1]} cluster{case[5]} {name}: not applicable ({e})")
                continue
            r = k.resources
            print(f"{case[0]} {case[1]} cluster{case[5]} {name}: {r.registers} registers, {r.spill_bytes} B spilled")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    from ptxgen.runtime import prepare_launch

    if args.dry_run:
        return dry_run()

    dev = G.Device()
    results = []
    for dtype, n, block, consumers, stages, cluster in CASES:
        job, base = _case_kernel(dtype, n, block, consumers, stages, cluster)
        a = dev.randn((n, n), dtype, seed=1)
        b = dev.randn((n, n), dtype, seed=2).t()
        ref = dev.reference(a, b)
        for name in VARIANTS:
            row = {"dtype": dtype, "n": n, "schedule": f"{block} c{consumers} s{stages} cluster{cluster}",
                   "variant": name}
            try:
                k = dataclasses.replace(base, ptx=variant_ptx(base.ptx, name), _assembled=None)
            except ValueError as e:
                row["status"] = f"not applicable: {e}"
                results.append(row)
                print(row, flush=True)
                continue
            out = dev.empty((n, n), G.OUT_DTYPE[dtype])
            out.fill_(float("nan"))
            stream = dev.stream_handle()
            launch = prepare_launch(k, a, b, out, stream=stream)
            launch()
            dev.sync()
            err = dev.rel_err(out, ref)
            row["rel_err"] = err
            if not err < G.TOL[G.OUT_DTYPE[dtype]]:
                row["status"] = "wrong"
            else:
                ms = G.time_launches(dev, [launch], args.runs)
                row.update(ms=ms, tflops=job.flops / ms / 1e9)
            results.append(row)
            print(f"{dtype} {n} {row['schedule']:40s} {name:11s} "
                  f"{row.get('tflops') or 0:7.1f} TFLOP/s  rel_err {err:.2e} {row.get('status', '')}", flush=True)
    path = Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    path = path / f"{_dt.date.today()}-cluster-probe-{G.slug(dev.name)}.json"
    path.write_text(json.dumps({"device": dev.name, "commit": G.git_commit(), "results": results}, indent=1,
                               default=str))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
