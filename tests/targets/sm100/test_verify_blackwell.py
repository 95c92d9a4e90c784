"""The sm_100a rules (ptxgen/targets/sm100/verify.py): each refusal names the field and the rule,
and the fix it gives is accepted; what is not built (CTA pairs, batches, split-K) is refused
with a LoweringNotBuilt whose fix compiles."""
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
    (G, tc((128, 256, 64), cta_group=2), "schedule.cta_group"),
    (Gemm(256, 256, 256, batch=2, a_layout="row", b_layout="col"), tc(), "gemm.batch"),
    (G, tc(split_k=2), "schedule.split_k"),
    (G, tc(decomposition="stream-k"), "schedule.decomposition"),
])
def test_what_is_not_built_is_refused_with_a_fix_that_compiles(g, s, field):
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, s, arch=ARCH)
    assert e.value.field == field
    fixed = dataclasses.replace(s, cta_group=1, split_k=1, decomposition="tiles")
    one = dataclasses.replace(g, batch=1)
    assert ".target sm_100a" in ptxgen.compile(one, fixed, arch=ARCH).ptx


def test_clusters_are_not_a_tcgen05_field():
    with pytest.raises(TypeError, match="cluster"):
        tc(cluster=(2, 1))
