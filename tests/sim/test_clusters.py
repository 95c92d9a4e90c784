"""Thread block clusters on the simulator: launch shapes and directives, the cluster special
registers, distributed shared memory (mapa + ld/st .shared::cluster), barrier.cluster, remote
mbarrier arrives and TMA multicast. Expected values are computed here from the PTX ISA's
definitions (rank = x + nx * (y + ny * z) inside the cluster), not from the simulator."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import line_of

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"
REGS = "    .reg .pred %p<8>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<16>;\n"


def module(body: str, directives: str = "", params: str = ".param .u64 pOut", shared: str = "") -> str:
    return (HEADER + shared + f".visible .entry k({params}){directives}\n{{\n" + REGS + body + "\n    ret;\n}\n")


# ------------------------------------------------------------------ special registers
SPECIALS = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %ctaid.z;
    mov.u32 %r4, %nctaid.x;
    mov.u32 %r5, %nctaid.y;
    mad.lo.u32 %r6, %r3, %r5, %r2;
    mad.lo.u32 %r6, %r6, %r4, %r1;
    mul.wide.u32 %rd2, %r6, 64;
    add.u64 %rd3, %rd1, %rd2;
    mov.u32 %r10, %cluster_ctaid.x;
    mov.u32 %r11, %cluster_ctaid.y;
    mov.u32 %r12, %cluster_ctaid.z;
    mov.u32 %r13, %cluster_nctaid.x;
    mov.u32 %r14, %cluster_nctaid.y;
    mov.u32 %r15, %cluster_nctaid.z;
    mov.u32 %r16, %clusterid.x;
    mov.u32 %r17, %clusterid.y;
    mov.u32 %r18, %clusterid.z;
    mov.u32 %r19, %nclusterid.x;
    mov.u32 %r20, %nclusterid.y;
    mov.u32 %r21, %nclusterid.z;
    mov.u32 %r22, %cluster_ctarank;
    mov.u32 %r23, %cluster_nctarank;
    selp.u32 %r24, 1, 0, %is_explicit_cluster;
    st.global.v4.u32 [%rd3], {%r10, %r11, %r12, %r13};
    st.global.v4.u32 [%rd3+16], {%r14, %r15, %r16, %r17};
    st.global.v4.u32 [%rd3+32], {%r18, %r19, %r20, %r21};
    st.global.v4.u32 [%rd3+48], {%r22, %r23, %r24, %r24};"""


def expected_specials(grid, dims, explicit: bool) -> np.ndarray:
    rows = []
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                c = (x % dims[0], y % dims[1], z % dims[2])
                rank = c[0] + dims[0] * (c[1] + dims[1] * c[2])
                rows.append([*c, *dims, x // dims[0], y // dims[1], z // dims[2],
                             grid[0] // dims[0], grid[1] // dims[1], grid[2] // dims[2],
                             rank, dims[0] * dims[1] * dims[2], int(explicit), int(explicit)])
    return np.array(rows, dtype=np.uint32)


@pytest.mark.parametrize("dims", [(1, 1, 1), (2, 1, 1), (4, 1, 1), (2, 2, 1), (1, 2, 2), (2, 2, 2), (1, 1, 2)])
def test_cluster_special_registers_for_several_shapes(dims):
    grid = (4, 2, 2)
    out = np.zeros((16, 16), dtype=np.uint32)
    sim.launch(module(SPECIALS), "k", grid=grid, block=(1,), args=[out], cluster=dims)
    assert out.tolist() == expected_specials(grid, dims, True).tolist()


def test_reqnctapercluster_sets_the_cluster_without_a_launch_argument():
    grid = (4, 2, 1)
    out = np.zeros((8, 16), dtype=np.uint32)
    sim.launch(module(SPECIALS, " .reqnctapercluster 2, 2, 1"), "k", grid=grid, block=(1,), args=[out])
    assert out.tolist() == expected_specials(grid, (2, 2, 1), True).tolist()
    out[:] = 0
    sim.launch(module(SPECIALS), "k", grid=grid, block=(1,), args=[out])     # implicit 1x1x1 clusters
    assert out.tolist() == expected_specials(grid, (1, 1, 1), False).tolist()


