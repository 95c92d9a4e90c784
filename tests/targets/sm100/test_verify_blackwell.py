"""The sm_100a rules (ptxgen/targets/sm100/verify.py): each refusal names the field and the rule,
and the fix it gives is accepted; what is not built (M = 128 CTA pairs, split-K, Stream-K, cluster
launch control with clusters) is refused with a LoweringNotBuilt whose fix compiles (the cluster and
CTA-pair rules: test_verify_cluster.py)."""
from __future__ import annotations

import dataclasses

import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.schedule.verify import verify

ARCH = "sm_100a"
G = Gemm(512, 512, 512, dtype="f16", a_layout="row", b_layout="col")


def tc(block=(128, 256, 64), **kw) -> Schedule:
    return Schedule(block=block, instruction="tcgen05", **kw)


@pytest.mark.parametrize("s, field, words, fixed", [
    (tc((256, 128, 64)), "schedule.block.BM", "M = 64 or 128", tc((128, 128, 64))),
    (tc((128, 72, 64)), "schedule.block.BN", "multiple of 16", tc((128, 64, 64))),
    (tc((64, 264, 64)), "schedule.block.BN", "from 8 to 256", tc((64, 256, 64))),
    (tc((128, 128, 40)), "schedule.block.BK", "K = 16", tc((128, 128, 32))),
    (tc((128, 256, 64), stages=6), "schedule.stages", "228 KB per SM", tc((128, 256, 64), stages=4)),
    (tc(cta_group=3), "schedule.cta_group", "CTA pair", tc()),
])
def test_each_rule_names_the_field_and_its_fix_is_accepted(s, field, words, fixed):
    with pytest.raises(ScheduleError) as e:
        verify(G, s, ARCH)
    assert e.value.field == field and words in str(e.value), str(e.value)
    verify(G, fixed, ARCH)


def test_the_stage_fix_is_the_number_the_message_gives():
    with pytest.raises(ScheduleError) as e:
        verify(G, tc(stages=6), ARCH)
    assert "stages=4" in str(e.value)


@pytest.mark.parametrize("g, s, arch, field", [
    (G, tc(), "sm_90a", "schedule.instruction"),   # sm_90a's own rule: it lowers wgmma only
    (G, Schedule(block=(128, 128, 64), instruction="wgmma"), ARCH, "arch"),   # wgmma needs sm_90a
    (G, Schedule(block=(128, 128, 32)), ARCH, "schedule.instruction"),
    (G, tc(), "sm_80", "arch"),
    (G, Schedule(block=(128, 128, 64), instruction="m16n8k16", cta_group=1), "sm_80", "schedule.cta_group"),
    (Gemm(512, 512, 512, dtype="e4m3", a_layout="col", b_layout="col"), tc(), ARCH, "gemm.layout"),  # fp8 K-major
    (Gemm(512, 512, 512, dtype="s8", out_dtype="f16", acc_dtype="f16", a_layout="row", b_layout="col"), tc(), ARCH,
     "gemm.acc_dtype"),
    (Gemm(512, 512, 512, dtype="tf32", a_layout="col", b_layout="col"), tc((128, 128, 32)), ARCH, "gemm.layout"),
    (Gemm(512, 500, 512, dtype="f16", a_layout="row", b_layout="row"), tc(), ARCH, "gemm.ldb"),
])
def test_target_pairing_and_operands(g, s, arch, field):
    with pytest.raises(ScheduleError) as e:
        verify(g, s, arch)
    assert e.value.field == field, str(e.value)


@pytest.mark.parametrize("g, s, field", [
    (G, tc((128, 256, 64), cta_group=2), "schedule.block.BM"),   # a pair's M = 128 (64 rows per CTA)
    (G, tc(split_k=2), "schedule.split_k"),
    (G, tc(decomposition="stream-k"), "schedule.decomposition"),
])
def test_what_is_not_built_is_refused_with_a_fix_that_compiles(g, s, field):
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, s, arch=ARCH)
    assert e.value.field == field
    fixed = dataclasses.replace(s, cta_group=1, split_k=1, decomposition="tiles")
    assert ".target sm_100a" in ptxgen.compile(g, fixed, arch=ARCH).ptx


@pytest.mark.parametrize("s", [tc(cluster=(2, 1), tile_scheduler="clc"),
                               tc((256, 256, 64), cta_group=2, tile_scheduler="clc")])
def test_cluster_launch_control_with_a_cluster_is_refused_with_a_fix_that_compiles(s):
    """CLC is built for single-CTA clusters (a cluster's cancel would have to be multicast)."""
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(G, s, arch=ARCH)
    assert e.value.field == "schedule.tile_scheduler" and "single-CTA clusters" in str(e.value)
    assert "tile_scheduler='static'" in e.value.fix
    fixed = dataclasses.replace(s, tile_scheduler="static")
    assert ".reqnctapercluster 2, 1, 1" in ptxgen.compile(G, fixed, arch=ARCH).ptx


