"""What the cost model chooses over a table of problem classes, for sm_80, sm_90 and sm_90a, next to
what published peers pick (issue 14, item 4: evidence without a GPU).

The sm_90a section (issue 13) lists the chooser's pick among the built wgmma kernels (warp-specialised
persistent vs the non-specialised one-CTA-per-tile kernel with its split-K and Stream-K; TMA-store vs
direct epilogue) for bf16 square 1024-16384, the LLM shapes of bench/gemm.py, and fp8 squares, next to
the predicted time of bench/gemm.py's non-specialised baseline (128x128x64, 2 consumers, 4 stages).

For each problem and arch: the chosen schedule, its predicted time and efficiency (of the dense
mma.sync peak of the arch's flagship part), CTAs per SM and their limiter, the waves, the
assembler's real registers and spill bytes, and the same for the old fixed CLI default
(128x128x32, 2x2 warps, 3 stages). Peers, with sources:

* Triton's matmul tutorial (python/tutorials/03-matrix-multiplication.py, get_cuda_autotune_config):
  eight f16 configs that Triton *measures* per shape, so it has no static pick; the column says
  whether our tile is one of them, and the smallest BM it would try is 32.
* CUTLASS 2.x DefaultGemmConfiguration<OpClassTensorOp, Sm80> (include/cutlass/gemm/device/
  default_gemm_configuration.h): 128x256x64, 64x64x64 warps (2x4), 3 stages, for every shape.
* vLLM's int8 CUTLASS dispatch for sm_80 (csrc/quantization/cutlass_w8a8, scaled_mm_c2x
  sm80 configs), a shape-dependent static heuristic: M <= 16: 16x64x128 (1 warp), M <= 32:
  32x64x128 (1 warp), M <= 64: 64x128x128 (1x2 warps), M <= 128: 64x128x128 when N < 8192 else
  128x128x64 (2x2 warps), larger M: 128x128x64 (2x2 warps); 5 stages. Compared on the int8 rows.

Usage: python bench/choose_table.py [-o bench/results/DATE-choose-table.txt] [--quick] [--archs sm_90a]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ptxgen  # noqa: E402
from ptxgen import Gemm, Schedule, verify  # noqa: E402
from ptxgen.tune.costmodel import predict  # noqa: E402
from ptxgen.schedule.devices import device_model  # noqa: E402

#: Triton tutorial's CUDA autotune configs: (BM, BN, BK, stages, warps).
TRITON_TUTORIAL = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
                   (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]
CUTLASS_SM80_DEFAULT = "128x256x64 w2x4 s3"
OLD_DEFAULT = Schedule(block=(128, 128, 32), warps=(2, 2), stages=3)
CUTLASS_SCHEDULE = Schedule(block=(128, 256, 64), warps=(2, 4), stages=3)

SQUARE = [256, 512, 1024, 2048, 4096, 8192, 16384]
LLM_M = [1, 16, 64, 512, 4096]
LLM_NK = [(4096, 11008), (11008, 4096)]
ODD = [((77, 131, 45), 1), ((100, 72, 7), 3), ((8192, 64, 8192), 1), ((64, 8192, 8192), 1),
       ((128, 128, 65536), 1), ((1000, 1000, 1000), 1), ((4095, 4097, 1023), 1), ((3, 50257, 768), 1)]


def problems(quick: bool) -> list[tuple[str, Gemm]]:
    out = [("square", Gemm(n, n, n)) for n in (SQUARE[:4] if quick else SQUARE)]
    for n, k in LLM_NK:
        out += [("llm", Gemm(m, n, k)) for m in (LLM_M[:2] if quick else LLM_M)]
    out += [("odd", Gemm(*shape, batch=batch)) for shape, batch in (ODD[:3] if quick else ODD)]
    return out


def int8_problems(quick: bool) -> list[tuple[str, Gemm]]:
    return [("llm-int8", Gemm(m, n, k, dtype="s8", out_dtype="s32"))
            for n, k in LLM_NK[:1 if quick else 2] for m in (LLM_M[:2] if quick else LLM_M)]


#: bench/gemm.py's sm_90a baseline: the non-specialised kernel, one CTA per tile.
HOPPER_BASELINE = Schedule(block=(128, 128, 64), instruction="wgmma", consumers=2, stages=4,
                           warp_specialized=False, persistent=False)


def hopper_problems(quick: bool) -> list[tuple[str, Gemm]]:
    """bf16 (bf16 out) squares 1024-16384 and the LLM shapes bench/gemm.py times; fp8 squares."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gemm_cases import SHAPES

    squares = [1024, 2048, 4096] if quick else [1024, 2048, 4096, 8192, 16384]
    out = [("square", Gemm(n, n, n, dtype="bf16", out_dtype="bf16")) for n in squares]
    llm = [(m, n, k, group) for m, n, k, group in SHAPES if group in ("llm", "decode")]
    out += [(group, Gemm(m, n, k, dtype="bf16", out_dtype="bf16")) for m, n, k, group in (llm[:3] if quick else llm)]
    out += [("fp8", Gemm(n, n, n, dtype="e4m3", out_dtype="bf16")) for n in squares[1::2]]
    return out


