"""Clusters and CTA pairs on the sm_100a kernel (ptxgen/targets/sm100/cluster.py, cta_pair.py):
cta_group=1 clusters share A along CN and B along CM by TMA multicast, each stage released by one
multicast tcgen05.commit of every CTA that reads it; cta_group=2 runs the pair's MMA from the
leader CTA, A split along M and B along N, commits multicast to both CTAs. Proven on the simulator
against float64 numpy (never-zero inputs, poisoned C) over edges in M, N and K, persistent walks of
several tiles per CTA or pair, both operand majors; planted bugs (a pair's commit that reaches one
CTA only, a stage refilled before the MMAs reading it committed) must be reported."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, sim
from ptxgen.errors import ScheduleError
from ptxgen.schedule.verify import verify
from ptxgen.targets.sm100.plan import sm100_plan

from tests import harness
from tests.targets.sm100.common import GELU, tc, tn

ARCH = "sm_100a"


@pytest.mark.parametrize("g, s", [
    (tn(300, 200, 72), tc((128, 64, 32), cluster=(2, 1))),                         # B multicast; 6 cluster tiles on 1 cluster
    (tn(200, 300, 72, "bf16", "bf16"), tc((128, 64, 32), 3, cluster=(1, 2))),      # A multicast, odd tile count (padding CTA)
    (tn(260, 260, 40), tc((128, 64, 32), 2, sms=4, cluster=(2, 2))),                # both multicast, 4-CTA cluster
    (Gemm(136, 200, 72, a_layout="col", b_layout="row"), tc((128, 64, 32), cluster=(1, 2))),  # MN-major slices (along K)
    (tn(260, 140, 40), tc((128, 32, 32), 2, sms=2, cluster=(2, 1), raster="grouped", group_m=2)),
    (tn(300, 200, 72), tc((256, 64, 32), cta_group=2)),                             # pair: 4 pair tiles on one pair
    (tn(520, 136, 104, "bf16", "bf16"), tc((256, 128, 64), 3, sms=4, cta_group=2)),  # 2 pairs, edges, 3 stages
    (Gemm(296, 136, 72, a_layout="col", b_layout="row", out_dtype="f16"), tc((256, 128, 64), cta_group=2)),  # MN-major pair
    (tn(260, 72, 36, "tf32"), tc((256, 32, 32), cta_group=2)),                      # tf32 pair, N 32 (16 per CTA)
    (tn(600, 100, 40), tc((256, 16, 32), 4, cta_group=2, raster="grouped", group_m=2)),  # BN 16: 8 B columns per CTA
], ids=["c2x1", "c1x2-bf16", "c2x2", "c1x2-mn-major", "c2x1-grouped", "pair", "pair-2pairs", "pair-mn-major",
        "pair-tf32", "pair-bn16-grouped"])
def test_cluster_and_pair_gemms_match_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.m + g.n + g.k)


@pytest.mark.parametrize("s", [tc((256, 32, 32), cta_group=2), tc((128, 32, 32), cluster=(2, 1))], ids=["pair", "c2x1"])
def test_fused_epilogue_matches_numpy(s):
    harness.check(tn(300, 40, 48, "f16", "bf16", epilogue=GELU), s, ARCH, seed=7)


def test_the_default_pair_schedule_compiles_and_assembles_without_spills(monkeypatch):
    """Only block, instruction and cta_group given: a (2, 1) cluster, the rest defaults; every
    tcgen05 instruction is .cta_group::2; ptxas -arch=sm_100a assembles it with no spills."""
    from ptxgen.runtime import assemble as asm

    s = Schedule(block=(256, 256, 64), instruction="tcgen05", cta_group=2)
    assert s.cluster == (2, 1) and s.warps == (4, 1)
    g = Gemm(4096, 4096, 4096, dtype="bf16", out_dtype="bf16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, s, arch=ARCH)
    assert k.cluster_dims == (2, 1, 1) and k.grid == (148, 1, 1) and ".reqnctapercluster 2, 1, 1" in k.ptx
    groups = re.findall(r"tcgen05\.(?:mma|commit|alloc|dealloc|relinquish_alloc_permit)\.(cta_group::\d)", k.ptx)
    assert len(groups) >= 6 and set(groups) == {"cta_group::2"}
    assert "tcgen05.mma.cta_group::2.kind::f16" in k.ptx and "multicast::cluster.b64" in k.ptx
    plan = sm100_plan(g, s)
    assert plan.mma == (256, 256, 16) and plan.tmem_columns == 512 and plan.acc_buffers == 2
    assert plan.idesc >> 24 & 0x1F == 256 >> 4 and plan.idesc >> 17 & 0x3F == 256 >> 3   # the pair's M and N
    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources


def test_a_multicast_cluster_assembles_without_spills(monkeypatch):
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    k = ptxgen.compile(tn(4096, 4096, 4096, "bf16", "bf16"), tc((128, 256, 64), 4, sms=None, cluster=(2, 2)), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources


def test_cluster_grids_are_whole_clusters_of_the_tiles():
    g = tn(1000, 1000, 64)
    assert ptxgen.compile(g, tc((128, 128, 64), sms=None, cluster=(2, 2)), arch=ARCH).grid == (64, 1, 1)
    assert ptxgen.compile(g, tc((256, 128, 64), sms=None, cta_group=2), arch=ARCH).grid == (64, 1, 1)
    assert ptxgen.compile(tn(4096, 4096, 64), tc((128, 128, 64), sms=None, cluster=(2, 2)), arch=ARCH).grid == (148, 1, 1)


# -- planted bugs ------------------------------------------------------------------------------------
PLANT_G = tn(300, 136, 136)   # 5 k-tiles over a 2-stage ring: every stage is refilled
PAIR = tc((256, 64, 32), cta_group=2)
CLUSTER = tc((128, 64, 32), cluster=(1, 2))


def _compile(s: Schedule):
    return ptxgen.compile(PLANT_G, s, arch=ARCH)


def _one_cta_commit(ptx: str, comment: str) -> str:
    """The pair's multicast commit carrying `comment` replaced by one that arrives only on the
    committing (leader) CTA's barrier."""
    pattern = re.compile(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster\.multicast::cluster\.b64 "
                         r"(\[[^\]]*\]), %h\d+; // " + re.escape(comment))
    bad, n = pattern.subn(r"tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 \1; // planted", ptx)
    assert n == 1, comment
    return bad


