"""tcgen05 over a CTA pair (cta_group::2, M = 256): A split along M, B along N, each CTA's half of D in
its own tensor memory; the commit multicast to both CTAs (docs/ptx_facts/tcgen05.md §12i)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import HEADER, idesc, image_kmajor, smem_desc

N = 64


def pair_kernel(issuer_guard: str = "%p4", dealloc_sync: bool = True, m: int = 256) -> str:
    """Both CTAs copy their operand halves (image of pAB at rank * 8192) into shared memory; rank 0's
    thread 0 issues one 256 x N x 16 MMA; the commit arrives on both CTAs' barriers; every warp
    stores its CTA's D rows to out[rank * 128 + row]."""
    copy = "".join(f"    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4+{2048 * j}];\n"
                   f"    st.shared.v4.u32 [%r3+{2048 * j}], {{%r4, %r5, %r6, %r7}};\n" for j in range(3))
    regs = ", ".join(f"%d{i}" for i in range(N))
    stores = "".join(f"    st.global.b32 [%rd7+{4 * i}], %d{i};\n" for i in range(N))
    body = f"""
    mov.u32 %r0, %tid.x;
    mov.u32 %r30, %cluster_ctarank;
    ld.param.u64 %rd0, [pOut];
    ld.param.u64 %rd1, [pAB];
    ld.param.u64 %rd10, [dA];
    ld.param.u64 %rd11, [dB];
    mul.wide.u32 %rd8, %r30, 6144;
    add.u64 %rd1, %rd1, %rd8;
    mov.u32 %r2, buf;
    shl.b32 %r1, %r0, 4;
    add.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd3, %r0, 16;
    add.u64 %rd4, %rd1, %rd3;
{copy}    fence.proxy.async.shared::cta;
    setp.lt.u32 %p3, %r0, 32;
    or.b32 %r31, %r0, %r30;
    setp.eq.u32 %p4, %r31, 0;
    setp.eq.u32 %p5, %r0, 0;
    setp.ne.u32 %p7, %r0, %r0;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    @%p3 tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [tptr], 64;
    @%p5 mbarrier.init.shared::cta.b64 [bar], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ld.shared.b32 %r10, [tptr];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;
    @{issuer_guard} tcgen05.mma.cta_group::2.kind::f16 [%r10], %rd10, %rd11, {idesc(1, 0, 0, m, N):#x}, %p7;
    mov.b16 %h1, 3;
    @{issuer_guard} tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], %h1;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p6, [bar], 0;
    @!%p6 bra WAIT;
    tcgen05.fence::after_thread_sync;
    shr.u32 %r12, %r0, 5;
    shl.b32 %r12, %r12, 21;
    add.u32 %r11, %r10, %r12;
    tcgen05.ld.sync.aligned.32x32b.x{N}.b32 {{{regs}}}, [%r11];
    tcgen05.wait::ld.sync.aligned;
    mad.lo.u32 %r13, %r30, 128, %r0;
    mul.wide.u32 %rd6, %r13, {4 * N};
    add.u64 %rd7, %rd0, %rd6;
{stores}    tcgen05.fence::before_thread_sync;
""" + ("    barrier.cluster.arrive.aligned;\n    barrier.cluster.wait.aligned;\n" if dealloc_sync else "") + """
    @%p3 tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r10, 64;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;"""
    return (HEADER + ".shared .align 1024 .b8 buf[8192];\n.shared .align 8 .b64 bar;\n.shared .align 4 .b32 tptr;\n"
            ".visible .entry k(.param .u64 pOut, .param .u64 pAB, .param .u64 dA, .param .u64 dB)\n{\n"
            "    .reg .pred %p<8>;\n    .reg .b16 %h<4>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<32>;\n"
            f"    .reg .b32 %d<{N}>;\n" + body + "\n}\n")


def _operands(seed: int = 0):
    rng = np.random.default_rng(seed)
    a = (rng.integers(1, 4, (256, 16)) * rng.choice([-1, 1], (256, 16))).astype(np.float16)
    b = (rng.integers(1, 4, (N, 16)) * rng.choice([-1, 1], (N, 16))).astype(np.float16)
    images = []
    for v in range(2):    # CTA v: A rows 128v.., B rows (N columns) v*N/2..
        ia, _, sbo = image_kmajor(a[128 * v:128 * v + 128], "32B", 4096)
        ib, _, _ = image_kmajor(b[N // 2 * v:N // 2 * (v + 1)], "32B", 2048)
        images.append(np.concatenate([ia, ib]))
    return a, b, np.concatenate(images), smem_desc(0, 16, 256, "32B"), smem_desc(4096, 16, 256, "32B")


def test_pair_mma_256xN_against_numpy():
    a, b, image, da, db = _operands()
    out = np.full((256, N), np.nan, np.float32)
    sim.launch(pair_kernel(), "k", grid=(2,), block=(128,), cluster=(2, 1, 1), args=[out, image, da, db])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


def test_pair_mma_needs_a_cluster():
    a, b, image, da, db = _operands()
    with pytest.raises(sim.HazardError, match="CTA pair"):
        sim.launch(pair_kernel(), "k", grid=(2,), block=(128,), args=[np.zeros((256, N), np.float32), image, da, db])


def test_mixing_cta_groups_is_refused():
    ptx = pair_kernel().replace("tcgen05.relinquish_alloc_permit.cta_group::2",
                                "tcgen05.relinquish_alloc_permit.cta_group::1")
    a, b, image, da, db = _operands()
    with pytest.raises(sim.HazardError, match="same one"):
        sim.launch(ptx, "k", grid=(2,), block=(128,), cluster=(2, 1, 1),
                   args=[np.zeros((256, N), np.float32), image, da, db])


def test_pair_mma_m128_layout_b():
    """M = 128 over the pair: CTA v holds A rows 64v..64v+63; its D row m (< 64) keeps columns
    n < N/2 in lane m and columns n >= N/2 in lane 64 + m, both at columns n mod N/2 (layout B,
    docs/ptx_facts/tcgen05.md §12i; CUTLASS's 2x1SM M=64 atom, single source)."""
    rng = np.random.default_rng(3)
    a = (rng.integers(1, 4, (128, 16)) * rng.choice([-1, 1], (128, 16))).astype(np.float16)
    b = (rng.integers(1, 4, (N, 16)) * rng.choice([-1, 1], (N, 16))).astype(np.float16)
    images = []
    for v in range(2):
        ia, _, _ = image_kmajor(np.concatenate([a[64 * v:64 * v + 64], np.zeros((64, 16), np.float16)]), "32B", 4096)
        ib, _, _ = image_kmajor(b[N // 2 * v:N // 2 * (v + 1)], "32B", 2048)
        images.append(np.concatenate([ia, ib]))
    out = np.full((256, N), np.nan, np.float32)
    sim.launch(pair_kernel(m=128), "k", grid=(2,), block=(128,), cluster=(2, 1, 1),
               args=[out, np.concatenate(images), smem_desc(0, 16, 256, "32B"), smem_desc(4096, 16, 256, "32B")])
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    half = N // 2
    for v in range(2):
        got = out[128 * v:128 * v + 128, :half]          # CTA v's lanes 0..127, columns 0..N/2-1
        np.testing.assert_array_equal(got[:64], ref[64 * v:64 * v + 64, :half])
        np.testing.assert_array_equal(got[64:], ref[64 * v:64 * v + 64, half:])
