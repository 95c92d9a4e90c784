"""K-grouped GEMMs (grouping="k-contiguous": C_g = A[:, k0:k1] @ B[k0:k1, :], the weight gradient
of a mixture-of-experts layer) on the mma.sync path (schedule/grouping.py, emit/groups.py
`k_slice`): random draws on the simulator against the float64 reference computed group by group,
every group's C written (an empty group's: the epilogue of a zero product), planted bugs the
comparison must catch, and the refusals."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import check_simulated, compare, random_epilogue_operands, random_operands, reference
from ptxgen.emit import groups as device_groups
from ptxgen.ir import ops as ptx
from ptxgen.ir.ops import U32
from ptxgen.schedule.grouping import random_counts

BLOCKS = [(32, 32, 32), (64, 32, 32), (32, 64, 64), (32, 32, 16)]


def k_gemm(m: int, n: int, k: int, groups: int, **kw) -> Gemm:
    return Gemm(m, n, k, groups=groups, grouping="k-contiguous", a_layout="col", b_layout="row", **kw)


def draw_problem(seed: int) -> tuple[Gemm, Schedule, np.ndarray]:
    """A random small k-grouped problem: 1-16 groups, K_total and the groups' lengths rarely
    multiples of BK (groups start inside k-tiles), offs[-1] often short of K_total, empty groups,
    f16/bf16 in, every built output, an epilogue with beta and a bias on some draws."""
    rng = np.random.default_rng(seed)
    block = BLOCKS[seed % len(BLOCKS)]
    groups = 16 if seed == 3 else int(rng.integers(1, 17))
    epilogue = Epilogue(alpha=0.75, beta=-0.5, bias="col") if seed % 3 == 1 else None
    g = k_gemm(int(rng.integers(1, 72)), int(rng.integers(1, 56)), 8 * int(rng.integers(1, 24)), groups,
               dtype=("f16", "bf16")[seed % 2], out_dtype=("f32", "bf16", "f16")[seed % 3], epilogue=epilogue)
    return g, Schedule(block=block, stages=(2, 3, 1)[seed % 3]), random_counts(g, rng, empty=0.3)


def check_draw(g: Gemm, s: Schedule, offs: np.ndarray, seed: int):
    k = ptxgen.compile(g, s)
    a, b = random_operands(g, seed)
    c, bias = random_epilogue_operands(g, seed + 1)
    return check_simulated(k, a, b, c, bias, offs=offs)


@pytest.mark.parametrize("seed", range(8))
def test_random_k_grouped_problems_match_the_reference(seed):
    g, s, offs = draw_problem(seed)
    result = check_draw(g, s, offs, seed)
    assert result.ok, f"{result}\n{g}\n{s}\noffs {offs}"


def test_the_draws_cover_empty_unaligned_short_and_many_groups():
    """The draws above reach: an empty group, a group starting inside a k-tile, offs[-1] short of
    K_total, 16 groups, an epilogue with beta and bias, both input dtypes."""
    seen = set()
    for seed in range(8):
        g, s, offs = draw_problem(seed)
        sizes = np.diff(np.concatenate([[0], offs]))
        seen |= {"empty"} if (sizes == 0).any() else set()
        seen |= {"unaligned"} if (np.concatenate([[0], offs[:-1]])[sizes > 0] % s.bk).any() else set()
        seen |= {"short"} if offs[-1] < g.k else set()
        seen |= {"many"} if g.groups == 16 else set()
        seen |= {"beta+bias"} if g.epi.beta and g.epi.bias else set()
        seen |= {g.dtype}
    assert seen == {"empty", "unaligned", "short", "many", "beta+bias", "f16", "bf16"}, seen


def test_offs_change_without_recompiling():
    """One kernel, several offs: K_total a multiple of BK (the edge checks stay on: group ends are
    arbitrary), every group empty (each C_g the epilogue of a zero product), one group all of K."""
    g = k_gemm(40, 24, 96, 4, epilogue=Epilogue(beta=1.0, bias="col"), out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g)
    c, bias = random_epilogue_operands(g)
    for offs in ([32, 64, 64, 96], [0, 0, 0, 0], [0, 96, 96, 96], [1, 33, 34, 95], [5, 6, 7, 8]):
        result = check_simulated(k, a, b, c, bias, offs=np.array(offs, np.int32))
        assert result.ok, f"offs {offs}: {result}"


def test_an_empty_group_writes_the_epilogue_of_a_zero_product():
    g = k_gemm(20, 16, 32, 2, out_dtype="f32", epilogue=Epilogue(beta=2.0, bias="col"))
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g)
    c, bias = random_epilogue_operands(g)
    out = k.simulate(a, b, c=c.copy(), bias=bias, offs=np.array([32, 32], np.int32))
    np.testing.assert_allclose(out[1], 2.0 * c[1].astype(np.float64) + bias, rtol=1e-6)
    assert compare(out, reference(a, b, g.epilogue, c, bias, offs=np.array([32, 32], np.int32)), g).ok


# -- planted bugs --------------------------------------------------------------------------------
def _planted_length(monkeypatch, extra: int) -> None:
    """k_slice whose length is `extra` more than the group's (k1 replaced by k1 + extra)."""
    real = device_groups.k_slice

    def buggy(b, k_total):
        part = real(b, k_total)
        return dataclasses.replace(part, length=ptx.add(b, U32, part.length, extra))
    monkeypatch.setattr(device_groups, "k_slice", buggy)
    import ptxgen.targets.sm80.context as context
    monkeypatch.setattr(context, "k_slice", buggy)


