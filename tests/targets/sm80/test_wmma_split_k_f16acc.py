"""The wmma path with split-K (workspace and atomic) and with f16 accumulation, on the simulator.

Split-K partials leave wmma's opaque fragments through wmma.store.d to the global workspace and
come back through wmma.load.c; atomic mode adds the staged tile with red.global.add.f32. f16
accumulation keeps f16 C/D fragments and stages them as f16 (wmma.store.d ... .f16).
"""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.schedule.geometry import staging_layout
from tests import harness

SIZES = [1, 7, 17, 63, 100, 129]
#: N and K also take multiples of 8, so 16-byte aligned rows (8-element f16 drain chunks) come up.
ALIGNED = SIZES + [64, 72]
EPILOGUES = [None, Epilogue(alpha=2.0), Epilogue(alpha=0.5, beta=1.0, bias="col", activation="gelu"),
             Epilogue(bias="row", activation="relu"), Epilogue(beta=-0.5, activation="silu")]
SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def simulate(g: Gemm, s: Schedule, seed: int = 0) -> ptxgen.Kernel:
    """The harness's check: a NaN-poisoned C (zeroed per tile for atomic mode) against float64."""
    return harness.check(g, s, seed=seed, bound=False).kernel


def draw_schedule(data, **fixed) -> Schedule:
    """A wmma schedule in the rules' grain: a warp grid of 16x16-instruction warp tiles no larger than
    32x32 (a 64x64 wmma warp tile needs about 280 registers), so the verifier rarely refuses it."""
    warps = data.draw(st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2)]), label="warps")
    bm, bn = (w * data.draw(st.sampled_from([16, 32]), label=x) for w, x in zip(warps, ("warp tile M", "warp tile N")))
    return Schedule(block=(bm, bn, data.draw(st.sampled_from([16, 32]), label="BK")),
                    warps=warps,
                    instruction="wmma", smem_layout=data.draw(st.sampled_from(["pad", "plain"]), label="smem"),
                    stages=data.draw(st.integers(1, 3), label="stages"),
                    frag_double_buffer=data.draw(st.booleans(), label="dbuf"), **fixed)


def legal(g: Gemm, s: Schedule) -> None:
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)


@SETTINGS
@given(st.data())
def test_wmma_split_k_matches_numpy(data):
    dtype = data.draw(st.sampled_from(["f16", "bf16"]), label="dtype")
    mode = data.draw(st.sampled_from(["workspace", "atomic"]), label="mode")
    split_k = data.draw(st.integers(2, 4), label="split_k")
    s = draw_schedule(data, split_k=split_k, split_k_mode=mode)
    # Every split needs a k-tile: K of at least split_k k-tiles (an edge k-tile included).
    k = data.draw(st.sampled_from([x for x in ALIGNED if x > (split_k - 1) * s.bk] + [split_k * s.bk + 7]), label="K")
    atomic = mode == "atomic"  # sums straight into C: an f32 output and a linear epilogue
    g = Gemm(data.draw(st.sampled_from(SIZES), label="M"), data.draw(st.sampled_from(ALIGNED), label="N"),
             k, dtype=dtype,
             out_dtype="f32" if atomic else data.draw(st.sampled_from(["f32", "f32", "f16", "bf16"]), label="out"),
             a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"),
             epilogue=data.draw(st.sampled_from(EPILOGUES[:2] if atomic else EPILOGUES), label="epilogue"),
             batch=data.draw(st.sampled_from([1, 1, 2]), label="batch"))
    legal(g, s)
    simulate(g, s)


@SETTINGS
@given(st.data())
def test_wmma_f16_accumulation_matches_numpy(data):
    g = Gemm(data.draw(st.sampled_from(SIZES), label="M"), data.draw(st.sampled_from(ALIGNED), label="N"),
             data.draw(st.sampled_from(ALIGNED), label="K"), dtype="f16", out_dtype="f16",
             acc_dtype="f16", a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"),
             epilogue=data.draw(st.sampled_from(EPILOGUES), label="epilogue"))
    s = draw_schedule(data)
    legal(g, s)
    simulate(g, s)


