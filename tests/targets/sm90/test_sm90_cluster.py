"""Thread-block clusters on the warp-specialised persistent sm_90a kernel (ptxgen/targets/sm90/cluster.py):
the CTAs of a (CM, CN) cluster walk cluster tiles in lockstep, each loads 1/CM of the shared B box
(1/CN of A) and multicasts it, every consumer warp releases a stage on every CTA it came from, and
cluster barriers guard the barrier inits and the exit. Proven on the simulator (which runs whole
clusters: distributed shared memory, multicast, remote arrivals) against float64 numpy with
never-zero inputs and a NaN-poisoned C; planted protocol bugs must be reported, not pass or hang."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, sim
from ptxgen.check import Comparison, random_operands
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.targets.sm90.plan import persistent_ctas
from ptxgen.schedule.verify import verify, verify_rules
from ptxgen.simulate import cta_tiles

from tests import harness

from .test_sm90_gemm import tn
from .test_sm90_ws import GELU, draw_ws_case

ARCH = "sm_90a"


def cl(block, cluster, stages=3, consumers=1, sms=2, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, consumers=consumers, cluster=cluster,
                    sms=sms, **kw)



# -- numerics -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("g, s", [
    pytest.param(tn(300, 200, 200), cl((64, 64, 64), (2, 1))),                            # 5 m-tiles: an odd count, edges M/N/K
    pytest.param(tn(200, 300, 136), cl((64, 64, 64), (1, 2))),                            # 5 n-tiles
    pytest.param(Gemm(336, 136, 72, a_layout="col", b_layout="col"), cl((64, 64, 32), (2, 1), stages=4)),   # A MN-major
    (Gemm(200, 304, 200, a_layout="col", b_layout="row"), cl((64, 64, 64), (1, 2), stages=2)),  # both MN-major
    pytest.param(Gemm(136, 264, 104, a_layout="row", b_layout="row"), cl((64, 64, 64), (1, 2))),            # B MN-major
    pytest.param(tn(264, 136, 136, "bf16", "bf16"), cl((128, 64, 64), (2, 1), consumers=2, stages=4)),      # 2 consumers
    pytest.param(tn(136, 520, 72, "f16", "f16"), cl((128, 128, 64), (1, 2), consumers=2, stages=2)),        # 2 consumers
    (tn(300, 200, 200), cl((64, 64, 64), (2, 1), stages=1)),                  # one stage: release after wait 0
    pytest.param(tn(392, 264, 64), cl((64, 64, 64), (2, 1), sms=4, raster="grouped", group_m=4)),
    (Gemm(200, 136, 136, a_layout="row", b_layout="col", epilogue=GELU), cl((64, 64, 64), (1, 2), sms=4)),
    pytest.param(tn(300, 200, 136), cl((64, 64, 64), (2, 1), multicast=False)),            # clusters for scheduling only
    pytest.param(tn(200, 200, 128), cl((64, 64, 64), (2, 2), sms=4)),                      # both operands multicast
    pytest.param(tn(520, 72, 64), cl((64, 64, 64), (4, 1), sms=4)),                        # quarters of B
], ids=["2x1-odd-m", "1x2-odd-n", "2x1-tt", "1x2-nt", "1x2-nn", "2x1-2c-bf16", "1x2-2c", "2x1-s1",
        "2x1-grouped", "1x2-gelu", "2x1-no-multicast", "2x2", "4x1"])
def test_cluster_gemm_matches_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.m + g.n + g.k)


def test_cluster_kernel_declares_its_cluster_and_multicasts_half_of_b():
    g = tn(512, 512, 256)
    k = ptxgen.compile(g, cl((128, 256, 64), (2, 1), consumers=2, sms=None), arch=ARCH)
    ptx = k.ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx and k.cluster_dims == (2, 1, 1)
    assert k.grid == (persistent_ctas(g, k.schedule, 132), 1, 1) and k.grid[0] % 2 == 0
    # B's tensor map box is half the B tile (128 of 256 rows); A's is whole
    assert [t.box for t in k.tensor_maps if t.operand != "C"] == [(128, 64), (128, 64)]
    assert ptx.count("mbarrier::complete_tx::bytes.multicast::cluster") == 1      # B: one box per stage, halved
    assert "fence.mbarrier_init.release.cluster;" in ptx
    assert ptx.count("barrier.cluster.arrive") == 3   # after the inits, and at each role's exit
    assert "mapa.shared::cluster.u32" in ptx and "mbarrier.arrive.shared::cluster.b64" in ptx
    # the production forms (CUTLASS's ClusterBarrier): the cluster-scoped release/acquire halved the
    # kernel's speed on an H200 (docs/ptx_facts/clusters.md §9f)
    assert ".release.cluster.shared::cluster" not in ptx and ".acquire.cluster" not in ptx
    assert re.search(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\+?\d*\], 16;", ptx)  # 8 consumer warps x 2 CTAs
    assert "%clusterid.x" in ptx and "%nclusterid.x" in ptx
    unshared = ptxgen.compile(g, cl((128, 256, 64), (2, 1), consumers=2, multicast=False), arch=ARCH)
    assert "multicast::cluster" not in unshared.ptx and "barrier.cluster" not in unshared.ptx
    assert ".reqnctapercluster 2, 1, 1" in unshared.ptx


def test_one_cluster_computes_exactly_its_tiles():
    """Asking for CTA 0 runs its whole cluster (CTAs 0 and 1): their tiles, as simulate.cta_tiles
    says, are written, everything else stays NaN. 5 x 3 tiles, cluster (2, 1): 3 x 3 cluster tiles
    (the last row half past M), 2 clusters walking them."""
    g = tn(300, 192, 64)
    k = ptxgen.compile(g, cl((64, 64, 64), (2, 1), sms=4), arch=ARCH)
    a, b = random_operands(g, 2)
    c = k.simulate(a, b, ctas=[(0, 0, 0)])
    want = np.zeros((5, 3), bool)
    for cta in ((0, 0, 0), (1, 0, 0)):
        for tm, tn_ in cta_tiles(k, cta):
            want[tm, tn_] = True
    assert want.sum() == 8     # cluster tiles 0, 2, 4 (and 6, half past M: tile (6, 0) only, rank 0's)
    written = ~np.isnan(np.pad(c, ((0, 20), (0, 0)), constant_values=np.nan))
    got = written.reshape(5, 64, 3, 64).any(axis=(1, 3))
    assert (got == want).all()
    _, result = harness.judge(g, c, harness.Operands(a, b), mask=~np.isnan(c))   # the cluster's tiles
    assert result.ok, str(result)


# -- issue 21: 10+ clusters, half-empty cluster tiles, batches ----------------------------------------
@pytest.mark.parametrize("g, s", [
    (Gemm(480, 264, 120, dtype="f16", out_dtype="f16"), cl((128, 64, 64), (1, 2), stages=2, sms=20)),  # 10 clusters
    (Gemm(512, 320, 128, dtype="f16", out_dtype="f16"), cl((128, 64, 64), (1, 2), stages=2, sms=24)),
    (Gemm(257, 176, 48, dtype="bf16", out_dtype="bf16", batch=2), cl((128, 64, 64), (1, 2), stages=5, sms=24)),
], ids=["480x264x120-sms20", "512x320x128-sms24", "257x176x48-batch2"])
def test_many_clusters_finish_at_the_exit_barrier(g, s):
    """Once 20+ CTAs ran, the simulator used to report a deadlock at the exit barrier.cluster.wait:
    each producer thread spun there while its consumers, parked beside it, waited for a turn the
    scheduler's deadlock count did not leave them. The kernel is right (every non-exited thread
    arrives: PTX ISA barrier.cluster); the simulator lets a failed barrier.cluster.wait yield."""
    assert ptxgen.compile(g, s, arch=ARCH).grid[0] >= 20
    harness.check(g, s, ARCH, seed=g.m + g.n)


def test_sampled_ctas_of_a_cluster_grid_are_whole_clusters_and_cover_what_they_write():
    """`ptxgen run`'s sample on a cluster grid: the simulator runs each sampled CTA's whole cluster,
    so the sample lists the peers and `covered` counts their tiles (it reported the peers' tiles as
    stray writes: "16432 elements outside the simulated CTAs' tiles were written")."""
    from ptxgen.check import unwritten
    from ptxgen.simulate import covered, sample_ctas

    g = Gemm(480, 264, 120, dtype="f16", out_dtype="f16")
    k = ptxgen.compile(g, cl((128, 64, 64), (1, 2), stages=2, sms=20), arch=ARCH)
    ctas = sample_ctas(k)
    assert ctas is not None and len(ctas) < k.grid[0]
    assert {x for x, _, _ in ctas} == {x ^ 1 for x, _, _ in ctas}          # both ranks of each cluster
    assert (covered(k, [(19, 0, 0)]) == covered(k, [(18, 0, 0), (19, 0, 0)])).all()
    a, b = random_operands(g, 3)
    c = k.simulate(a, b, ctas=[ctas[-1]])                                 # one CTA asked, its cluster runs
    mask = covered(k, [ctas[-1]])
    assert (~unwritten(c) == mask).all()
    assert harness.judge(g, c, harness.Operands(a, b), mask=mask)[1].ok


# -- property test over the cluster space -------------------------------------------------------------
@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data())
def test_cluster_schedules_match_numpy(data):
    """Warp-specialised persistent schedules with a drawn cluster and multicast; the verifier
    rejects what is illegal (a multicast slice off a swizzle atom, sms not whole clusters)."""
    g, s = draw_ws_case(data, persistent=True)
    cluster = data.draw(st.sampled_from(((2, 1), (1, 2), (2, 2), (4, 1))), label="cluster")
    size = cluster[0] * cluster[1]
    bn = data.draw(st.sampled_from((16, 32, 48, 64, 128)), label="BN (multicast-friendly)")
    s = s.__class__(**{**s.__dict__, "cluster": cluster, "block": (s.bm, bn, s.bk),
                       "multicast": data.draw(st.sampled_from((True, True, False)), label="multicast"),
                       "sms": data.draw(st.sampled_from((size, 2 * size, 2 * size, 3)), label="sms"),
                       "group_m": data.draw(st.sampled_from((4, 8)), label="group_m")})
    try:
        verify(g, s, ARCH)
    except ScheduleError as e:
        assert not isinstance(e, LoweringNotBuilt), e   # the drawn space is built
        event(f"rejected: {e.field}")
        return
    event(f"cluster {cluster}, multicast {s.multicast}")
    harness.check(g, s, ARCH, seed=g.m * g.n + g.k)


# -- planted bugs the simulator must catch ------------------------------------------------------------
G_PLANT = tn(256, 128, 512)


def _plant_kernel(cluster=(2, 1), epilogue_via_smem=None):
    return ptxgen.compile(G_PLANT, cl((128, 64, 64), cluster, stages=2, consumers=2, sms=2,
                                      epilogue_via_smem=epilogue_via_smem), arch=ARCH)


def _run(ptx: str, k) -> Comparison:
    """Launch `ptx` (k's, or a planted variant) through sim.launch; C against float64 numpy."""
    g = k.gemm
    a, b = random_operands(g, 7)
    c = np.full((g.m, g.n), np.nan, np.float32)
    maps = [sim.TensorMap(v, t.box, swizzle=t.swizzle) for v, t in zip((a, b.T, c), k.tensor_maps)]
    sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=[*maps, c, g.m, g.n, g.k, g.n],
               dynamic_smem=k.smem_bytes)
    return harness.judge(g, c, harness.Operands(a, b))[1]


