"""The chooser's picks next to the published configurations of CUTLASS's profiler and Triton's
autotuner for the same problems, with each disagreement priced by our own model (issue 22, item 2).

Why: the cost model is static (no GPU), so the evidence that its ranking means something is that
it lands where libraries tuned on real GPUs land, and that where it does not, the terms it prices
say why. For every problem: our pick (the cost model's first-ranked candidate), its predicted
time; the best peer configuration by our model (its time, and how much slower); whether our pick
is in the peer set; and the two terms (`schedule.cost.deciding_terms`) that separate our pick
from that peer: positive where our pick saves time.

Peers (read with the search tools, not copied):
* CUTLASS profiler, sm_80 f16/bf16 mma 16x8x16 (python/cutlass_library/generator.py,
  GenerateSM80_TensorOp_16816): the 20 TileDescriptions below, (BM, BN, BK, stages, warps M x N).
* Triton matmul tutorial (python/tutorials/03-matrix-multiplication.py, get_cuda_autotune_config):
  eight (BM, BN, BK, stages, num_warps); num_warps is mapped to our warp grids (8: 2x4 or 4x2,
  4: 2x2, 2: 1x2 or 2x1, the longer side taking more warps).
* Triton persistent matmul tutorial for Hopper (python/tutorials/09-persistent-matmul.py,
  matmul_get_configs): BM 128, BN 128 or 256, BK 64 or 128, 3-4 stages, 4 or 8 warps; on sm_90a
  one consumer warpgroup per 4 warps (BK 128 is not a 128-byte swizzle row of bf16, so dropped).

Usage: python bench/calibration_table.py [-o bench/results/DATE-calibration-table.txt]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptxgen import Gemm, Schedule, ScheduleError, verify  # noqa: E402
from ptxgen.schedule.cost import deciding_terms  # noqa: E402
from ptxgen.tune.choose import rank  # noqa: E402
from ptxgen.tune.costmodel import predict  # noqa: E402

#: CUTLASS profiler sm_80 16816 tiles: (BM, BN, BK, stages, (warps M, warps N)).
CUTLASS_SM80 = [(256, 128, 32, 3, (4, 2)), (128, 256, 32, 3, (2, 4)), (256, 64, 32, 3, (4, 1)),
                (256, 64, 32, 4, (4, 1)), (64, 256, 32, 4, (1, 4)), (128, 128, 32, 3, (2, 2)),
                (128, 128, 32, 4, (2, 2)), (128, 128, 32, 5, (2, 2)), (128, 64, 32, 6, (2, 2)),
                (64, 128, 32, 6, (2, 2)), (64, 64, 32, 10, (2, 2)), (256, 128, 64, 3, (4, 2)),
                (128, 256, 64, 3, (2, 4)), (256, 64, 64, 4, (4, 1)), (64, 256, 64, 4, (1, 4)),
                (128, 128, 64, 4, (2, 2)), (256, 64, 64, 3, (4, 1)), (128, 64, 64, 3, (2, 2)),
                (64, 128, 64, 3, (2, 2)), (64, 64, 64, 5, (2, 2))]
#: Triton matmul tutorial (CUDA): (BM, BN, BK, stages, num_warps).
TRITON_SM80 = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
               (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]
#: Triton persistent matmul tutorial (Hopper): (BM, BN, BK, stages, num_warps).
TRITON_SM90 = [(128, bn, 64, s, w) for bn in (128, 256) for s in (3, 4) for w in (4, 8)]

#: (problem, arch): the quickstart, squares, an LLM layer, and the issue's odd shapes.
PROBLEMS = [(Gemm(256, 256, 128, out_dtype="f16"), "sm_80")] + \
    [(Gemm(n, n, n, out_dtype="f16"), "sm_80") for n in (512, 1024, 2048, 4096, 8192)] + \
    [(Gemm(4096, 4096, 11008, out_dtype="f16"), "sm_80"), (Gemm(4226, 5430, 4327, out_dtype="f16"), "sm_80"),
     (Gemm(1695, 3815, 3625, out_dtype="f16"), "sm_80")] + \
    [(Gemm(n, n, n, dtype="bf16", out_dtype="bf16"), "sm_90a") for n in (1024, 4096, 8192)] + \
    [(Gemm(4096, 11008, 4096, dtype="bf16", out_dtype="bf16"), "sm_90a")]


def triton_warps(bm: int, bn: int, warps: int) -> tuple[int, int]:
    """num_warps as a warp grid: the longer block side takes more warps."""
    if warps == 8:
        return (2, 4) if bn >= bm else (4, 2)
    if warps == 4:
        return (2, 2)
    return (1, 2) if bn >= bm else (2, 1)


def peer_schedules(arch: str) -> list[tuple[str, Schedule]]:
    """Every peer configuration as our Schedule, named by where it comes from."""
    if arch == "sm_90a":
        return [(f"Triton {bm}x{bn}x{bk} s{s} w{w}",
                 Schedule(block=(bm, bn, bk), instruction="wgmma", consumers=w // 4, stages=s))
                for bm, bn, bk, s, w in TRITON_SM90]
    out = [(f"CUTLASS {bm}x{bn}x{bk} s{s} w{wm}x{wn}", Schedule(block=(bm, bn, bk), warps=(wm, wn), stages=s))
           for bm, bn, bk, s, (wm, wn) in CUTLASS_SM80]
    out += [(f"Triton {bm}x{bn}x{bk} s{s} w{w}", Schedule(block=(bm, bn, bk), warps=triton_warps(bm, bn, w), stages=s))
            for bm, bn, bk, s, w in TRITON_SM80]
    return out


def short(s: Schedule) -> str:
    if s.instruction == "wgmma":
        text = f"{s.bm}x{s.bn}x{s.bk} c{s.consumers} s{s.stages}{' ws' if s.warp_specialized else ''}"
        text += f" cl{s.cluster[0]}x{s.cluster[1]}" if tuple(s.cluster) != (1, 1) else ""
    else:
        text = f"{s.bm}x{s.bn}x{s.bk} w{s.warps[0]}x{s.warps[1]} s{s.stages}"
    return text + (" sk" + str(s.split_k) if s.split_k > 1 else "") + (" streamK" if s.stream_k else "")


def same_config(ours: Schedule, peer: Schedule) -> bool:
    """Whether our pick is the peer's configuration (block, stages, and warps or consumers)."""
    if ours.block != peer.block or ours.stages != peer.stages or ours.split_k > 1 or ours.stream_k:
        return False
    return ours.consumers == peer.consumers if ours.instruction == "wgmma" else ours.warps == peer.warps


