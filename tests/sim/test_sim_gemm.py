"""Whole GEMM kernels (cp.async -> ldmatrix -> mma.sync -> st.global) against numpy float64."""
from __future__ import annotations

import numpy as np

from ptxgen import sim
from sim_gemm_ptx import gemm_dynamic_smem, gemm_ptx

SMALL_GEMM = """
.version 7.8
.target sm_80
.address_size 64

// C (16x8, f32) = A (16x32, f16, row-major) @ B (32x8, f16, row-major); one warp.
.visible .entry small_gemm(
    .param .u64 pA,
    .param .u64 pB,
    .param .u64 pC
)
.reqntid 32, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<12>;
    .reg .f32 %c<4>;
    .shared .align 128 .b8 sA[1024];
    .shared .align 128 .b8 sB[512];

    ld.param.u64 %rd1, [pA];
    ld.param.u64 %rd2, [pB];
    ld.param.u64 %rd3, [pC];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %laneid;

    // A (1024 B) and B (512 B) to shared with 16-byte copies
    shl.b32 %r2, %r1, 4;
    mov.u32 %r3, sA;
    add.u32 %r4, %r3, %r2;
    mov.u32 %r5, sB;
    add.u32 %r6, %r5, %r2;
    cvt.u64.u32 %rd4, %r2;
    add.u64 %rd5, %rd1, %rd4;
    add.u64 %rd6, %rd2, %rd4;
    cp.async.cg.shared.global [%r4], [%rd5], 16;
    cp.async.cg.shared.global [%r4+512], [%rd5+512], 16;
    cp.async.cg.shared.global [%r6], [%rd6], 16;
    cp.async.commit_group;
    cp.async.wait_group 0;
    bar.sync 0;

    // A rows: lane supplies &A[lane % 16][8 * (lane / 16)] (64-byte rows)
    and.b32 %r7, %r1, 15;
    shl.b32 %r7, %r7, 6;
    shr.u32 %r8, %r1, 4;
    shl.b32 %r8, %r8, 4;
    add.u32 %r7, %r7, %r8;
    add.u32 %r7, %r7, %r3;
    // B rows for .trans: lanes 0-15 supply &B[k0 + lane][0] (16-byte rows)
    and.b32 %r9, %r1, 15;
    shl.b32 %r9, %r9, 4;
    add.u32 %r9, %r9, %r5;

    mov.f32 %c0, 0f00000000;
    mov.f32 %c1, 0f00000000;
    mov.f32 %c2, 0f00000000;
    mov.f32 %c3, 0f00000000;
    mov.u32 %r10, 0;
$L_k:
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r7];
    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r24, %r25}, [%r9];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%c0, %c1, %c2, %c3}, {%r20, %r21, %r22, %r23}, {%r24, %r25}, {%c0, %c1, %c2, %c3};
    add.u32 %r7, %r7, 32;          // next 16 columns of A
    add.u32 %r9, %r9, 256;         // next 16 rows of B
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p1, %r10, 2;
    @%p1 bra.uni $L_k;

    // c0,c1 -> C[g][2t..2t+1]; c2,c3 -> C[g+8][2t..2t+1]
    shr.u32 %r11, %r1, 2;
    and.b32 %r12, %r1, 3;
    shl.b32 %r13, %r11, 3;
    shl.b32 %r14, %r12, 1;
    add.u32 %r13, %r13, %r14;
    mul.wide.u32 %rd7, %r13, 4;
    add.u64 %rd8, %rd3, %rd7;
    st.global.v2.f32 [%rd8], {%c0, %c1};
    st.global.v2.f32 [%rd8+256], {%c2, %c3};
    ret;
}
"""


def nonzero_f16(rng, shape) -> np.ndarray:
    x = rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(np.float16)


def test_small_hand_written_gemm():
    rng = np.random.default_rng(42)
    A, B = nonzero_f16(rng, (16, 32)), nonzero_f16(rng, (32, 8))
    C = np.full((16, 8), np.nan, dtype=np.float32)
    res = sim.launch(SMALL_GEMM, "small_gemm", block=(32,), args=[A, B, C])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-5)
    lines = SMALL_GEMM.split("\n")
    top = lines.index("$L_k:")
    bottom = next(i for i, line in enumerate(lines) if "bra.uni $L_k" in line)
    assert _instruction_lines(lines[top:bottom + 1]) == 8
    assert res.instructions == 32 * (_instruction_lines(lines[:top]) + 2 * 8 + _instruction_lines(lines[bottom + 1:]))


def _instruction_lines(lines: list[str]) -> int:
    count = 0
    for line in lines:
        s = line.split("//")[0].strip()
        if s and not s.startswith((".", "{", "}", "$", ")")) and not s.endswith(":"):
            count += 1
    return count


def test_gemm_tile_128x128x256_matches_float64_and_counts_instructions():
    M = N = 128
    K = 256
    rng = np.random.default_rng(0)
    A, Bt = nonzero_f16(rng, (M, K)), nonzero_f16(rng, (N, K))
    C = np.full((M, N), np.nan, dtype=np.float32)
    ptx = gemm_ptx(M, N, K)
    res = sim.launch(ptx, "gemm_tile", block=(128,), args=[A, Bt, C], dynamic_smem=gemm_dynamic_smem())
    ref = A.astype(np.float64) @ Bt.astype(np.float64).T
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-4)
    lines = ptx.split("\n")
    top = lines.index("$L_loop:")
    bottom = next(i for i, line in enumerate(lines) if "bra.uni $L_loop" in line)
    per_thread = (_instruction_lines(lines[:top]) + (K // 64) * _instruction_lines(lines[top:bottom + 1])
                  + _instruction_lines(lines[bottom + 1:]))
    assert res.instructions == 128 * per_thread


def test_gemm_grid_runs_only_the_requested_ctas():
    M = N = 256
    K = 128
    rng = np.random.default_rng(1)
    A, Bt = nonzero_f16(rng, (M, K)), nonzero_f16(rng, (N, K))
    C = np.full((M, N), np.nan, dtype=np.float32)
    ptx = gemm_ptx(M, N, K)
    res = sim.launch(ptx, "gemm_tile", grid=(2, 2), block=(128,), args=[A, Bt, C],
                     dynamic_smem=gemm_dynamic_smem(), ctas=[(1, 0), (0, 1)])
    assert res.ctas == 2
    ref = A.astype(np.float64) @ Bt.astype(np.float64).T
    for bn, bm in ((1, 0), (0, 1)):
        tile = (slice(bm * 128, bm * 128 + 128), slice(bn * 128, bn * 128 + 128))
        np.testing.assert_allclose(C[tile], ref[tile], rtol=1e-5, atol=1e-4)
    assert np.isnan(C[:128, :128]).all() and np.isnan(C[128:, 128:]).all()
