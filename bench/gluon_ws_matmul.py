"""A warp-specialised Hopper matmul written in Gluon (Triton 3.9's explicit-layout language), for
bench/triton_hopper.py: `tl.range(..., warp_specialize=True)` does nothing on sm_90a in Triton
3.9, so this is the Triton stack's warp-specialised baseline for issue 13's ptxgen kernels.

One producer warp loops over k-tiles issuing TMA loads into a ring of STAGES shared buffers
(`ready` mbarriers with expected bytes); the consumer warpgroup(s) wait on `ready`, issue wgmma
asynchronously, keep one wgmma group in flight, and release the previous stage on its `empty`
mbarrier. setmaxnreg hands the producer's registers to the consumers. f16 inputs, f32
accumulation and output, A [M, K], B [K, N]. Never run on a GPU; its 128x128x64 PTX (4+1 and
8+1 warps) runs on ptxgen.sim and matches numpy (tests/sim/hopper_corpus, the gluon_ws_* entries,
which make_corpus.py compiles from this file).
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                             warpgroup_mma_wait)


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, K,
              BK: gl.constexpr, STAGES: gl.constexpr):
    """Fill stage i % STAGES once the consumers have released it (the first round passes at once:
    a fresh mbarrier has completed the phase before phase 0)."""
    for i in range(gl.cdiv(K, BK)):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [off_m, i * BK], ready.index(s), a_bufs.index(s))
        tma.async_load(b_desc, [i * BK, off_n], ready.index(s), b_bufs.index(s))


@gluon.jit
def _consumer(a_bufs, b_bufs, ready, empty, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
              STAGES: gl.constexpr, WARPS: gl.constexpr):
    """wgmma over the ring; a stage is released only after the wgmma reading it has retired
    (wait_group 1 retires the previous one)."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1],
                                                     instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, layout)
    for i in range(gl.cdiv(K, BK)):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(1, deps=[acc])
        mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), pred=i > 0)
    return warpgroup_mma_wait(0, deps=[acc])


@gluon.jit
def ws_matmul(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, WARPS: gl.constexpr,
              PRODUCER_REGS: gl.constexpr):
    """C tile (program_id 0, 1) = A rows x B columns; the epilogue stores through TMA."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    acc = gl.warp_specialize(
        [(_consumer, (a_bufs, b_bufs, ready, empty, K, BM, BN, BK, STAGES, WARPS)),
         (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, K, BK, STAGES))],
        [1], [PRODUCER_REGS])
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


def signature(bm: int, bn: int, bk: int) -> dict[str, str]:
    """triton.compile's signature: Gluon descriptors carry their shared-memory layout."""
    layout = gl.NVMMASharedLayout.get_default_for
    la, lb, lc = layout([bm, bk], gl.float16), layout([bk, bn], gl.float16), layout([bm, bn], gl.float32)
    return {"a_desc": f"tensordesc<fp16[{bm}, {bk}],{la!r}>", "b_desc": f"tensordesc<fp16[{bk}, {bn}],{lb!r}>",
            "c_desc": f"tensordesc<fp32[{bm}, {bn}],{lc!r}>", "K": "i32", "STAGES": "constexpr",
            "WARPS": "constexpr", "PRODUCER_REGS": "constexpr"}
