"""Masked MXFP8 grouped GEMMs on sm_100a (targets/sm100/grouped.py with scales.py): each group's
128x4 scale blocks stacked along the row blocks (runtime/scale_layout.py `kernel_scales` with
groups), the producer adding group * ceil(rows / 128) to SFA's and SFB's block coordinate. Proven on
the simulator against the float64 group-by-group product (random never-zero per-group scales over
four decades, so another group's scales show; poisoned C; rows past masked_m[g] required
untouched); the planted bug of every group reading group 0's scales caught; the block-scaled
grouped GEMMs not built refused naming why and a fix."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule
from ptxgen.check import check_simulated, random_operands
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.runtime.scale_layout import kernel_scales, logical_scales, stacked_shapes
from ptxgen.schedule.block_scale import random_grouped_scales

ARCH = "sm_100a"
MX = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")
NV = BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")


def masked(max_m, n, k, groups, dtype="e4m3", out="bf16", **kw) -> Gemm:
    return Gemm(max_m, n, k, dtype=dtype, out_dtype=out, groups=groups, grouping="masked", block_scale=MX, **kw)


def tc(block, sms=2, **kw) -> Schedule:
    """A small persistent grid: one CTA walks several groups' tiles."""
    return Schedule(block=block, instruction="tcgen05", sms=sms, **kw)


def run(k: ptxgen.Kernel, counts, seed: int = 3):
    """The simulator's comparison of kernel `k` with random operands, per-group scales and `counts`."""
    g = k.gemm
    a, b = random_operands(g, seed)
    sa, sb = random_grouped_scales(g.block_scale, g, seed + 4)
    assert sa.min() >= 1 and sb.min() >= 1 and sa.max() - sa.min() >= 10   # never 2^-127 nor NaN; decades apart
    bias = np.random.default_rng(seed).uniform(-1, 1, g.n).astype(np.float32) if g.epi.bias else None
    return check_simulated(k, a, b, bias=bias, masked_m=np.array(counts, np.int32), scale_a=sa, scale_b=sb)


CASES = [
    # empty, full, partial (not a multiple of 128) and two-tile slots; K = 304: a partial k-tile and a
    # partial 32-group; BN 64 (B-scale column offsets 0 and 2 of the block); 8 tiles on 2 CTAs
    (masked(200, 128, 304, 4), tc((128, 64, 128)), [0, 200, 77, 130]),
    # e5m2, BN 128 over N = 200 (two B-scale row blocks per group), a column bias, one CTA walking all
    (masked(130, 200, 160, 3, "e5m2", "f32", epilogue=Epilogue(bias="col")), tc((128, 128, 128), sms=1),
     [130, 0, 5]),
    # BK 256 (two K blocks per k-tile), five groups, max_m a multiple of 128
    (masked(128, 64, 512, 5, out="f16"), tc((128, 64, 256), sms=3), [128, 1, 0, 100, 128]),
    # BN 256 over N = 200: the SFB box's two row blocks reach into the next group's (B's rows there are
    # zero-filled past N, so those scales multiply zeros)
    (masked(100, 200, 128, 3, out="f32"), tc((128, 256, 128)), [100, 60, 33]),
]


@pytest.mark.parametrize("g, s, counts", CASES, ids=["e4m3-bn64-k-edge", "e5m2-bn128-bias", "bk256-five-groups",
                                                     "bn256-past-n"])
def test_masked_mxfp8_groups_match_the_reference(g, s, counts):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert k.grid[0] <= s.sms and "kind::mxf8f6f4.block_scale" in k.ptx
    result = run(k, counts)
    assert result.ok, str(result)


def test_the_stacked_layout_holds_each_groups_blocks_in_turn():
    """Group i's blocks are rows i * ceil(rows/128) .. of the stacked array (what the kernel's group
    term addresses), with the shapes the tensor maps are made with."""
    g = masked(200, 72, 160, 3)
    sa, sb = random_grouped_scales(g.block_scale, g, 1)
    fa, fb = kernel_scales(g.block_scale, sa, sb, g.groups)
    assert (fa.shape, fb.shape) == stacked_shapes(g) == ((6, 4, 256), (3, 4, 256))
    for i in range(g.groups):
        assert (logical_scales(fa[2 * i:2 * i + 2], g.m, 5) == sa[i]).all()
        assert (logical_scales(fb[i:i + 1], g.n, 5) == sb[i].T).all()


def _drop_group_term(ptx: str, name: str) -> str:
    """The PTX with `name`'s group term multiplied by 0: every group reads group 0's scales."""
    pattern = re.compile(rf"(mad\.lo\.u32 [^,]+, [^,]+, )\d+(, [^;]+;\s+// {name}: \+ group)")
    planted, count = pattern.subn(r"\g<1>0\g<2>", ptx)
    assert count == 1, f"{count} {name} group terms in the PTX"
    return planted


@pytest.mark.parametrize("name", ["SFA", "SFB"])
def test_every_group_reading_group_0s_scales_fails(name):
    g, s = masked(150, 128, 128, 3), tc((128, 128, 128))
    k = ptxgen.compile(g, s, arch=ARCH)
    counts = [150, 90, 128]
    assert run(k, counts).ok
    result = run(dataclasses.replace(k, ptx=_drop_group_term(k.ptx, name)), counts)
    assert not result.ok and result.bad > 0 and result.stray == 0, str(result)


@pytest.mark.parametrize("g, field, why", [
    (Gemm(256, 64, 128, dtype="e4m3", groups=2, grouping="contiguous", block_scale=MX), "gemm.grouping",
     "128 rows x 4 K-groups"),
    (Gemm(256, 64, 128, dtype="e2m1", groups=2, grouping="masked", block_scale=MX), "gemm.dtype", "fp4 grouped"),
    (Gemm(256, 64, 128, dtype="e2m1", groups=2, grouping="masked", block_scale=NV), "gemm.dtype", "fp4 grouped"),
    (Gemm(256, 64, 128, dtype="e4m3", b_dtype="e5m2", groups=2, grouping="masked", block_scale=MX), "gemm.b_dtype",
     "mixed fp8"),
], ids=["contiguous", "mxfp4", "nvfp4", "mixed-fp8"])
def test_block_scaled_groups_not_built_are_refused_naming_why_and_the_fix(g, field, why):
    with pytest.raises(ScheduleError) as e:
        ptxgen.compile(g, tc((128, 64, 128)), arch=ARCH)
    assert e.value.field == field and why in str(e.value), str(e.value)
    assert isinstance(e.value, LoweringNotBuilt) == (field != "gemm.dtype")   # fp4: the grouped input rule
    if field == "gemm.dtype":   # the fix keeps the block scales: MXFP8, masked
        assert "dtype='e4m3'" in str(e.value) and "grouping='masked'" in str(e.value), str(e.value)
        fixed = dataclasses.replace(g, dtype="e4m3", block_scale=MX)
        ptxgen.compile(fixed, tc((128, 64, 128)), arch=ARCH)
    if field == "gemm.grouping":   # the fixes named: masked here, or the sm_90a grouped kernel
        msg = str(e.value)
        assert "grouping='masked'" in msg and "arch='sm_90a'" in msg and "1x128 f32" in msg, msg
        ptxgen.compile(dataclasses.replace(g, grouping="masked"), tc((128, 64, 128)), arch=ARCH)