def _without(ptx: str, *markers: str, lines_removed: int | None = None) -> str:
    lines = ptx.split("\n")
    bad = "\n".join(line for line in lines if not any(m in line for m in markers))
    assert len(bad.split("\n")) == len(lines) - (lines_removed or len(markers)), markers
    return bad


@pytest.mark.parametrize("cluster", [(2, 1), (1, 2)])
def test_the_unplanted_cluster_kernel_runs_through_sim_launch(cluster):
    k = _plant_kernel(cluster)
    assert _run(k.ptx, k).ok


def test_consumers_releasing_only_their_own_cta_is_caught(monkeypatch):
    """Each CTA's consumers arrive only on their own empty barrier (counted for them alone): a
    producer refills a stage its multicast peer is still reading, or has not read yet. The
    deadlock form of a missing remote release is caught (test_missing_remote_release_is_a_deadlock).
    Caught since issue 21's ordering model (sim/async_order.py): the refill writes bytes whose last
    TMA load the peer's threads are not ordered after."""
    from ptxgen.emit import mbarrier_isa as mb
    from ptxgen.targets.sm90.cluster import ClusterRoles

    def own_only(self, lane, empty):
        return (self.ops.pred("setp.eq.u32", lane, 0),
                mb.mapa(self.b, empty, self.rank, comment="only my own CTA (planted)"))

    monkeypatch.setattr(ClusterRoles, "release_targets", own_only)
    monkeypatch.setattr(ClusterRoles, "barrier_counts", lambda self, warps: warps)
    k = _plant_kernel()
    assert "only my own CTA (planted)" in k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(k.ptx, k)
    assert e.value.kind in ("async-pending", "race"), e.value


