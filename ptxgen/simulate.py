"""Run a compiled Kernel on ptxgen's CPU simulator (`ptxgen.sim`) with logical operands."""
from __future__ import annotations

import dataclasses
import re
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .check import poisoned
from .scaleout.progress import ProgressArg, progress_callback

if TYPE_CHECKING:
    from .kernel import Kernel
    from .schedule.problem import Gemm
    from .runtime.operands import OperandView

#: Grids up to this many CTAs are simulated whole by default in `ptxgen run`.
WHOLE_GRID_CTAS = 16
#: Fallback seconds per step (`cta_steps`), used only when no warm-up run can be made (a Kernel not
#: made by `compile`, a warm-up that failed): 140-170 us of CPU time for 128-thread sm_80 GEMM CTAs on
#: an idle x86 core; an sm_90a wgmma step costs several times that (`simulator_pace` measures it).
SECONDS_PER_CTA_STEP = 1.5e-4
#: k-tiles per split of the two warm-up problems: their difference is the main loop's pace.
WARM_UP_K_TILES = (2, 8)
#: Timed runs of each warm-up twin (interleaved; the median counts): a short run on a shared
#: machine is easily slowed by a burst of other work, and the run it estimates meets the same load.
TIMED_RUNS = 3
#: How much slower than the constant-pace guess (`estimate_seconds(calibrate=False)`) a simulation
#: may run (an sm_90a wgmma step: over 10x): callers skip the warm-up when the guess times this is short.
ROUGH_ESTIMATE_SLACK = 20
#: A progress bar's first ETA is calibrated by a warm-up only when the constant pace's guess is
#: longer than this: a shorter run is mostly done before the bar shows (after 2 s) anyway.
WARM_UP_WORTH_S = 1.0
CALIBRATED = "calibrated by a warm-up run on this machine"
_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$]*):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z_][\w$]*)\s*;")


