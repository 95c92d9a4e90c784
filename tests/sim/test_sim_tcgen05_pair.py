"""tcgen05 over a CTA pair (cta_group::2, M = 256): A split along M, B along N, each CTA's half of D in
its own tensor memory; the commit multicast to both CTAs (docs/ptx_facts/tcgen05.md §12i)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import HEADER, idesc, image_kmajor, smem_desc

N = 64


def pair_kernel(issuer_guard: str = "%p4", dealloc_sync: bool = True, m: int = 256, chunks: int = 3,
                mma: str = "", ncols: int = 64) -> str:
    """Both CTAs copy their operand halves (image of pAB at rank * chunks * 2 KiB) into shared memory;
    rank 0's thread 0 issues one 256 x N x 16 MMA (or the lines `mma`, where %r14 = TMEM base + 64);
    the commit arrives on both CTAs' barriers; every warp stores its CTA's D rows to
    out[rank * 128 + row]."""
    copy = "".join(f"    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4+{2048 * j}];\n"
                   f"    st.shared.v4.u32 [%r3+{2048 * j}], {{%r4, %r5, %r6, %r7}};\n" for j in range(chunks))
    mma = mma or (f"    @{issuer_guard} tcgen05.mma.cta_group::2.kind::f16 [%r10], %rd10, %rd11, "
                  f"{idesc(1, 0, 0, m, N):#x}, %p7;")
    regs = ", ".join(f"%d{i}" for i in range(N))
    stores = "".join(f"    st.global.b32 [%rd7+{4 * i}], %d{i};\n" for i in range(N))
    body = f"""
    mov.u32 %r0, %tid.x;
    mov.u32 %r30, %cluster_ctarank;
    ld.param.u64 %rd0, [pOut];
    ld.param.u64 %rd1, [pAB];
    ld.param.u64 %rd10, [dA];
    ld.param.u64 %rd11, [dB];
    mul.wide.u32 %rd8, %r30, {2048 * chunks};
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
    @%p3 tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [tptr], {ncols};
    @%p5 mbarrier.init.shared::cta.b64 [bar], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ld.shared.b32 %r10, [tptr];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;
    add.u32 %r14, %r10, 64;
{mma}
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
    @%p3 tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r10, """ + str(ncols) + """;
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


def test_pair_mma_with_a_from_each_ctas_tensor_memory():
    """A reaches tensor memory by tcgen05.cp.cta_group::2 (each CTA copies its own shared A half to
    its own TMEM, PTX ISA §9.7.16.9.2) and the pair MMA reads A from [a-tmem] in each CTA (cp -> mma
    is pipelined: no wait between them)."""
    a, b, image, da, db = _operands(4)
    lines = (f"    @%p4 tcgen05.cp.cta_group::2.128x256b [%r14], %rd10;\n"
             f"    @%p4 tcgen05.mma.cta_group::2.kind::f16 [%r10], [%r14], %rd11, {idesc(1, 0, 0, 256, N):#x}, %p7;")
    out = np.full((256, N), np.nan, np.float32)
    sim.launch(pair_kernel(mma=lines, ncols=128), "k", grid=(2,), block=(128,), cluster=(2, 1, 1),
               args=[out, image, da, db])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


