"""Grouped GEMMs on the mma.sync path (schedule/grouping.py, emit/groups.py): random draws on the
simulator against the float64 reference computed group by group, rows outside every group
required untouched, and planted bugs that the comparison must catch."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import check_simulated, compare, random_operands, reference, untouched_rows
from ptxgen.emit import groups as device_groups
from ptxgen.ir import ops as ptx
from ptxgen.ir.ops import U32
from ptxgen.schedule.grouping import random_counts
from tests.grouped_checks import counts_kw, epilogue_outside_groups

BLOCKS = [(32, 32, 32), (64, 32, 32), (32, 64, 32)]


def draw_problem(seed: int, grouping: str) -> tuple[Gemm, Schedule, np.ndarray]:
    """A random small grouped problem: 1-16 groups, K not a multiple of BK, either B layout, every
    built dtype; counts with empty groups (and, contiguous, groups straddling tile edges)."""
    rng = np.random.default_rng(seed)
    block = BLOCKS[seed % len(BLOCKS)]
    groups = int(rng.integers(1, 17))
    dtype = ("f16", "bf16")[seed % 2]
    out = ("f32", "f16", "bf16")[seed % 3]
    m = int(rng.integers(1, 4 * block[0] + 1)) if grouping == "masked" else int(rng.integers(1, 160))
    k = int(rng.integers(1, 5)) * 8 + block[2] * int(rng.integers(0, 2)) + 8 * (seed % 2)  # rarely a multiple of BK
    g = Gemm(m, int(rng.integers(1, 80)), k, dtype=dtype, out_dtype=out, b_layout=("row", "col")[seed % 2],
             groups=groups, grouping=grouping)
    counts = random_counts(g, rng, empty=0.3)
    return g, Schedule(block=block, stages=2 + seed % 2), counts


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_random_grouped_problems_match_the_reference(seed, grouping):
    g, s, counts = draw_problem(seed, grouping)
    k = ptxgen.compile(g, s)
    a, b = random_operands(g, seed)
    result = check_simulated(k, a, b, **counts_kw(g, counts))
    assert result.ok, f"{result}\n{g}\n{s}\ncounts {counts}"


def test_the_draws_cover_empty_straddling_and_full_groups():
    """The property draws above reach the cases that matter: an empty group, a contiguous group
    starting inside a tile, K not a multiple of BK, 16 groups, masked counts 0 and max_m."""
    seen = set()
    for seed in range(10):
        for grouping in ("contiguous", "masked"):
            g, s, counts = draw_problem(seed, grouping)
            sizes = np.diff(np.concatenate([[0], counts])) if grouping == "contiguous" else counts
            seen |= {"empty"} if (sizes == 0).any() else set()
            seen |= {"k-edge"} if g.k % s.bk else set()
            if grouping == "contiguous":
                seen |= {"straddle"} if (np.concatenate([[0], counts[:-1]])[sizes > 0] % s.bm).any() else set()
            else:
                seen |= {"full"} if (counts == g.m).any() else set()
            seen |= {"many"} if g.groups >= 12 else set()
    assert seen == {"empty", "k-edge", "straddle", "full", "many"}, seen


def test_sizes_change_without_recompiling():
    g = Gemm(96, 40, 48, groups=4, grouping="contiguous")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g)
    for offs in ([0, 0, 0, 96], [96, 96, 96, 96], [1, 33, 34, 95], [0, 0, 0, 0]):
        result = check_simulated(k, a, b, offs=np.array(offs, np.int32))
        assert result.ok, f"offs {offs}: {result}"


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_epilogue_and_previous_c_outside_the_groups(grouping):
    """beta reads each group's C; rows no group owns keep C's previous values (not poison)."""
    epilogue = Epilogue(alpha=0.5, beta=-1.5, bias="col", activation="relu")
    result = epilogue_outside_groups(grouping, (40, 24, 40), epilogue,
                                     lambda g: ptxgen.compile(g, Schedule(block=(32, 32, 32))), (7, 7, 30))
    assert result.ok, str(result)


def test_f16_accumulation_runs_grouped():
    g = Gemm(50, 16, 32, dtype="f16", out_dtype="f16", acc_dtype="f16", groups=2, grouping="masked")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g)
    assert check_simulated(k, a, b, masked_m=np.array([50, 3], np.int32)).ok


# -- planted bugs --------------------------------------------------------------------------------
def _run(k, counts):
    g = k.gemm
    a, b = random_operands(g, 7)
    out = k.simulate(a, b, **counts_kw(g, counts))
    return a, b, out


def test_reference_with_a_group_shifted_by_one_row_fails():
    g = Gemm(64, 32, 32, groups=3, grouping="contiguous")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    offs = np.array([20, 41, 64], np.int32)
    a, b, out = _run(k, offs)
    assert compare(out, reference(a, b, offs=offs), g, untouched=untouched_rows(g, offs=offs)).ok
    shifted = np.array([21, 41, 64], np.int32)  # group 0 one row longer, group 1 one shorter
    bad = compare(out, reference(a, b, offs=shifted), g, untouched=untouched_rows(g, offs=shifted))
    assert not bad.ok and bad.bad >= g.n


def _planted(monkeypatch, method: str, field: str):
    """A GroupWalk whose slot's `field` (row0 or rows) is one more than it should be."""
    real = getattr(device_groups.GroupWalk, method)

    def buggy(self, tile, *group):
        slot = real(self, tile, *group)
        moved = ptx.add(self.b, U32, getattr(slot, field), 1)
        return dataclasses.replace(slot, **{field: moved})
    monkeypatch.setattr(device_groups.GroupWalk, method, buggy)