@pytest.mark.parametrize("g, s, field, words, fixed", [
    # C's rows of 100 f16 elements (200 B) are not a multiple of TMA's 16 bytes
    (Gemm(512, 100, 512, a_layout="row", b_layout="col", out_dtype="f16"), tc((128, 64, 64), epilogue_via_smem=True),
     "schedule.epilogue_via_smem", "multiple of 16", tc((128, 64, 64), epilogue_via_smem=False)),
    (G, tc(tile_scheduler="clc", sms=4), "schedule.sms", "one CTA per tile", tc(tile_scheduler="clc")),
    (G, tc(tile_scheduler="dynamic"), "schedule.tile_scheduler", "'static', 'clc'", tc(tile_scheduler="static")),
])
def test_epilogue_and_tile_scheduler_rules(g, s, field, words, fixed):
    with pytest.raises(ScheduleError) as e:
        verify(g, s, ARCH)
    assert e.value.field == field and words in str(e.value), str(e.value)
    verify(g, fixed, ARCH)


def test_the_tile_scheduler_belongs_to_tcgen05_and_defaults_to_static():
    assert tc().tile_scheduler == "static"
    with pytest.raises(ScheduleError) as e:
        verify(G, Schedule(block=(128, 128, 64), instruction="m16n8k16", tile_scheduler="clc"), "sm_80")
    assert e.value.field == "schedule.tile_scheduler"


def test_the_epilogue_defaults_to_the_tma_store_where_tma_can_write_c():
    tma = ptxgen.compile(G, tc(), arch=ARCH)
    assert [m.param for m in tma.tensor_maps] == ["tmapA", "tmapB", "tmapC"]
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in tma.ptx
    odd = ptxgen.compile(Gemm(512, 100, 512, a_layout="row", b_layout="col", out_dtype="f16"), tc((128, 64, 64)),
                         arch=ARCH)
    assert [m.param for m in odd.tensor_maps] == ["tmapA", "tmapB"] and "bulk_group" not in odd.ptx


@pytest.mark.parametrize("bn, fix", [(16, 32), (48, 32), (80, 64)])
def test_an_int8_pair_takes_n_a_multiple_of_32(bn, fix):
    """cta_group::2 kind::i8 has the pair's N = 32..256 step 32 (tcgen05.md §12i), not cta_group::1's
    16 step: `fuzz.py --arch sm_100a` seed 257 (767x47x48 s8 on a (256, 16, 64) pair) passed the
    verifier and the simulator refused its instruction descriptor. cta_group::1 keeps N = 16, 48."""
    g = Gemm(767, 47, 48, dtype="s8", out_dtype="f32", acc_dtype="s32", a_layout="row", b_layout="col")
    with pytest.raises(ScheduleError) as e:
        verify(g, tc((256, bn, 64), cta_group=2), ARCH)
    assert e.value.field == "schedule.block.BN" and "multiple of 32" in str(e.value), str(e.value)
    assert f"BN = {fix}" in e.value.fix
    verify(g, tc((256, fix, 64), cta_group=2), ARCH)
    verify(g, tc((128, bn, 64)), ARCH)


@pytest.mark.parametrize("field, value", [("warps", (2, 2)), ("smem_layout", "pad"), ("smem_layout", "plain"),
                                          ("frag_double_buffer", False)])
def test_shared_fields_the_tcgen05_kernel_has_no_use_for_are_refused_not_ignored(field, value):
    """warps, smem_layout and frag_double_buffer shape the mma.sync kernels; the tcgen05 kernel's
    warps are fixed roles and its stages TMA's swizzled ones, so any other value is refused."""
    with pytest.raises(ScheduleError) as e:
        verify(G, tc(**{field: value}), ARCH)
    assert e.value.field == f"schedule.{field}", str(e.value)
    verify(G, tc(), ARCH)
    assert tc().warps == (4, 1) and tc().smem_layout == "swizzle"


def test_fast_accum_which_the_tcgen05_kernel_has_no_use_for_is_refused():
    """fast_accum picks sm_90a's fp8 promotion; the tcgen05 kernel has one fp8 accumulation."""
    fast = Gemm(512, 512, 512, dtype="e4m3", fast_accum=True)
    with pytest.raises(ScheduleError) as e:
        verify(fast, tc(), ARCH)
    assert e.value.field == "gemm.fast_accum" and "drop fast_accum" in e.value.fix
    verify(dataclasses.replace(fast, fast_accum=False), tc(), ARCH)
