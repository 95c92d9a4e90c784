"""The fp8/int8 and block-scaled kinds (targets/sm100/kinds.py, scales.py) together with clusters,
CTA pairs, the TMA-store epilogue and batched walks: MXFP8 and NVFP4 in multicast clusters (each
CTA TMA-loads and tcgen05.cp-copies its own rows' scales, A and B shared by multicast), fp8 and
int8 on a CTA pair, s32 accumulators dequantised through the TMA store, a batched fp8 cluster
walk. Proven on the simulator against float64 numpy (never-zero inputs and scales, poisoned C);
block scaling of a batched GEMM is refused by the Gemm itself (block scaling on a CTA pair:
test_sm100_pair_block_scaled.py)."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Schedule
from ptxgen.check import check_simulated, random_epilogue_operands, random_operands
from ptxgen.errors import ScheduleError
from ptxgen.schedule.block_scale import random_block_scales

from tests import harness
from tests.targets.sm100.common import tc, tn

ARCH = "sm_100a"
MX = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")
NV = BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")


def tma_store(k: ptxgen.Kernel) -> bool:
    return "global.shared::cta.tile.bulk_group" in k.ptx


@pytest.mark.parametrize("g, s", [
    (tn(200, 136, 256, "e4m3", "bf16", block_scale=MX, epilogue=Epilogue(beta=0.5)), tc((128, 64, 128), cluster=(2, 1))),
    (tn(136, 200, 256, "e4m3", "f32", block_scale=MX), tc((128, 64, 128), cluster=(1, 2))),
    (tn(200, 136, 256, "e2m1", "f16", block_scale=NV), tc((128, 64, 128), cluster=(2, 1))),
], ids=["mxfp8-c2x1-beta", "mxfp8-c1x2", "nvfp4-c2x1"])
def test_block_scaled_kinds_in_multicast_clusters_match_the_reference(g, s):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert tma_store(k) and ".reqnctapercluster 2, 1, 1" in k.ptx and "tcgen05.cp" in k.ptx
    assert [m.param for m in k.tensor_maps] == ["tmapA", "tmapB", "tmapSFA", "tmapSFB", "tmapC"]
    a, b = random_operands(g, 1)
    c, bias = random_epilogue_operands(g, 2)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=3)
    res = check_simulated(k, a, b, c, bias, scale_a=sa, scale_b=sb)
    assert res.ok, res


@pytest.mark.parametrize("g, s, stores", [
    (tn(300, 72, 96, "e4m3", "bf16"), tc((256, 32, 32), cta_group=2), "tma"),
    (tn(300, 72, 96, "s8", "s32"), tc((256, 32, 64), cta_group=2), "direct"),           # s32 keeps its bits
    (tn(136, 72, 96, "s8", "f32", epilogue=Epilogue(alpha=0.5, beta=1.0)), tc((128, 32, 64)), "tma"),  # dequantised
    (tn(200, 72, 96, "e4m3", "f16", batch=2), tc((128, 32, 32), cluster=(2, 1)), "tma"),
    (tn(136, 72, 96, "u8", "bf16", batch=2), Schedule(block=(128, 32, 64), instruction="tcgen05", tile_scheduler="clc"),
     "tma"),
], ids=["fp8-pair", "s8-pair-s32", "s8-f32-tma-beta", "fp8-c2x1-batched", "u8-clc-batched"])
def test_fp8_and_int8_with_pairs_clusters_and_the_tma_store_match_numpy(g, s, stores):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert tma_store(k) == (stores == "tma")
    harness.check(k, seed=g.m)


def test_block_scaling_of_a_batched_gemm_is_refused_by_the_gemm():
    with pytest.raises(ScheduleError) as e:
        tn(200, 72, 256, "e4m3", "f16", batch=2, block_scale=MX)
    assert e.value.field == "gemm.block_scale" and "batch=1" in str(e.value)