def test_kernel_reading_a_group_one_row_late_fails(monkeypatch):
    g = Gemm(64, 32, 32, groups=3, grouping="contiguous")
    s = Schedule(block=(32, 32, 32))
    offs = np.array([20, 41, 60], np.int32)
    assert check_simulated(ptxgen.compile(g, s), *random_operands(g), offs=offs).ok
    _planted(monkeypatch, "_contiguous", "row0")
    result = check_simulated(ptxgen.compile(g, s), *random_operands(g), offs=offs)
    assert not result.ok and result.bad > 0 and result.stray > 0, str(result)


def test_kernel_writing_one_masked_row_too_many_fails(monkeypatch):
    g = Gemm(40, 32, 32, groups=3, grouping="masked")
    s = Schedule(block=(32, 32, 32))
    masked_m = np.array([5, 0, 33], np.int32)
    assert check_simulated(ptxgen.compile(g, s), *random_operands(g), masked_m=masked_m).ok
    _planted(monkeypatch, "_masked", "rows")
    result = check_simulated(ptxgen.compile(g, s), *random_operands(g), masked_m=masked_m)
    # groups 0 and 2 write row masked_m[g] (group 1's empty slot still exits before its tile)
    assert not result.ok and result.stray == 2 * g.n and result.bad == 0, str(result)


def test_a_masked_row_written_is_caught_by_compare():
    g = Gemm(40, 16, 32, groups=2, grouping="masked")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    masked_m = np.array([9, 20], np.int32)
    a, b, out = _run(k, masked_m)
    ref, untouched = reference(a, b, masked_m=masked_m), untouched_rows(g, masked_m=masked_m)
    assert compare(out, ref, g, untouched=untouched).ok
    out[1, 20, 3] = 0.25  # a row past masked_m[1] written
    bad = compare(out, ref, g, untouched=untouched)
    assert not bad.ok and bad.stray == 1 and "outside every group" in str(bad)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_moe_sized_kernels_assemble_without_spills(grouping, arch):
    """A DeepSeek-V3-like expert shape (N 2048, K 7168) with the 128x128 tile assembles cleanly."""
    g = Gemm(4096 if grouping == "contiguous" else 256, 2048, 7168, dtype="bf16", out_dtype="bf16",
             groups=16, grouping=grouping)
    k = ptxgen.compile(g, Schedule(block=(128, 128, 32), warps=(2, 2), stages=4), arch)
    r = k.resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0, str(r)


@pytest.mark.parametrize("grouping, counts, effective", [
    # a decreasing entry is an empty group; ends past M_total stop at M_total
    ("contiguous", [30, 10, 50, 90], [30, 30, 50, 64]),
    # negative counts are empty groups, counts past max_m fill the slot
    ("masked", [-3, 41, 7], [0, 40, 7]),
])
def test_device_clamps_counts_the_host_check_would_refuse(monkeypatch, grouping, counts, effective):
    """A device array is read unchecked: whatever it holds, the kernel stays inside A and C (the
    simulator refuses any access outside the buffers) and computes the clamped groups."""
    import ptxgen.runtime.grouped as grouped_args

    g = Gemm(64 if grouping == "contiguous" else 40, 32, 32, groups=len(counts), grouping=grouping)
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g, 2)
    monkeypatch.setattr(grouped_args, "check_counts", lambda g, offs=None, masked_m=None:
                        offs if offs is not None else masked_m)
    out = k.simulate(a, b, **counts_kw(g, np.array(counts, np.int32)))
    want = counts_kw(g, np.array(effective, np.int32))
    result = compare(out, reference(a, b, **want), g, untouched=untouched_rows(g, **want))
    assert result.ok, str(result)
