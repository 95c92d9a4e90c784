"""Grouped GEMMs on sm_90a (targets/sm90/grouped.py): the warp-specialised persistent kernel
walking the groups' tiles from offs / masked_m on the device, on the simulator against the float64
reference computed group by group (and block by block for block-scaled fp8), rows outside every
group required untouched; the refusals; and planted bugs that the comparison must catch."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule
from ptxgen.check import check_simulated, compare, random_operands, reference, untouched_rows
from ptxgen.errors import ScheduleError
from ptxgen.ir import Imm
from ptxgen.ir import ops as ptx
from ptxgen.ir.ops import B32, U32
from ptxgen.schedule.block_scale import random_grouped_scales
from ptxgen.schedule.grouping import random_counts
from ptxgen.targets.sm90 import grouped as sm90_grouped
from ptxgen.targets.sm90.block_scales import BlockScales
from tests.grouped_checks import counts_kw, epilogue_outside_groups
from tests.grouped_plants import one_more_row, shift_rows

ARCH = "sm_90a"
#: (block, consumers): one consumer with 64 rows, two with 128 (64 each).
TILES = [((64, 64, 64), 1), ((128, 64, 64), 2), ((64, 32, 128), 1)]
DTYPES = ("f16", "bf16", "e4m3")


def schedule(block, consumers, stages=2, sms=2, **kw) -> Schedule:
    """The warp-specialised persistent kernel on a small grid (`sms`): every CTA walks several tiles."""
    return Schedule(block=block, instruction="wgmma", consumers=consumers, stages=stages, sms=sms, **kw)


def scales(g: Gemm, seed: int = 5) -> dict:
    if g.block_scale is None:
        return {}
    sa, sb = random_grouped_scales(g.block_scale, g, seed)
    return {"scale_a": sa, "scale_b": sb}


def draw_problem(seed: int, grouping: str) -> tuple[Gemm, Schedule, np.ndarray]:
    """A random small grouped problem: 1-16 groups, K rarely a multiple of BK (or of 128), f16/bf16
    in either B layout or block-scaled e4m3 (K-major B); counts with empty groups and (contiguous)
    groups straddling tiles, masked counts from 0 to max_m."""
    rng = np.random.default_rng(seed)
    block, consumers = TILES[seed % len(TILES)]
    dtype = DTYPES[(seed // 2) % 3]
    fp8 = dtype == "e4m3"
    if fp8 and block[2] == 64 and seed % 2:
        block = (block[0], block[1], 128)
    groups = 1 if seed % 6 == 5 else int(rng.integers(1, 17))
    m = int(rng.integers(1, 2 * block[0] + 1)) if grouping == "masked" else int(rng.integers(1, 200))
    k = 16 * int(rng.integers(1, 18))                      # 16..272: mostly not a multiple of BK or 128
    n = 8 * int(rng.integers(1, 17))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=("f32", "bf16", "f16")[seed % 3],
             b_layout="col" if fp8 else ("row", "col")[(seed // 3) % 2], groups=groups, grouping=grouping,
             block_scale=BlockScale() if fp8 else None)
    counts = random_counts(g, rng, empty=0.3)
    if grouping == "masked" and seed % 4 == 0:
        counts[0] = g.m                                      # a full slot
    return g, schedule(block, consumers, stages=2 + seed % 2, sms=1 + seed % 3), counts


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_random_grouped_problems_match_the_reference(seed, grouping):
    g, s, counts = draw_problem(seed, grouping)
    k = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed)
    result = check_simulated(k, a, b, **counts_kw(g, counts), **scales(g, seed))
    assert result.ok, f"{result}\n{g}\n{s}\ncounts {counts}"


def test_the_draws_cover_what_matters():
    """The draws above reach: an empty group, a contiguous group starting inside a tile, K not a
    multiple of BK nor of 128, 12+ groups, masked counts 0 and max_m, one group, every dtype, both
    B layouts of f16/bf16, two consumers, BK 128, block-scaled with BK 64 and 128 and two consumers."""
    seen = set()
    for seed in SEEDS:
        for grouping in ("contiguous", "masked"):
            g, s, counts = draw_problem(seed, grouping)
            sizes = np.diff(np.concatenate([[0], counts])) if grouping == "contiguous" else counts
            seen |= {"empty"} if (sizes == 0).any() else set()
            seen |= {"k-edge"} if g.k % s.bk else set()
            seen |= {"k-128-edge"} if g.k % 128 else set()
            seen |= {"many"} if g.groups >= 12 else set()
            seen |= {"one"} if g.groups == 1 else set()
            seen |= {f"dtype-{g.dtype}", f"b-{g.b_layout}", f"consumers-{s.consumers}", f"bk-{s.bk}"}
            if g.block_scale is not None:
                seen |= {f"scaled-bk-{s.bk}", f"scaled-consumers-{s.consumers}"}
            if grouping == "contiguous":
                starts = np.concatenate([[0], counts[:-1]])
                seen |= {"straddle"} if (starts[sizes > 0] % s.bm).any() else set()
            else:
                seen |= {"full"} if (counts == g.m).any() else set()
                seen |= {"zero"} if (counts == 0).any() else set()
    want = {"empty", "k-edge", "k-128-edge", "many", "one", "straddle", "full", "zero", "b-row", "b-col",
            "consumers-1", "consumers-2", "bk-64", "bk-128", "scaled-bk-64", "scaled-bk-128",
            "scaled-consumers-2"} | {f"dtype-{d}" for d in DTYPES}
    assert want <= seen, want - seen


def test_sizes_change_without_recompiling():
    g = Gemm(150, 40, 80, dtype="bf16", groups=4, grouping="contiguous")
    k = ptxgen.compile(g, schedule((64, 64, 64), 1), arch=ARCH)
    a, b = random_operands(g)
    for offs in ([0, 0, 0, 150], [150] * 4, [1, 65, 66, 149], [0, 0, 0, 0], [63, 64, 129, 130]):
        result = check_simulated(k, a, b, offs=np.array(offs, np.int32))
        assert result.ok, f"offs {offs}: {result}"


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_epilogue_and_previous_c_outside_the_groups(grouping):
    """beta reads each group's C (guarded like the stores); rows no group owns keep C's previous
    values, not poison."""
    epilogue = Epilogue(alpha=0.5, beta=-1.5, bias="col", activation="relu")
    result = epilogue_outside_groups(grouping, (70, 24, 48), epilogue,
                                     lambda g: ptxgen.compile(g, schedule((64, 64, 64), 1), arch=ARCH), (7, 7, 60))
    assert result.ok, str(result)


def test_ue8m0_scales_in_transposed_storage():
    """Power-of-two scales, sa of each masked group column-major (its (Kb, max_m) storage
    transposed) and sb column-major per group: read through their strides and group strides."""
    g = Gemm(90, 64, 272, dtype="e4m3", out_dtype="f32", groups=3, grouping="masked",
             block_scale=BlockScale(dtype="ue8m0"))
    k = ptxgen.compile(g, schedule((64, 64, 128), 1), arch=ARCH)
    a, b = random_operands(g, 1)
    sa, sb = random_grouped_scales(g.block_scale, g, 2)
    sa_t, sb_t = np.ascontiguousarray(sa.swapaxes(1, 2)).swapaxes(1, 2), np.ascontiguousarray(sb.swapaxes(1, 2)).swapaxes(1, 2)
    result = check_simulated(k, a, b, masked_m=np.array([90, 33, 0], np.int32), scale_a=sa_t, scale_b=sb_t)
    assert result.ok, str(result)


@pytest.mark.parametrize("scaled", [False, True], ids=["per-tensor", "block-scaled"])
def test_one_group_of_e5m2(scaled):
    """groups=1: B comes as its one matrix and gets its group axis back for the 3-D tensor map
    (simulate.one_matrix_batch), which must stride ml_dtypes' float8_e5m2 too (found by
    bench/fuzz.py --designs grouped: "data type '<f1' not understood")."""
    g = Gemm(72, 40, 160, dtype="e5m2", out_dtype="bf16", groups=1, grouping="contiguous",
             block_scale=BlockScale() if scaled else None)
    k = ptxgen.compile(g, schedule((64, 32, 64), 1, sms=1), arch=ARCH)
    a, b = random_operands(g, 7)
    result = check_simulated(k, a, b, offs=np.array([61], np.int32), **scales(g))
    assert result.ok, str(result)


# -- planted bugs ------------------------------------------------------------------------------------
def _plant_ops(monkeypatch, change):
    """A GroupedTileWalk whose tile operands pass through `change(b, ops)` (every role's)."""
    real = sm90_grouped.GroupedTileWalk.begin

    def begin(self):
        ops, step = real(self)
        return change(self.b, ops), step
    monkeypatch.setattr(sm90_grouped.GroupedTileWalk, "begin", begin)


def _group_zero_weights(b, ops):
    return dataclasses.replace(ops, b_batch=(ptx.mov(b, U32, Imm("0")),))


def test_a_group_shifted_by_one_row_fails(monkeypatch):
    g = Gemm(150, 64, 64, groups=3, grouping="contiguous")
    s = schedule((64, 64, 64), 1)
    offs = np.array([40, 81, 140], np.int32)
    a, b = random_operands(g)
    assert check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, offs=offs).ok
    _plant_ops(monkeypatch, shift_rows)
    result = check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, offs=offs)
    assert not result.ok and result.bad > 0 and result.stray > 0, str(result)