def short_hopper(s: Schedule) -> str:
    kind = ("ws-pers" if s.warp_specialized else "streamK" if s.stream_k else
            f"sk{s.split_k}" if s.split_k > 1 else "cta/tile")
    epi = {None: "", True: " tma", False: " direct"}[s.epilogue_via_smem]
    return f"{s.bm}x{s.bn}x{s.bk} c{s.consumers} s{s.stages} {kind}{epi}" + (" grp" if s.raster == "grouped" else "")


def hopper_row(kind: str, g: Gemm) -> str:
    t0 = time.time()
    k = ptxgen.compile(g, arch="sm_90a")
    c, r = k.choice, k.resources
    p = c.prediction
    try:
        verify(g, HOPPER_BASELINE, "sm_90a")
        base = f"{predict(g, HOPPER_BASELINE, 'sm_90a').time_s * 1e6:9.1f} us"
    except ptxgen.ScheduleError as e:
        base = f"invalid: {str(e)[:30]}"
    from ptxgen.targets.sm90.plan import hopper_plan

    epi = hopper_plan(g, k.schedule).epilogue
    return (f"{kind:<9} {shape_text(g):<22} {short_hopper(k.schedule):<34} {epi:<6} {p.time_s * 1e6:9.1f} "
            f"{p.efficiency:5.0%} {p.ctas_per_sm:3d} {p.limiter:<13} {r.registers:4d} {p.waves:7.2f} "
            f"{r.spill_bytes:5d} {p.bound:<13} | {base}  ({time.time() - t0:.0f}s)")


HOPPER_HEADER = (f"{'class':<9} {'problem':<22} {'chosen (sm_90a)':<34} {'epi':<6} {'pred us':>9} {'eff':>5} "
                 f"{'CTA':>3} {'limiter':<13} {'regs':>4} {'waves':>7} {'spill':>5} {'bound':<13} | "
                 "non-WS 128x128x64 c2 s4 baseline")

HOPPER_WEAK_SPOTS = """# sm_90a: eff is of the wgmma peak (989 TFLOPS bf16, 1979 fp8). Weak spots besides the above: the
# producer/consumer overlap is priced as S stages in flight (S-1 without a producer) with the fill
# paid once per persistent CTA; the epilogue of a persistent tile is charged in full to its
# consumers (the built kernel has one accumulator set); direct-store sector efficiency and TMA
# staging are estimates; waves in the persistent rows are tiles / SMs (the CTA walks
# ceil(tiles / SMs) whole tiles). Nothing here was measured on an H100."""


def vllm_int8_sm80(g: Gemm) -> str:
    if g.m <= 16:
        return "16x64x128 w1x1 s5"
    if g.m <= 32:
        return "32x64x128 w1x1 s5"
    if g.m <= 64 or (g.m <= 128 and g.n < 8192):
        return "64x128x128 w1x2 s5"
    return "128x128x64 w2x2 s5"


def triton_note(s: Schedule) -> str:
    same = any((s.bm, s.bn, s.bk) == c[:3] for c in TRITON_TUTORIAL)
    return "in Triton set" if same else "not in Triton set"


def shape_text(g: Gemm) -> str:
    return f"{g.m}x{g.n}x{g.k}" + (f" b{g.batch}" if g.batch > 1 else "") + ("" if g.dtype == "f16" else f" {g.dtype}")


def short(s: Schedule) -> str:
    text = f"{s.bm}x{s.bn}x{s.bk} w{s.warps[0]}x{s.warps[1]} s{s.stages}"
    if s.raster == "grouped":
        text += " grp"
    if s.split_k > 1:
        text += f" sk{s.split_k}"
    if s.stream_k:
        text += " streamK"
    return text