@pytest.mark.parametrize("directives, grid, cluster, kwargs, words", [
    ("", (6, 1, 1), (4, 1, 1), {}, "not divisible by cluster (4, 1, 1) along x"),
    ("", (4, 4, 1), (4, 4, 1), {}, "non-portable opt-in"),
    ("", (32, 1, 1), (32, 1, 1), {"non_portable_cluster": True}, "the limit is 16"),
    ("", (4, 1, 1), (0, 1, 1), {}, "positive integers"),
    (" .reqnctapercluster 2, 1, 1", (4, 1, 1), (4, 1, 1), {}, "requires .reqnctapercluster 2, 1, 1"),
    (" .explicitcluster", (4, 1, 1), None, {}, "must be launched with cluster dimensions"),
    (" .maxclusterrank 2", (4, 1, 1), (4, 1, 1), {}, ".maxclusterrank 2"),
    (" .reqnctapercluster 2, 1, 1 .maxclusterrank 2", (4, 1, 1), None, {}, "cannot both be given"),
])
def test_bad_cluster_launches_are_clear_errors(directives, grid, cluster, kwargs, words):
    with pytest.raises(ValueError) as e:
        sim.launch(module(SPECIALS, directives), "k", grid=grid, block=(1,), args=[np.zeros((64, 16), np.uint32)],
                   cluster=cluster, **kwargs)
    assert words in str(e.value)


def test_sixteen_cta_cluster_with_the_non_portable_opt_in():
    grid = (16, 1, 1)
    out = np.zeros((16, 16), dtype=np.uint32)
    sim.launch(module(SPECIALS), "k", grid=grid, block=(1,), args=[out], cluster=16, non_portable_cluster=True)
    assert out.tolist() == expected_specials(grid, (16, 1, 1), True).tolist()


def test_ctas_subset_runs_whole_clusters():
    out = np.zeros((8, 16), dtype=np.uint32)
    res = sim.launch(module(SPECIALS), "k", grid=(8, 1, 1), block=(1,), args=[out], cluster=(4, 1, 1),
                     ctas=[(5, 0, 0)])
    assert res.ctas == 4
    assert out[4:].tolist() == expected_specials((8, 1, 1), (4, 1, 1), True)[4:].tolist()
    assert not out[:4].any()