def test_missing_remote_release_is_a_deadlock():
    """Only lane 0 of each consumer warp arrives (on its column's rank 0): rank 1's empty barriers
    never complete and its producer waits forever; reported, not hung."""
    k = _plant_kernel()
    bad = re.sub(r"(setp\.lt\.u32 %p\d+, %r\d+, )2;", r"\g<1>1;", k.ptx)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind in ("deadlock", "race"), e.value


def test_missing_cluster_barrier_at_exit_is_caught():
    """Without the exit barrier a CTA leaves while its peer still releases stages on its empty
    barriers (or multicasts into it): the simulator reports the access to an exited CTA. With
    direct stores: the simulator runs a cluster's CTAs round-robin, and the TMA-store epilogue's
    longer tail lets the peer's last releases land before the exit, hiding the bug."""
    k = _plant_kernel(epilogue_via_smem=False)
    bad = _without(k.ptx, "done with the cluster: my releases", "every peer is done too",
                   lines_removed=4)   # the consumers' and the producer's exits
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert "exited" in e.value.detail, e.value


def test_missing_cluster_barrier_after_init_is_caught():
    """A peer may multicast into (or arrive on) barriers this CTA has not initialised yet."""
    k = _plant_kernel()
    bad = _without(k.ptx, "the cluster's barriers are initialised", "(also a CTA barrier")
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind == "race", e.value


