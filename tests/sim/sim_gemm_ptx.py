"""A hand-designed multistage tensor-core GEMM tile kernel, written out as PTX text.

It is the simulator's stress test (and bench/sim_speed.py's workload): cp.async.cg 16-byte copies
into a 3-stage shared ring with a 128-byte XOR swizzle (docs/ptx_facts/shared_memory.md §8), ldmatrix.x4 fragments (§4),
mma.sync m16n8k16 f16->f32 (§1) and st.global.v2.f32. One CTA of 4 warps (2x2) computes a 128x128
tile of C = A @ B with A (M x K, row-major f16) and B given as Bt (N x K, row-major f16).
M, N, K are baked into the text; the k loop is a real PTX loop with a CTA-uniform branch.
"""
from __future__ import annotations

BM = BN = 128
BK = 64
ROW_BYTES = BK * 2            # 128 bytes per tile row
TILE_BYTES = BM * ROW_BYTES   # 16 KiB per operand per stage
STAGE_BYTES = 2 * TILE_BYTES
THREADS = 128


def gemm_ptx(M: int, N: int, K: int, stages: int = 3, swizzle: bool = True,
             wait_groups: int | None = None, barrier_after_wait: bool = True) -> str:
    """PTX for C[M,N] (f32) = A[M,K] (f16) @ Bt[N,K]^T (f16); grid = (N/128, M/128), block = 128.

    wait_groups overrides the cp.async.wait_group count (stages-2 is right; larger is a planted
    bug), barrier_after_wait=False drops the bar.sync after it (another planted bug).
    """
    assert M % BM == 0 and N % BN == 0 and K % BK == 0 and stages >= 2
    kt_total = K // BK
    wait_n = stages - 2 if wait_groups is None else wait_groups
    out: list[str] = []
    emit = out.append
    emit(".version 7.8\n.target sm_80\n.address_size 64\n")
    emit(".extern .shared .align 1024 .b8 smem[];\n")
    emit(".visible .entry gemm_tile(\n    .param .u64 pA,\n    .param .u64 pB,\n    .param .u64 pC\n)")
    emit(f".reqntid {THREADS}, 1, 1\n{{")
    emit("    .reg .pred %p<4>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<16>;")
    emit("    .reg .f32 %acc<128>;\n    .reg .b32 %fa<16>;\n    .reg .b32 %fb<16>;")
    emit("    .reg .b32 %aoff<4>;\n    .reg .b32 %boff<4>;")
    # ---- thread coordinates
    emit("    ld.param.u64 %rd1, [pA];\n    ld.param.u64 %rd2, [pB];\n    ld.param.u64 %rd3, [pC];")
    emit("    cvta.to.global.u64 %rd1, %rd1;\n    cvta.to.global.u64 %rd2, %rd2;\n    cvta.to.global.u64 %rd3, %rd3;")
    emit("    mov.u32 %r1, %tid.x;\n    shr.u32 %r2, %r1, 5;        // warp\n    and.b32 %r3, %r1, 31;       // lane")
    emit("    shr.u32 %r4, %r2, 1;        // warp_m\n    and.b32 %r5, %r2, 1;        // warp_n")
    emit("    mov.u32 %r6, %ctaid.x;      // block_n\n    mov.u32 %r7, %ctaid.y;      // block_m")
    emit("    mov.u32 %r8, smem;")
    # ---- cp.async per-thread offsets: row = tid>>3 (+16 i), chunk = tid&7
    emit("    shr.u32 %r9, %r1, 3;        // load row\n    and.b32 %r10, %r1, 7;       // load chunk")
    if swizzle:
        emit("    and.b32 %r11, %r9, 7;\n    xor.b32 %r11, %r10, %r11;   // swizzled chunk")
    else:
        emit("    mov.u32 %r11, %r10;")
    emit("    shl.b32 %r12, %r9, 7;\n    shl.b32 %r13, %r11, 4;\n    add.u32 %r12, %r12, %r13;   // smem load offset")
    # global load pointers: A + ((block_m*128 + row)*K + chunk*8)*2
    for ptr, block_reg, dst in (("%rd1", "%r7", "%rd4"), ("%rd2", "%r6", "%rd5")):
        emit(f"    shl.b32 %r14, {block_reg}, 7;\n    add.u32 %r14, %r14, %r9;")
        emit(f"    mul.lo.u32 %r14, %r14, {K};\n    shl.b32 %r15, %r10, 3;\n    add.u32 %r14, %r14, %r15;")
        emit(f"    mul.wide.u32 %rd6, %r14, 2;\n    add.u64 {dst}, {ptr}, %rd6;")
    # ---- ldmatrix per-thread offsets
    emit("    and.b32 %r16, %r3, 15;\n    shl.b32 %r17, %r4, 6;\n    add.u32 %r16, %r16, %r17;   // A row")
    emit("    shl.b32 %r16, %r16, 7;\n    shr.u32 %r18, %r3, 4;       // A chunk hi\n    and.b32 %r19, %r3, 7;")
    emit("    and.b32 %r20, %r3, 7;\n    shr.u32 %r21, %r3, 4;\n    shl.b32 %r21, %r21, 3;\n    add.u32 %r20, %r20, %r21;")
    emit("    shl.b32 %r21, %r5, 6;\n    add.u32 %r20, %r20, %r21;   // B row\n    shl.b32 %r20, %r20, 7;")
    emit(f"    add.u32 %r20, %r20, {TILE_BYTES};\n    shr.u32 %r22, %r3, 3;\n    and.b32 %r22, %r22, 1;      // B chunk hi")
    for ks in range(BK // 16):
        for name, hi_reg, row_reg in (("%aoff", "%r18", "%r16"), ("%boff", "%r22", "%r20")):
            emit(f"    add.u32 %r23, {hi_reg}, {2 * ks};")
            if swizzle:
                emit("    xor.b32 %r23, %r23, %r19;")
            emit(f"    shl.b32 %r23, %r23, 4;\n    add.u32 {name}{ks}, {row_reg}, %r23;")
    for i in range(128):
        emit(f"    mov.f32 %acc{i}, 0f00000000;")
    # ---- prologue: tiles 0..stages-2
    emit("    add.u32 %r24, %r8, %r12;    // smem write base (stage 0)")
    emit("    mov.u32 %r25, 0;            // tiles issued")
    for s in range(stages - 1):
        if s < kt_total:
            _issue_tile(emit, K, s * STAGE_BYTES, s * ROW_BYTES, pred=None)
        emit("    cp.async.commit_group;")
    emit(f"    mov.u32 %r25, {stages - 1};")
    emit(f"    mov.u32 %r26, {(stages - 1) * STAGE_BYTES};   // write stage offset")
    emit("    mov.u32 %r27, 0;            // read stage offset\n    mov.u32 %r28, 0;            // kt")
    emit("$L_loop:")
    emit(f"    cp.async.wait_group {wait_n};")
    if barrier_after_wait:
        emit("    bar.sync 0;")
    emit(f"    setp.lt.u32 %p1, %r25, {kt_total};")
    emit("    add.u32 %r24, %r8, %r26;\n    add.u32 %r24, %r24, %r12;\n    mul.wide.u32 %rd7, %r25, 128;")
    emit("    add.u64 %rd8, %rd4, %rd7;\n    add.u64 %rd9, %rd5, %rd7;")
    _issue_tile(emit, K, 0, 0, pred="%p1", a_ptr="%rd8", b_ptr="%rd9")
    emit("    cp.async.commit_group;")
    emit("    add.u32 %r29, %r8, %r27;    // read stage base")
    for ks in range(BK // 16):
        emit(f"    add.u32 %r30, %r29, %aoff{ks};\n    add.u32 %r31, %r29, %boff{ks};")
        for mi in range(4):
            regs = ", ".join(f"%fa{4 * mi + j}" for j in range(4))
            emit(f"    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{regs}}}, [%r30+{mi * 16 * ROW_BYTES}];")
        for nj in range(4):
            regs = ", ".join(f"%fb{4 * nj + j}" for j in range(4))
            emit(f"    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{regs}}}, [%r31+{nj * 16 * ROW_BYTES}];")
        for mi in range(4):
            for ni in range(8):
                acc = ", ".join(f"%acc{(mi * 8 + ni) * 4 + j}" for j in range(4))
                a = ", ".join(f"%fa{4 * mi + j}" for j in range(4))
                b0 = 4 * (ni // 2) + 2 * (ni % 2)
                emit(f"    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{acc}}}, {{{a}}}, "
                     f"{{%fb{b0}, %fb{b0 + 1}}}, {{{acc}}};")
    for reg in ("%r26", "%r27"):
        emit(f"    add.u32 {reg}, {reg}, {STAGE_BYTES};\n    setp.eq.u32 %p2, {reg}, {stages * STAGE_BYTES};")
        emit(f"    selp.b32 {reg}, 0, {reg}, %p2;")
    emit("    add.u32 %r25, %r25, 1;\n    add.u32 %r28, %r28, 1;")
    emit(f"    setp.lt.u32 %p3, %r28, {kt_total};\n    @%p3 bra.uni $L_loop;")
    emit("    cp.async.wait_all;")
    # ---- epilogue: C[row][col], row = block_m*128 + warp_m*64 + g, col = block_n*128 + warp_n*64 + 2t
    emit("    shr.u32 %r32, %r3, 2;\n    and.b32 %r33, %r3, 3;")
    emit("    shl.b32 %r34, %r7, 7;\n    shl.b32 %r35, %r4, 6;\n    add.u32 %r34, %r34, %r35;\n    add.u32 %r34, %r34, %r32;")
    emit("    shl.b32 %r36, %r6, 7;\n    shl.b32 %r37, %r5, 6;\n    add.u32 %r36, %r36, %r37;\n    shl.b32 %r37, %r33, 1;")
    emit(f"    add.u32 %r36, %r36, %r37;\n    mad.lo.u32 %r38, %r34, {N}, %r36;\n    mul.wide.u32 %rd10, %r38, 4;")
    emit("    add.u64 %rd11, %rd3, %rd10;")
    for mi in range(4):
        for ni in range(8):
            base = (mi * 8 + ni) * 4
            off0 = (mi * 16 * N + ni * 8) * 4
            off1 = off0 + 8 * N * 4
            emit(f"    st.global.v2.f32 [%rd11+{off0}], {{%acc{base}, %acc{base + 1}}};")
            emit(f"    st.global.v2.f32 [%rd11+{off1}], {{%acc{base + 2}, %acc{base + 3}}};")
    emit("    ret;\n}\n")
    return "\n".join(out)


def _issue_tile(emit, K: int, smem_stage_offset: int, gmem_offset: int, pred: str | None,
                a_ptr: str = "%rd4", b_ptr: str = "%rd5") -> None:
    guard = f"@{pred} " if pred else ""
    for operand, ptr in ((0, a_ptr), (1, b_ptr)):
        for i in range(BM // 16):
            soff = smem_stage_offset + operand * TILE_BYTES + i * 16 * ROW_BYTES
            goff = gmem_offset + i * 16 * K * 2
            emit(f"    {guard}cp.async.cg.shared.global [%r24+{soff}], [{ptr}+{goff}], 16;")


def gemm_dynamic_smem(stages: int = 3) -> int:
    return stages * STAGE_BYTES
