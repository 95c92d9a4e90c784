"""Grouped GEMMs on sm_100a (targets/sm100/grouped.py): the 1-CTA warp-specialised persistent
tcgen05 kernel walking the groups' tiles from offs / masked_m on the device, on the simulator
against the float64 reference computed group by group, rows outside every group required
untouched (check_kernel); what is not built with groups refused with a fix that compiles; planted
bugs the comparison must catch."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule
from ptxgen.check import check_kernel, check_simulated, random_operands
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.ir import Imm
from ptxgen.ir import ops as ptx
from ptxgen.ir.ops import U32
from ptxgen.targets.sm100 import grouped as sm100_grouped
from tests.grouped_checks import counts_kw, epilogue_outside_groups
from tests.grouped_plants import one_more_row, shift_rows

ARCH = "sm_100a"


def tc(block=(128, 64, 64), sms=2, **kw) -> Schedule:
    """A small persistent grid (`sms`): every CTA walks several tiles, across groups."""
    return Schedule(block=block, instruction="tcgen05", sms=sms, **kw)


@pytest.mark.parametrize("g, s, counts", [
    # contiguous: an empty group, groups not multiples of the tile, one straddling two tiles, rows
    # past offs[-1] untouched
    (Gemm(256, 64, 64, dtype="bf16", groups=4, grouping="contiguous"), tc(), [50, 50, 200, 230]),
    # BM = 64 (TMEM layout F), B row-major (MN-major), f16 output, one CTA walking every tile
    (Gemm(150, 64, 96, dtype="f16", out_dtype="f16", b_layout="row", groups=3, grouping="contiguous"),
     tc((64, 64, 32), sms=1), [40, 81, 150]),
    # one group
    (Gemm(100, 32, 64, dtype="bf16", groups=1, grouping="contiguous"), tc((128, 32, 64)), [77]),
    # masked: an empty slot, a full one, one short of a tile, K not a multiple of BK
    (Gemm(130, 64, 80, dtype="bf16", out_dtype="bf16", groups=4, grouping="masked"), tc((128, 64, 32), sms=3),
     [0, 130, 127, 5]),
    # masked, B row-major, BM = 64
    (Gemm(70, 48, 64, dtype="f16", b_layout="row", groups=3, grouping="masked"), tc((64, 48, 64)), [5, 0, 70]),
    # fp8 dense (kind::f8f6f4), K-major
    (Gemm(200, 64, 128, dtype="e4m3", out_dtype="bf16", groups=3, grouping="contiguous"), tc((128, 64, 128)),
     [10, 140, 190]),
    (Gemm(90, 32, 64, dtype="e5m2", out_dtype="f32", groups=2, grouping="masked",
          epilogue=Epilogue(scale="col", activation="gelu")), tc((64, 32, 64)), [90, 33]),
])
def test_grouped_problems_match_the_reference(g, s, counts):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert k.grid[0] <= s.sms and "tcgen05.mma" in k.ptx
    a, b = random_operands(g, seed=3)
    scale = np.random.default_rng(7).uniform(0.5, 2, g.n).astype(np.float32) if g.epi.scale else None
    result = check_kernel(k, a, b, scale=scale, run=k.simulate, **counts_kw(g, counts))
    assert result.ok, str(result)


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_epilogue_and_previous_c_outside_the_groups(grouping):
    """alpha, beta (each group's C read under the same guard as the stores) and a column bias;
    rows no group owns keep C's previous values, not poison."""
    result = epilogue_outside_groups(grouping, (70, 32, 48), Epilogue(alpha=0.5, beta=2.0, bias="col"),
                                     lambda g: ptxgen.compile(g, tc((64, 32, 16)), arch=ARCH), (20, 20, 61))
    assert result.ok, str(result)


def test_sizes_change_without_recompiling():
    g = Gemm(150, 40, 80, dtype="bf16", groups=4, grouping="contiguous")
    k = ptxgen.compile(g, tc((64, 48, 16)), arch=ARCH)
    a, b = random_operands(g)
    for offs in ([0, 0, 0, 150], [150, 150, 150, 150], [1, 65, 66, 140]):
        result = check_kernel(k, a, b, run=k.simulate, offs=np.array(offs, np.int32))
        assert result.ok, f"offs {offs}: {result}"


def test_the_kernel_reads_b_by_group_and_the_counts_last():
    g = Gemm(256, 128, 64, dtype="bf16", groups=8, grouping="masked", epilogue=Epilogue(bias="col"))
    k = ptxgen.compile(g, tc((128, 128, 64), sms=None), arch=ARCH)
    assert [m.box for m in k.tensor_maps] == [(1, 128, 64), (1, 128, 64)]   # no tmapC: direct stores
    params = [line.split()[-1].rstrip(",") for line in k.ptx.split(".entry", 1)[1].split(")", 1)[0].splitlines()
              if ".param" in line]
    assert params[-4:] == ["ldc", "batch_stride_c", "bias", "masked_m"] or params[-3:] == ["batch_stride_c", "bias",
                                                                                            "masked_m"], params
    assert "tensor.3d" in k.ptx and k.grid[0] == min(148, 8 * 2)


@pytest.mark.parametrize("s, field", [
    (tc((128, 64, 64), cluster=(2, 1)), "schedule.cluster"),
    (tc((256, 64, 64), cta_group=2), "schedule.cta_group"),
    (tc((128, 64, 64), sms=None, tile_scheduler="clc"), "schedule.tile_scheduler"),
])
def test_what_is_not_built_with_groups_is_refused_with_a_fix_that_compiles(s, field):
    g = Gemm(256, 64, 64, dtype="bf16", groups=2, grouping="contiguous")
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, s, arch=ARCH)
    assert e.value.field == field, str(e.value)
    fixed = Schedule(block=(128, 64, 64), instruction="tcgen05")
    assert ".target sm_100a" in ptxgen.compile(g, fixed, arch=ARCH).ptx


