"""Shared windows of a cluster on sm_100a and the .cta_group::2 forms of TMA loads and mbarrier
arrives (docs/ptx_facts/tcgen05.md §12m): a CTA's .shared::cta addresses carry its cluster rank in
bits 24 and up, so clearing bit 24 names the even CTA of a pair (CUTLASS's Sm100MmaPeerBitMask,
Gluon's `and.b32 %r, %r, 0xFEFFFFF0`)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import HEADER
from test_sim_tcgen05_pair import N, _operands, pair_kernel

ENTRY = ".visible .entry k(.param .u64 pOut, .param .align 64 .b8 pMap[128])\n{\n" \
        "    .reg .pred %p<8>;\n    .reg .b32 %r<32>;\n    .reg .b64 %rd<16>;\n"
MAP = sim.TensorMap(np.zeros((16, 32), np.float32), (16, 32))     # unused by the non-TMA kernels
SHARED = ".shared .align 1024 .b8 buf[2048];\n.shared .align 8 .b64 bar;\n"


def _kernel(body: str, header: str = HEADER) -> str:
    return header + SHARED + ENTRY + body + "\n    ret;\n}\n"


ADDRESSES = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r1, 16;
    add.u64 %rd0, %rd0, %rd1;
    mov.u32 %r2, bar;
    mapa.shared::cluster.u32 %r3, %r2, 0;
    mapa.shared::cluster.u32 %r4, bar, 1;
    getctarank.shared::cluster.u32 %r5, %r2;
    st.global.v4.u32 [%rd0], {%r2, %r3, %r4, %r5};
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;"""


def test_shared_cta_addresses_carry_the_cluster_rank():
    """`mov %r, bar` in rank r gives r << 24 | offset; mapa to rank q gives q << 24 | offset."""
    out = np.zeros((2, 4), np.uint32)
    sim.launch(_kernel(ADDRESSES), "k", grid=(2,), block=(1,), cluster=(2, 1, 1), args=[out, MAP])
    off = int(out[0, 0])
    assert off < 1 << 24
    np.testing.assert_array_equal(out, [[off, off, (1 << 24) | off, 0],
                                        [(1 << 24) | off, off, (1 << 24) | off, 1]])


def test_no_cluster_means_rank_zero_addresses():
    out = np.zeros((1, 4), np.uint32)
    ptx = _kernel(ADDRESSES.replace("mapa.shared::cluster.u32 %r4, bar, 1;", "mov.u32 %r4, 0;"))
    sim.launch(ptx, "k", grid=(1,), block=(1,), args=[out, MAP])
    assert out[0, 0] == out[0, 1] < 1 << 24 and out[0, 3] == 0


def test_shared_cta_access_outside_own_window_is_refused():
    """Rank 1 storing through an address without its rank bits reaches rank 0's window: a
    .shared::cta access may not (it must use .shared::cluster)."""
    body = """
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, buf;
    and.b32 %r3, %r2, 0xFEFFFFFF;
    setp.eq.u32 %p1, %r1, 1;
    @%p1 st.shared.u32 [%r3], %r1;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;"""
    with pytest.raises(sim.HazardError, match="not in this CTA's"):
        sim.launch(_kernel(body), "k", grid=(2,), block=(32,), cluster=(2, 1, 1), args=[np.zeros(1), MAP])


def test_clearing_bit_24_arrives_on_the_lead_ctas_barrier():
    """Rank 0's barrier expects 2 arrivals: its own and rank 1's through `addr & 0xFEFFFFFF` (rank
    1 has no barrier of its own: an arrive there would fault); rank 0 then sees the phase complete
    and the value rank 1 stored into rank 0's buf through `buf & 0xFEFFFFFF`."""
    body = """
    mov.u32 %r1, %cluster_ctarank;
    ld.param.u64 %rd0, [pOut];
    mov.u32 %r2, bar;
    mov.u32 %r6, buf;
    and.b32 %r3, %r2, 0xFEFFFFFF;
    and.b32 %r7, %r6, 0xFEFFFFFF;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r2], 2;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    @!%p1 st.shared::cluster.u32 [%r7], 77;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r3];
    @!%p1 bra DONE;
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra WAIT;
    ld.shared.u32 %r8, [%r6];
    st.global.u32 [%rd0], %r8;
DONE:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;"""
    out = np.zeros(1, np.uint32)
    sim.launch(_kernel(body), "k", grid=(2,), block=(1,), cluster=(2, 1, 1), args=[out, MAP])
    assert out[0] == 77


