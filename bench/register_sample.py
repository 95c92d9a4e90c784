"""Measure the verifier's register estimate against the assembler's count on a committed sample.

Why: the chooser ranks by the estimate and only assembles the best few, so an estimate that is
low for some family of schedules sends every one of them to the assembler and into spills (issue
22: BK of 4 mma k-steps took 255 registers and spilled where the estimate said 232-240). The
sample below covers warp tiles 16x8 to 128x128, BK of 1, 2 and 4 k-steps, 2-4 stages, an
edge-free and an edge-heavy problem, and the 16- and 32-bit input types; each row prints the
estimate, the assembler's registers and spill bytes, so a model change can be checked against it.

    PTXGEN_ASSEMBLER=ptxas python bench/register_sample.py > bench/results/<date>-register-sample-<assembler>.txt
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptxgen.compile import compile as compile_kernel  # noqa: E402
from ptxgen.runtime.assemble import AssemblerNotFound  # noqa: E402
from ptxgen.schedule.geometry import register_estimate  # noqa: E402
from ptxgen.schedule.problem import Gemm  # noqa: E402
from ptxgen.schedule.schedule import Schedule  # noqa: E402
from ptxgen.schedule.verify import verify  # noqa: E402
from ptxgen.errors import ScheduleError  # noqa: E402

#: (problem, arch, stage counts tried).
PROBLEMS = [
    (Gemm(m=2048, n=2048, k=2048, dtype="f16", out_dtype="f16"), "sm_80", (2, 3)),
    (Gemm(m=1695, n=3815, k=3625, dtype="bf16"), "sm_90", (3,)),
    (Gemm(m=1000, n=1000, k=1000, dtype="tf32"), "sm_80", (3,)),
]
#: (block M, block N, warps): warp tiles from 16x8... to 128x128.
SHAPES = [((64, 64), (2, 2)), ((128, 128), (2, 2)), ((64, 256), (1, 4)), ((64, 256), (2, 2)),
          ((128, 128), (1, 4)), ((128, 128), (4, 1)), ((128, 256), (2, 4)), ((256, 128), (4, 2)),
          ((128, 64), (2, 2)), ((128, 128), (1, 2)), ((64, 128), (1, 2)), ((32, 32), (2, 2))]
BK_STEPS = (1, 2, 4)


#: The verifier refuses schedules whose estimate is over the register limit; the sample measures
#: those too (that is where the model is tested), so the limit the verifier checks is lifted here.
#: The emitted code does not change: the prefetch decision reads the limit from geometry.py.
LIFTED = mock.patch("ptxgen.schedule.verify.register_limit", lambda *a, **k: 10**6)
LIMIT = 255


def sample() -> list[tuple[Gemm, str, Schedule]]:
    out = []
    for g, arch, stage_counts in PROBLEMS:
        for (bm, bn), warps in SHAPES:
            for steps in BK_STEPS:
                for stages in stage_counts:
                    s = Schedule(block=(bm, bn, g.k_step * steps), warps=warps, stages=stages)
                    try:
                        verify(g, s, arch)
                    except ScheduleError:
                        continue
                    out.append((g, arch, s))
    return out


def main() -> int:
    agree = over_spilled = over_clean = under_spilled = 0
    print("problem                     arch   block        warps stages  estimate  parts                          regs  spill")
    rows = sample()
    for g, arch, s in rows:
        est = register_estimate(g, s)
        try:
            res = compile_kernel(g, s, arch).resources
        except AssemblerNotFound as e:
            print(f"no assembler: {e}", file=sys.stderr)
            return 1
        parts = " ".join(f"{k[:4]}={v}" for k, v in est.items() if k != "total")
        prob = f"{g.m}x{g.n}x{g.k} {g.dtype}->{g.out_dtype}"
        print(f"{prob:27} {arch:6} {s.bm}x{s.bn}x{s.bk:<4} {s.warps[0]}x{s.warps[1]}   {s.stages}      "
              f"{est['total']:4}      {parts:38} {res.registers:4}  {res.spill_bytes}", flush=True)
        over = est["total"] > LIMIT
        if over and res.spill_bytes:
            over_spilled += 1
        elif over:
            over_clean += 1
        elif res.spill_bytes:
            under_spilled += 1
        else:
            agree += 1
    print(f"# {len(rows)} schedules: {agree} estimated within {LIMIT} and clean, {over_spilled} estimated "
          f"over and spilled, {over_clean} estimated over but clean (passed over by the chooser needlessly), "
          f"{under_spilled} estimated within but spilled (the failures the chooser must absorb)")
    return 0


if __name__ == "__main__":
    t = time.time()
    with LIFTED:
        rc = main()
    print(f"# {time.time() - t:.0f} s", file=sys.stderr)
    sys.exit(rc)
