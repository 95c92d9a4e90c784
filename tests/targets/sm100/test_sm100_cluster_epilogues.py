"""Clusters and CTA pairs (targets/sm100/cluster.py, cta_pair.py) together with the TMA-store
epilogue (epilogue_tma.py), batched walks and the static tile walk (tile_scheduler.py): each CTA
of a cluster stores its own tile through its staging boxes, each CTA of a pair its BM/2 rows;
beta's C is read by TMA per CTA; a batched GEMM's cluster walk covers batch x cluster tiles, the
batch outermost, the batch the third coordinate of the multicast and pair copies. Proven on the
simulator against float64 numpy (never-zero inputs, poisoned C); cluster launch control with a
cluster is refused (test_verify_blackwell.py)."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import Epilogue, Schedule

from tests import harness
from tests.targets.sm100.common import tc, tn

ARCH = "sm_100a"
FUSED = Epilogue(alpha=0.5, beta=-1.0, bias="col", scale="row", activation="silu")


def tma_store(k: ptxgen.Kernel) -> bool:
    return "global.shared::cta.tile.bulk_group" in k.ptx and [m.param for m in k.tensor_maps][-1] == "tmapC"


@pytest.mark.parametrize("g, s", [
    (tn(200, 136, 40, "bf16", "bf16", epilogue=FUSED), tc((128, 32, 32), cluster=(2, 1))),
    (tn(136, 200, 40, epilogue=FUSED), tc((128, 32, 32), cluster=(1, 2))),
    (tn(300, 72, 40, "bf16", "bf16", epilogue=FUSED), tc((256, 32, 32), cta_group=2)),
    (tn(260, 136, 40, "f16", "f16", batch=2, epilogue=Epilogue(beta=1.0, bias="col")),
     tc((128, 32, 32), cluster=(2, 1))),
    (tn(72, 136, 40, batch=3), tc((64, 32, 32), cluster=(1, 2))),
    (tn(300, 40, 40, "bf16", "bf16", batch=2, epilogue=Epilogue(alpha=2.0, beta=0.5)), tc((256, 32, 32), cta_group=2)),
    (tn(260, 136, 40, "bf16", "bf16", batch=2, epilogue=Epilogue(beta=1.0, bias="row")),
     tc((128, 64, 32), sms=4, cluster=(2, 2))),
    (tn(520, 100, 72, batch=2), tc((256, 32, 32), 3, sms=4, cta_group=2, raster="grouped", group_m=2)),
], ids=["c2x1-fused-beta", "c1x2-fused-beta", "pair-fused-beta", "c2x1-batched-beta", "c1x2-m64-batched",
        "pair-batched-beta", "c2x2-batched-beta", "2pairs-grouped-batched"])
def test_cluster_and_pair_kernels_store_by_tma_and_match_numpy(g, s):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert tma_store(k) and f".reqnctapercluster {s.cluster[0] * s.cluster[1]}, 1, 1" in k.ptx
    if g.batch > 1:   # the batch is the third coordinate of every copy, multicast and pair copies included
        assert "cp.async.bulk.tensor.3d" in k.ptx and "cp.async.bulk.tensor.2d" not in k.ptx
    harness.check(k, seed=g.m + g.batch)


@pytest.mark.parametrize("s", [tc((128, 32, 32), cluster=(2, 1), epilogue_via_smem=False),
                               tc((256, 32, 32), cta_group=2, epilogue_via_smem=False)], ids=["c2x1", "pair"])
def test_direct_stores_with_clusters_and_batches_match_numpy(s):
    g = tn(260, 72, 40, "bf16", "bf16", batch=2, epilogue=Epilogue(alpha=0.5, beta=1.0, bias="row"))
    k = ptxgen.compile(g, s, arch=ARCH)
    assert not tma_store(k) and [m.param for m in k.tensor_maps] == ["tmapA", "tmapB"]
    harness.check(k, seed=3)


def test_the_combined_kernels_assemble_without_spills(monkeypatch):
    """ptxas -arch=sm_100a takes the combinations this merge made possible: a CTA pair with the
    fused TMA-store epilogue, MXFP8/NVFP4 in multicast clusters, a batched 2x2 cluster, and an
    int8 pair dequantised to f32, each with no spills."""
    from ptxgen import BlockScale
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    mx, nv = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0"), BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")
    big = 4096
    cases = [
        (tn(big, big, big, "bf16", "bf16", epilogue=Epilogue(beta=1.0, bias="col", activation="gelu")),
         Schedule(block=(256, 256, 64), instruction="tcgen05", cta_group=2)),
        (tn(big, big, big, "e4m3", "bf16", block_scale=mx), Schedule(block=(128, 256, 128), instruction="tcgen05",
                                                                      stages=4, cluster=(2, 1))),
        (tn(big, big, big, "e2m1", "bf16", block_scale=nv), Schedule(block=(128, 128, 256), instruction="tcgen05",
                                                                      stages=4, cluster=(1, 2))),
        (tn(2048, 2048, 2048, "f16", "f16", batch=4), Schedule(block=(128, 128, 64), instruction="tcgen05", stages=4,
                                                               cluster=(2, 2))),
        (tn(big, big, big, "s8", "f32"), Schedule(block=(256, 128, 128), instruction="tcgen05", stages=4, cta_group=2)),
    ]
    for g, s in cases:
        k = ptxgen.compile(g, s, arch=ARCH)
        r = asm.assemble(k.ptx, ARCH, k.entry)
        assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, (k.entry, r.resources)
