"""A standard Triton matmul (f32 accumulation, grouped tile order) with the usual autotune
configs, as the Triton baseline for bench/gemm.py. Imported only on a GPU machine.

    from triton_matmul import matmul
    matmul(a, b, out=c)    # a: (M, K), b: (K, N) torch tensors (any strides), c: (M, N)
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


def _config(bm: int, bn: int, bk: int, stages: int, warps: int, group: int = 8) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
                         num_stages=stages, num_warps=warps)


#: Big tiles for large problems, narrow-M tiles for the skinny LLM shapes.
CONFIGS = [
    _config(128, 256, 64, 3, 8),
    _config(256, 128, 64, 3, 8),
    _config(128, 128, 64, 4, 4),
    _config(128, 128, 32, 4, 4),
    _config(64, 128, 64, 4, 4),
    _config(64, 64, 64, 4, 4),
    _config(32, 128, 128, 4, 4),
    _config(16, 128, 128, 4, 4),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K,
            s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
            GROUP_M: tl.constexpr):
    # Grouped order: GROUP_M consecutive tile rows walk the N tiles together, sharing B in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows_in_group
    tile_n = (pid % per_group) // rows_in_group

    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + (rm % M)[:, None] * s_am + rk[None, :] * s_ak
    b_tile = b_ptr + rk[:, None] * s_bk + (rn % N)[None, :] * s_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_left = K - k0
        a = tl.load(a_tile, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_tile, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * s_ak
        b_tile += BLOCK_K * s_bk

    c_tile = c_ptr + rm[:, None] * s_cm + rn[None, :] * s_cn
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """C = A @ B with f32 accumulation; C has A's dtype unless `out` is given."""
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, (a.shape, b.shape)
    if out is None:
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    _matmul[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                  out.stride(0), out.stride(1))
    return out


def best_config(m: int, n: int, k: int) -> str | None:
    """The autotuner's pick for a problem size, once it has run (for the results file)."""
    cfg = _matmul.cache.get((m, n, k)) if hasattr(_matmul, "cache") else None
    if cfg is None:
        for key, value in getattr(_matmul, "cache", {}).items():
            if tuple(key[:3]) == (m, n, k):
                cfg = value
                break
    return None if cfg is None else str(cfg)