def test_the_unplanted_kernels_are_right():
    for s in (PAIR, CLUSTER):
        assert harness.run(_compile(s)).ok


@pytest.mark.parametrize("comment, barrier", [("the tile's accumulator is complete", "acc_full"),
                                              ("the stage is free once these MMAs completed", "empty")])
def test_a_pair_commit_that_reaches_one_cta_only_is_caught(comment, barrier):
    """The leader's commit names only its own barrier: the peer CTA (rank 1) waits on its acc_full
    (its epilogue) or its empty barrier (its producer, refilling the ring) for an arrival that
    never comes; the simulator reports that wait instead of hanging."""
    k = _compile(PAIR)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=_one_cta_commit(k.ptx, comment))
    plan = sm100_plan(PLANT_G, PAIR)
    assert e.value.kind == "deadlock" and "CTA (1, 0, 0)" in str(e.value), e.value
    assert f"shared {getattr(plan, barrier):#x}" in str(e.value)   # the ring's base is at offset 0 here


def _release_before_the_mmas(ptx: str) -> str:
    """The stage's commit moved before the k-tile's MMAs: it covers only the earlier ones, so the
    producers refill the stage while the MMAs reading it are in flight."""
    lines = ptx.split("\n")
    j = next(i for i, line in enumerate(lines) if "the stage is free once these MMAs completed" in line)
    release = lines[j - 2:j + 1]   # the barrier's address (shl, add) and the commit
    assert release[0].split()[0] == "shl.b32" and release[1].split()[0] == "add.u32", release
    wait = max(i for i in range(j) if lines[i].startswith("$L_wait_full"))
    fence = next(i for i in range(wait, j) if "tcgen05.fence::after_thread_sync" in lines[i])
    return "\n".join(lines[:fence + 1] + release + lines[fence + 1:j - 2] + lines[j + 1:])


@pytest.mark.parametrize("s", [PAIR, CLUSTER], ids=["pair", "c1x2"])
def test_a_stage_refilled_before_its_mmas_committed_is_caught(s):
    """Pair: the peer's producer refills its half of the stage while the leader's MMAs still read
    it. Cluster: a CTA's multicast refills the stage while the MMAs reading it are in flight."""
    k = _compile(s)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=_release_before_the_mmas(k.ptx))
    # the simulator names the in-flight tensor-core read with its wgmma wording (one counter serves both)
    assert e.value.kind == "async-pending" and "still in flight reads" in e.value.detail
    assert "cp.async.bulk.tensor" in e.value.detail


def test_a_cluster_commit_that_skips_the_peers_is_caught():
    """The cluster's stage commit without .multicast::cluster arrives on this CTA's empty barrier
    only: each empty barrier counts a commit from both CTAs of the cluster row, so the producers
    wait forever once the ring wraps (and the MMA warps on the stages never filled)."""
    k = _compile(CLUSTER)
    pattern = re.compile(r"(tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster)\.multicast::cluster"
                         r"(\.b64 \[[^\]]*\]), %h\d+; // the stage is free")
    bad, n = pattern.subn(r"\1\2; // planted", k.ptx)
    assert n == 1
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=bad)
    assert e.value.kind == "deadlock" and "mbarrier.try_wait" in str(e.value), e.value   # the CTAs wait on each other


# -- a small property test over the cluster and pair schedule space ----------------------------------
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_cluster_and_pair_schedules_match_numpy(data):
    """Shapes with edges (M, N, K not multiples of the block; rows kept 16-byte aligned for TMA),
    either major, f16/bf16/tf32, 1 to 3 stages, clusters 2x1/1x2 (cta_group=1) or the pair, 1 or 2
    persistent clusters (so several tiles each), row or grouped raster."""
    dtype = data.draw(st.sampled_from(["f16", "bf16", "tf32"]), label="dtype")
    esize = 4 if dtype == "tf32" else 2
    step = 16 // esize
    pair = data.draw(st.booleans(), label="pair")
    m = step * data.draw(st.integers(2, 80 if pair else 40), label="m")
    n, k = (step * data.draw(st.integers(2, 24), label=d) for d in "nk")
    majors = ("row", "col") if dtype == "tf32" else tuple(data.draw(st.sampled_from(["row", "col"]), label=x)
                                                          for x in ("A", "B"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
             a_layout=majors[0], b_layout=majors[1])
    bn = data.draw(st.sampled_from([16, 32, 64, 128]), label="BN")
    bk = data.draw(st.sampled_from([32, 64]), label="BK") // (esize // 2)
    cluster = (2, 1) if pair else data.draw(st.sampled_from([(2, 1), (1, 2)]), label="cluster")
    s = tc((256 if pair else 128, bn, bk), stages=data.draw(st.integers(1, 3), label="stages"),
           sms=2 * data.draw(st.integers(1, 2), label="clusters"), cta_group=2 if pair else 1, cluster=cluster,
           raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"), group_m=2)
    try:
        verify(g, s, ARCH)
    except ScheduleError:
        assume(False)
    harness.check(g, s, ARCH, seed=m * n + k)