def _tma_pair_kernel(load_mods: str, bar_mask: str = "0xFEFFFFFF", count: int = 2) -> str:
    """Each CTA loads its 16x32 fp32 box (rows 16 * rank..) into its own buf; both loads complete
    on rank 0's barrier (`bar & bar_mask`); rank 0 waits, then a cluster barrier, then each CTA
    writes its buf to out[rank]."""
    body = f"""
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    ld.param.u64 %rd0, [pOut];
    mov.u32 %r2, bar;
    mov.u32 %r6, buf;
    and.b32 %r3, %r2, {bar_mask};
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r2], {count};
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%r3], 2048;
    shl.b32 %r9, %r1, 4;
    mov.u32 %r10, 0;
    cp.async.bulk.tensor.2d.{load_mods}.global.mbarrier::complete_tx::bytes [%r6], [pMap, {{%r10, %r9}}], [%r3];
    @!%p1 bra SYNC;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra WAIT;
SYNC:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    mul.wide.u32 %rd2, %r1, 2048;
    add.u64 %rd0, %rd0, %rd2;
    mov.u32 %r11, 0;
COPY:
    add.u32 %r12, %r6, %r11;
    ld.shared.u32 %r13, [%r12];
    cvt.u64.u32 %rd3, %r11;
    add.u64 %rd4, %rd0, %rd3;
    st.global.u32 [%rd4], %r13;
    add.u32 %r11, %r11, 4;
    setp.lt.u32 %p3, %r11, 2048;
    @%p3 bra COPY;"""
    return _kernel(body)


def _run_tma_pair(ptx: str, ctas: int = 2):
    src = np.arange(16 * ctas * 32, dtype=np.float32).reshape(16 * ctas, 32) + 1
    out = np.full((ctas, 16, 32), np.nan, np.float32)
    sim.launch(ptx, "k", grid=(ctas,), block=(1,), cluster=(ctas, 1, 1), args=[out, sim.TensorMap(src, (16, 32))])
    return src, out


def test_cta_group_2_tma_load_completes_on_the_peer_barrier():
    src, out = _run_tma_pair(_tma_pair_kernel("cta_group::2.shared::cluster"))
    np.testing.assert_array_equal(out.reshape(32, 32), src)


def test_plain_tma_load_needs_its_barrier_in_the_destination_cta():
    with pytest.raises(sim.HazardError, match="must be in the same CTA"):
        _run_tma_pair(_tma_pair_kernel("shared::cluster"))


def test_cta_group_2_tma_barrier_must_be_in_the_pair():
    """Cluster of 4, every load completing on rank 0's barrier (`& 0xFCFFFFFF`): rank 2's barrier is
    in rank 0, which is not the pair peer of rank 2 or 3."""
    with pytest.raises(sim.HazardError, match="not its pair peer"):
        _run_tma_pair(_tma_pair_kernel("cta_group::2.shared::cluster", "0xFCFFFFFF", count=4), ctas=4)


def test_cta_group_2_tma_with_multicast_is_refused():
    ptx = _tma_pair_kernel("cta_group::2.shared::cluster").replace(
        "mbarrier::complete_tx::bytes [%r6], [pMap, {%r10, %r9}], [%r3];",
        "mbarrier::complete_tx::bytes.multicast::cluster [%r6], [pMap, {%r10, %r9}], [%r3], %h1;")
    with pytest.raises(sim.HazardError, match="multicast::cluster with .cta_group::2 is not simulated"):
        _run_tma_pair(ptx)


def test_cta_group_tma_load_needs_sm100a():
    ptx = _tma_pair_kernel("cta_group::2.shared::cluster").replace("sm_100a", "sm_90a")
    with pytest.raises(sim.HazardError, match="sm_100a"):
        _run_tma_pair(ptx)


def test_cta_group_2_commit_reaching_one_cta_is_caught():
    """Planted bug: the pair MMA's commit multicast to rank 0 only (mask 1): rank 1 waits on a
    barrier no one arrives on, and the simulator reports the deadlock instead of hanging."""
    a, b, image, da, db = _operands()
    ptx = pair_kernel().replace("mov.b16 %h1, 3;", "mov.b16 %h1, 1;")
    with pytest.raises(sim.HazardError, match="deadlock|never"):
        sim.launch(ptx, "k", grid=(2,), block=(128,), cluster=(2, 1, 1),
                   args=[np.zeros((256, N), np.float32), image, da, db])
