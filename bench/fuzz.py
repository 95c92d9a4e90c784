"""Fuzz ptxgen end to end: random (Gemm, Schedule) draws, compiled and run on the CPU simulator.

    python bench/fuzz.py [--draws 2000] [--seed 0] [--workers 2 | --ray [ADDRESS]] [--instruction wmma | --arch sm_90a]
    python bench/fuzz.py --designs grouped,block-scale [--draws 2000] [--workers N]

`--workers N` spreads the draws over N local processes (default: one per core; `--jobs` is the old
name), `--ray [ADDRESS]` over a Ray cluster (`pip install -e ".[cluster]"`; no ADDRESS: a local
instance, `auto`: the cluster `ray start` made). Every draw is a function of its seed alone and
results are gathered in seed order, so the same --seed and --draws print the same report however
the draws are spread (only the first line's wall time and "on ..." differ).

Each draw ends as one of:
  rejected  the verifier raised ScheduleError (a clear message; fine)
  correct   compiled, simulated with every hazard check on, and matched float64 numpy
  wrong     ran but the result missed the tolerance            (a bug)
  error     any other exception: a hazard, a crash, ...         (a bug)
The last two must be 0. The draw space covers everything the lowering supports: all layouts,
dtypes (s8/u8 inputs with s32, quantised s8/u8 and dequantised float outputs), accumulators,
odd shapes, leading dimensions, alignment, epilogues (with row/column scale vectors), batches,
split-K, Stream-K and both instruction paths (mma.sync and wmma); `--instruction` pins the path
to focus a run on it. `--arch sm_90a` draws Hopper (wgmma) schedules instead (fuzz_draws_sm90.py):
every built design (warp-specialised persistent, with clusters, one tile per CTA; the simpler
kernel, split-K, Stream-K) crossed with clusters and multicast, batches, odd tile counts and `sms`
(10+ clusters now and then), every dtype with its outputs, epilogues, and now and then a legal part
not built yet, which must come back "rejected". `--designs grouped,block-scale` draws issue 24's
LLM-shaped problems instead (fuzz_draws_llm.py), taking the designs in turn: grouped GEMMs
(contiguous and masked, 1-16 groups, empty and tile-straddling groups, masked counts 0..max_m)
on the mma.sync path and in the sm_90a warp-specialised persistent wgmma kernel (f16/bf16 and
block-scaled e4m3/e5m2, small `sms`; `grouped-sm90a` alone), and block-scaled fp8 (1x128 / 128x128
scales, K rarely a multiple of 128) on sm_90a; these draws are legal by construction, so "rejected"
must be 0 there too, but for the row "grouped sm_90a unbuilt (refused)", whose draws ask for
a legal part the grouped kernel does not build. `--designs grouped-sm100a` draws grouped GEMMs in
the sm_100a tcgen05 kernel (fuzz_draws_sm100_grouped.py: f16/bf16, dense fp8 and masked MXFP8, BM 64/128, small
`sms`; its probes, named "grouped sm_100a unbuilt (refused)", must be rejected). `--arch sm_100a` draws tcgen05 schedules
(fuzz_draws_sm100.py): 1-CTA, CTA pairs, multicast clusters 2x1 to 4x2, cluster launch control,
batches and short persistent walks, every dense dtype and layout and the block-scaled
MXFP8/MXFP4/NVFP4 kinds with random scales, the TMA-store or direct epilogue, and one draw in
twenty a probe of a legal part not built ("probe ..."), which must come back "rejected".
The report counts outcomes per design (a cluster and a batch named after it; sm_100a's names say
family, kind, batched and walk themselves); ARCH_DRAWS is where another target's draws go.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import traceback
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # fuzz_draws_* beside this file, in workers too

SIZES = [1, 2, 7, 15, 16, 17, 63, 64, 100, 127, 128, 129]


def draw(rng: np.random.Generator, instruction: str | None = None):
    from ptxgen import Epilogue, Gemm, Schedule

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    wmma = instruction == "wmma"  # pinned to wmma: draw only what that path can take
    dtype = pick(["f16", "bf16"] if wmma else ["f16", "bf16"] * 3 + ["tf32"] + ["s8", "u8"] * 2)
    acc = "f16" if dtype == "f16" and rng.random() < 0.15 else "f32"
    out = ("f16" if acc == "f16" else pick(["s32", "s8", "s8", "u8", "f32", "f16", "bf16"]) if dtype in ("s8", "u8")
           else "f32" if dtype == "tf32" else pick(["f32", "f16", "bf16"]))
    epi = None
    if rng.random() < (0.1 if out == "s32" else 0.5 if out in ("f32", "f16", "bf16") else 0.9):  # s32: rejected
        epi = Epilogue(alpha=pick([1.0, 0.5, -2.0]), beta=pick([0.0, 0.0, 1.0, -0.5]),
                       bias=pick([None, "row", "col"]), activation=pick([None, "relu", "gelu", "silu"]),
                       scale=pick([None, None, "col", "row"] if dtype in ("s8", "u8") else [None] * 3 + ["col", "row"]))
    m, n, k = pick(SIZES), pick(SIZES), pick(SIZES)
    a_layout, b_layout = pick(["row", "col"]), pick(["row", "col"])
    # leading dimensions: dense, padded by 8 or 3 elements, or rounded up to 16 elements (int8
    # rows of any byte length narrow their copies down to single bytes)
    ld_of = pick([None, None, lambda w: w + 8, lambda w: w + 3, lambda w: -(-w // 16) * 16])
    lds = {}
    if ld_of:
        lds = {"lda": ld_of(k if a_layout == "row" else m), "ldb": ld_of(n if b_layout == "row" else k),
               "ldc": ld_of(n)}
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, acc_dtype=acc,
             epilogue=epi, batch=pick([1, 1, 1, 2]), align=pick([None, None, 16, 8, 4, 2, 1]), **lds)
    bk = pick([32, 64, 128] if dtype in ("s8", "u8") else [16, 32, 64])  # 32..128 bytes of K either way
    s = Schedule(block=(pick([32, 64, 128]), pick([32, 64, 128]), bk),
                 warps=(pick([1, 2, 4]), pick([1, 2, 4])), stages=int(rng.integers(1, 6)),
                 smem_layout=pick(["pad", "plain"] if wmma else ["swizzle", "pad", "plain"]),
                 raster=pick(["row", "grouped"]),
                 group_m=pick([1, 2, 8]), frag_double_buffer=bool(rng.integers(2)),
                 split_k=pick([1, 1, 1, 2, 3]), split_k_mode=pick(["workspace", "workspace", "atomic"]),
                 instruction=instruction or pick(["m16n8k16"] * 4 + ["wmma"]),
                 decomposition=pick(["tiles"] * 4 + ["stream-k", "stream-k-pure"]), sms=pick([None, 1, 3, 5, 8]))
    return g, s


def draw_sm80(rng: np.random.Generator, instruction: str | None = None):
    return draw(rng, instruction)


def draw_sm90a(rng: np.random.Generator, instruction: str | None = None):
    from fuzz_draws_sm90 import draw as draw_hopper

    return draw_hopper(rng)


def draw_sm100a(rng: np.random.Generator, instruction: str | None = None):
    """A fuzz_draws_llm.Draw: named in full (family, kind, batched, walk) and with its run-time
    block scales."""
    from fuzz_draws_sm100 import draw as draw_blackwell

    return draw_blackwell(rng)


def design_sm80(s) -> str:
    if s.decomposition != "tiles":
        return "stream-k"
    return ("split-k " + s.split_k_mode if s.split_k > 1 else "tiles") + f" {s.instruction}"


def design_sm90a(s) -> str:
    from fuzz_draws_sm90 import design

    return design(s)


#: Per arch: how a (Gemm, Schedule) is drawn from a seed's generator and which design (kernel
#: family) a schedule selects, for the per-design counts; None where the draw is a
#: fuzz_draws_llm.Draw that names its design in full and brings its run-time arrays (sm_100a's
#: block scales). A new target adds a row and its own draw module (as fuzz_draws_sm90.py).
ARCH_DRAWS = {"sm_80": (draw_sm80, design_sm80), "sm_90a": (draw_sm90a, design_sm90a),
              "sm_100a": (draw_sm100a, None)}


def operands(g, rng: np.random.Generator):
    """Operands honouring the gemm's leading dimensions (strided views of wider buffers)."""
    from ptxgen.check import random_epilogue_operands, random_operands, random_scale

    a, b = random_operands(g, int(rng.integers(1 << 30)))
    lda, ldb, _ = g.leading_dims()

    def widen(x, layout, ld):
        if x.ndim == 2:
            x = x[None]
        if layout == "row":
            big = np.zeros(x.shape[:-1] + (ld,), x.dtype)
            big[..., : x.shape[-1]] = x
            v = big[..., : x.shape[-1]]
        else:
            big = np.zeros(x.shape[:-2] + (x.shape[-1], ld), x.dtype)
            big[..., : x.shape[-2]] = np.swapaxes(x, -1, -2)
            v = np.swapaxes(big[..., : x.shape[-2]], -1, -2)
        return v if g.batch > 1 else v[0]

    c0, bias = random_epilogue_operands(g, int(rng.integers(1 << 30)))
    scale = random_scale(g, int(rng.integers(1 << 30)))
    return widen(a, g.a_layout, lda), widen(b, g.b_layout, ldb), c0, bias, scale