def test_a_masked_row_written_fails(monkeypatch):
    g = Gemm(70, 32, 64, groups=3, grouping="masked")
    s = schedule((64, 64, 64), 1)
    masked_m = np.array([5, 0, 33], np.int32)
    a, b = random_operands(g)
    assert check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, masked_m=masked_m).ok
    _plant_ops(monkeypatch, one_more_row)
    result = check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, masked_m=masked_m)
    # groups 0 and 2 write row masked_m[g] (group 1 has no tile)
    assert not result.ok and result.stray == 2 * g.n and result.bad == 0, str(result)


def test_every_group_reading_group_zeros_weights_fails(monkeypatch):
    g = Gemm(100, 32, 64, groups=3, grouping="contiguous", b_layout="row")
    s = schedule((64, 64, 64), 1)
    offs = np.array([30, 60, 100], np.int32)
    a, b = random_operands(g)
    _plant_ops(monkeypatch, _group_zero_weights)
    result = check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, offs=offs)
    assert not result.ok and result.bad > 0 and result.stray == 0, str(result)


def _wrong_k_slice(self, kt, chunk, k_block=BlockScales.k_block):
    return ptx.xor(self.ctx.b, B32, k_block(self, kt, chunk), Imm("1"))   # K-blocks 0 <-> 1, 2 <-> 3


