"""Gluon (Triton 3.9's explicit-layout language) kernels of the Blackwell corpus (needs Triton;
only make_corpus.py imports this file). Written for this corpus after the Gluon tutorials'
descriptions of the API (tcgen05, cluster launch control, 2-CTA MMA), so the PTX is Gluon's own
lowering of each Blackwell feature. f16 in, f32 accumulation in tensor memory.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout, TensorMemoryScalesLayout,
                                                                allocate_tensor_memory, clc, tcgen05_copy,
                                                                tcgen05_mma_scaled,
                                                                fence_async_shared, mbarrier, tcgen05_commit,
                                                                tcgen05_mma, tma)
from triton.experimental.gluon.language.nvidia.blackwell import tcgen05_mma_barrier_count


@gluon.jit
def _ws_loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, K,
               BK: gl.constexpr, STAGES: gl.constexpr):
    """One warp: TMA loads into the ring once the MMA warp has released the stage."""
    for i in range(gl.cdiv(K, BK)):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [off_m, i * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [i * BK, off_n], ready.index(s), b_bufs.index(s))


@gluon.jit
def _ws_mma(a_bufs, b_bufs, ready, empty, acc_tmem, acc_done, K, BK: gl.constexpr, STAGES: gl.constexpr):
    """One warp: tcgen05.mma per stage; the MMA's completion releases the stage (its `empty`
    mbarrier), and a final commit tells the epilogue the accumulator is complete."""
    use_acc = False
    for i in range(gl.cdiv(K, BK)):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        tcgen05_mma(a_bufs.index(s), b_bufs.index(s), acc_tmem, use_acc=use_acc, mbarriers=[empty.index(s)])
        use_acc = True
    tcgen05_commit(acc_done)


@gluon.jit
def _ws_epilogue(acc_tmem, acc_done):
    """The default partition waits for the accumulator and reads it out of tensor memory."""
    mbarrier.wait(acc_done, 0)
    return acc_tmem.load()


@gluon.jit
def tcgen05_ws_matmul(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr):
    """C tile (program 0, 1) = A @ B: loader warp, MMA warp, 4 epilogue warps (f32 out via TMA)."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    mbarrier.init(acc_done, count=1)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    acc = gl.warp_specialize(
        [(_ws_epilogue, (acc_tmem, acc_done)),
         (_ws_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, K, BK, STAGES)),
         (_ws_mma, (a_bufs, b_bufs, ready, empty, acc_tmem, acc_done, K, BK, STAGES))],
        [1, 1], [40, 40])
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