def row(g: Gemm, arch: str) -> str:
    best = rank(g, arch)[0]
    legal = []
    for name, s in peer_schedules(arch):
        try:
            verify(g, s, arch)
        except ScheduleError:
            continue
        legal.append((name, s, predict(g, s, arch)))
    shape = f"{g.m}x{g.n}x{g.k} {g.dtype}"
    ours = f"{short(best.schedule):<26} {best.prediction.time_s * 1e6:9.1f}"
    if not legal:
        return f"{shape:<22} {arch:<6} {ours} | no peer configuration is legal here"
    name, peer, p = min(legal, key=lambda r: r[2].time_s)
    match = "yes" if any(same_config(best.schedule, s) for _, s, _ in legal) else "no"
    slower = p.time_s / best.prediction.time_s - 1
    why = ", ".join(f"{name_}{saved * 1e6:+.1f}" for name_, saved in deciding_terms(best.prediction, p, 2))
    return f"{shape:<22} {arch:<6} {ours} | {match:<3} {name:<28} {p.time_s * 1e6:9.1f} {slower:+6.1%} | {why}"


HEADER = (f"{'problem':<22} {'arch':<6} {'our pick':<26} {'pred us':>9} | {'in':<3} {'best peer by our model':<28} "
          f"{'pred us':>9} {'slower':>6} | terms that separate them (us the peer spends more)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", help="also write the table here")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [f"# bench/calibration_table.py at {commit}: the cost model's pick (no GPU: predicted) vs the peers",
             "# 'in': our pick is one of the peers' configurations; 'slower': the best peer by our model vs our pick",
             HEADER]
    t0 = time.time()
    for g, arch in PROBLEMS:
        lines.append(row(g, arch))
        print(lines[-1], flush=True)
    lines.append(f"# {time.time() - t0:.0f} s")
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
