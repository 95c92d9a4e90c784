"""The sm_100a cluster and CTA-pair rules (ptxgen/targets/sm100/verify_cluster.py, verify.py):
each refusal names the field and the rule, and the fix it gives is accepted; a legal pair the
lowering does not build is refused with a LoweringNotBuilt whose fix compiles."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.schedule.verify import verify
from ptxgen.targets.sm100.plan import sm100_plan

ARCH = "sm_100a"
G = Gemm(1024, 1024, 512, dtype="f16", a_layout="row", b_layout="col")


def tc(block=(256, 256, 64), **kw) -> Schedule:
    return Schedule(block=block, instruction="tcgen05", **kw)


@pytest.mark.parametrize("g, s, field, words, fixed", [
    (G, tc((192, 128, 64), cta_group=2), "schedule.block.BM", "pair's M = 128 or 256", tc((256, 128, 64), cta_group=2)),
    (G, tc((256, 264, 64), cta_group=2), "schedule.block.BN", "from 16 to 256", tc((256, 256, 64), cta_group=2)),
    (G, tc((256, 24, 64), cta_group=2), "schedule.block.BN", "multiple of 16", tc((256, 16, 64), cta_group=2)),
    (G, tc(cta_group=2, cluster=(1, 2)), "schedule.cluster", "CM must be even", tc(cta_group=2, cluster=(2, 1))),
    (G, tc(cta_group=2, cluster=(3, 1)), "schedule.cluster", "differ in bit 0", tc(cta_group=2, cluster=(2, 1))),
    (G, tc((128, 128, 64), cluster=(4, 4)), "schedule.cluster", "1 to 8 CTAs", tc((128, 128, 64), cluster=(2, 1))),
    (G, tc((128, 128, 64), cluster=(2, 1), raster="grouped", group_m=3), "schedule.group_m", "multiple of 2",
     tc((128, 128, 64), cluster=(2, 1), raster="grouped", group_m=4)),
    (G, tc(cta_group=2, sms=3), "schedule.sms", "sms=2", tc(cta_group=2, sms=2)),
    (G, tc((128, 16, 64), cluster=(4, 1)), "schedule.block.BN", "multiple of 32", tc((128, 32, 64), cluster=(4, 1))),
    (Gemm(1024, 1024, 512, a_layout="col", b_layout="col"), tc((128, 128, 32), cluster=(1, 8)), "schedule.block.BK",
     "multiple of 64", tc((128, 128, 64), cluster=(1, 8))),
    (G, tc(cta_group=2, stages=8), "schedule.stages", "per CTA of the pair", tc(cta_group=2, stages=7)),
])
def test_each_rule_names_the_field_and_its_fix_is_accepted(g, s, field, words, fixed):
    with pytest.raises(ScheduleError) as e:
        verify(g, s, ARCH)
    assert e.value.field == field and words in str(e.value), str(e.value)
    verify(g, fixed, ARCH)


def test_the_stage_fix_for_a_pair_is_the_number_the_message_gives():
    with pytest.raises(ScheduleError) as e:
        verify(G, tc(cta_group=2, stages=8), ARCH)
    # 6 x (128 + 128) x 64 x 2 B per CTA and the TMA-store epilogue's 32 KB of staging fit the 227 KB
    assert "use stages=6" in str(e.value)
    verify(G, tc(cta_group=2, stages=6), ARCH)


def test_a_pair_keeps_tensor_memory_within_512_columns_with_two_buffers():
    """Each CTA holds BM/2 rows and all BN columns: BN = 256 double-buffered is the whole 512."""
    for bn, buffers, columns in ((256, 2, 512), (128, 2, 256), (48, 2, 128)):
        plan = sm100_plan(G, tc((256, bn, 64), cta_group=2))
        assert (plan.acc_buffers, plan.tmem_columns) == (buffers, columns)
        assert (plan.a_stage, plan.b_stage) == (128 * 64 * 2, -(-bn // 2 * 64 * 2 // 1024) * 1024)


def test_defaults_pick_the_pair_cluster_and_keep_clusters_off_otherwise():
    assert tc(cta_group=2).cluster == (2, 1) and tc((128, 256, 64)).cluster == (1, 1)
    assert Schedule(block=(128, 128, 64), instruction="wgmma", cluster=(2, 1)).cluster == (2, 1)   # sm_90a's own field
    verify(G, tc(cta_group=2), ARCH)


@pytest.mark.parametrize("s, field", [
    (tc(cta_group=2, cluster=(4, 1)), "schedule.cluster"),
    (tc((128, 128, 64), cta_group=2), "schedule.block.BM"),
])
def test_pairs_not_built_are_refused_with_a_fix_that_compiles(s, field):
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(G, s, arch=ARCH)
    assert e.value.field == field, str(e.value)
    fixed = tc((256, s.bn, 64), cta_group=2, cluster=(2, 1))
    assert "tcgen05.mma.cta_group::2" in ptxgen.compile(G, fixed, arch=ARCH).ptx