# ------------------------------------------------------------------ DSMEM exchange
NT = 64
EXCHANGE = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, %cluster_nctarank;
    mov.u32 %r3, buf;
    shl.b32 %r4, %r0, 2;
    add.u32 %r5, %r3, %r4;
    mad.lo.u32 %r6, %r1, 1000, %r0;
    st.shared.u32 [%r5], %r6;                              // WRITE
    barrier.cluster.arrive.release.aligned;                // ARRIVE1
    barrier.cluster.wait.acquire.aligned;                  // WAIT1
    add.u32 %r7, %r1, 1;
    rem.u32 %r7, %r7, %r2;
    mapa.shared::cluster.u32 %r8, %r5, %r7;
    ld.shared::cluster.u32 %r9, [%r8];                     // REMOTE
    barrier.cluster.arrive.aligned;                        // ARRIVE2
    barrier.cluster.wait.aligned;                          // WAIT2
    mov.u32 %r10, %ctaid.x;
    mad.lo.u32 %r11, %r10, 64, %r0;
    mul.wide.u32 %rd2, %r11, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;"""
BUF = ".shared .align 16 .b8 buf[256];\n"


def run_exchange(ptx: str, ctas: int = 4, size: int = 2) -> np.ndarray:
    out = np.full((ctas, NT), 0xDEAD, dtype=np.uint32)
    sim.launch(ptx, "k", grid=(ctas,), block=(NT,), args=[out], cluster=(size,))
    return out


def exchange_expected(ctas: int, size: int) -> list:
    return [[((c % size + 1) % size) * 1000 + t for t in range(NT)] for c in range(ctas)]


@pytest.mark.parametrize("size", [2, 4, 8])
def test_dsmem_exchange_through_mapa_and_the_cluster_barrier(size):
    out = run_exchange(module(EXCHANGE, shared=BUF), ctas=8, size=size)
    assert out.tolist() == exchange_expected(8, size)


def test_dsmem_exchange_through_generic_mapa():
    ptx = module(EXCHANGE.replace(
        "    mapa.shared::cluster.u32 %r8, %r5, %r7;\n    ld.shared::cluster.u32 %r9, [%r8];",
        "    cvt.u64.u32 %rd4, %r5;\n    cvta.shared.u64 %rd5, %rd4;\n    mapa.u64 %rd6, %rd5, %r7;\n"
        "    ld.u32 %r9, [%rd6];"), shared=BUF)
    assert run_exchange(ptx).tolist() == exchange_expected(4, 2)


def test_dsmem_remote_store_then_local_read():
    """Each CTA writes into the next CTA's buffer; after the cluster barrier each reads its own."""
    body = EXCHANGE.replace("    st.shared.u32 [%r5], %r6;                              // WRITE\n", "").replace(
        "    barrier.cluster.arrive.release.aligned;                // ARRIVE1\n"
        "    barrier.cluster.wait.acquire.aligned;                  // WAIT1\n", "").replace(
        "    ld.shared::cluster.u32 %r9, [%r8];                     // REMOTE\n",
        "    st.shared::cluster.u32 [%r8], %r6;\n").replace(
        "    barrier.cluster.wait.aligned;                          // WAIT2\n",
        "    barrier.cluster.wait.aligned;                          // WAIT2\n    ld.shared.u32 %r9, [%r5];\n")
    out = run_exchange(module(body, shared=BUF), ctas=4, size=4)
    assert out.tolist() == [[((c - 1) % 4) * 1000 + t for t in range(NT)] for c in range(4)]


def test_planted_missing_cluster_barrier_before_the_remote_read_is_a_race():
    ptx = module(EXCHANGE.replace("    barrier.cluster.arrive.release.aligned;                // ARRIVE1\n", "")
                 .replace("    barrier.cluster.wait.acquire.aligned;                  // WAIT1\n", ""), shared=BUF)
    with pytest.raises(sim.HazardError) as e:
        run_exchange(ptx)
    assert e.value.kind == "race" and "barrier.cluster" in e.value.detail
    assert e.value.line in (line_of(ptx, "// WRITE"), line_of(ptx, "// REMOTE"))


def test_planted_bar_sync_does_not_order_another_ctas_shared_memory():
    ptx = module(EXCHANGE.replace("    barrier.cluster.arrive.release.aligned;                // ARRIVE1\n", "")
                 .replace("    barrier.cluster.wait.acquire.aligned;                  // WAIT1\n", "    bar.sync 0;\n"),
                 shared=BUF)
    with pytest.raises(sim.HazardError) as e:
        run_exchange(ptx)
    assert e.value.kind == "race" and "barrier.cluster" in e.value.detail


def test_planted_relaxed_arrive_without_fence_is_a_race_and_the_fence_fixes_it():
    relaxed = EXCHANGE.replace("arrive.release.aligned;                // ARRIVE1",
                               "arrive.relaxed.aligned;                // ARRIVE1")
    with pytest.raises(sim.HazardError) as e:
        run_exchange(module(relaxed, shared=BUF))
    assert e.value.kind == "race"
    fenced = relaxed.replace("    barrier.cluster.arrive.relaxed", "    fence.acq_rel.cluster;\n    barrier.cluster.arrive.relaxed")
    assert run_exchange(module(fenced, shared=BUF)).tolist() == exchange_expected(4, 2)


