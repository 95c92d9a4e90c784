"""On-device check of the sm_90a grouped kernels (ptxgen/targets/sm90/grouped.py): each
case runs on the GPU through `k(a, b, offs= / masked_m=, scale_a=, scale_b=)` and is compared
elementwise with the float64 group-by-group reference (poisoned C, rows outside every group
required untouched), then one planted bug (a masked row written) must fail on the device too.

    python bench/grouped_sm90_device.py [--out results.json]

Small cases use a 2-CTA persistent grid (every CTA walks several groups' tiles); the MoE-sized
ones take the chooser's schedule on the device's SM count.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

import ptxgen
from ptxgen import BlockScale, Gemm, Schedule
from ptxgen.check import check_kernel, random_operands
from ptxgen.schedule.block_scale import random_grouped_scales
from ptxgen.schedule.grouping import random_counts

SMALL = dict(instruction="wgmma", consumers=1, stages=2, sms=2)
BS = BlockScale()
CASES = [
    ("contiguous-bf16-small", Gemm(300, 136, 208, dtype="bf16", out_dtype="bf16", b_layout="row", groups=7,
                                   grouping="contiguous"), Schedule(block=(64, 64, 64), **SMALL)),
    ("masked-f16-small", Gemm(150, 72, 200, dtype="f16", out_dtype="f32", groups=5, grouping="masked"),
     Schedule(block=(64, 64, 64), **SMALL)),
    ("contiguous-e4m3-bs-small", Gemm(300, 128, 400, dtype="e4m3", out_dtype="bf16", groups=6,
                                      grouping="contiguous", block_scale=BS), Schedule(block=(64, 64, 128), **SMALL)),
    ("masked-e4m3-bs-small", Gemm(150, 128, 400, dtype="e4m3", out_dtype="f32", groups=4, grouping="masked",
                                  block_scale=BS), Schedule(block=(64, 64, 128), **SMALL)),
    ("contiguous-bf16-moe", Gemm(4096, 1024, 2048, dtype="bf16", out_dtype="bf16", groups=16,
                                 grouping="contiguous"), None),
    ("masked-e4m3-bs-moe", Gemm(256, 2048, 2048, dtype="e4m3", out_dtype="bf16", groups=8, grouping="masked",
                                block_scale=BS), None),
]


def run_case(name: str, g: Gemm, s: Schedule | None, seed: int = 0) -> dict:
    k = ptxgen.compile(g, s, arch="sm_90a")
    rng = np.random.default_rng(seed)
    counts = random_counts(g, rng, empty=0.25)
    kw = {"offs" if g.grouping == "contiguous" else "masked_m": counts}
    if g.block_scale is not None:
        sa, sb = random_grouped_scales(g.block_scale, g, seed + 5, decades=2.0)
        kw.update(scale_a=sa, scale_b=sb)
    a, b = random_operands(g, seed)
    t = time.time()
    res = check_kernel(k, a, b, run=k, **kw)
    return {"case": name, "ok": bool(res.ok), "bad": res.bad, "stray": res.stray, "result": str(res),
            "schedule": str(k.schedule.block), "grid": list(k.grid), "counts": counts.tolist()[:16],
            "seconds": round(time.time() - t, 2)}


def planted_masked_row() -> dict:
    """rows_end + 1 in every role: each non-empty group writes row masked_m[g], which must show."""
    from ptxgen.ir import Imm
    from ptxgen.ir import ops as ptx
    from ptxgen.ir.ops import U32
    from ptxgen.targets.sm90 import grouped

    real = grouped.GroupedTileWalk.begin

    def begin(self):
        ops, step = real(self)
        return dataclasses.replace(ops, rows_end=ptx.add(self.b, U32, ops.rows_end, Imm("1"))), step
    grouped.GroupedTileWalk.begin = begin
    try:
        g = Gemm(70, 32, 64, groups=3, grouping="masked")
        k = ptxgen.compile(g, Schedule(block=(64, 64, 64), **SMALL), arch="sm_90a")
        a, b = random_operands(g)
        res = check_kernel(k, a, b, run=k, masked_m=np.array([5, 0, 33], np.int32))
    finally:
        grouped.GroupedTileWalk.begin = real
    return {"case": "plant-masked-row-written", "caught": not res.ok, "stray": res.stray, "bad": res.bad,
            "expected_stray": 2 * g.n, "result": str(res)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args()
    rows = []
    for name, g, s in CASES:
        try:
            rows.append(run_case(name, g, s))
        except Exception as e:  # noqa: BLE001 - one case's failure is reported, the others still run
            rows.append({"case": name, "ok": False, "error": f"{type(e).__name__}: {e}"})
        print(json.dumps(rows[-1]), flush=True)
    rows.append(planted_masked_row())
    print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    good = all(r.get("ok", r.get("caught")) for r in rows)
    print("ALL OK" if good else "FAILURES")
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