def test_wrong_multicast_mask_is_caught():
    """B's ctaMask names only the issuing CTA: the peer's full barrier never receives that half of
    the stage's bytes, so its consumers wait forever (reported as a deadlock)."""
    k = _plant_kernel()
    lines = k.ptx.split("\n")
    at = next(i for i, line in enumerate(lines) if "ctaMask of B" in line)
    src = re.search(r"cvt\.u16\.u32 %h\d+, (%r\d+);", lines[at]).group(1)
    shl = next(i for i in range(at - 1, -1, -1) if re.match(rf"\s*shl\.b32 {re.escape(src)}, 3,", lines[i]))
    lines[shl] = lines[shl].replace(", 3,", ", 1,")
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(lines), k)
    assert e.value.kind == "deadlock", e.value


# -- what the verifier and the lowering accept ---------------------------------------------------------
def test_odd_tile_counts_are_legal_and_the_grid_is_whole_clusters():
    g = tn(300, 200, 200)                       # 5 x 4 tiles of 64: 3 x 4 cluster tiles of (2, 1)
    s = cl((64, 64, 64), (2, 1), sms=None)
    verify(g, s, ARCH)
    assert persistent_ctas(g, s, 132) == 24     # every cluster tile its cluster
    assert persistent_ctas(g, cl((64, 64, 64), (2, 1), sms=6), 132) == 6