def test_planted_exit_while_a_peer_reads_its_shared_memory():
    """Without the final cluster barrier a CTA may exit while its peer still reads its buffer."""
    ptx = module(EXCHANGE.replace("    barrier.cluster.arrive.aligned;                        // ARRIVE2\n", "")
                 .replace("    barrier.cluster.wait.aligned;                          // WAIT2\n", ""), shared=BUF)
    with pytest.raises(sim.HazardError) as e:
        run_exchange(ptx)
    assert e.value.kind == "out-of-bounds" and "has exited" in e.value.detail
    assert e.value.line == line_of(ptx, "// REMOTE")


def test_remote_rank_outside_the_cluster_is_a_clear_fault():
    ptx = module(EXCHANGE.replace("rem.u32 %r7, %r7, %r2;", "add.u32 %r7, %r7, 4;  // BADRANK"), shared=BUF)
    with pytest.raises(sim.HazardError) as e:
        run_exchange(ptx)
    assert e.value.kind == "out-of-bounds" and "outside this cluster of 2" in e.value.detail
    assert e.value.line == line_of(ptx, "mapa")


def test_cluster_wait_without_arrive_and_a_missing_arrival_deadlock():
    no_arrive = module(EXCHANGE.replace("    barrier.cluster.arrive.release.aligned;                // ARRIVE1\n", ""),
                       shared=BUF)
    with pytest.raises(sim.HazardError) as e:
        run_exchange(no_arrive)
    assert e.value.kind == "race" and "without a barrier.cluster.arrive" in e.value.detail
    # rank 1 spins on a flag that rank 0 sets only after the cluster barrier: neither can go on
    spin = module("""
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %cluster_ctarank;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SPIN;
    barrier.cluster.arrive;
    barrier.cluster.wait;                 // WAITS
    st.volatile.global.u32 [%rd1], 1;
    bra DONE;
SPIN:
    ld.volatile.global.u32 %r2, [%rd1];
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra SPIN;
DONE:""")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(spin, "k", grid=(2,), block=(32,), args=[np.zeros(1, np.uint32)], cluster=(2,))
    assert e.value.kind == "deadlock"


def test_one_cta_cluster_barrier_is_a_cta_barrier():
    """Without a cluster launch every CTA is its own cluster: arrive + wait completes locally and
    orders the CTA's own shared accesses like bar.sync."""
    body = EXCHANGE.replace("rem.u32 %r7, %r7, %r2;", "mov.u32 %r7, 0;").replace(
        "    add.u32 %r5, %r3, %r4;\n", "    add.u32 %r5, %r3, %r4;\n    xor.b32 %r12, %r4, 4;\n"
        "    add.u32 %r13, %r3, %r12;\n").replace("mapa.shared::cluster.u32 %r8, %r5, %r7;",
                                                 "mapa.shared::cluster.u32 %r8, %r13, %r7;")
    out = np.zeros((2, NT), dtype=np.uint32)
    sim.launch(module(body, shared=BUF), "k", grid=(2,), block=(NT,), args=[out])
    assert out.tolist() == [[t ^ 1 for t in range(NT)]] * 2