def _group_zeros_scales(self, ops, bases=BlockScales.group_bases):
    return self.ctx.ptr["scale_a"], self.ctx.ptr["scale_b"]


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
@pytest.mark.parametrize("plant", [("k_block", _wrong_k_slice), ("group_bases", _group_zeros_scales)],
                         ids=["wrong-k-slice", "group-0-scales"])
def test_scale_plants_fail(monkeypatch, grouping, plant):
    g = Gemm(100, 64, 512, dtype="e4m3", out_dtype="f32", groups=3, grouping=grouping, block_scale=BlockScale())
    s = schedule((64, 64, 128), 1)
    counts = np.array([30, 60, 100], np.int32) if grouping == "contiguous" else np.array([30, 100, 70], np.int32)
    a, b = random_operands(g)
    kw = {**counts_kw(g, counts), **scales(g)}
    assert check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, **kw).ok
    monkeypatch.setattr(BlockScales, *plant)
    result = check_simulated(ptxgen.compile(g, s, arch=ARCH), a, b, **kw)
    assert not result.ok and result.bad > 0, str(result)


@pytest.mark.parametrize("grouping, counts, effective", [
    ("contiguous", [30, 10, 50, 90], [30, 30, 50, 64]),   # decreasing entry: empty; past M_total: clamped
    ("masked", [-3, 41, 7], [0, 40, 7]),                  # negative: empty; past max_m: the full slot
])
def test_device_clamps_counts_the_host_check_would_refuse(monkeypatch, grouping, counts, effective):
    import ptxgen.runtime.grouped as grouped_args

    g = Gemm(64 if grouping == "contiguous" else 40, 32, 32, groups=len(counts), grouping=grouping)
    k = ptxgen.compile(g, schedule((64, 64, 64), 1), arch=ARCH)
    a, b = random_operands(g, 2)
    monkeypatch.setattr(grouped_args, "check_counts", lambda g, offs=None, masked_m=None:
                        offs if offs is not None else masked_m)
    out = k.simulate(a, b, **counts_kw(g, np.array(counts, np.int32)))
    want = counts_kw(g, np.array(effective, np.int32))
    result = compare(out, reference(a, b, **want), g, untouched=untouched_rows(g, **want))
    assert result.ok, str(result)


# -- what is emitted, chosen and refused -------------------------------------------------------------
def test_the_kernel_reads_the_counts_last_and_b_by_group():
    g = Gemm(256, 128, 256, dtype="e4m3", out_dtype="bf16", groups=8, grouping="masked", block_scale=BlockScale())
    k = ptxgen.compile(g, schedule((128, 128, 128), 2), arch=ARCH)
    params = [line.strip() for line in k.ptx.split(".entry", 1)[1].split("(", 1)[1].split(")", 1)[0].splitlines() if ".param" in line]
    assert params[-1] == ".param .u64 masked_m" and ".param .u32 sb_group_stride," in params
    assert [t.box for t in k.tensor_maps] == [(1, 128, 128), (1, 128, 128)]
    assert "grouped walk: every role sums" in k.ptx and "producer_group_seek" in k.ptx
    assert "st.global" in k.ptx and "cp.async.bulk.tensor.2d.global.shared" not in k.ptx   # direct stores