def cta_tile(kernel: Kernel, cta: tuple[int, int, int]) -> tuple[int, int]:
    """The (m-tile, n-tile) a CTA computes, mirroring the kernel's raster order."""
    g, s = kernel.problem, kernel.schedule
    if s.raster == "row":
        return cta[1], cta[0]
    num_m, num_n = -(-g.m // s.bm), -(-g.n // s.bn)
    in_group = s.group_m * num_n
    first_m = cta[0] // in_group * s.group_m
    size_m = min(num_m - first_m, s.group_m)
    pos = cta[0] % in_group
    return first_m + pos % size_m, pos // size_m


def walks_tiles(kernel: Kernel) -> bool:
    """A persistent grid of whole tiles: CTA x walks tiles x, x + gridDim.x, ... (its backend says:
    targets/sm90/persistent.py)."""
    return kernel.walks_tiles


def tile_of_index(kernel: Kernel, index: int) -> tuple[int, int]:
    """The (m-tile, n-tile) of linear tile `index` in the raster (emit/tiles.py TileScheduler.tile)."""
    g, s = kernel.problem, kernel.schedule
    if s.raster == "row":
        num_n = -(-g.n // s.bn)
        return index // num_n, index % num_n
    return cta_tile(kernel, (index, 0, 0))


def cta_tiles(kernel: Kernel, cta: tuple[int, int, int]) -> list[tuple[int, int]]:
    """Every (m-tile, n-tile) a CTA computes: one, or a persistent CTA's walk over the tiles (of
    whichever batch: `cta_batch_tiles` says which)."""
    return [(tm, tn) for _, tm, tn in cta_batch_tiles(kernel, cta)]


def cta_batch_tiles(kernel: Kernel, cta: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """Every (batch, m-tile, n-tile) a CTA computes: its ctaid.z's batch (ctaid.z = batch *
    split_k + split), or a persistent CTA's walk over batch x tiles, the batch outermost
    (targets/sm90/persistent.py: index i is batch i // per_batch, tile i % per_batch)."""
    if not walks_tiles(kernel):
        return [(cta[2] // kernel.schedule.split_k, *cta_tile(kernel, cta))]
    g, s = kernel.problem, kernel.schedule
    if kernel.cluster_dims != (1, 1, 1):
        return cluster_cta_tiles(kernel, cta)
    tiles = -(-g.m // s.bm) * -(-g.n // s.bn)
    return [(i // tiles, *tile_of_index(kernel, i % tiles))
            for i in range(cta[0], tiles * g.batch, kernel.grid[0])]


def cluster_cta_tiles(kernel: Kernel, cta: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """A clustered persistent CTA's tiles (targets/sm90/cluster.py): cluster x // size walks cluster
    tiles in the raster over cluster tiles; rank r takes tile (CM*ctm + r % CM, CN*ctn + r // CM);
    tiles past the edge (the grid rounded up to whole clusters) write nothing."""
    g, s = kernel.problem, kernel.schedule
    cm, cn = s.cluster
    size = cm * cn
    tiles_m, tiles_n = -(-g.m // s.bm), -(-g.n // s.bn)
    num_m, num_n = -(-tiles_m // cm), -(-tiles_n // cn)
    dm, dn = cta[0] % size % cm, cta[0] % size // cm
    out = []
    per_batch = num_m * num_n
    for walked in range(cta[0] // size, per_batch * g.batch, kernel.grid[0] // size):
        batch, index = divmod(walked, per_batch)
        if s.raster == "row":
            ctm, ctn = index // num_n, index % num_n
        else:
            group = s.group_m // cm
            first = index // (num_n * group) * group
            size_m = min(num_m - first, group)
            pos = index % (num_n * group)
            ctm, ctn = first + pos % size_m, pos // size_m
        tm, tn = ctm * cm + dm, ctn * cn + dn
        if tm < tiles_m and tn < tiles_n:
            out.append((batch, tm, tn))
    return out


def sample_ctas(kernel: Kernel) -> list[tuple[int, int, int]] | None:
    """None (the whole grid) for small grids, else the corner tiles and one interior tile of the
    first and last batch, each with all of its split-K CTAs (a tile is only complete with all)."""
    gx, gy, gz = kernel.grid
    if gx * gy * gz <= WHOLE_GRID_CTAS or kernel.schedule.stream_k or kernel.gemm.grouped:
        # Stream-K CTAs share tiles and wait for each other; a grouped CTA's tile depends on the
        # groups' sizes read at run time: only the whole grid runs
        return None
    splits, batches = kernel.schedule.split_k, kernel.gemm.batch
    if walks_tiles(kernel):
        batches = 1  # a persistent grid is 1-D: each CTA walks every batch (cta_batch_tiles)
    tiles = {(0, 0), (gx - 1, 0), (0, gy - 1), (gx - 1, gy - 1), (gx // 2, gy // 2)}
    picked = sorted((x, y, b * splits + sp) for x, y in tiles for b in {0, batches - 1} for sp in range(splits))
    return sorted(whole_clusters(kernel, picked))


def whole_clusters(kernel: Kernel, ctas: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """`ctas` with every CTA's cluster peers: the simulator launches and runs a cluster as a unit
    (sim/cluster.py `cluster_order`, whose order this is), so the peers' tiles are written too."""
    from .sim.cluster import cluster_order

    return cluster_order([tuple(c) for c in ctas], kernel.grid, kernel.cluster_dims)


@dataclass(frozen=True)
class LoopShape:
    """Instruction counts of a kernel's PTX (every op once, `compile_entry`'s op lines): `body` in the
    k main loop, `per_unit` the rest of the loop over tiles or Stream-K units that encloses it (the
    whole kernel but the main loop when there is none), `once` the rest (before that loop)."""
    once: int
    per_unit: int
    body: int


def loop_shape(kernel: Kernel) -> LoopShape:
    """The main loop ($L_main_loop, else the longest backward branch) and the innermost backward
    branch enclosing it (a persistent or Stream-K CTA's loop over its tiles), counted in ops."""
    from .sim.machine import compile_entry

    op_lines = compile_entry(kernel.ptx, kernel.entry).op_lines
    lines = kernel.ptx.splitlines()
    labels = {m.group(1): no for no, text in enumerate(lines, 1) if (m := _LABEL.match(text))}
    loops = [(labels[m.group(1)], no) for no, text in enumerate(lines, 1)
             if (m := _BRANCH.search(text)) and labels.get(m.group(1), no + 1) < no]
    main = next(((a, b) for a, b in loops if lines[a - 1].strip().startswith("$L_main_loop")), None)
    if main is None and loops:
        main = max(loops, key=lambda ab: ab[1] - ab[0])
    if main is None:
        return LoopShape(0, len(op_lines), 0)
    body = sum(1 for line in op_lines if main[0] <= line <= main[1])
    around = [(a, b) for a, b in loops if a < main[0] and b > main[1]]
    if not around:
        return LoopShape(0, len(op_lines) - body, body)
    outer = min(around, key=lambda ab: ab[1] - ab[0])
    inside = sum(1 for line in op_lines if outer[0] <= line <= outer[1])
    return LoopShape(len(op_lines) - inside, inside - body, body)


def unit_k_tiles(kernel: Kernel, cta: tuple[int, int, int]) -> list[int]:
    """The k-tiles of each unit of work CTA `cta` runs, in order: its tile's share of K (split-K),
    a persistent CTA's tiles, or a Stream-K CTA's whole tiles and ranges (`streamk.StreamKPlan`)."""
    g, s = kernel.problem, kernel.schedule
    k_tiles = -(-g.k // s.bk)
    if s.stream_k:
        from .schedule.streamk import stream_k_plan

        return [u.k_count for u in stream_k_plan(g, s, kernel.grid[0]).units(cta[0])]
    per_tile = -(-k_tiles // s.split_k)
    if walks_tiles(kernel):
        return [per_tile] * len(cta_batch_tiles(kernel, cta))
    return [per_tile]


class StepCount(NamedTuple):
    """Steps (instructions issued, all of a CTA's threads in lock step) outside the main loop and in it."""
    other: int
    loop: int


def cta_steps(kernel: Kernel, ctas: list[tuple[int, int, int]] | None = None) -> StepCount:
    """About how many instructions the given CTAs (None: the grid) issue, each counted once per CTA:
    per CTA the ops outside its tile loop once, then per unit of work the tile loop's other ops
    once and the main loop's body once per k-tile."""
    shape = loop_shape(kernel)

    def steps(cta: tuple[int, int, int]) -> StepCount:
        units = unit_k_tiles(kernel, cta)
        return StepCount(shape.once + shape.per_unit * len(units), shape.body * sum(max(k, 1) for k in units))

    gx, gy, gz = kernel.grid
    if ctas is None and not (kernel.schedule.stream_k or walks_tiles(kernel)):
        one = steps((0, 0, 0))  # every CTA alike
        return StepCount(one.other * gx * gy * gz, one.loop * gx * gy * gz)
    every = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
    counts = [steps(tuple(c)) for c in (every if ctas is None else ctas)]
    return StepCount(sum(c.other for c in counts), sum(c.loop for c in counts))


def steps_per_cta(kernel: Kernel) -> int:
    """About how many instructions one CTA issues, on average over the grid (`cta_steps`)."""
    return -(-sum(cta_steps(kernel)) // (kernel.grid[0] * kernel.grid[1] * kernel.grid[2]))


@dataclass(frozen=True)
class SimPace:
    """Seconds the simulator takes per step of `cta_steps`: `loop` per main-loop step (mma,
    ldmatrix, copies: dearer) and `other` per step outside it, and where the numbers came from
    (CALIBRATED, or why the constant was assumed)."""
    other: float
    loop: float
    source: str

    @property
    def calibrated(self) -> bool:
        return self.source == CALIBRATED

    def seconds(self, steps: StepCount) -> float:
        return steps.other * self.other + steps.loop * self.loop


#: (warm-up gemm, schedule, arch) -> its measured pace: one warm-up per schedule per process.
_PACES: dict[tuple, SimPace] = {}


def warm_up_gemm(g: Gemm, s: Any, k_tiles: int = WARM_UP_K_TILES[-1]) -> Gemm:
    """`g` (same dtypes, layouts, leading dimensions, epilogue) shrunk to one tile per cluster CTA
    and `k_tiles` k-tiles per split, one batch: the kernel's own kinds of steps, briefly."""
    cm, cn = getattr(s, "cluster", None) or (1, 1)
    m, n = s.bm * cm, s.bn * cn
    if getattr(s, "swap_ab", False) is True:  # the caller's M x N is the tile's N x M
        m, n = n, m
    return dataclasses.replace(g, m=m, n=n, k=s.bk * k_tiles * s.split_k, batch=1)


def warm_up_schedule(s: Any) -> Any:
    """`s`, with a Stream-K grid of one CTA (per cluster CTA): on one tile a grid of more would give
    each CTA one k-tile, and the twins would time no main loop (their loop steps a fixed share)."""
    if not s.stream_k:
        return s
    cm, cn = getattr(s, "cluster", None) or (1, 1)
    return dataclasses.replace(s, sms=cm * cn)


def simulator_pace(kernel: Kernel) -> SimPace:
    """The simulator's pace for `kernel`'s schedule on this machine, from timed simulations of the
    same schedule on `warm_up_gemm`s of WARM_UP_K_TILES k-tiles (`measure_pace`), per `cta_steps`
    step, so that steps the count misses for this kind of kernel are in the pace too. The kernel
    builds its warm-up twins itself (`Kernel.recompile`, given by `compile`): this module runs
    kernels and never imports the compiler. Cached per schedule and problem kind."""
    if kernel.recompile is None:
        return SimPace(SECONDS_PER_CTA_STEP, SECONDS_PER_CTA_STEP, "assumed: this Kernel was not made by "
                       "ptxgen.compile, so no warm-up kernel could be built")
    key = (warm_up_gemm(kernel.gemm, kernel.schedule), kernel.schedule, kernel.arch)
    if key not in _PACES:
        try:
            schedule = warm_up_schedule(kernel.schedule)
            _PACES[key] = measure_pace([kernel.recompile(warm_up_gemm(kernel.gemm, kernel.schedule, k), schedule)
                                        for k in WARM_UP_K_TILES])
        except Exception as e:  # noqa: BLE001 - an estimate must never stop a run
            _PACES[key] = SimPace(SECONDS_PER_CTA_STEP, SECONDS_PER_CTA_STEP,
                                  f"assumed: the warm-up run failed ({type(e).__name__}: {e})")
    return _PACES[key]


def measure_pace(twins: list[Kernel]) -> SimPace:
    """Time TIMED_RUNS whole-grid simulations of each twin (after an untimed run of the first that
    fills the simulator's caches), keep each one's median, and solve time = other steps x other
    pace + loop steps x loop pace; one pace for both where timing noise makes the solution
    meaningless (a pace <= 0)."""
    from .check import random_epilogue_operands, random_operands, random_scale

    def seconds(kernel: Kernel) -> float:
        a, b = random_operands(kernel.gemm)
        c, bias = random_epilogue_operands(kernel.gemm)
        start = time.perf_counter()
        run_simulation(kernel, a, b, c=c, bias=bias, scale=random_scale(kernel.gemm), progress=False)
        return time.perf_counter() - start

    seconds(twins[0])
    (o1, l1), (o2, l2) = (cta_steps(t) for t in twins)  # parses each PTX before its timed run
    runs = [(seconds(twins[0]), seconds(twins[1])) for _ in range(TIMED_RUNS)]
    t1, t2 = (sorted(r[i] for r in runs)[len(runs) // 2] for i in (0, 1))  # medians: a burst of load moves none
    det = o1 * l2 - o2 * l1
    other, loop = ((t1 * l2 - t2 * l1) / det, (o1 * t2 - o2 * t1) / det) if det else (0.0, 0.0)
    if other <= 0 or loop <= 0:
        other = loop = t2 / max(o2 + l2, 1)
    return SimPace(other, loop, CALIBRATED)


def estimate_seconds(kernel: Kernel, ctas: list[tuple[int, int, int]] | None = None,
                     calibrate: bool = True) -> float:
    """About how long the simulator takes for `ctas` (None: the whole grid): `cta_steps` at the
    pace a warm-up run measured (`simulator_pace`; its `source` says when it fell back to the
    constant), or at SECONDS_PER_CTA_STEP without `calibrate` (no warm-up: a quick upper guess)."""
    steps = cta_steps(kernel, ctas)
    return simulator_pace(kernel).seconds(steps) if calibrate else sum(steps) * SECONDS_PER_CTA_STEP


def covered(kernel: Kernel, ctas) -> np.ndarray:
    """Boolean mask, shaped like C, of the elements the given CTAs (None = all) compute."""
    if kernel.lowered_gemm is not None:  # swap-AB: the tiles cover Cᵀ
        return np.swapaxes(covered(dataclasses.replace(kernel, gemm=kernel.lowered_gemm, lowered_gemm=None), ctas), -1, -2)
    g, s = kernel.gemm, kernel.schedule
    if g.grouped:
        raise ValueError("a grouped kernel's CTAs find their tiles from offs / masked_m at run time: "
                         "check.untouched_rows(gemm, offs=... or masked_m=...) gives the rows no group owns")
    mask = np.zeros((g.batch, g.m, g.n), dtype=bool)
    if s.stream_k:  # persistent CTAs: which tiles a CTA touches depends on the whole grid
        mask[:] = ctas is None
        return mask if g.batch > 1 else mask[0]
    gx, gy, gz = kernel.grid
    every = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
    for cta in (every if ctas is None else whole_clusters(kernel, ctas)):
        for batch, tm, tn in cta_batch_tiles(kernel, cta):
            mask[batch, tm * s.bm:(tm + 1) * s.bm, tn * s.bn:(tn + 1) * s.bn] = True  # numpy clips at the edge
    return mask if g.batch > 1 else mask[0]


def matrix_operand(x: Any, *, name: str, shape: tuple[int, int], dtype: str, layout: str, align: int,
                   batch: int, writable: bool = False) -> tuple["OperandView", int, np.ndarray]:
    """(view of one matrix, batch stride in elements, 1-D buffer spanning every batch).

    The checks are the GPU launcher's (check_batched_operand), so both accept the same inputs;
    the buffer shares the caller's memory, so the simulated kernel writes C in place.
    """
    from .runtime.batch import check_batched_operand

    v = check_batched_operand(x, name=name, batch=batch, shape=shape, dtype=dtype, layout=layout,
                              align=align, writable=writable)
    if v.host is None:
        raise TypeError(f"Kernel.simulate takes numpy arrays; copy {name} to the host first")
    return v, v.batch_stride, v.host_span()


def one_matrix_batch(x: np.ndarray) -> np.ndarray:
    """A matrix as a batch of one, its batch stride the matrix's span (TMA needs a positive one;
    with one matrix it is never stepped over). Strided by runtime.operands.as_strided, which also
    takes ml_dtypes' float8_e5m2 (numpy's own cannot read its typestr back)."""
    from .runtime.operands import as_strided

    span = x.shape[0] * x.strides[0]
    return as_strided(x, (1,) + x.shape, (span,) + x.strides)


def sim_tensor_maps(kernel: Kernel, va: "OperandView", vb: "OperandView", vc: "OperandView | None" = None,
                    scales: tuple | None = None) -> list:
    """`sim.TensorMap`s of A's and B's contiguous-last views (and C's, for the TMA-store epilogue)
    with the boxes and swizzle the kernel's tensor-map parameters must have (`Kernel.tensor_maps`);
    out-of-bounds boxes fill with zero on loads and are clipped on stores."""
    from . import sim

    assert va.host is not None and vb.host is not None
    (va, vb, *_), _ = kernel.kernel_operands((va, vb), [None, None])
    for v in (va, vb):
        kernel.check_operand(v)
    logical = {"A": va.host, "B": vb.host, "C": None if vc is None else vc.host}
    if scales is not None:  # sm_100a's blocked scales (runtime/scale_layout.py)
        logical.update(SFA=scales[0], SFB=scales[1])
    views = [t.view(logical[t.operand]) for t in kernel.tensor_maps]
    # a one-group GEMM's operand comes as its matrix: its 3-D map (targets/sm90/grouped.py) gets the group axis
    views = [one_matrix_batch(v) if t.batched and v.ndim == 2 else v for t, v in zip(kernel.tensor_maps, views)]
    return [sim.TensorMap(v, t.box, swizzle=t.swizzle) for t, v in zip(kernel.tensor_maps, views)]


def run_simulation(kernel: Kernel, a: Any, b: Any, ctas=None, c: Any = None, bias: Any = None,
                   scale: Any = None, progress: ProgressArg = False, workers: Any = 1,
                   ray_address: str | None = None, trace=None, trace_ctas=None, offs: Any = None,
                   masked_m: Any = None, scale_a: Any = None, scale_b: Any = None):
    """Simulate; return (C, sim result). A new C is poisoned (`check.poisoned`) where no
    simulated CTA wrote. `progress`, `workers`, `ray_address`, `trace`, `trace_ctas`, `offs`,
    `masked_m`: see `Kernel.simulate`."""
    from . import sim
    from .runtime.grouped import check_not_grouped, counts_view, grouped_inputs, grouped_output
    from .runtime.launch import check_epilogue_operands, vector_view
    from .schedule.grouping import c_shape
    from .runtime.block_scales import check_block_scales, group_stride_args, stride_args
    from .runtime.scale_layout import kernel_scales, reads_scales_by_tma
    from .runtime.fp4 import as_packed, packed_shapes
    from .runtime.operands import check_no_aliasing
    from .scaleout import Workers

    spread_over = Workers.of(workers, ray_address)  # bad values fail before any work
    if trace is not None and spread_over.parallel:
        raise ValueError("trace= records one process's simulation: run it with workers=1 (and no Ray)")

    g = kernel.gemm
    align = g.alignment()
    check_epilogue_operands(kernel, c, bias, scale)
    check_not_grouped(g, offs, masked_m)
    block_scales = check_block_scales(kernel, scale_a, scale_b)
    tma_scales = None  # sm_100a: the scales in the 128x4 block layout, read through tensor maps
    if block_scales is not None and reads_scales_by_tma(kernel):
        tma_scales = kernel_scales(g.block_scale, np.asarray(scale_a), np.asarray(scale_b),
                                   g.groups if g.grouped else None)   # masked: each group's blocks stacked
        block_scales = None
    if c is None:  # with the gemm's ldc, whose alignment the kernel may rely on
        lead = c_shape(g)[:-2] if g.grouped else ((g.batch,) if g.batch > 1 else ())
        c = poisoned(lead + (g.m, g.leading_dims()[2]), g.out_dtype)[..., :g.n]
    if g.grouped:
        (va, vb), vc = grouped_inputs(g, a, b), grouped_output(g, c)
        if any(v.host is None for v in (va, vb, vc)):
            raise TypeError("Kernel.simulate takes numpy arrays; copy A, B and C to the host first")
        buf_a, buf_b, buf_c = (v.host_span() for v in (va, vb, vc))
    else:
        (a_shape, b_shape), in_dtype = ((g.m, g.k), (g.k, g.n)), g.dtype
        if g.dtype == "e2m1":  # packed two per byte along K (runtime/fp4.py)
            a, b, (a_shape, b_shape), in_dtype = as_packed(a, "A"), as_packed(b, "B"), packed_shapes(g), "u8"
        va, sa, buf_a = matrix_operand(a, name="A", shape=a_shape, dtype=in_dtype, layout=g.a_layout,
                                       align=align, batch=g.batch)
        b_dtype = g.in_dtype_b if in_dtype == g.dtype else in_dtype   # mixed fp8: B's own dtype
        vb, sb, buf_b = matrix_operand(b, name="B", shape=b_shape, dtype=b_dtype, layout=g.b_layout,
                                       align=align, batch=g.batch)
        vc, sc, buf_c = matrix_operand(c, name="C", shape=(g.m, g.n), dtype=g.out_dtype, layout="row",
                                       align=g.out_alignment(), batch=g.batch, writable=True)
    vectors = [vector_view(kernel, name, np.asarray(vec), None)
               for name, vec in (("bias", bias), ("scale", scale)) if vec is not None]
    vectors += list(block_scales or ())  # then scale_a, scale_b (their strides follow the pointers)
    if g.grouped:  # the kernel's last parameter: the groups' sizes, read on the device
        counts = counts_view(g, offs, masked_m)
        if counts.host is None:
            raise TypeError("Kernel.simulate takes numpy arrays; pass offs / masked_m as a numpy int32 array")
        vectors.append(counts)
    check_no_aliasing(vc, [va, vb, *vectors])  # the GPU path's rule (runtime.launch)
    # The simulator takes each operand's memory as one contiguous buffer spanning the matrices;
    # the inputs read-only, so a kernel that stores into one is reported, not silently obeyed.
    inputs = [buf_a, buf_b] + [v.host_span() for v in vectors]
    for buf in inputs:
        buf.flags.writeable = False
    views = (va, vb, vc)  # tensor maps by value where the kernel takes them (an sm_90a kernel's A and B)
    args = kernel.arguments(views, [buf_a, buf_b, buf_c], sim_tensor_maps(kernel, va, vb, vc, tma_scales)) + inputs[2:]
    if block_scales is not None:
        strides = stride_args(block_scales) + group_stride_args(g, block_scales)
        # a grouped kernel's offs / masked_m stays its last parameter
        args = args[:-1] + strides + args[-1:] if g.grouped else args + strides
    readonly = tuple(sorted({0, 1} | {i for i, x in enumerate(args) if any(x is buf for buf in inputs[2:])}))
    if kernel.workspace_elements:
        args += [np.zeros(kernel.workspace_elements, np.float32), np.zeros(kernel.counter_count, np.uint32)]
    if kernel.zeroes_c_first:  # atomic split-K adds into C; zero only the simulated tiles, so
        c[covered(kernel, ctas)] = 0  # the rest stays poisoned and stray writes still show
    total = kernel.grid[0] * kernel.grid[1] * kernel.grid[2] if ctas is None else len(ctas)
    shows_bar = progress is True or (progress is None and getattr(sys.stderr, "isatty", lambda: False)())
    rough = estimate_seconds(kernel, ctas, calibrate=False) if shows_bar else None  # only a bar shows it
    # the warm-up (about a second) only where the run is long enough to pay for it
    estimate = estimate_seconds(kernel, ctas) if rough is not None and rough > WARM_UP_WORTH_S else rough
    if estimate is not None and spread_over.processes > 1:  # the bar's ETA before the first CTA is done
        estimate /= min(spread_over.processes, total)
    on_done, bar = progress_callback(progress, total, estimate)
    try:
        if spread_over.parallel:
            from .scaleout.simulate import launch_spread

            scratch = tuple(range(len(args) - 2, len(args))) if kernel.workspace_elements else ()
            c_index = next(i for i, x in enumerate(args) if x is buf_c)
            res = launch_spread(kernel, args, c_index, readonly, scratch, ctas, spread_over, on_done)
        else:
            res = sim.launch(kernel.ptx, kernel.entry, grid=kernel.grid, block=kernel.block, args=args,
                             dynamic_smem=kernel.smem_bytes, ctas=ctas, on_cta_done=on_done,
                             trace=trace, trace_ctas=trace_ctas)
    finally:
        if bar is not None:
            bar.close()
    return c, res


def simulate_kernel(kernel: Kernel, a: Any, b: Any, c: Any = None, bias: Any = None, scale: Any = None,
                    ctas=None, progress: ProgressArg = None, workers: Any = 1,
                    ray_address: str | None = None, trace=None, trace_ctas=None, offs: Any = None,
                    masked_m: Any = None, scale_a: Any = None, scale_b: Any = None) -> np.ndarray:
    return run_simulation(kernel, a, b, ctas, c=c, bias=bias, scale=scale, progress=progress, workers=workers,
                          ray_address=ray_address, trace=trace, trace_ctas=trace_ctas, offs=offs,
                          masked_m=masked_m, scale_a=scale_a, scale_b=scale_b)[0]