@pytest.mark.parametrize("g,s", [
    (Gemm(100, 72, 300, out_dtype="bf16", batch=2, epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col",
                                                                   activation="gelu")),
     Schedule(block=(64, 64, 32), warps=(2, 2), instruction="wmma", smem_layout="pad", split_k=3)),
    (Gemm(63, 129, 100, dtype="bf16", a_layout="col", b_layout="row"),
     Schedule(block=(32, 64, 16), warps=(1, 2), instruction="wmma", smem_layout="plain", split_k=4, stages=1)),
    (Gemm(129, 100, 129, epilogue=Epilogue(alpha=-2.0)),
     Schedule(block=(64, 32, 32), warps=(2, 1), instruction="wmma", smem_layout="pad", split_k=3,
              split_k_mode="atomic")),
], ids=["workspace-batch-epilogue", "workspace-bf16-layouts", "atomic-alpha-edges"])
def test_wmma_split_k_cases(g, s):
    k = simulate(g, s)
    ops = re.findall(r"^\s+(wmma\.\w+\.\w+)\S*?\.(global|shared)", k.ptx, re.M)
    blocks = (s.warp_tile[0] // 16) * (s.warp_tile[1] // 16)
    if s.split_k_mode == "workspace":
        assert ops.count(("wmma.store.d", "global")) == blocks, "one partial store per fragment"
        assert ops.count(("wmma.load.c", "global")) == blocks, "one partial load per fragment, in the loop"
    else:
        assert not any(space == "global" for _, space in ops) and "red.relaxed.gpu.global.add.f32" in k.ptx
    assert ops.count(("wmma.store.d", "shared")) == blocks


# Output alignment picks the drain's chunk: 8 f16 (16 B), 4 (8 B), 2 (4 B) or 1, each read from
# the f16 staging tile with one ld.shared of that width.
@pytest.mark.parametrize("g,read", [
    (Gemm(128, 128, 64, dtype="f16", out_dtype="f16", acc_dtype="f16"), "ld.shared.v4.b32"),
    (Gemm(100, 36, 60, dtype="f16", out_dtype="f16", acc_dtype="f16", epilogue=Epilogue(bias="col")),
     "ld.shared.v2.b32"),
    (Gemm(100, 34, 62, dtype="f16", out_dtype="f16", acc_dtype="f16", epilogue=Epilogue(alpha=0.5, beta=1.0)),
     "ld.shared.b32"),
    (Gemm(17, 7, 129, dtype="f16", out_dtype="f16", acc_dtype="f16", a_layout="col",
          epilogue=Epilogue(bias="row", activation="gelu")), "ld.shared.b16"),
], ids=["16B", "8B", "4B", "2B"])
def test_wmma_f16_accumulation_cases(g, read):
    s = Schedule(block=(64, 64, 32), warps=(2, 2), instruction="wmma", smem_layout="pad")
    k = simulate(g, s)
    mmas = re.findall(r"wmma\.mma\.sync\.aligned\.\w+\.\w+\.m16n16k16\.f16\.f16 \{([^}]*)\}", k.ptx)
    assert mmas and all(len(d.split(",")) == 4 for d in mmas), "f16 C/D fragments: 4 x .b32 (f16x2)"
    assert len(re.findall(r"wmma\.store\.d\.sync\.aligned\.row\.m16n16k16\.shared\.f16 .*, 80;", k.ptx)) == 4
    st_ = staging_layout(g, s)
    assert st_.elem_bytes == 2 and st_.pitch == 64 * 2 + 32 and k.smem_plan.offsets["C_stage"] == 0
    assert re.search(rf"^\s+{re.escape(read)} ", k.ptx, re.M)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("g,s", [
    (Gemm(512, 512, 1024, out_dtype="f16", epilogue=Epilogue(bias="col", activation="gelu")),
     Schedule(block=(128, 128, 32), warps=(2, 4), instruction="wmma", smem_layout="pad", split_k=4)),
    (Gemm(512, 512, 1024), Schedule(block=(128, 128, 32), warps=(2, 4), instruction="wmma", smem_layout="pad",
                                    split_k=3, split_k_mode="atomic")),
    (Gemm(512, 512, 512, dtype="f16", out_dtype="f16", acc_dtype="f16", epilogue=Epilogue(alpha=0.5, beta=1.0)),
     Schedule(block=(128, 128, 32), warps=(2, 2), instruction="wmma", smem_layout="pad", stages=4)),
], ids=["workspace", "atomic", "f16acc"])
def test_wmma_split_k_and_f16_acc_assemble_without_spills(g, s, arch):
    r = ptxgen.compile(g, s, arch).resources
    assert r.spill_bytes == 0 and r.stack_bytes == 0, str(r)
    assert 0 < r.registers <= 255


@pytest.mark.parametrize("g,s,field", [
    (Gemm(64, 64, 256, dtype="f16", out_dtype="f16", acc_dtype="f16"),
     Schedule(block=(64, 64, 32), instruction="wmma", smem_layout="pad", split_k=2), "schedule.split_k"),
    (Gemm(64, 64, 256, dtype="bf16", out_dtype="f16", acc_dtype="f16"),
     Schedule(block=(64, 64, 32), instruction="wmma", smem_layout="pad"), "gemm.acc_dtype"),
    (Gemm(64, 64, 256, out_dtype="f16"),
     Schedule(block=(64, 64, 32), instruction="wmma", smem_layout="pad", split_k=2, split_k_mode="atomic"),
     "schedule.split_k_mode"),
], ids=["f16acc-split-k", "bf16-f16acc", "atomic-f16-out"])
def test_wmma_rules_that_remain(g, s, field):
    with pytest.raises(ScheduleError) as info:
        ptxgen.verify(g, s)
    assert info.value.field == field and info.value.fix