def test_the_chooser_picks_a_built_grouped_kernel():
    for g in (Gemm(4096, 2048, 7168, dtype="bf16", out_dtype="bf16", groups=16, grouping="contiguous"),
              Gemm(256, 4096, 7168, dtype="e4m3", out_dtype="bf16", groups=8, grouping="masked",
                   block_scale=BlockScale())):
        k = ptxgen.compile(g, arch=ARCH)
        s = k.schedule
        assert s.instruction == "wgmma" and s.warp_specialized and s.persistent and tuple(s.cluster) == (1, 1)
        assert not s.epilogue_via_smem and k.grid[0] == 132


@pytest.mark.parametrize("gemm_kw, schedule_kw, field, fix", [
    ({}, dict(cluster=(2, 1)), "schedule.cluster", "cluster=(1, 1)"),
    ({}, dict(warp_specialized=False, persistent=False), "schedule.warp_specialized", "warp_specialized=True"),
    ({}, dict(epilogue_via_smem=True), "schedule.epilogue_via_smem", "epilogue_via_smem=False"),
    ({}, dict(raster="grouped"), "schedule.raster", "raster='row'"),
    (dict(dtype="s8", out_dtype="s32"), {}, "gemm.dtype", "dtype='f16'"),
    (dict(epilogue=Epilogue(bias="row")), {}, "epilogue.bias", "bias='col'"),
])
def test_verifier_refuses_what_is_not_built(gemm_kw, schedule_kw, field, fix):
    g = Gemm(128, 64, 64, groups=3, grouping="contiguous", **gemm_kw)
    with pytest.raises(ScheduleError) as e:
        ptxgen.verify(g, Schedule(**{"block": (64, 64, 64), "instruction": "wgmma", "consumers": 1, **schedule_kw}),
                      ARCH)
    assert e.value.field == field and fix in e.value.fix, str(e.value)


def test_run_time_scales_are_checked_per_group():
    g = Gemm(64, 64, 256, dtype="e4m3", groups=2, grouping="masked", block_scale=BlockScale())
    k = ptxgen.compile(g, schedule((64, 64, 128), 1), arch=ARCH)
    a, b = random_operands(g)
    sa, sb = random_grouped_scales(g.block_scale, g)
    with pytest.raises(ValueError, match=r"\(2, 64, 2\)"):
        k.simulate(a, b, masked_m=np.array([3, 4], np.int32), scale_b=sb)
    with pytest.raises(ValueError, match="scale_b"):
        k.simulate(a, b, masked_m=np.array([3, 4], np.int32), scale_a=sa, scale_b=sb[0])


@pytest.mark.parametrize("g", [
    Gemm(4096, 2048, 7168, dtype="bf16", out_dtype="bf16", groups=16, grouping="contiguous"),
    Gemm(256, 4096, 7168, dtype="e4m3", out_dtype="bf16", groups=8, grouping="masked", block_scale=BlockScale()),
], ids=["contiguous-bf16", "masked-e4m3-block-scaled"])
def test_moe_sized_kernels_assemble_without_spills(g):
    """DeepSeek-V3-like expert shapes with the chooser's tile assemble cleanly (the walk's
    registers fit beside the accumulators)."""
    r = ptxgen.compile(g, arch=ARCH).resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0, str(r)


def test_the_cost_model_prices_equal_groups_as_a_batch():
    """Masked: every slot full; contiguous: M_total / G rows per group, each rounded up to tiles,
    so small groups under a tall BM show as edge waste."""
    from ptxgen.targets.sm90.choose import predict_hopper

    s = schedule((128, 128, 64), 2, sms=None)
    masked = Gemm(256, 1024, 2048, dtype="bf16", groups=8, grouping="masked")
    batch = Gemm(256, 1024, 2048, dtype="bf16", batch=8)
    assert predict_hopper(masked, s, ARCH).time_s == predict_hopper(batch, s, ARCH).time_s
    small = predict_hopper(Gemm(1024, 1024, 2048, dtype="bf16", groups=64, grouping="contiguous"), s, ARCH)
    assert small.edge_waste == pytest.approx(1 - 16 / 128)