def test_multicast_slice_must_be_whole_swizzle_atoms():
    g = Gemm(256, 256, 256, a_layout="row", b_layout="col")
    with pytest.raises(ScheduleError) as e:
        verify_rules(g, cl((64, 24, 64), (2, 1)), ARCH)      # B's 24 rows in halves of 12
    assert e.value.field == "schedule.block.BN" and "multiple of 16" in str(e.value)
    verify_rules(g, cl((64, 24, 64), (2, 1), multicast=False), ARCH)   # the other fix named
    verify_rules(g, cl((64, 64, 64), (1, 4), sms=4), ARCH)  # A's 64 rows in quarters of 16: fine
    mn = Gemm(256, 256, 256, a_layout="col", b_layout="col")   # A MN-major: its box rows run along K
    with pytest.raises(ScheduleError) as e:
        verify_rules(mn, cl((64, 64, 16), (1, 4), sms=4), ARCH)  # 16 rows of K in quarters of 4
    assert e.value.field == "schedule.block.BK" and "multiple of 32" in str(e.value)


@pytest.mark.parametrize("s, fix", [
    (cl((64, 64, 64), (2, 1), warp_specialized=False, sms=None, persistent=False), "warp_specialized=True"),
    (cl((64, 64, 64), (2, 1), persistent=False, sms=None), "persistent=True"),
])
def test_clusters_outside_the_persistent_ws_kernel_are_refused(s, fix):
    g = tn(256, 256, 128)
    verify_rules(g, s, ARCH)
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, s, arch=ARCH)
    assert e.value.field == "schedule.cluster" and fix in str(e.value) and "cluster=(1, 1)" in str(e.value)


# -- assembly ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block, stages, cluster", [((128, 128, 64), 4, (2, 1)), ((128, 256, 64), 3, (2, 1)),
                                                    ((128, 256, 64), 3, (1, 2))])
def test_cluster_kernels_assemble_without_spills(block, stages, cluster, monkeypatch):
    """Whole-program ptxas (setmaxnreg kept: the register count is the cap) and nvJitLink: no
    spills, no C7515 (serialised wgmma) or C7508."""
    from ptxgen.runtime import assemble as asm

    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=block, instruction="wgmma", stages=stages, cluster=cluster), arch=ARCH)
    ran = 0
    for tool, probe in (("ptxas", asm._ptxas_path() is not None), ("nvjitlink", isinstance(asm._nvjitlink_probe(), tuple))):
        if not probe:
            continue
        monkeypatch.setenv("PTXGEN_ASSEMBLER", tool)
        r = asm.assemble(k.ptx, ARCH, k.entry)
        assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, (tool, r.resources)
        log = r.log.lower()
        assert not any(code in log for code in ("c7508", "c7515", "c7509")), (tool, r.log)
        if tool == "ptxas":
            assert r.resources.registers == 168, r.resources
        ran += 1
    if not ran:
        pytest.skip("neither ptxas nor nvJitLink is installed")


def test_cli_runs_a_cluster_kernel_on_the_simulator(capsys):
    from ptxgen.cli.app import main

    argv = ["run", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "128x64x64", "--cluster", "2x1",
            "--sms", "2", "--shape", "300x136x104", "--sim"]
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "PASS" in out and "checked 9 of 9 tiles" in out and "Traceback" not in out + err