def test_a_kernel_reading_one_k_past_the_group_fails(monkeypatch):
    g = k_gemm(32, 32, 80, 3, out_dtype="f32")
    s = Schedule(block=(32, 32, 32))
    offs = np.array([20, 41, 60], np.int32)  # short of K_total: the extra k is inside A and B
    assert check_simulated(ptxgen.compile(g, s), *random_operands(g), offs=offs).ok
    _planted_length(monkeypatch, 1)
    result = check_simulated(ptxgen.compile(g, s), *random_operands(g), offs=offs)
    assert not result.ok and result.bad > 0, str(result)


def test_a_kernel_without_k_edge_checks_fails(monkeypatch):
    """K_total a multiple of BK but a group ending inside a k-tile: without the edge checks the
    copies read the next group's k."""
    import ptxgen.emit.edges as store_edges

    g = k_gemm(32, 32, 64, 2, out_dtype="f32")
    s = Schedule(block=(32, 32, 32))
    offs = np.array([20, 40], np.int32)  # the whole k-tiles past each group's end are still inside A and B
    assert check_simulated(ptxgen.compile(g, s), *random_operands(g), offs=offs).ok
    monkeypatch.setattr(store_edges, "edges", lambda g, s: (g.m % s.bm != 0, g.n % s.bn != 0, g.k % s.bk != 0))
    result = check_simulated(ptxgen.compile(g, s), *random_operands(g), offs=offs)
    assert not result.ok and result.bad > 0, str(result)


def test_the_reference_with_a_group_boundary_moved_fails():
    g = k_gemm(24, 16, 48, 3, out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g, 7)
    offs = np.array([10, 30, 48], np.int32)
    out = k.simulate(a, b, offs=offs)
    assert compare(out, reference(a, b, offs=offs), g).ok
    bad = compare(out, reference(a, b, offs=np.array([11, 30, 48], np.int32)), g)
    assert not bad.ok and bad.bad >= 2 * g.m * g.n - 4, str(bad)


def test_device_clamps_offs_the_host_check_would_refuse(monkeypatch):
    """offs read unchecked from a device array: a decreasing entry is an empty group (the next
    starts at it), ends past K_total stop there; the kernel stays inside A, B and C."""
    import ptxgen.runtime.grouped as grouped_args

    g = k_gemm(24, 16, 64, 4, out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g, 2)
    monkeypatch.setattr(grouped_args, "check_counts", lambda g, offs=None, masked_m=None: offs)
    out = k.simulate(a, b, offs=np.array([30, 10, 50, 900], np.int32))
    assert compare(out, reference(a, b, offs=np.array([30, 10, 50, 64], np.int32)), g).ok


