"""The BK rule follows the instruction each dtype actually issues: mma.sync m16n8k16 (f16/bf16),
m16n8k8 (tf32), m16n8k32 (s8/u8), wmma m16n16k16. tf32 with BK=8 (one k-step per k-tile) is lowered
and computes the right product."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, ScheduleError
from ptxgen.check import random_operands
from tests import harness


@pytest.mark.parametrize("dtype,out,bk,k", [("tf32", "f32", 4, 8), ("tf32", "f32", 12, 8), ("f16", "f32", 8, 16),
                                          ("bf16", "f32", 24, 16), ("s8", "s32", 16, 32), ("u8", "s32", 48, 32)])
def test_bk_rule_names_the_dtypes_instruction(dtype, out, bk, k):
    shape = f"m16n8k{k}"
    with pytest.raises(ScheduleError, match=rf"schedule\.block\.BK={bk}: BK is not a multiple of {k}, the k of "
                                            rf"the mma\.sync {shape} that {dtype} inputs issue: make BK a multiple "
                                            rf"of {k}"):
        ptxgen.verify(Gemm(64, 64, 64, dtype=dtype, out_dtype=out), Schedule(block=(64, 64, bk)))


def test_wmma_bk_rule_names_wmma():
    with pytest.raises(ScheduleError, match=r"not a multiple of 16, the k of the wmma m16n16k16"):
        ptxgen.verify(Gemm(64, 64, 64), Schedule(block=(64, 64, 8), instruction="wmma", smem_layout="pad"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_tf32_one_k_step_per_k_tile_matches_numpy(data):
    """BK=8 is one m16n8k8 per k-tile: 32-byte tile rows (two 16-byte chunks), edges in M, N and K."""
    g = Gemm(data.draw(st.sampled_from([1, 17, 33, 64]), label="M"), data.draw(st.sampled_from([8, 40, 64]), label="N"),
             data.draw(st.sampled_from([1, 8, 29, 64]), label="K"), dtype="tf32",
             a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"))
    s = Schedule(block=(64, 64, 8), warps=data.draw(st.sampled_from([(1, 1), (2, 2), (2, 1)]), label="warps"),
                 stages=data.draw(st.integers(1, 4), label="stages"),
                 smem_layout=data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                 split_k=data.draw(st.sampled_from([1, 2]), label="split_k"),
                 frag_double_buffer=data.draw(st.booleans(), label="dbuf"))
    try:
        k = ptxgen.compile(g, s)
    except ScheduleError as e:  # only split-K on a K of one k-tile may be refused
        assert e.field == "schedule.split_k" and g.k <= 8, str(e)
        return
    assert "m16n8k8" in k.ptx
    a, b = random_operands(g, 3)
    harness.check(k, ops=harness.Operands(a, b))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tf32_bk8_assembles_without_spills(arch):
    r = ptxgen.compile(Gemm(4000, 4000, 4000, dtype="tf32", a_layout="col"), Schedule(block=(128, 128, 8)), arch).resources
    assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0, str(r)