@gluon.jit
def clc_matmul(a_desc, b_desc, c_desc, M, N, K):
    """Dynamic persistent matmul: the grid has one program per tile, and a program that finished
    its tile cancels a not-yet-launched one (clusterlaunchcontrol.try_cancel) and computes that
    tile instead, until a cancel fails. Each K step: TMA load, wait, tcgen05.mma, wait."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    num_n = gl.cdiv(N, BN)
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    tma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    clc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    clc_buf = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(mma_bar, count=1)
    mbarrier.init(clc_bar, count=1)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    tile = gl.program_id(0)
    has_work = tile < gl.cdiv(M, BM) * num_n
    phase = 0
    clc_phase = 0
    while has_work:
        clc.try_cancel(clc_buf, clc_bar)
        mbarrier.expect(clc_bar, 16)
        off_m = (tile // num_n) * BM
        off_n = (tile % num_n) * BN
        use_acc = False
        for k in range(0, K, BK):
            mbarrier.expect(tma_bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [off_m, k], tma_bar, a_smem)
            tma.async_load(b_desc, [k, off_n], tma_bar, b_smem)
            mbarrier.wait(tma_bar, phase)
            tcgen05_mma(a_smem, b_smem, acc_tmem, use_acc=use_acc, mbarriers=[mma_bar])
            mbarrier.wait(mma_bar, phase)
            phase ^= 1
            use_acc = True
        c_smem.store(acc_tmem.load().to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n], c_smem)
        tma.store_wait(0)
        mbarrier.wait(clc_bar, clc_phase)
        clc_phase ^= 1
        result = clc.load_result(clc_buf)
        has_work = result.is_canceled()
        tile = result.program_id(0)


@gluon.jit
def two_cta_matmul(a_desc, b_desc, c_desc, K):
    """A CTA pair computes one 256 x BN tile with tcgen05.mma.cta_group::2: each CTA loads its
    128 rows of A and half of B's columns; the lead CTA issues the MMA over both CTAs' shared
    memory and each CTA's tensor memory holds its 128 rows of the accumulator."""
    BM: gl.constexpr = a_desc.block_type.shape[0]          # the pair's rows
    BN: gl.constexpr = b_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    tma_bar = mbarrier.allocate_mbarrier(two_ctas=True)
    mma_bar = mbarrier.allocate_mbarrier()
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(mma_bar, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, two_ctas=True))
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(BM // 2, BN), col_stride=1,
                                                  cga_layout=c_desc.layout.cga_layout, two_ctas=True)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        mbarrier.expect(tma_bar, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
        tma.async_load(a_desc, [off_m, k], tma_bar, a_smem)
        tma.async_load(b_desc, [k, off_n], tma_bar, b_smem)
        mbarrier.wait(tma_bar, phase, deps=[a_smem, b_smem])
        tcgen05_mma(a_smem, b_smem, acc_tmem, use_acc=use_acc, mbarriers=[mma_bar])
        mbarrier.wait(mma_bar, phase, deps=[a_smem, b_smem])
        phase ^= 1
        use_acc = True
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc_tmem.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


@gluon.jit
def two_cta_scaled_matmul(a_desc, b_desc, c_desc, a_scale_ptr, b_scale_ptr, M, N, K, ONE: gl.constexpr):
    """two_cta_matmul with mxfp8 block scaling (kind::mxf8f6f4.block_scale over a CTA pair): A and
    the A scales split along M over the pair (cga_layout [[1, 0]]), B [N, K] split along N, the B
    scales in both CTAs whole (cga_layout [[0, 0]]); scales [rows, K/32] pointer-loaded (masked, `ONE`
    outside M/N) and stored to tensor memory; each CTA holds its 128 accumulator rows."""
    BM: gl.constexpr = a_desc.block_type.shape[0]          # the pair's rows
    BN: gl.constexpr = b_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    SK: gl.constexpr = BK // 32
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    tma_bar = mbarrier.allocate_mbarrier(two_ctas=True)
    mma_bar = mbarrier.allocate_mbarrier()
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(mma_bar, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, two_ctas=True))
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(BM // 2, BN), col_stride=1,
                                                  cga_layout=c_desc.layout.cga_layout, two_ctas=True)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
    a_scale_tmem = allocate_tensor_memory(gl.uint8, [BM, SK], TensorMemoryScalesLayout(cga_layout=[[1, 0]]))
    b_scale_tmem = allocate_tensor_memory(gl.uint8, [BN, SK], TensorMemoryScalesLayout(cga_layout=[[0, 0]]))
    ra: gl.constexpr = gl.BlockedLayout([1, 1], [32 // SK, SK], [gl.num_warps(), 1], [1, 0], cga_layout=[[1, 0]])
    rb: gl.constexpr = gl.BlockedLayout([1, 1], [32 // SK, SK], [gl.num_warps(), 1], [1, 0], cga_layout=[[0, 0]])
    offs_am = off_m + gl.arange(0, BM, gl.SliceLayout(1, ra))
    offs_ak = gl.arange(0, SK, gl.SliceLayout(0, ra))
    offs_bn = off_n + gl.arange(0, BN, gl.SliceLayout(1, rb))
    offs_bk = gl.arange(0, SK, gl.SliceLayout(0, rb))
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        # each CTA stores its scales before it arrives on the lead CTA's barrier (expect), so the
        # lead's wait, and the MMA after it, come after the peer's tcgen05.st
        sa = gl.load(a_scale_ptr + offs_am[:, None] * (K // 32) + (k // 32 + offs_ak)[None, :],
                     mask=offs_am[:, None] < M, other=ONE)
        sb = gl.load(b_scale_ptr + offs_bn[:, None] * (K // 32) + (k // 32 + offs_bk)[None, :],
                     mask=offs_bn[:, None] < N, other=ONE)
        a_scale_tmem.store(gl.convert_layout(sa, a_scale_tmem.get_reg_layout()))
        b_scale_tmem.store(gl.convert_layout(sb, b_scale_tmem.get_reg_layout()))
        mbarrier.expect(tma_bar, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
        tma.async_load(a_desc, [off_m, k], tma_bar, a_smem)
        tma.async_load(b_desc, [off_n, k], tma_bar, b_smem)
        mbarrier.wait(tma_bar, phase, deps=[a_smem, b_smem])
        tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc_tmem, a_scale_tmem, b_scale_tmem, "e4m3", "e4m3",
                           use_acc=use_acc, mbarriers=[mma_bar])
        mbarrier.wait(mma_bar, phase, deps=[a_smem, b_smem])
        phase ^= 1
        use_acc = True
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc_tmem.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


@gluon.jit
def mma_scaled_matmul(a_desc, b_desc, c_desc, a_scale_ptr, b_scale_ptr, M, N, K,
                      A_FMT: gl.constexpr, B_FMT: gl.constexpr, VEC: gl.constexpr, ONE: gl.constexpr):
    """C = (A * a_scale) @ (B * b_scale).T with tcgen05.mma block scaling: A [M, K] and B [N, K]
    behind TMA descriptors (e2m1 packed two per byte along K; as the other operand of an fp8 one it
    is the padded smem form), scales a_scale [M, K/VEC], b_scale [N, K/VEC] loaded with masked
    pointer loads (`ONE`, the scale code of 1.0, outside M/N) and stored to tensor memory."""
    A_PACK: gl.constexpr = 2 if A_FMT == "e2m1" else 1
    B_PACK: gl.constexpr = 2 if B_FMT == "e2m1" else 1
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1] * A_PACK
    SK: gl.constexpr = BK // VEC
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    scale_layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scale_tmem = allocate_tensor_memory(a_scale_ptr.dtype.element_ty, [BM, SK], scale_layout)
    b_scale_tmem = allocate_tensor_memory(b_scale_ptr.dtype.element_ty, [BN, SK], scale_layout)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.init(mma_bar, count=1)
    rows: gl.constexpr = gl.BlockedLayout([1, 1], [32 // SK, SK], [gl.num_warps(), 1], [1, 0])
    offs_am = off_m + gl.arange(0, BM, gl.SliceLayout(1, rows))
    offs_bn = off_n + gl.arange(0, BN, gl.SliceLayout(1, rows))
    offs_k = gl.arange(0, SK, gl.SliceLayout(0, rows))
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [off_m, k // A_PACK], bar, a_smem)
        tma.async_load(b_desc, [off_n, k // B_PACK], bar, b_smem)
        mbarrier.wait(bar, phase)
        sa = gl.load(a_scale_ptr + offs_am[:, None] * (K // VEC) + (k // VEC + offs_k)[None, :],
                     mask=offs_am[:, None] < M, other=ONE)
        sb = gl.load(b_scale_ptr + offs_bn[:, None] * (K // VEC) + (k // VEC + offs_k)[None, :],
                     mask=offs_bn[:, None] < N, other=ONE)
        a_scale_tmem.store(gl.convert_layout(sa, a_scale_tmem.get_reg_layout()))
        b_scale_tmem.store(gl.convert_layout(sb, b_scale_tmem.get_reg_layout()))
        tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc_tmem, a_scale_tmem, b_scale_tmem, A_FMT, B_FMT,
                           use_acc=use_acc)
        tcgen05_commit(mma_bar)
        mbarrier.wait(mma_bar, phase)
        use_acc = True
        phase ^= 1
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc_tmem.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


@gluon.jit
def _scales_as_2d(smem, ROWS: gl.constexpr, COLS: gl.constexpr):
    """View a [1, REP_ROWS, REP_K, 2, 256] packed-block scale tile (global layout
    [rows/128, cols/4, 32, 4, 4]: scale[128a + 32b + c, 4d + e] at [a, d, c, b, e]) as [ROWS, COLS]."""
    smem = smem.reshape((smem.shape[1], smem.shape[2], 32, 4, 4))
    smem = smem.permute((0, 3, 2, 1, 4))
    return smem.reshape((ROWS, COLS))


@gluon.jit
def mma_scaled_cp_matmul(a_desc, b_desc, c_desc, a_scale_desc, b_scale_desc, K,
                         A_FMT: gl.constexpr, B_FMT: gl.constexpr, VEC: gl.constexpr):
    """mma_scaled_matmul with the scales TMA-loaded in the packed-block layout and moved to tensor
    memory by tcgen05.cp (tcgen05_copy) instead of registers."""
    A_PACK: gl.constexpr = 2 if A_FMT == "e2m1" else 1
    B_PACK: gl.constexpr = 2 if B_FMT == "e2m1" else 1
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1] * A_PACK
    REP_K: gl.constexpr = a_scale_desc.block_type.shape[2]
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    as_smem = gl.allocate_shared_memory(a_scale_desc.dtype, a_scale_desc.block_type.shape, a_scale_desc.layout)
    bs_smem = gl.allocate_shared_memory(b_scale_desc.dtype, b_scale_desc.block_type.shape, b_scale_desc.layout)
    scale_layout: gl.constexpr = TensorMemoryScalesLayout()
    a_scale_tmem = allocate_tensor_memory(a_scale_desc.dtype, [BM, BK // VEC], scale_layout)
    b_scale_tmem = allocate_tensor_memory(b_scale_desc.dtype, [BN, BK // VEC], scale_layout)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mma_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.init(mma_bar, count=1)
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes
                        + a_scale_desc.block_type.nbytes + b_scale_desc.block_type.nbytes)
        tma.async_load(a_desc, [pid_m * BM, k // A_PACK], bar, a_smem)
        tma.async_load(b_desc, [pid_n * BN, k // B_PACK], bar, b_smem)
        tma.async_load(a_scale_desc, [0, pid_m, (k // BK) * REP_K, 0, 0], bar, as_smem)
        tma.async_load(b_scale_desc, [0, pid_n, (k // BK) * REP_K, 0, 0], bar, bs_smem)
        mbarrier.wait(bar, phase)
        tcgen05_copy(_scales_as_2d(as_smem, BM, BK // VEC), a_scale_tmem)
        tcgen05_copy(_scales_as_2d(bs_smem, BN, BK // VEC), b_scale_tmem)
        tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc_tmem, a_scale_tmem, b_scale_tmem, A_FMT, B_FMT,
                           use_acc=use_acc)
        tcgen05_commit(mma_bar)
        mbarrier.wait(mma_bar, phase)
        use_acc = True
        phase ^= 1
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc_tmem.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [pid_m * BM, pid_n * BN], c_smem)
    tma.store_wait(0)


@gluon.jit
def two_cta_scaled_cp_matmul(a_desc, b_desc, c_desc, a_scale_desc, b_scale_desc, K):
    """two_cta_scaled_matmul with the scales TMA-loaded in the packed-block layout (A's two 128-row
    blocks split over the pair, B's block loaded whole by both CTAs) and moved to tensor memory by
    tcgen05_copy, which Gluon lowers to tcgen05.cp.cta_group::2.warpx4.32x128b issued by rank 0."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    REP_K: gl.constexpr = a_scale_desc.block_type.shape[2]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    as_smem = gl.allocate_shared_memory(a_scale_desc.dtype, a_scale_desc.block_type.shape, a_scale_desc.layout)
    bs_smem = gl.allocate_shared_memory(b_scale_desc.dtype, b_scale_desc.block_type.shape, b_scale_desc.layout)
    tma_bar = mbarrier.allocate_mbarrier(two_ctas=True)
    mma_bar = mbarrier.allocate_mbarrier()
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(mma_bar, count=tcgen05_mma_barrier_count([a_smem, b_smem], multicast=False, two_ctas=True))
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(BM // 2, BN), col_stride=1,
                                                  cga_layout=c_desc.layout.cga_layout, two_ctas=True)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
    a_scale_tmem = allocate_tensor_memory(gl.uint8, [BM, BK // 32], TensorMemoryScalesLayout(cga_layout=[[1, 0]]))
    b_scale_tmem = allocate_tensor_memory(gl.uint8, [BN, BK // 32], TensorMemoryScalesLayout(cga_layout=[[0, 0]]))
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        mbarrier.expect(tma_bar, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta + a_scale_desc.nbytes_per_cta
                        + b_scale_desc.nbytes_per_cta)
        tma.async_load(a_desc, [off_m, k], tma_bar, a_smem)
        tma.async_load(b_desc, [off_n, k], tma_bar, b_smem)
        tma.async_load(a_scale_desc, [0, gl.program_id(0) * 2, (k // BK) * REP_K, 0, 0], tma_bar, as_smem)
        tma.async_load(b_scale_desc, [0, gl.program_id(1), (k // BK) * REP_K, 0, 0], tma_bar, bs_smem)
        mbarrier.wait(tma_bar, phase, deps=[a_smem, b_smem])
        tcgen05_copy(_scales_as_2d(as_smem, BM, BK // 32), a_scale_tmem)
        tcgen05_copy(_scales_as_2d(bs_smem, BN, BK // 32), b_scale_tmem)
        tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc_tmem, a_scale_tmem, b_scale_tmem, "e4m3", "e4m3",
                           use_acc=use_acc, mbarriers=[mma_bar])
        mbarrier.wait(mma_bar, phase, deps=[a_smem, b_smem])
        phase ^= 1
        use_acc = True
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc_tmem.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


@gluon.jit
def two_cta_ts_matmul(a_desc, b_desc, c_desc, K):
    """two_cta_matmul with A staged through tensor memory: each CTA moves its TMA-loaded 128 rows of A
    from shared memory to its own TMEM (tcgen05.st) and the lead CTA's tcgen05.mma.cta_group::2 reads
    A from [a-tmem] in both CTAs, B from both CTAs' shared memory."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    tma_bar = mbarrier.allocate_mbarrier(two_ctas=True)     # B: both halves complete on the lead CTA's
    a_bar = mbarrier.allocate_mbarrier()                     # A: each CTA waits for its own rows
    mma_bar = mbarrier.allocate_mbarrier()
    mbarrier.init(tma_bar, count=1)
    mbarrier.init(a_bar, count=1)
    mbarrier.init(mma_bar, count=tcgen05_mma_barrier_count([b_smem], multicast=False, two_ctas=True))
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(BM // 2, BN), col_stride=1,
                                                  cga_layout=c_desc.layout.cga_layout, two_ctas=True)
    acc_tmem = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
    a_layout: gl.constexpr = TensorMemoryLayout(block=(BM // 2, BK), col_stride=1,
                                                cga_layout=c_desc.layout.cga_layout, two_ctas=True)
    a_tmem = allocate_tensor_memory(gl.float16, [BM, BK], a_layout)
    phase = 0
    use_acc = False
    for k in range(0, K, BK):
        mbarrier.expect(a_bar, a_desc.nbytes_per_cta)
        tma.async_load(a_desc, [off_m, k], a_bar, a_smem)
        mbarrier.wait(a_bar, phase, deps=[a_smem])
        a_tmem.store(a_smem.load(a_tmem.get_reg_layout()))
        # the peer's A is in its TMEM before it arrives on the lead CTA's barrier (expect), so the
        # lead's wait, and the MMA after it, come after the peer's tcgen05.st
        mbarrier.expect(tma_bar, b_desc.nbytes_per_cta)
        tma.async_load(b_desc, [k, off_n], tma_bar, b_smem)
        mbarrier.wait(tma_bar, phase, deps=[b_smem])
        tcgen05_mma(a_tmem, b_smem, acc_tmem, use_acc=use_acc, mbarriers=[mma_bar])
        mbarrier.wait(mma_bar, phase, deps=[a_smem, b_smem])
        phase ^= 1
        use_acc = True
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc_tmem.load().to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)