def test_the_tma_store_and_contiguous_block_scales_are_refused_for_groups():
    """(Masked MXFP8 groups are built: test_sm100_grouped_mxfp8.py.)"""
    g = Gemm(256, 64, 64, dtype="bf16", out_dtype="bf16", groups=2, grouping="masked")
    with pytest.raises(ScheduleError) as e:
        ptxgen.verify(g, tc(epilogue_via_smem=True), ARCH)
    assert e.value.field == "schedule.epilogue_via_smem" and "group's end" in str(e.value)
    ptxgen.verify(g, tc(epilogue_via_smem=False), ARCH)
    scaled = Gemm(256, 128, 256, dtype="e4m3", out_dtype="bf16", groups=2, grouping="contiguous",
                  block_scale=BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0"))
    with pytest.raises(ScheduleError) as e:
        ptxgen.verify(scaled, tc((128, 128, 128)), ARCH)
    assert e.value.field == "gemm.grouping" and "do not line up" in str(e.value), str(e.value)
    ptxgen.verify(dataclasses.replace(scaled, grouping="masked"), tc((128, 128, 128)), ARCH)


def test_the_chooser_picks_a_built_grouped_kernel_and_prices_groups_as_a_batch():
    from ptxgen.targets.sm100.cost import predict_blackwell

    g = Gemm(4096, 2048, 7168, dtype="bf16", out_dtype="bf16", groups=16, grouping="contiguous")
    k = ptxgen.compile(g, arch=ARCH)
    assert k.schedule.cta_group == 1 and tuple(k.schedule.cluster) == (1, 1) and k.choice is not None
    s = Schedule(block=(128, 128, 64), instruction="tcgen05")
    masked = Gemm(256, 1024, 2048, dtype="bf16", groups=8, grouping="masked")
    batch = Gemm(256, 1024, 2048, dtype="bf16", batch=8)
    assert predict_blackwell(masked, s, ARCH).time_s == predict_blackwell(batch, s, ARCH).time_s


# -- planted bugs ------------------------------------------------------------------------------------
def _plant(monkeypatch, change):
    """An Sm100GroupedWalk whose tiles pass through `change(b, walk_tile)` (every role's)."""
    real = sm100_grouped.Sm100GroupedWalk.begin

    def begin(self):
        return change(self.b, real(self))
    monkeypatch.setattr(sm100_grouped.Sm100GroupedWalk, "begin", begin)


def _next_groups_weights(b, wt):
    return dataclasses.replace(wt, b_batch=ptx.add(b, U32, wt.b_batch, Imm("1")))


def test_a_group_shifted_by_one_row_fails(monkeypatch):
    g = Gemm(150, 64, 64, dtype="bf16", groups=3, grouping="contiguous")
    offs = np.array([40, 81, 140], np.int32)
    a, b = random_operands(g)
    assert check_simulated(ptxgen.compile(g, tc((64, 64, 64)), arch=ARCH), a, b, offs=offs).ok
    _plant(monkeypatch, shift_rows)
    result = check_simulated(ptxgen.compile(g, tc((64, 64, 64)), arch=ARCH), a, b, offs=offs)
    assert not result.ok and result.bad > 0 and result.stray > 0, str(result)


def test_a_masked_row_written_fails(monkeypatch):
    g = Gemm(70, 32, 64, dtype="bf16", groups=3, grouping="masked")
    masked_m = np.array([5, 0, 33], np.int32)
    a, b = random_operands(g)
    assert check_simulated(ptxgen.compile(g, tc((64, 32, 64)), arch=ARCH), a, b, masked_m=masked_m).ok
    _plant(monkeypatch, one_more_row)
    result = check_simulated(ptxgen.compile(g, tc((64, 32, 64)), arch=ARCH), a, b, masked_m=masked_m)
    # groups 0 and 2 write row masked_m[g] (group 1 has no tile)
    assert not result.ok and result.stray == 2 * g.n and result.bad == 0, str(result)


def test_the_wrong_groups_weights_fail(monkeypatch):
    g = Gemm(100, 32, 64, dtype="bf16", groups=3, grouping="contiguous", b_layout="row")
    offs = np.array([30, 60, 90], np.int32)
    a, b = random_operands(g)
    _plant(monkeypatch, _next_groups_weights)   # the last group's B coordinate is past the map: zero-filled
    result = check_simulated(ptxgen.compile(g, tc((64, 32, 64)), arch=ARCH), a, b, offs=offs)
    assert not result.ok and result.bad > 0 and result.stray == 0, str(result)


def test_mixed_fp8_groups_are_refused():
    g = Gemm(256, 64, 128, dtype="e4m3", b_dtype="e5m2", groups=2, grouping="masked")
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, tc((128, 64, 128)), arch=ARCH)
    assert e.value.field == "gemm.b_dtype"


@pytest.mark.parametrize("g", [
    Gemm(4096, 2048, 7168, dtype="bf16", out_dtype="bf16", groups=16, grouping="contiguous"),
    Gemm(256, 4096, 7168, dtype="e4m3", out_dtype="bf16", groups=8, grouping="masked"),
], ids=["contiguous-bf16", "masked-e4m3"])
def test_moe_sized_kernels_assemble_without_spills(g):
    """DeepSeek-V3-like expert shapes with the chooser's tile assemble cleanly for sm_100a."""
    r = ptxgen.compile(g, arch=ARCH).resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0 and r.stack_bytes == 0, str(r)