def old_default(g: Gemm, arch: str) -> str:
    try:
        k = ptxgen.compile(g, OLD_DEFAULT, arch)
        r = k.resources
        p = predict(g, OLD_DEFAULT, arch, registers=r.registers)
        return f"{p.time_s * 1e6:9.1f} us {r.spill_bytes:4d} B spill"
    except ptxgen.ScheduleError as e:
        return f"invalid: {str(e)[:40]}"


#: Where the model is weakest (it has never been checked against a GPU: none was lent).
WEAK_SPOTS = """\
# Weak spots of the model (read the table with these in mind):
# 1. Unmeasured constants: loaded DRAM latency (1000 clk A100, 1200 H100), H100 L2 bandwidth, the
#    H100 mma.sync share of the peak (0.5), per-k-tile loop instructions (24/warp) and barrier
#    clocks (30). None has been calibrated on a GPU; the ranking leans on the latency constant for
#    decode and skinny shapes (it decides when Stream-K/split-K pays).
# 2. Small problems are latency- and launch-bound and many candidates tie within 2%: there the
#    tie-break (no split, 4 warps, larger BK, 3 stages, larger tile) decides, not the model.
# 3. It sees no cost in 1- and 2-warp CTAs with 64x64 warp tiles at 3-4 CTAs/SM, where Triton and
#    CUTLASS use 4-8 warps: only sub-partition feeding and issue are modelled, not per-warp
#    copy-issue latency or epilogue serialisation. Whether that matters is unmeasured.
# 4. Occupancy in the ranking uses the register estimate; only the checked candidates use the
#    assembler's count. Picks at 250-255 registers are spill-free but one codegen change from
#    spilling (the check then falls to the next candidate).
# 5. DRAM traffic is a panel-footprint model: no L2 partitions (A100/H100 split L2 in two), no set
#    conflicts; the grouped raster only helps once operands overflow half the L2.
# 6. Efficiencies over 90% for large shapes are optimistic: no instruction-level stalls, shared
#    memory assumed conflict-free except scalar tf32/int8 fragments (a flat 4x).
# 7. Split-K fix-up and Stream-K partials are priced as bandwidth plus one epilogue per unit;
#    Stream-K's flag waits are not modelled. sm_90 is mma.sync only (no wgmma/TMA)."""


def summary(rows: list[tuple[Gemm, str, Schedule]]) -> list[str]:
    """Agreement with the peers, counted over the rows."""
    f16 = [(g, a, s) for g, a, s in rows if g.dtype == "f16"]
    in_triton = sum(1 for _, _, s in f16 if any((s.bm, s.bn, s.bk) == c[:3] for c in TRITON_TUTORIAL))
    small_m = [(g, a, s) for g, a, s in f16 if g.m <= 16]
    int8 = [(g, a, s) for g, a, s in rows if g.dtype == "s8"]
    bm_agree = sum(1 for g, _, s in int8 if s.bm == int(vllm_int8_sm80(g).split("x")[0]))
    bk_agree = sum(1 for g, _, s in int8 if s.bk == int(vllm_int8_sm80(g).split("x")[2].split()[0]))
    cutlass = sum(1 for g, a, s in f16 if a == "sm_80" and (s.bm, s.bn, s.bk) == (128, 256, 64))
    ratios = []
    for g, a, s in f16:
        if a != "sm_80":
            continue
        try:
            verify(g, CUTLASS_SCHEDULE, a)
        except ptxgen.ScheduleError:
            continue
        ratios.append(predict(g, CUTLASS_SCHEDULE, a).time_s / predict(g, s, a).time_s)
    ratios.sort()
    split = sum(1 for _, _, s in rows if s.split_k > 1 or s.stream_k)
    return [
        "# Agreement with the peers:",
        f"# - Triton tutorial set: {in_triton} of {len(f16)} f16 rows pick one of its tiles; for the "
        f"{len(small_m)} rows with M <= 16 the model picks BM = {sorted({s.bm for _, _, s in small_m})}, "
        "below Triton's smallest BM of 32 (and CUTLASS's 128).",
        f"# - CUTLASS sm_80 default 128x256x64: chosen in {cutlass} of "
        f"{sum(1 for _, a, _ in f16 if a == 'sm_80')} sm_80 f16 rows; the model predicts it "
        + (f"{ratios[0]:.2f}x to {ratios[-1]:.2f}x the chosen one's time (median "
           f"{ratios[len(ratios) // 2]:.2f}x) over the {len(ratios)} rows it is legal for."
           if ratios else "nowhere legal."),
        f"# - vLLM int8 sm_80 dispatch: same BM in {bm_agree} of {len(int8)} int8 rows, same BK in "
        f"{bk_agree} of {len(int8)}.",
        f"# - split-K or Stream-K chosen in {split} of {len(rows)} rows (decode and long-K shapes).",
    ]


