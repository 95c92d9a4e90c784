"""The wmma path: wmma.load / wmma.mma / wmma.store m16n16k16, opaque fragments, staged epilogue."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from tests import harness


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_wmma_matches_numpy(data):
    g = Gemm(data.draw(st.sampled_from([16, 64, 100, 128]), label="M"),
             data.draw(st.sampled_from([16, 64, 72, 128]), label="N"),
             data.draw(st.sampled_from([16, 33, 64]), label="K"),
             dtype=data.draw(st.sampled_from(["f16", "bf16"]), label="dtype"),
             out_dtype=data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
             a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"),
             epilogue=data.draw(st.sampled_from([None, Epilogue(bias="col", activation="relu"),
                                                 Epilogue(alpha=2.0, beta=0.5)]), label="epilogue"))
    s = Schedule(block=(64, 64, 32), warps=data.draw(st.sampled_from([(1, 1), (2, 2), (2, 1)]), label="warps"),
                 instruction="wmma", smem_layout=data.draw(st.sampled_from(["pad", "plain"]), label="smem"),
                 stages=data.draw(st.integers(1, 3), label="stages"),
                 frag_double_buffer=data.draw(st.booleans(), label="dbuf"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    k = ptxgen.compile(g, s)
    harness.check(k, bound=False)


def test_wmma_kernel_structure():
    g = Gemm(256, 256, 128)
    s = Schedule(block=(128, 128, 32), warps=(4, 2), instruction="wmma", smem_layout="pad")
    k = ptxgen.compile(g, s)
    ops = re.findall(r"^\s+(wmma\.\w+)", k.ptx, re.M)
    # per k-tile: 2 k-steps x (2 A + 4 B loads, 8 mma); epilogue: 8 stores into the staging tile
    assert ops.count("wmma.load") == 2 * (2 + 4) and ops.count("wmma.mma") == 2 * 8
    assert ops.count("wmma.store") == 8
    assert not re.search(r"^\s+mma\.sync", k.ptx, re.M) and "ldmatrix" not in k.ptx
    assert k.entry.endswith("_wmma")
    assert k.smem_plan.offsets["C_stage"] == 0
    r = k.resources
    assert r.spill_bytes == 0


@pytest.mark.parametrize("sched,field", [
    (Schedule(block=(64, 64, 32), instruction="wmma", smem_layout="swizzle"), "schedule.smem_layout"),
    (Schedule(block=(64, 64, 32), instruction="wmma", smem_layout="pad", epilogue_via_smem=False),
     "schedule.epilogue_via_smem"),
    (Schedule(block=(64, 56, 32), warps=(1, 1), instruction="wmma", smem_layout="pad"), "schedule.block"),
])
def test_wmma_rules(sched, field):
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(Gemm(64, 64, 64), sched)
    assert info.value.field == field


def test_wmma_defaults_are_the_layout_and_warps_it_supports():
    """smem_layout=None and warps=None resolve per instruction: wmma gets "pad" (wmma.load reads
    plain strided rows) and 2x4 warps (a 128x128 tile's opaque fragments do not fit 4 warps'
    registers); mma.sync keeps "swizzle" and 2x2. The Schedule holds, prints and compares the
    resolved values, and a default wmma Schedule compiles and computes the right product."""
    s = Schedule(block=(128, 128, 32), instruction="wmma")
    assert (s.smem_layout, s.warps) == ("pad", (2, 4))
    assert s == Schedule(block=(128, 128, 32), warps=(2, 4), instruction="wmma", smem_layout="pad")
    assert "smem_layout='pad'" in repr(s) and "warps=(2, 4)" in repr(s)
    m = Schedule(block=(128, 128, 32))
    assert (m.smem_layout, m.warps) == ("swizzle", (2, 2)) and m == Schedule(block=(128, 128, 32), warps=(2, 2),
                                                                              smem_layout="swizzle")
    g = Gemm(100, 72, 33, epilogue=Epilogue(alpha=2.0, bias="col"))
    k = ptxgen.compile(g, s)
    assert k.schedule.smem_layout == "pad" and "smem pad" in k.ptx and k.block == (256, 1, 1)
    harness.check(k, bound=False)


def test_small_wmma_tile_with_default_warps_is_pointed_at_fewer_warps():
    with pytest.raises(ScheduleError, match=r"warp tile 16x8 is not a multiple of the mma shape 16x16 "
                                            r"\(wmma m16n16k16\): .* \(e\.g\. warps=\(2, 2\)\)"):
        ptxgen.verify(Gemm(64, 64, 64), Schedule(block=(32, 32, 32), instruction="wmma"))
    ptxgen.verify(Gemm(64, 64, 64), Schedule(block=(32, 32, 32), warps=(2, 2), instruction="wmma"))