# -- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("layouts, field", [(("row", "row"), "gemm.a_layout"), (("col", "col"), "gemm.b_layout")])
def test_layouts_other_than_column_major_a_and_row_major_b_are_refused(layouts, field):
    with pytest.raises(ptxgen.ScheduleError, match=field) as e:
        Gemm(32, 32, 64, groups=2, grouping="k-contiguous", a_layout=layouts[0], b_layout=layouts[1])
    assert "x.mT" in str(e.value) or "ascontiguousarray" in str(e.value)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_the_wgmma_and_tcgen05_kernels_refuse_it_naming_sm_90(arch):
    g = k_gemm(64, 64, 128, 4, dtype="bf16", out_dtype="bf16")
    with pytest.raises(ptxgen.LoweringNotBuilt, match="arch='sm_90'"):
        ptxgen.compile(g, arch=arch)
    assert ptxgen.compile(g, arch="sm_90").schedule.instruction == "m16n8k16"


@pytest.mark.parametrize("schedule, field", [
    (Schedule(block=(32, 32, 32), split_k=2), "schedule.split_k"),
    (Schedule(block=(32, 32, 32), instruction="wmma", smem_layout="pad"), "schedule.instruction"),
    (Schedule(block=(32, 32, 32), decomposition="stream-k"), "schedule.decomposition"),
])
def test_split_k_stream_k_and_wmma_are_refused(schedule, field):
    with pytest.raises(ptxgen.ScheduleError, match=field):
        ptxgen.compile(k_gemm(64, 64, 128, 2), schedule)


def test_run_time_offs_are_checked_against_k_total():
    g = k_gemm(16, 16, 32, 2)
    k = ptxgen.compile(g, Schedule(block=(32, 32, 32)))
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="exceeds the compiled K_total k=32"):
        k.simulate(a, b, offs=np.array([10, 33], np.int32))
    with pytest.raises(ValueError, match="reads offs="):
        k.simulate(a, b, masked_m=np.array([10, 20], np.int32))
    with pytest.raises(ValueError, match="non-decreasing"):
        k.simulate(a, b, offs=np.array([10, 5], np.int32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_moe_weight_gradient_kernel_assembles_without_spills(arch):
    """dW of a DeepSeek-V3-like expert (hidden 7168 x N 2048 over 4096 tokens, 16 experts) with the
    128x128 tile assembles cleanly (its offs[g-1] load is `[addr+-4]`, which the assembler takes)."""
    g = k_gemm(7168, 2048, 4096, 16, dtype="bf16", out_dtype="bf16")
    k = ptxgen.compile(g, Schedule(block=(128, 128, 32), warps=(2, 2), stages=4), arch)
    r = k.resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0, str(r)
    assert k.grid == (16, 56, 16)


def test_the_cost_model_prices_g_ctas_per_tile_over_slices_of_k():
    """grid z = G: the model counts G CTAs per output tile, each over K_total / G (not one CTA
    over all of K), so the chooser sees the launch the kernel makes."""
    from ptxgen.targets.sm80 import cost

    g = k_gemm(512, 256, 4096, 8, dtype="bf16", out_dtype="bf16")
    s = Schedule(block=(128, 128, 32), warps=(2, 2), stages=3)
    grouped = cost.predict(g, s, "sm_80")
    dense = cost.predict(Gemm(512, 256, 512, batch=8, dtype="bf16", out_dtype="bf16", a_layout="col",
                              b_layout="row"), s, "sm_80")
    gx, gy, gz = ptxgen.compile(g, s).grid
    assert grouped.ctas == gx * gy * gz == 2 * 4 * 8
    assert grouped.time_s == pytest.approx(dense.time_s)