def run_one(seed: int, instruction: str | None = None, arch: str = "sm_80",
            designs: tuple[str, ...] = ()) -> tuple[str, str, str, str]:
    """(outcome, bug report or "", dtype and layout, design) of the draw of `seed`: from the
    arch's draws, or with `designs` (fuzz_draws_llm.py) from design number seed % len(designs)."""
    rng = np.random.default_rng(seed)
    if designs:
        from fuzz_draws_llm import DRAWS, operands as designed_operands

        d = DRAWS[designs[seed % len(designs)]](rng)
        return outcome_of(seed, d.gemm, d.schedule, d.arch, d.design, lambda: designed_operands(d, rng), d.arrays)
    draw_of, design_of = ARCH_DRAWS[arch]
    if design_of is None:  # a Draw named in full, with its run-time arrays
        d = draw_of(rng, instruction)
        return outcome_of(seed, d.gemm, d.schedule, arch, d.design, lambda: operands(d.gemm, rng), d.arrays, named=True)
    g, s = draw_of(rng, instruction)
    return outcome_of(seed, g, s, arch, design_of(s), lambda: operands(g, rng), {})


def outcome_of(seed: int, g, s, arch: str, design: str, make_operands, arrays: dict,
               named: bool = False) -> tuple[str, str, str, str]:
    """Compile (g, s) for `arch`, simulate it on `make_operands()` and the run-time `arrays`
    (offs / masked_m, scale_a / scale_b) and compare with float64: run_one's outcome. The design
    gets its cluster and " batched" added unless it is `named` in full already."""
    import ptxgen
    from ptxgen.check import check_simulated

    kind = f"{g.dtype} {'tn'[g.a_layout == 'col']}{'tn'[g.b_layout == 'col']}"  # CUTLASS letters, A then B
    try:
        k = ptxgen.compile(g, s, arch=arch)
    except ptxgen.ScheduleError:
        return "rejected", "", kind, design
    except Exception:  # noqa: BLE001 - anything but ScheduleError from compile is a bug too
        return "error", f"seed {seed}: {g} {s}: compile raised:\n{traceback.format_exc(limit=3)}", kind, design
    if k.cluster_dims != (1, 1, 1) and not named:
        design += f" {s.cluster[0]}x{s.cluster[1]}"
    if g.batch > 1 and not named:
        design += " batched"
    try:
        a, b, c0, bias, scale = make_operands()
        result = check_simulated(k, a, b, c0, bias, scale, **arrays)  # C poisoned, strided by ldc (twice for 8-bit)
        if result.ok:
            return "correct", "", kind, design
        return "wrong", f"seed {seed}: {g} {s} {arch}: {result}", kind, design
    except Exception:  # noqa: BLE001 - the point is to catch everything
        return "error", f"seed {seed}: {g} {s} {arch}:\n{traceback.format_exc(limit=3)}", kind, design


