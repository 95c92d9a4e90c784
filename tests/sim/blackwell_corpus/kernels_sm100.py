"""Triton kernels of the Blackwell corpus that the Hopper corpus lacks (needs Triton; only
make_corpus.py imports this file). The plain matmuls are hopper_corpus/kernels.py's, compiled for
sm_100a instead: the same Triton source, Blackwell's tcgen05 lowering.

The block-scaled kernels follow `tl.dot_scaled`'s contract: A [M, K] and B [K, N] hold fp8 bytes,
or for e2m1 two fp4 values per byte along K (the first element in the low nibble, as Triton's
docstring says; the PTX and the simulator's numerics check it), and one e8m0 scale byte per 32
elements of K: a_scale [M, K/32], b_scale [N, K/32].
"""
import triton
import triton.language as tl


@triton.jit
def dot_scaled_ptr_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
                          stride_am, stride_bk, stride_cm,
                          FORMAT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    """C[M, N] = (A * 2^a_scale) @ (B * 2^b_scale) for mx formats, masked on M and N.
    K (in elements) must be a multiple of BLOCK_K: the scales come in 32-element blocks and an
    fp4 byte holds two K elements, so Triton's masks cannot split them."""
    PACK: tl.constexpr = 2 if FORMAT == "e2m1" else 1
    SCALE_K: tl.constexpr = BLOCK_K // 32
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_ak = tl.arange(0, BLOCK_K // PACK)
    offs_sk = tl.arange(0, SCALE_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k * BLOCK_K // PACK + offs_ak)[None, :],
                    mask=offs_m[:, None] < M, other=0)
        b = tl.load(b_ptr + (k * BLOCK_K // PACK + offs_ak)[:, None] * stride_bk + offs_n[None, :],
                    mask=offs_n[None, :] < N, other=0)
        sa = tl.load(a_scale_ptr + offs_m[:, None] * (K // 32) + (k * SCALE_K + offs_sk)[None, :],
                     mask=offs_m[:, None] < M, other=127)
        sb = tl.load(b_scale_ptr + offs_n[:, None] * (K // 32) + (k * SCALE_K + offs_sk)[None, :],
                     mask=offs_n[:, None] < N, other=127)
        acc = tl.dot_scaled(a, sa, FORMAT, b, sb, FORMAT, acc)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def dot_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              NUM_SMS: tl.constexpr):
    """Persistent TMA matmul (Triton's tutorial style): NUM_SMS programs walk the output tiles."""
    start = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(start, num_m * num_n, NUM_SMS, flatten=True):
        off_m = (tile // num_n) * BLOCK_M
        off_n = (tile % num_n) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = a_desc.load([off_m, k])
            b = b_desc.load([k, off_n])
            acc = tl.dot(a, b, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def dot_ptr_int8_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """hopper_corpus's dot_ptr_kernel for int8 inputs: an int32 accumulator (tcgen05 kind::i8)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