def _scale_block(codes: np.ndarray) -> np.ndarray:
    """512 bytes: the scale of row m (one per row) at byte 16*(m % 32) + 4*(m // 32) (docs §12h)."""
    block = np.zeros(512, np.uint8)
    m = np.arange(codes.size)
    block[16 * (m % 32) + 4 * (m // 32)] = codes
    return block


def test_pair_block_scaled_mma_256xN():
    """kind::mxf8f6f4 over the pair, M = 256: CTA v scales its 128 A rows by its own SFA and the whole
    B (both halves) by the SFB in its own TMEM, both placed by tcgen05.cp.cta_group::2.32x128b.warpx4."""
    import ml_dtypes
    rng = np.random.default_rng(5)
    a = (rng.integers(1, 4, (256, 32)) * rng.choice([-1, 1], (256, 32))).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.integers(1, 4, (N, 32)) * rng.choice([-1, 1], (N, 32))).astype(ml_dtypes.float8_e4m3fn)
    sfa = rng.integers(125, 130, 256).astype(np.uint8)          # ue8m0: 2^-2 .. 2^2
    sfb = rng.integers(125, 130, N).astype(np.uint8)
    images = []
    for v in range(2):
        ia, _, _ = image_kmajor(a[128 * v:128 * v + 128].view(np.uint8), "32B", 4096)
        ib, _, _ = image_kmajor(b[N // 2 * v:N // 2 * (v + 1)].view(np.uint8), "32B", 2048)
        images.append(np.concatenate([ia, ib, _scale_block(sfa[128 * v:128 * v + 128]), _scale_block(sfb),
                                      np.zeros(1024, np.uint8)]))
    sf_desc = lambda at: 0x00004008 << 32 | at >> 4                          # noqa: E731 (Triton's form)
    scaled_idesc = (N >> 3) << 17 | 1 << 23 | (256 >> 4) << 24              # e4m3 x e4m3, ue8m0, IDs 0
    lines = (f"    add.u32 %r15, %r10, 68;\n"
             f"    @%p4 tcgen05.cp.cta_group::2.32x128b.warpx4 [%r14], {sf_desc(6144):#x};\n"
             f"    @%p4 tcgen05.cp.cta_group::2.32x128b.warpx4 [%r15], {sf_desc(6656):#x};\n"
             f"    @%p4 tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X [%r10], %rd10, %rd11, "
             f"{scaled_idesc:#x}, [%r14], [%r15], %p7;")
    out = np.full((256, N), np.nan, np.float32)
    sim.launch(pair_kernel(mma=lines, ncols=128, chunks=4), "k", grid=(2,), block=(128,), cluster=(2, 1, 1),
               args=[out, np.concatenate(images), smem_desc(0, 16, 256, "32B"), smem_desc(4096, 16, 256, "32B")])
    scale = lambda c: 2.0 ** (c.astype(np.float64) - 127)                   # noqa: E731
    ref = (a.astype(np.float64) * scale(sfa)[:, None]) @ (b.astype(np.float64) * scale(sfb)[:, None]).T
    np.testing.assert_array_equal(out, ref.astype(np.float32))


def test_pair_block_scaled_m128_is_refused():
    scaled_idesc = (N >> 3) << 17 | 1 << 23 | (128 >> 4) << 24
    lines = (f"    @%p4 tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X [%r10], %rd10, %rd11, "
             f"{scaled_idesc:#x}, [%r14], [%r14], %p7;")
    a, b, image, da, db = _operands()
    with pytest.raises(sim.HazardError, match="M = 128 and block scaling") as e:
        sim.launch(pair_kernel(mma=lines, ncols=128), "k", grid=(2,), block=(128,), cluster=(2, 1, 1),
                   args=[np.zeros((256, N), np.float32), image, da, db])
    assert e.value.kind == "unsupported"


def test_pair_shift_after_the_mma_moves_both_ctas_lanes():
    """mma -> shift is pipelined (no wait); .cta_group::2 shifts the same lanes in both CTAs."""
    a, b, image, da, db = _operands(6)
    lines = (f"    @%p4 tcgen05.mma.cta_group::2.kind::f16 [%r10], %rd10, %rd11, {idesc(1, 0, 0, 256, N):#x}, %p7;\n"
             "    @%p4 tcgen05.shift.cta_group::2.down [%r10];")
    out = np.full((256, N), np.nan, np.float32)
    sim.launch(pair_kernel(mma=lines), "k", grid=(2,), block=(128,), cluster=(2, 1, 1), args=[out, image, da, db])
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for v in range(2):                       # lanes 1..31 of each CTA take lanes 0..30, columns 0..7
        rows = want[128 * v:128 * v + 128].copy()
        rows[1:32, :8] = rows[0:31, :8].copy()
        np.testing.assert_array_equal(out[128 * v:128 * v + 128], rows)