# ------------------------------------------------------------------ remote mbarrier arrive
REMOTE_ARRIVE = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, bar;
    setp.eq.u32 %p0, %r0, 0;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 32;          // INIT
    @%p0 fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.relaxed.aligned;                // INITSYNC1
    barrier.cluster.wait.aligned;                          // INITSYNC2
    xor.b32 %r3, %r1, 1;
    mapa.shared::cluster.u32 %r4, %r2, %r3;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r4];   // REMOTE_ARRIVE
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra WAIT;
    mov.u32 %r5, %ctaid.x;
    mad.lo.u32 %r6, %r5, 32, %r0;
    mul.wide.u32 %rd2, %r6, 4;
    add.u64 %rd3, %rd1, %rd2;
    add.u32 %r7, %r1, 100;
    st.global.u32 [%rd3], %r7;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;"""
BAR = ".shared .align 8 .b8 bar[8];\n"


def test_remote_mbarrier_arrive_completes_the_peer_phase():
    out = np.zeros((4, 32), dtype=np.uint32)
    sim.launch(module(REMOTE_ARRIVE, shared=BAR), "k", grid=(4,), block=(32,), args=[out], cluster=(2,))
    assert out.tolist() == [[100 + c % 2] * 32 for c in range(4)]


@pytest.mark.parametrize("change, kind", [
    (("    barrier.cluster.arrive.relaxed.aligned;                // INITSYNC1\n", ""), "race"),
    (("    @%p0 fence.mbarrier_init.release.cluster;\n", ""), "race"),
    (("[%r2], 32;          // INIT", "[%r2], 31;          // INIT"), "race"),
    (("[%r2], 32;          // INIT", "[%r2], 33;          // INIT"), "deadlock"),
])
def test_planted_remote_arrive_bugs(change, kind):
    body = REMOTE_ARRIVE.replace(*change)
    if "INITSYNC1" not in body:
        body = body.replace("    barrier.cluster.wait.aligned;                          // INITSYNC2\n", "")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(module(body, shared=BAR), "k", grid=(2,), block=(32,), args=[np.zeros((2, 32), np.uint32)],
                   cluster=(2,))
    assert e.value.kind == kind


# ------------------------------------------------------------------ TMA multicast
MULTICAST = """
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 pOut, .param .align 64 .b8 tmap[128], .param .u32 c0, .param .u32 c1)
{
    .reg .pred %p<8>; .reg .b16 %h<4>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r30, %cluster_ctarank;
    mov.u32 %r1, smem;
    add.u32 %r2, %r1, 1024;
    setp.eq.u32 %p0, %r0, 0;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    @%p0 fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.relaxed.aligned;
    barrier.cluster.wait.aligned;
    mov.b64 %rd1, tmap;
    cvta.param.u64 %rd1, %rd1;
    ld.param.u32 %r10, [c0];
    ld.param.u32 %r11, [c1];
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 1024;     // EXPECT
    setp.eq.u32 %p3, %r30, 0;
    and.pred %p4, %p0, %p3;
    mov.b16 %h1, MASK;
    @%p4 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%r1], [%rd1, {%r10, %r11}], [%r2], %h1;   // MCAST
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra WAIT;
    shl.b32 %r3, %r0, 4;
    add.u32 %r4, %r1, %r3;
    ld.shared.v4.b32 {%r20, %r21, %r22, %r23}, [%r4];
    ld.param.u64 %rd4, [pOut];
    mad.lo.u32 %r5, %r30, 1024, %r3;
    cvt.u64.u32 %rd5, %r5;
    add.u64 %rd4, %rd4, %rd5;
    st.global.v4.b32 [%rd4], {%r20, %r21, %r22, %r23};
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}
"""
SPAN = {"none": 0, "128B": 7}


def multicast(swizzle: str, mask: int = 3, body: str = MULTICAST):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((20, 80)) + 4).astype(np.float16)
    box, start = (8, 64), (5, 8)
    raw = np.zeros((2, 1024), dtype=np.uint8)
    sim.launch(HEADER + body.replace("MASK", str(mask)), "k", grid=(2,), block=(64,), cluster=(2,),
               args=[raw, sim.TensorMap(a, box, swizzle=swizzle), start[1], start[0]], dynamic_smem=2048)
    return a, box, start, raw


@pytest.mark.parametrize("swizzle", ["none", "128B"])
def test_tma_multicast_lands_the_box_in_every_masked_cta(swizzle):
    a, box, (r, c), raw = multicast(swizzle)
    offs = np.arange(1024)
    physical = offs ^ (((offs >> 7) & SPAN[swizzle]) << 4)      # 16-byte chunk XOR row (docs/ptx_facts/tma.md §9d)
    want = a[r:r + box[0], c:c + box[1]]
    for rank in range(2):
        assert np.array_equal(raw[rank][physical].view(np.float16).reshape(box), want)


def test_planted_multicast_bugs():
    with pytest.raises(sim.HazardError) as e:      # rank 2 is outside a 2-CTA cluster
        multicast("none", mask=5)
    assert e.value.kind == "out-of-bounds" and "ctaMask" in e.value.detail
    no_expect = MULTICAST.replace("    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 1024;     // EXPECT",
                                  "    @%p0 mbarrier.arrive.shared::cta.b64 _, [%r2];")
    with pytest.raises(sim.HazardError) as e:      # without expect-tx the phase completes before the data lands
        multicast("none", body=no_expect)
    assert e.value.kind == "async-pending" and "CTA (1, 0, 0)" in e.value.detail


def test_mapa_of_a_symbol_and_getctarank():
    """mapa takes the shared variable's name directly; getctarank names the CTA an address is in."""
    body = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, buf;
    mapa.shared::cluster.u32 %r3, buf, 2;
    getctarank.shared::cluster.u32 %r4, %r3;
    getctarank.shared::cluster.u32 %r5, %r2;
    mov.u32 %r8, %ctaid.x;
    mul.wide.u32 %rd2, %r8, 16;
    add.u64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r1, %r4, %r5, %r8};"""
    out = np.zeros((4, 4), dtype=np.uint32)
    sim.launch(module(body, shared=BUF), "k", grid=(4,), block=(1,), args=[out], cluster=(4,))
    assert out.tolist() == [[r, 2, r, r] for r in range(4)]


@pytest.mark.parametrize("text", ["mapa.shared::cluster.u32 %r2, %r1, 0;", "getctarank.shared::cluster.u32 %r2, %r1;",
                                  "ld.shared::cluster.u32 %r2, [%r1];", "barrier.cluster.arrive;"])
def test_cluster_instructions_need_sm90(text):
    ptx = module(f"    mov.u32 %r1, 0;\n    {text}  // OLD").replace(".target sm_90a", ".target sm_80")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", args=[np.zeros(1, np.uint32)])
    assert e.value.kind == "unsupported" and "sm_90" in e.value.detail and e.value.line == line_of(ptx, "// OLD")


def test_waiting_on_a_peer_mbarrier_is_refused_clearly():
    body = REMOTE_ARRIVE.replace("    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;",
                                 "    mbarrier.try_wait.parity.shared::cluster.b64 %p1, [%r4], 0;   // PEERWAIT")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(module(body, shared=BAR), "k", grid=(2,), block=(32,), args=[np.zeros((2, 32), np.uint32)],
                   cluster=(2,))
    assert e.value.kind == "unsupported" and "another CTA's mbarrier" in e.value.detail


# ------------------------------------------------------------------ many CTAs, a warp waiting early
# Warp 0 reaches the exit barrier.cluster.wait (or spins on a shared flag) while warp 1 of its CTA
# still has work to do; on hardware warp 1 runs meanwhile. Many resident CTAs waiting like this
# must not look like a deadlock: the waiting warp lets warp 1 run, however many CTAs wait beside it
# (issue 21: 20+ CTAs of a cluster GEMM were reported deadlocked at the exit barrier).
LATE_WARP = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ctaid.x;
    setp.ge.u32 %p0, %r0, 32;
    @%p0 bra WORK;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;         // EARLY
    ret;
WORK:
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 4;
    @%p1 bra LOOP;
    setp.eq.u32 %p2, %r0, 32;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    @%p2 st.global.u32 [%rd3], %r2;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;"""

FLAG_SPIN = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    setp.ge.u32 %p0, %r0, 32;
    @%p0 bra WORK;
SPIN:
    ld.acquire.gpu.global.u32 %r4, [%rd3];    // SPIN
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra SPIN;
    ret;
WORK:
    setp.eq.u32 %p2, %r0, 32;
    @%p2 st.release.gpu.global.u32 [%rd3], 7;"""


@pytest.mark.parametrize("body, want", [(LATE_WARP, 4), (FLAG_SPIN, 7)], ids=["cluster-wait", "flag-spin"])
def test_many_ctas_with_a_waiting_warp_are_not_a_deadlock(body, want):
    ctas = 48
    out = np.zeros(ctas, dtype=np.uint32)
    sim.launch(module(body), "k", grid=(ctas,), block=(64,), args=[out], cluster=(2,))
    assert out.tolist() == [want] * ctas