def row(kind: str, g: Gemm, arch: str, chosen: list | None = None) -> str:
    t0 = time.time()
    k = ptxgen.compile(g, arch=arch)
    if chosen is not None:
        chosen.append((g, arch, k.schedule))
    c, r = k.choice, k.resources
    p = c.prediction
    peer = triton_note(k.schedule)
    if g.dtype == "s8":
        peer = f"vLLM int8: {vllm_int8_sm80(g)}" if arch == "sm_80" else "vLLM int8 (sm_80 table only)"
    return (f"{kind:<9} {shape_text(g):<22} {arch:<5} {short(k.schedule):<30} {p.time_s * 1e6:9.1f} "
            f"{p.efficiency:5.0%} {p.ctas_per_sm:3d} {p.limiter:<13} {r.registers:4d} {p.waves:7.2f} "
            f"{r.spill_bytes:5d} {p.bound:<13} | {old_default(g, arch)} | {peer}  ({time.time() - t0:.0f}s)")


HEADER = (f"{'class':<9} {'problem':<22} {'arch':<5} {'chosen':<30} {'pred us':>9} {'eff':>5} {'CTA':>3} "
          f"{'limiter':<13} {'regs':>4} {'waves':>7} {'spill':>5} {'bound':<13} | "
          f"{'old default 128x128x32 w2x2 s3':<29} | peer")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=None, help="write the table here too (default: stdout only)")
    ap.add_argument("--quick", action="store_true", help="a few rows only (default: the whole table)")
    ap.add_argument("--archs", default="sm_80,sm_90,sm_90a",
                    help="comma-separated: sm_80/sm_90 (the mma.sync table), sm_90a (the wgmma section)")
    args = ap.parse_args()
    archs = [a for a in args.archs.split(",") if a]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    if archs == ["sm_90a"]:
        return hopper_main(args, commit)
    lines = [f"# bench/choose_table.py at {commit}: the cost model's choice per problem (no GPU: predicted, "
             "not measured)",
             *(f"# {a}: {device_model(a).name}, mma.sync peak f16 {device_model(a).peak_flops('f16') / 1e12:.0f} "
               f"TFLOPS (eff = flops / (time x that))" for a in ("sm_80", "sm_90")),
             f"# CUTLASS 2.x sm_80 default for every shape: {CUTLASS_SM80_DEFAULT}; Triton tutorial set: "
             + ", ".join(f"{a}x{b}x{c}" for a, b, c, *_ in TRITON_TUTORIAL),
             "# regs and spill: the assembler's (nvJitLink) for the chosen kernel", HEADER]
    print("\n".join(lines), flush=True)
    chosen: list = []
    for kind, g in problems(args.quick):
        for arch in [a for a in ("sm_80", "sm_90") if a in archs]:
            lines.append(row(kind, g, arch, chosen))
            print(lines[-1], flush=True)
    for kind, g in int8_problems(args.quick):
        lines.append(row(kind, g, "sm_80", chosen))
        print(lines[-1], flush=True)
    lines += summary(chosen) + [WEAK_SPOTS]
    print("\n".join(lines[-len(summary(chosen)) - 1:]), flush=True)
    if "sm_90a" in archs:
        lines += hopper_lines(args.quick)
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
    return 0


def hopper_lines(quick: bool) -> list[str]:
    """The sm_90a section, printed as it goes."""
    lines = [f"# sm_90a: {device_model('sm_90a').name}, the built wgmma kernels", HOPPER_HEADER]
    print("\n".join(lines), flush=True)
    for kind, g in hopper_problems(quick):
        lines.append(hopper_row(kind, g))
        print(lines[-1], flush=True)
    lines.append(HOPPER_WEAK_SPOTS)
    print(lines[-1], flush=True)
    return lines


def hopper_main(args, commit: str) -> int:
    lines = [f"# bench/choose_table.py at {commit}: the cost model's sm_90a choice per problem (no GPU: "
             "predicted, not measured)",
             "# command: python " + " ".join(sys.argv),
             "# regs and spill: the assembler's (nvJitLink) for the chosen kernel"]
    print("\n".join(lines), flush=True)
    lines += hopper_lines(args.quick)
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