OUTCOMES = ("rejected", "correct", "wrong", "error")
#: Draws per task: enough to amortise a task's overhead, few enough to balance the workers.
CHUNK = 4


def run_chunk(pinned: tuple[str | None, str, tuple[str, ...]], seeds: range) -> list[tuple[str, str, str, str]]:
    """run_one for each seed (a task for ptxgen.scaleout.spread: fn(shared, item)); `pinned` is
    (instruction, arch, designs)."""
    instruction, arch, designs = pinned
    return [run_one(seed, instruction, arch, designs) for seed in seeds]


def design_list(text: str) -> tuple[str, ...]:
    """`--designs grouped,block-scale` as a tuple of names fuzz_draws_llm.DRAWS knows."""
    from fuzz_draws_llm import DRAWS

    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in names if x not in DRAWS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown design(s) {', '.join(unknown) or '(none)'}: choose from "
                                         f"{', '.join(DRAWS)}, comma-separated")
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", "--jobs", dest="workers", type=int, default=None,
                    help="local processes the draws are spread over, whichever draws (--arch, --designs) "
                    "(default: one per core)")
    ap.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                    help="spread the draws over a Ray cluster instead (no ADDRESS: a local instance)")
    ap.add_argument("--show", type=int, default=5, help="bug reports to print")
    ap.add_argument("--instruction", choices=("m16n8k16", "wmma"), default=None,
                    help="pin every draw to one instruction path (default: drawn, 1 in 5 wmma)")
    ap.add_argument("--arch", choices=tuple(ARCH_DRAWS), default="sm_80",
                    help="sm_90a: draw Hopper (wgmma) schedules instead: every built design crossed with "
                    "clusters, batches, odd tile counts and sms (bench/fuzz_draws_sm90.py); sm_100a: tcgen05 "
                    "schedules: 1-CTA, CTA pairs, multicast clusters, cluster launch control, batches and walks, "
                    "dense and block-scaled (MXFP8/MXFP4/NVFP4) kinds, 1 in 20 a probe that must be rejected "
                    "(bench/fuzz_draws_sm100.py)")
    ap.add_argument("--designs", type=design_list, default=(), metavar="grouped,block-scale",
                    help="draw these LLM-shaped designs instead, in turn (seed %% count picks one; each names its "
                    "own arch): 'grouped' (mixture-of-experts GEMMs, contiguous and masked, half on the "
                    "mma.sync path of sm_80/sm_90, half in the sm_90a wgmma kernel, f16/bf16 and block-scaled "
                    "fp8), 'grouped-sm90a' (only the latter), 'grouped-sm100a' (grouped GEMMs in the sm_100a "
                    "tcgen05 kernel) and 'block-scale' (1x128/128x128 block-scaled fp8 on sm_90a); "
                    "bench/fuzz_draws_llm.py")
    args = ap.parse_args()
    if args.arch != "sm_80" and args.instruction:
        ap.error(f"--instruction pins an sm_80 path; --arch {args.arch} draws its own schedules: pass one")
    if args.designs and (args.instruction or args.arch != "sm_80"):
        ap.error("--designs draws its own archs and instructions: drop --arch/--instruction")
    if args.ray is not None and args.workers is not None:
        ap.error("--workers and --ray both say where to run the draws: pass one")
    from ptxgen.scaleout import Workers, spread

    workers = (Workers.of("ray", args.ray or None) if args.ray is not None
               else Workers.of(args.workers or os.cpu_count() or 1))
    t0 = time.perf_counter()
    end = args.seed + args.draws
    chunks = [range(at, min(at + CHUNK, end)) for at in range(args.seed, end, CHUNK)]
    counts: Counter = Counter()
    correct_by_kind: Counter = Counter()
    by_design: dict[str, Counter] = {}
    bugs: list[str] = []
    for chunk in spread(run_chunk, chunks, workers, shared=(args.instruction, args.arch, args.designs)):
        for outcome, detail, kind, design in chunk:
            counts[outcome] += 1
            by_design.setdefault(design, Counter())[outcome] += 1
            if outcome == "correct":
                correct_by_kind[kind] += 1
            if detail:
                bugs.append(detail)
    wall = time.perf_counter() - t0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for detail in bugs[: args.show]:
        print(detail, file=sys.stderr)
    pinned = f", instruction {args.instruction}" if args.instruction else ""
    pinned += f", arch {args.arch}" if args.arch != "sm_80" else ""
    pinned += f", designs {','.join(args.designs)}" if args.designs else ""
    print(f"fuzz: {args.draws} draws{pinned}, seeds {args.seed}..{args.seed + args.draws - 1}, on {workers.describe()}, "
          f"{wall:.0f} s on {platform.machine()} ({os.cpu_count()} cores), commit {commit or '?'}")
    print(f"{'outcome':<10}{'count':>7}")
    for outcome in OUTCOMES:
        print(f"{outcome:<10}{counts[outcome]:>7}")
    print(f"{'design':<40}" + "".join(f"{o:>9}" for o in OUTCOMES))
    for design in sorted(by_design):
        print(f"{design:<40}" + "".join(f"{by_design[design][o]:>9}" for o in OUTCOMES))
    print("correct by dtype and layout (A then B: t row-major, n col-major): "
          + ", ".join(f"{kind} {n}" for kind, n in sorted(correct_by_kind.items())))
    bad = counts["wrong"] + counts["error"]
    print(f"any other outcome: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
