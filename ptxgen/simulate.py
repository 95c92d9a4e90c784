"""Run a compiled Kernel on ptxgen's CPU simulator (`ptxgen.sim`) with logical operands."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from .check import poisoned
from .scaleout.progress import ProgressArg, progress_callback

if TYPE_CHECKING:
    from .kernel import Kernel
    from .runtime.operands import OperandView

#: Grids up to this many CTAs are simulated whole by default in `ptxgen run`.
WHOLE_GRID_CTAS = 16
#: Seconds the simulator takes per instruction a CTA issues (all its threads in lock step):
#: 140-170 us of CPU time for 128-thread GEMM CTAs on an idle x86 core (a busy machine is slower;
#: the progress bar's ETA follows the measured pace once a CTA is done).
SECONDS_PER_CTA_STEP = 1.5e-4
_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$]*):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z_][\w$]*)\s*;")


def cta_tile(kernel: Kernel, cta: tuple[int, int, int]) -> tuple[int, int]:
    """The (m-tile, n-tile) a CTA computes, mirroring the kernel's raster order."""
    g, s = kernel.gemm, kernel.schedule
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
    g, s = kernel.gemm, kernel.schedule
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
    g, s = kernel.gemm, kernel.schedule
    if kernel.cluster_dims != (1, 1, 1):
        return cluster_cta_tiles(kernel, cta)
    tiles = -(-g.m // s.bm) * -(-g.n // s.bn)
    return [(i // tiles, *tile_of_index(kernel, i % tiles))
            for i in range(cta[0], tiles * g.batch, kernel.grid[0])]


def cluster_cta_tiles(kernel: Kernel, cta: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """A clustered persistent CTA's tiles (targets/sm90/cluster.py): cluster x // size walks cluster
    tiles in the raster over cluster tiles; rank r takes tile (CM*ctm + r % CM, CN*ctn + r // CM);
    tiles past the edge (the grid rounded up to whole clusters) write nothing."""
    g, s = kernel.gemm, kernel.schedule
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
    if gx * gy * gz <= WHOLE_GRID_CTAS or kernel.schedule.stream_k:
        return None  # Stream-K CTAs share tiles and wait for each other: only the whole grid runs
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


def steps_per_cta(kernel: Kernel) -> int:
    """About how many instructions one CTA issues: the kernel's instructions once, plus the main
    loop's body once more per further k-tile of the CTA's share of K."""
    from .sim.machine import compile_entry

    op_lines = compile_entry(kernel.ptx, kernel.entry).op_lines
    lines = kernel.ptx.splitlines()
    labels = {m.group(1): no for no, text in enumerate(lines, 1) if (m := _LABEL.match(text))}
    loops = [(labels[m.group(1)], no) for no, text in enumerate(lines, 1)
             if (m := _BRANCH.search(text)) and labels.get(m.group(1), no + 1) < no]
    main = next(((a, b) for a, b in loops if lines[a - 1].strip().startswith("$L_main_loop")), None)
    if main is None and loops:
        main = max(loops, key=lambda ab: ab[1] - ab[0])
    body = sum(1 for line in op_lines if main and main[0] <= line <= main[1])
    g, s = kernel.gemm, kernel.schedule
    k_tiles = -(-g.k // s.bk)
    ctas = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
    tiles = -(-g.m // s.bm) * -(-g.n // s.bn) * g.batch
    per_cta = (-(-k_tiles * tiles // ctas) if s.stream_k or walks_tiles(kernel)
               else -(-k_tiles // s.split_k))
    return len(op_lines) + body * max(per_cta - 1, 0)


def estimate_seconds(kernel: Kernel, ctas: list[tuple[int, int, int]] | None = None) -> float:
    """About how long the simulator takes for `ctas` (None: the whole grid)."""
    count = kernel.grid[0] * kernel.grid[1] * kernel.grid[2] if ctas is None else len(ctas)
    return steps_per_cta(kernel) * count * SECONDS_PER_CTA_STEP


def covered(kernel: Kernel, ctas) -> np.ndarray:
    """Boolean mask, shaped like C, of the elements the given CTAs (None = all) compute."""
    g, s = kernel.gemm, kernel.schedule
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


def sim_tensor_maps(kernel: Kernel, va: "OperandView", vb: "OperandView", vc: "OperandView | None" = None) -> list:
    """`sim.TensorMap`s of A's and B's contiguous-last views (and C's, for the TMA-store epilogue)
    with the boxes and swizzle the kernel's tensor-map parameters must have (`Kernel.tensor_maps`);
    out-of-bounds boxes fill with zero on loads and are clipped on stores."""
    from . import sim

    assert va.host is not None and vb.host is not None
    for v in (va, vb):
        kernel.check_operand(v)
    logical = {"A": va.host, "B": vb.host, "C": None if vc is None else vc.host}
    return [sim.TensorMap(t.view(logical[t.operand]), t.box, swizzle=t.swizzle) for t in kernel.tensor_maps]


def run_simulation(kernel: Kernel, a: Any, b: Any, ctas=None, c: Any = None, bias: Any = None,
                   scale: Any = None, progress: ProgressArg = False, workers: Any = 1,
                   ray_address: str | None = None, trace=None, trace_ctas=None, scale_a: Any = None,
                   scale_b: Any = None):
    """Simulate; return (C, sim result). A new C is poisoned (`check.poisoned`) where no
    simulated CTA wrote. `progress`, `workers`, `ray_address`, `trace`, `trace_ctas`: see
    `Kernel.simulate`."""
    from . import sim
    from .runtime.launch import check_epilogue_operands, vector_view
    from .runtime.block_scales import check_block_scales, stride_args
    from .runtime.operands import check_no_aliasing
    from .scaleout import Workers

    spread_over = Workers.of(workers, ray_address)  # bad values fail before any work
    if trace is not None and spread_over.parallel:
        raise ValueError("trace= records one process's simulation: run it with workers=1 (and no Ray)")

    g = kernel.gemm
    align = g.alignment()
    check_epilogue_operands(kernel, c, bias, scale)
    block_scales = check_block_scales(kernel, scale_a, scale_b)
    if c is None:  # with the gemm's ldc, whose alignment the kernel may rely on
        c = poisoned(((g.batch,) if g.batch > 1 else ()) + (g.m, g.leading_dims()[2]), g.out_dtype)[..., :g.n]
    va, sa, buf_a = matrix_operand(a, name="A", shape=(g.m, g.k), dtype=g.dtype, layout=g.a_layout,
                                   align=align, batch=g.batch)
    vb, sb, buf_b = matrix_operand(b, name="B", shape=(g.k, g.n), dtype=g.dtype, layout=g.b_layout,
                                   align=align, batch=g.batch)
    vc, sc, buf_c = matrix_operand(c, name="C", shape=(g.m, g.n), dtype=g.out_dtype, layout="row",
                                   align=g.out_alignment(), batch=g.batch, writable=True)
    vectors = [vector_view(kernel, name, np.asarray(vec), None)
               for name, vec in (("bias", bias), ("scale", scale)) if vec is not None]
    vectors += list(block_scales or ())  # then scale_a, scale_b (their strides follow the pointers)
    check_no_aliasing(vc, [va, vb, *vectors])  # the GPU path's rule (runtime.launch)
    # The simulator takes each operand's memory as one contiguous buffer spanning the matrices;
    # the inputs read-only, so a kernel that stores into one is reported, not silently obeyed.
    inputs = [buf_a, buf_b] + [v.host_span() for v in vectors]
    for buf in inputs:
        buf.flags.writeable = False
    views = (va, vb, vc)  # tensor maps by value where the kernel takes them (an sm_90a kernel's A and B)
    args = kernel.arguments(views, [buf_a, buf_b, buf_c], sim_tensor_maps(kernel, va, vb, vc)) + inputs[2:]
    if block_scales is not None:
        args += stride_args(block_scales)
    first_input = len(args) - len(inputs) + 2 - (4 if block_scales is not None else 0)
    readonly = (0, 1) + tuple(range(first_input, first_input + len(inputs) - 2))
    if kernel.workspace_elements:
        args += [np.zeros(kernel.workspace_elements, np.float32), np.zeros(kernel.counter_count, np.uint32)]
    if kernel.zeroes_c_first:  # atomic split-K adds into C; zero only the simulated tiles, so
        c[covered(kernel, ctas)] = 0  # the rest stays poisoned and stray writes still show
    total = kernel.grid[0] * kernel.grid[1] * kernel.grid[2] if ctas is None else len(ctas)
    estimate = estimate_seconds(kernel, ctas) if progress is not False and not callable(progress) else None
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
                    ray_address: str | None = None, trace=None, trace_ctas=None, scale_a: Any = None,
                    scale_b: Any = None) -> np.ndarray:
    return run_simulation(kernel, a, b, ctas, c=c, bias=bias, scale=scale, progress=progress, workers=workers,
                          ray_address=ray_address, trace=trace, trace_ctas=trace_ctas, scale_a=scale_a,
                          scale_b=scale_b)[0]
