"""Block-scaled fp8 on sm_90a (schedule/block_scale.py, targets/sm90/block_scales.py): the
simulated kernels against the float64 block-by-block reference (never-zero inputs, scales over
four orders of magnitude, poisoned C, elementwise `compare`), the run-time scale checks, the
refusals, and planted bugs caught."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import ptxgen
from ptxgen import BlockScale, Gemm, Schedule
from ptxgen.check import check_simulated, compare, magnitude, random_operands, reference
from ptxgen.errors import ScheduleError
from ptxgen.sim.errors import HazardError
from ptxgen.schedule.block_scale import random_block_scales, scaled_product
from ptxgen.targets.sm90.block_scales import BlockScales
from ptxgen.targets.sm90.choose import hopper_register_need

ARCH = "sm_90a"
BS = BlockScale()


def wg(block, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", **kw)


def simple(block, stages=2, **kw) -> Schedule:
    """The non-specialised kernel, one CTA per tile."""
    return wg(block, stages=stages, warp_specialized=False, persistent=False, consumers=1, **kw)


def gemm(m, n, k, dtype="e4m3", out="f32", bs=BS) -> Gemm:
    return Gemm(m, n, k, dtype=dtype, out_dtype=out, block_scale=bs)


def simulate_checked(g: Gemm, s: Schedule, seed: int = 0, transform=lambda sa, sb: (sa, sb)):
    k = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=seed + 7)
    ref_sa, ref_sb = sa, sb
    sa, sb = transform(sa, sb)
    res = check_simulated(k, a, b, scale_a=sa, scale_b=sb)
    # the comparison really is against the block-scaled product, not the plain one
    plain = compare(k.simulate(a, b, scale_a=sa, scale_b=sb), reference(a, b), g)
    assert not plain.ok, "the scales changed nothing: the test would not see them"
    assert np.allclose(reference(a, b, block_scale=g.block_scale, scale_a=ref_sa, scale_b=ref_sb),
                       scaled_product(a, b, g.block_scale, ref_sa, ref_sb))
    return res


# -- against float64, block by block ----------------------------------------------------------------
@pytest.mark.parametrize("g, s", [
    # warp-specialised persistent, two consumers, K % 128 != 0, M and N edges, 3 tiles per CTA
    (gemm(200, 192, 336, out="bf16"), wg((128, 64, 128), consumers=2, stages=3, sms=2)),
    # BK 64: two k-tiles per scale block; e5m2, one consumer, f32 out
    (gemm(130, 136, 400, dtype="e5m2"), wg((64, 64, 64), consumers=1, stages=2, sms=3)),
    # BK 256: two promotions (and two K-blocks) per k-tile, the last one partial; f16 out
    (gemm(96, 64, 592, out="f16"), simple((64, 64, 256), 2)),
    # BN 32 (four tiles share one n-block of sb), one stage
    (gemm(70, 100, 208, out="bf16"), simple((64, 32, 128), 1)),
    # a (2, 1) cluster with multicast: 3 tile rows rounded up to 4, the fourth CTA's rows past M (clamped scales)
    (gemm(150, 128, 256, out="f16"), wg((64, 64, 128), consumers=1, stages=2, cluster=(2, 1), sms=2)),
], ids=["ws-2consumers-edges", "ws-bk64-e5m2", "simple-bk256", "simple-bn32", "ws-cluster"])
def test_block_scaled_kernels_match_the_reference(g, s):
    res = simulate_checked(g, s)
    assert res.ok, res


def test_ue8m0_scales_and_transposed_storage():
    """Power-of-two scales as biased exponents, sa passed as the transpose of its M-contiguous
    (Kb, M) storage and sb column-major: the kernel reads both through their strides."""
    g = gemm(136, 128, 272, bs=BlockScale(dtype="ue8m0"))
    transposed = (lambda sa, sb: (np.ascontiguousarray(sa.T).T, np.asfortranarray(sb)))
    res = simulate_checked(g, wg((64, 64, 128), consumers=1, stages=2, sms=2), transform=transposed)
    assert res.ok, res


# -- what is emitted ------------------------------------------------------------------------------
def test_the_promotion_multiplies_by_the_scales():
    g = gemm(256, 256, 512, out="bf16")
    s = wg((128, 128, 128), consumers=2, stages=3)
    ptx = ptxgen.compile(g, s, arch=ARCH).ptx
    plain = ptxgen.compile(dataclasses.replace(g, block_scale=None), s, arch=ARCH).ptx
    assert "block-scaled fp8 promotion" in ptx and "block-scaled fp8 promotion" in ptx.splitlines()[1]
    assert len(re.findall(r"fma\.rn\.f32 (%f\d+), %f\d+, %f\d+, \1;", ptx)) == 64   # one per accumulator register
    assert ".param .u64 scale_a" in ptx and ".param .u32 sb_n_stride" in ptx
    assert "scale_a" not in plain and "block scales" not in plain
    loop = ptx.split("$L_main_loop:")[1].split("main_loop_done")[0]
    assert loop.index("block scales of k-tile kt") < loop.index("mbarrier.try_wait")   # loads before the wait


def test_the_register_model_counts_the_scale_registers():
    g = gemm(4096, 4096, 4096, out="bf16")
    s = wg((128, 128, 128), consumers=2)
    # 2 rows of sa + 1 n-block of sb: 3 pointers (6 registers) and 2 factors
    assert hopper_register_need(g, s) - hopper_register_need(dataclasses.replace(g, block_scale=None), s) == 8


# -- refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("s, arch, field", [
    (wg((64, 96, 128), consumers=1), ARCH, "schedule.block.BN"),
    (wg((64, 64, 96), consumers=1), ARCH, "schedule.block.BK"),
    (simple((64, 64, 64), 2, split_k=2), ARCH, "gemm.block_scale"),
    (Schedule(block=(64, 64, 32)), "sm_90", "gemm.block_scale"),
])
def test_schedules_not_built_are_refused(s, arch, field):
    with pytest.raises(ScheduleError) as e:
        ptxgen.compile(gemm(128, 192, 256), s, arch=arch)
    assert e.value.field == field and e.value.fix


def test_run_time_scales_are_checked():
    g = gemm(64, 64, 256)
    k = ptxgen.compile(g, wg((64, 64, 128), consumers=1, stages=2), arch=ARCH)
    a, b = random_operands(g)
    sa, sb = random_block_scales(BS, 64, 64, 256)
    with pytest.raises(ValueError, match="pass scale_a="):
        k.simulate(a, b, scale_b=sb)
    with pytest.raises(ValueError, match=r"\(64, 2\)"):
        k.simulate(a, b, scale_a=sa[:, :1], scale_b=sb)
    with pytest.raises(TypeError, match="dtype f32"):
        k.simulate(a, b, scale_a=sa.astype(np.float64), scale_b=sb)
    plain = ptxgen.compile(dataclasses.replace(g, block_scale=None), wg((64, 64, 128), consumers=1), arch=ARCH)
    with pytest.raises(ValueError, match="not block-scaled"):
        plain.simulate(a, b, scale_a=sa, scale_b=sb)
    k8 = ptxgen.compile(gemm(64, 64, 256, bs=BlockScale(dtype="ue8m0")), wg((64, 64, 128), consumers=1), arch=ARCH)
    with pytest.raises(ValueError, match="1..254"):
        k8.simulate(a, b, scale_a=np.zeros((64, 2), np.uint8), scale_b=np.full((2, 1), 127, np.uint8))


def test_compare_bound_follows_the_scales():
    """The bound is |A||B| block by block times |sa||sb|: a 1% error on the largest block fails."""
    g = gemm(64, 64, 256)
    a, b = random_operands(g)
    sa, sb = random_block_scales(BS, 64, 64, 256)
    kw = dict(block_scale=BS, scale_a=sa, scale_b=sb)
    ref = reference(a, b, **kw)
    bound = magnitude(a, b, **kw)
    assert compare(ref.astype(np.float32), ref, g, bound=bound).ok
    assert not compare((ref * 1.01).astype(np.float32), ref, g, bound=bound).ok


# -- planted bugs ------------------------------------------------------------------------------------
def _wrong_slice(self, kt, chunk, k_block=BlockScales.k_block):
    from ptxgen.ir import Imm
    from ptxgen.ir import ops as ptx
    from ptxgen.ir.ops import B32
    return ptx.xor(self.ctx.b, B32, k_block(self, kt, chunk), Imm("1"))   # K-blocks 0 <-> 1, 2 <-> 3


def _per_k_tile(self, kt, chunk):
    return kt                                                                # kb = kt, not kt * BK / 128


def _transposed_sb(self, base, index, stride, pointer=BlockScales._pointer):
    swap = {"sb_k_stride": "sb_n_stride", "sb_n_stride": "sb_k_stride"}
    return pointer(self, base, index, swap.get(stride, stride))


def _sa_as_sb(self, chunk, frag, reg, factor=BlockScales.factor):
    f = factor(self, chunk, frag, reg)
    return self.factors[chunk][(0, 0)] if reg % 2 else f                     # a row's factor on another's


@pytest.mark.parametrize("plant", [("k_block", _wrong_slice), ("k_block", _per_k_tile),
                                   ("_pointer", _transposed_sb), ("factor", _sa_as_sb)],
                         ids=["wrong-k-slice", "per-k-tile-not-per-block", "sb-transposed", "wrong-row-factor"])
def test_planted_bugs_are_caught(monkeypatch, plant):
    g = gemm(128, 256, 512)           # 4 K-blocks, 2 n-blocks: every plant reads in bounds but wrongly
    monkeypatch.setattr(BlockScales, *plant)
    try:
        res = simulate_checked(g, wg((64, 64, 64), consumers=1, stages=2, sms=2))
    except HazardError as e:  # kb = kt reads past sb's last K-block: the simulator names it
        assert plant[1] is _per_k_tile and "out-of-bounds" in str(e) and "scale_" in str(e), e
        return
    assert not res.ok
