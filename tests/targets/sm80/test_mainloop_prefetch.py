"""The prefetching main loop (emit/sm80/mainloop.py) judged by the simulator: the emitted kernel
is right, and each synchronisation it relies on is needed (planted bugs are caught)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule, sim
from ptxgen.check import random_operands
from tests import harness

G = Gemm(64, 64, 256)  # 8 k-tiles of 32: the loop wraps around its 3 stages twice
S = Schedule(block=(64, 64, 32), warps=(2, 2), stages=3)  # 32x32 warp tiles, 2 k-steps per k-tile


def launch(ptx: str, k) -> np.ndarray:
    a, b = random_operands(G)
    c = np.full((64, 64), np.nan, np.float32)
    sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=[a, np.ascontiguousarray(b.T), c, 64, 64, 256,
               256, 256, 64], dynamic_smem=k.smem_bytes)
    return c


def loop_lines(ptx: str) -> tuple[list[str], int, int]:
    lines = ptx.splitlines()
    start = lines.index("$L_main_loop:")
    end = next(i for i in range(start, len(lines)) if re.search(r"\bbra(\.uni)? \$L_main_loop;", lines[i]))
    return lines, start, end


@pytest.fixture(scope="module")
def kernel():
    k = ptxgen.compile(G, S)
    assert "k-tile i+1 has landed" in k.ptx, "this schedule prefetches across k-tiles"
    return k


def test_emitted_loop_is_right(kernel):
    a, b = random_operands(G)
    c = launch(kernel.ptx, kernel)
    _, result = harness.judge(G, c, harness.Operands(a, b), bound=False)
    assert result.ok, str(result)


def plant(kernel, pattern: str, replacement: str | None) -> str:
    """The kernel with the main loop's one line matching `pattern` replaced (None: removed)."""
    lines, start, end = loop_lines(kernel.ptx)
    hits = [i for i in range(start, end) if re.search(pattern, lines[i])]
    assert len(hits) == 1, hits
    lines[hits[0]] = "    // planted bug" if replacement is None else replacement
    return "\n".join(lines)


def test_missing_loop_barrier_is_a_race(kernel):
    """Without it a warp reads k-tile i+1 before the other warps' copies of it are visible."""
    with pytest.raises(sim.HazardError) as info:
        launch(plant(kernel, r"^\s*bar\.sync 0;", None), kernel)
    assert info.value.kind == "race"


def test_too_weak_loop_wait_reads_pending_copies(kernel):
    """wait_group S-1 instead of S-2 lets the next k-tile's fragment loads read copies in flight."""
    with pytest.raises(sim.HazardError) as info:
        launch(plant(kernel, r"cp\.async\.wait_group 1;", "    cp.async.wait_group 2;"), kernel)
    assert info.value.kind in ("async-pending", "race")


def test_next_fragments_loaded_before_the_barrier_is_a_race(kernel):
    """Move the barrier after the next k-tile's first ldmatrix: that load may read another warp's
    copy of k-tile i+1 before it is visible."""
    lines, start, end = loop_lines(kernel.ptx)
    bar = next(i for i in range(start, end) if re.match(r"\s*bar\.sync 0;", lines[i]))
    first_ld = next(i for i in range(bar, end) if lines[i].strip().startswith("ldmatrix"))
    moved = lines[:bar] + lines[bar + 1:first_ld + 1] + [lines[bar]] + lines[first_ld + 1:]
    with pytest.raises(sim.HazardError) as info:
        launch("\n".join(moved), kernel)
    assert info.value.kind in ("race", "async-pending")


@pytest.mark.parametrize("g,s,on", [
    (G, S, True),
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 32)), True),  # 64x64 warp tiles: estimate 216 + 24
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 64)), True),  # 4 k-steps
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 16)), False),  # 1 k-step: nothing to carry
    (Gemm(512, 512, 512, dtype="tf32"), Schedule(block=(64, 64, 64), warps=(1, 1)), False),  # 8 k-steps
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 32), stages=1), False),
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 32), frag_double_buffer=False), False),
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 32), warps=(2, 4), instruction="wmma", smem_layout="pad"), False),
    # Stream-K's unit state leaves no room beside 64x64 warp tiles (it spilled with the prefetch)
    (Gemm(512, 512, 512), Schedule(block=(128, 128, 32), decomposition="stream-k"), False),
    (Gemm(512, 512, 512), Schedule(block=(64, 128, 32), decomposition="stream-k"), True),
])
def test_when_the_loop_prefetches(g, s, on):
    from ptxgen.schedule.geometry import PREFETCH_REGISTERS, prefetches_across_k_tiles, register_estimate

    assert prefetches_across_k_tiles(g, s) == on
    assert register_estimate(g, s).get("prefetch", 0) == (PREFETCH_REGISTERS if on else 0)
    ptx = ptxgen.compile(g, s).ptx
    assert ("k-tile i+1 has landed" in ptx) == on
    assert ("fragment double buffer on, across k-tiles" in ptx) == on  # the header says so
