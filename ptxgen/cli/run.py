"""`ptxgen run`: compile, execute on the GPU or the CPU simulator, and compare with numpy.

Before allocating anything it estimates the host memory the run needs and refuses (with the fix)
what cannot fit; before simulating it estimates the time and warns about runs of minutes. The
float64 reference is computed only for the output tiles that are checked, in bands of rows, so a
sampled 8192^3 run pays for five tiles, not for all of C.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, replace

import numpy as np

from ..check import compare, random_epilogue_operands, random_operands, random_scale, reference_tile, unwritten
from .build import UsageError, build
from .report import bank_summary, describe, resources_line
from ..kernel import Kernel
from ..scaleout.progress import duration
from ..scaleout import Workers
from ..schedule.problem import numpy_dtype

#: Warn before a simulation expected to take longer than this many seconds.
SLOW_RUN_S = 60.0
#: Elements of C (or of the reference) handled at once when scanning for stray writes or
#: building a whole-grid reference: bounds the float64 temporaries.
BAND_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Region:
    """A block of C that is checked: one batch's rows x cols (a tile, or a band of rows)."""

    batch: int
    rows: slice
    cols: slice


def host_bytes(k: Kernel, checked_elements: int, workers: int = 1) -> dict[str, int]:
    """Host memory a run needs at its peak, by what needs it (bytes); `workers` local processes
    each hold a private copy of C (and of the split-K workspace)."""
    g = k.gemm
    elem, out = np.dtype(numpy_dtype(g.dtype)).itemsize, np.dtype(numpy_dtype(g.out_dtype)).itemsize
    mk, kn, mn = g.batch * g.m * g.k, g.batch * g.k * g.n, g.batch * g.m * g.leading_dims()[2]
    need = {"A and B": elem * (mk + kn),
            "drawing A and B (float64 temporaries)": 24 * max(mk, kn),  # random_operands' draws
            "C": out * mn}
    if g.epi.beta != 0.0:  # C's input, its float64 draw and the copy the kernel writes into
        need["C's input for beta"] = (2 * out + 8) * mn
    if k.workspace_elements:
        need["split-K workspace"] = 4 * k.workspace_elements + 4 * k.counter_count
    if workers > 1:
        need[f"C in each of {workers} workers"] = workers * (need["C"] + need.get("split-K workspace", 0))
    rows = min(g.m, max(k.schedule.bm, BAND_ELEMENTS // max(g.n, 1)))  # one region's A rows, at most
    # the reference and C of the checked elements in float64 (a few copies inside compare), and one
    # region's float64 rows of A and columns of B
    need["float64 reference of the checked tiles"] = 40 * checked_elements + 8 * (rows * g.k + g.k * g.n)
    return need


def available_bytes() -> int | None:
    """Memory the OS can give without swapping (MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB"


def check_memory(k: Kernel, checked_elements: int, available: int | None = None, workers: int = 1) -> None:
    """Refuse, naming the fix, a run whose arrays cannot fit in host memory."""
    available = available_bytes() if available is None else available
    need = host_bytes(k, checked_elements, workers)
    total = sum(need.values())
    if available is None or total <= 0.9 * available:
        return
    g = k.gemm
    parts = ", ".join(f"{what} {_gb(n)}" for what, n in sorted(need.items(), key=lambda kv: -kv[1]) if n >= 2**28)
    raise UsageError(
        f"run --shape {g.m}x{g.n}x{g.k}{f' --batch {g.batch}' if g.batch > 1 else ''} needs about {_gb(total)} of "
        f"host memory ({parts}), more than the {_gb(available)} available. Fix: a smaller --shape"
        + (", fewer --workers" if workers > 1 else "") + "; "
        "the simulator checks only sampled tiles, but A, B and C are allocated whole")


def tile_regions(k: Kernel, ctas: list[tuple[int, int, int]] | None) -> list[Region]:
    """The output tiles the CTAs compute (None: all of C, as bands of rows)."""
    from ..simulate import cta_batch_tiles

    g, s = k.gemm, k.schedule
    if ctas is None:
        band = max(1, BAND_ELEMENTS // max(g.n, 1))
        return [Region(b, slice(r, min(r + band, g.m)), slice(0, g.n))
                for b in range(g.batch) for r in range(0, g.m, band)]
    seen: dict[tuple[int, int, int], Region] = {}
    lg = k.problem  # swap-AB: the tiles cover C^T, so each region is transposed back
    for cta in ctas:
        for batch, tm, tn in cta_batch_tiles(k, cta):  # a persistent sm_90a CTA computes several
            rows, cols = slice(tm * s.bm, min((tm + 1) * s.bm, lg.m)), slice(tn * s.bn, min((tn + 1) * s.bn, lg.n))
            seen.setdefault((batch, tm, tn), Region(batch, cols, rows) if k.lowered_gemm is not None
                            else Region(batch, rows, cols))
    return list(seen.values())


def _batch(x: np.ndarray | None, b: int, batched: bool) -> np.ndarray | None:
    return x if x is None or not batched else x[b]


def check_regions(k: Kernel, regions: list[Region], c, a, b, c0, bias, scale, block_scales: dict | None = None):
    """Compare C with the float64 reference on the regions only (`block_scales`: scale_a=, scale_b=
    of a block-scaled kernel)."""
    block = {"block_scale": k.gemm.block_scale, **block_scales} if block_scales else {}
    batched = k.gemm.batch > 1
    got, ref, starts = [], [], []
    for r in regions:
        cb = _batch(c, r.batch, batched)
        starts.append(sum(x.size for x in got))
        got.append(np.asarray(cb[r.rows, r.cols]).ravel())
        ref.append(reference_tile(_batch(a, r.batch, batched), _batch(b, r.batch, batched), k.gemm.epilogue,
                                  r.rows, r.cols, _batch(c0, r.batch, batched), bias, scale, **block).ravel())
    result = compare(np.concatenate(got), np.concatenate(ref), k.gemm)
    return replace(result, worst=tuple((_matrix_index(regions, starts, i[0], batched), g, w)
                                       for i, g, w in result.worst))


def _matrix_index(regions: list[Region], starts: list[int], flat: int, batched: bool) -> tuple[int, ...]:
    """Where element `flat` of the concatenated regions sits in C: (row, column), batch first if batched."""
    at = max(j for j, s in enumerate(starts) if s <= flat)
    r, off = regions[at], flat - starts[at]
    width = r.cols.stop - r.cols.start
    row, col = r.rows.start + off // width, r.cols.start + off % width
    return (r.batch, row, col) if batched else (row, col)


def stray_writes(k: Kernel, c: np.ndarray, c0: np.ndarray | None, regions: list[Region]) -> int:
    """Elements outside the regions that no longer hold their value (the poison, or C's own
    under beta != 0), scanned in bands of rows so no full-size temporaries are made."""
    g = k.gemm
    batched = g.batch > 1
    band = max(1, BAND_ELEMENTS // max(g.n, 1))
    strays = 0
    for bi in range(g.batch):
        cb, c0b = _batch(c, bi, batched), _batch(c0, bi, batched)
        mine = [r for r in regions if r.batch == bi]
        for r0 in range(0, g.m, band):
            r1 = min(r0 + band, g.m)
            sub = cb[r0:r1]
            kept = unwritten(sub) if c0b is None else (sub == c0b[r0:r1])
            inside = np.zeros(sub.shape, dtype=bool)
            for r in mine:
                lo, hi = max(r.rows.start, r0), min(r.rows.stop, r1)
                if lo < hi:
                    inside[lo - r0:hi - r0, r.cols] = True
            strays += int((~inside & ~kept).sum())
    return strays


def _progress_arg(args: argparse.Namespace):
    return {"auto": None, "on": True, "off": False}[getattr(args, "progress", "auto")]


def cmd_run(args: argparse.Namespace) -> int:
    from ..runtime.driver import gpu_available, gpu_unavailable_reason
    from ..simulate import ROUGH_ESTIMATE_SLACK, estimate_seconds, sample_ctas, simulator_pace

    spread_over = workers_from(args)
    k = build(args, (256, 256, 128))
    print("\n".join(describe(k)))
    print(resources_line(k))
    g = k.gemm
    tracing = getattr(args, "trace", None) is not None or getattr(args, "trace_png", None) is not None
    on_gpu = gpu_available() and not args.sim and not tracing
    if g.grouped:
        from .run_grouped import run_grouped
        from .trace_outputs import traced_run

        with traced_run(getattr(args, "trace", None), getattr(args, "trace_png", None), spread_over) as trace:
            return run_grouped(k, args, on_gpu, spread_over, _progress_arg(args), trace)
    ctas = None if (on_gpu or args.all_ctas) else sample_ctas(k)
    regions = tile_regions(k, ctas)
    tiles = -(-k.problem.m // k.schedule.bm) * -(-k.problem.n // k.schedule.bn) * g.batch  # swap-AB: C^T's
    checked = tiles if ctas is None else len(regions)
    if on_gpu and spread_over.parallel:
        print("ptxgen: note: --workers and --ray spread the CPU simulator's CTAs; this run is on the GPU "
              "(add --sim to simulate)", file=sys.stderr)
    if not on_gpu and estimate_seconds(k, ctas, calibrate=False) > SLOW_RUN_S / ROUGH_ESTIMATE_SLACK:
        estimate = estimate_seconds(k, ctas)  # worth a warm-up run of the schedule to say how long
        if spread_over.processes > 1:  # Ray's CPU count is the cluster's: not known before connecting
            n = len(ctas) if ctas else k.grid[0] * k.grid[1] * k.grid[2]
            estimate /= min(spread_over.processes, n)
        if estimate > SLOW_RUN_S:
            n = len(ctas) if ctas else k.grid[0] * k.grid[1] * k.grid[2]
            count = f"{n} sampled CTAs" if ctas else ("the grid's one CTA" if n == 1 else f"all {n} CTAs")
            pace = simulator_pace(k)
            how = ("calibrated by a warm-up run of this schedule" if pace.calibrated
                   else f"a fallback guess; {pace.source}")
            print(f"ptxgen: warning: simulating {count} will take about {duration(estimate)} ({how}). Faster: "
                  "a smaller --shape (K sets the k-loop's length)"
                  + (", or drop --all-ctas to check sampled tiles" if args.all_ctas else "")
                  + "; Ctrl-C stops it", file=sys.stderr, flush=True)
    check_memory(k, sum((r.rows.stop - r.rows.start) * (r.cols.stop - r.cols.start) for r in regions),
                 workers=1 if on_gpu else spread_over.processes)
    a, b = random_operands(g, seed=args.seed)
    c0, bias = random_epilogue_operands(g, seed=args.seed + 1)
    scale = random_scale(g, seed=args.seed + 2)
    block = {}  # block-scaled fp8: random never-zero scales over two decades
    if g.block_scale is not None:
        from ..schedule.block_scale import random_block_scales

        sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=args.seed + 3, decades=2.0)
        block = {"scale_a": sa, "scale_b": sb}
    total = k.grid[0] * k.grid[1] * k.grid[2]
    if on_gpu:
        c = k(a, b, c=None if c0 is None else c0.copy(), bias=bias, scale=scale, **block)
        from ..runtime import simdriver

        where = "through the simulator-backed driver (PTXGEN_DRIVER=sim)" if simdriver.active() else "on the GPU"
        print(f"executed   {where}, every CTA; runs {k.resources.binary}")
        result = check_regions(k, regions, c, a, b, c0, bias, scale, block)
        print(f"{result}; checked {checked} of {tiles} tiles")
        return 0 if result.ok else 1
    from ..simulate import run_simulation

    why = ("requested with --sim" if args.sim else "requested with --trace/--trace-png" if tracing and gpu_available()
           else no_gpu_text(gpu_unavailable_reason()))
    from .trace_outputs import traced_run

    with traced_run(getattr(args, "trace", None), getattr(args, "trace_png", None), spread_over) as trace:
        c, res = run_simulation(k, a, b, ctas=ctas, c=None if c0 is None else c0.copy(), bias=bias, scale=scale,
                                progress=_progress_arg(args), workers=spread_over, trace=trace, **block)
    scope = "every CTA" if ctas is None else f"{len(ctas)} of {total} CTAs {ctas}"
    over = f" over {spread_over.describe()}" if spread_over.parallel else ""
    print(f"executed   on the CPU simulator ({why}): {scope}{over}, {res.instructions} thread-instructions")
    result = check_regions(k, regions, c, a, b, c0, bias, scale, block)
    strays = stray_writes(k, c, c0, regions)
    print(f"{result}; checked {checked} of {tiles} tiles" + ("" if ctas is None else f" ({len(ctas)} of {total} CTAs)"))
    if strays:
        print(f"FAIL: {strays} elements outside the simulated CTAs' tiles were written")
    print("shared-memory bank conflicts:")
    print("\n".join(bank_summary(k, res.smem_wavefronts)))
    return 0 if result.ok and not strays else 1


def workers_from(args: argparse.Namespace) -> Workers:
    """Where the simulator's CTAs run: --workers N local processes, or --ray [ADDRESS]."""
    workers, address = getattr(args, "workers", 1), getattr(args, "ray", None)
    if address is not None and workers > 1:
        raise UsageError(f"--workers {workers} and --ray both ask where to simulate: pass one (--workers N for "
                         "local processes, --ray [ADDRESS] for a Ray cluster)")
    return Workers.of("ray", address or None) if address is not None else Workers.of(workers)


#: The file in the cache directory that remembers the no-GPU reason already given in full.
NO_GPU_NOTE = "no-gpu-reason.txt"


def no_gpu_text(reason: str) -> str:
    """"no GPU: <why>" the first time this machine gives that reason, then just "no GPU" (the
    cache directory remembers it; without a cache, always in full)."""
    from ..runtime.cache import cache_dir

    full = short_reason(f"no GPU: {reason}")
    folder = cache_dir()
    if folder is None:
        return full
    note = folder / NO_GPU_NOTE
    try:
        if note.exists() and note.read_text() == reason:
            return "no GPU, as before"
        note.write_text(reason)
    except OSError:
        pass
    return full


def short_reason(why: str, width: int = 90) -> str:
    """`why` in at most `width` characters: a trailing "(...)" (the loader's own message) is
    dropped whole rather than cut mid-word."""
    if len(why) <= width or not why.endswith(")"):
        return why if len(why) <= width else why[: width - 3] + "..."
    depth = 0
    for i in range(len(why) - 1, -1, -1):  # the "(" that the final ")" closes
        depth += {")": 1, "(": -1}.get(why[i], 0)
        if depth == 0:
            head = why[:i].rstrip()
            return head if len(head) <= width else head[: width - 3] + "..."
    return why[: width - 3] + "..."
