"""Block scales (DeepSeek-V3's 1x128 activation and 128x128 weight blocks, and OCP MXFP8's 1x32
exponents; schedule/block_scale.py) as torch tensors: which `scale_a`, `scale_b` pairs are block
scales, their dtypes, and the block-scaled `scaled_mm` run (sm_90a's promoted wgmma kernels; on sm_100a tcgen05's MX block-scaled
MMA, power-of-two scales only; on CPU tensors the simulator).

Shapes are the logical orientation: scale_a (M, ceil(K/128)), scale_b (ceil(K/128), ceil(N/128)),
in any strides a row- or column-major view covers, so the M-contiguous storage DeepGEMM and
cuBLASLt keep for scale_a is passed as its transpose (`sa_storage.t()`), not copied. Scales are
float32, or float8_e8m0fnu (power-of-two exponents: `BlockScale(dtype="ue8m0")`).
"""
from __future__ import annotations

from dataclasses import replace

import torch

import ptxgen
from ptxgen.schedule.block_scale import SCALE_BLOCK_K
from ptxgen.schedule.targets import target as ptxgen_target
from ptxgen.torch.dispatch import (Vector, arch_for, describe, gemm_problem, kernel_for, run_checked, signature,
                                   signatures)

#: torch dtype of a scale tensor -> BlockScale.dtype.
SCALE_DTYPES = {torch.float32: "f32", torch.float8_e8m0fnu: "ue8m0"}
#: The MX block scales (BlockScale(a=(1, 32), b=(32, 1), "ue8m0")) that tcgen05 applies in its MMA
#: (targets/sm100/scales.py): scaled_mm's MXFP8 scales, and on a target without wgmma's promotion
#: (sm_100a) 1x128 / 128x128 power-of-two scales too, each repeated over its block's 32-wide K
#: groups and B's columns.
MX_SCALES = ptxgen.BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")
MX_GROUP = MX_SCALES.a[1]


def blocks(extent: int) -> int:
    """Scale blocks along a dimension of `extent` (128 wide; the last one partial)."""
    return -(-extent // SCALE_BLOCK_K)


def is_block_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> bool:
    """Whether (scale_a, scale_b) are block scales of a (M, K) @ b (K, N) and not one of
    torch._scaled_mm's per-tensor / per-row / per-column pairs (where the shapes coincide, at
    K <= 128 and N <= 128, the two readings compute the same product)."""
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    sa, sb = tuple(scale_a.shape), tuple(scale_b.shape)
    per_channel = (scale_a.numel() == 1 or sa == (m, 1)) and (scale_b.numel() == 1 or sb == (1, n))
    return not per_channel and sa == (m, blocks(k)) and sb == (blocks(k), blocks(n))


def is_mx_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> bool:
    """Whether (scale_a, scale_b) are MX scales (OCP MXFP8: one power-of-two exponent per 32 of K),
    float8_e8m0fnu scale_a (M, ceil(K/32)) per 1x32 block of a and scale_b (ceil(K/32), N) per
    32x1 block of b, in the logical orientation (not torch._scaled_mm's swizzled 128x4 blocks,
    which ptxgen makes itself). Where 1x128 block scales have the same shapes (K <= 32, N = 1),
    both readings compute the same product."""
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    groups = -(-k // MX_GROUP)
    return (scale_a.dtype == scale_b.dtype == torch.float8_e8m0fnu
            and tuple(scale_a.shape) == (m, groups) and tuple(scale_b.shape) == (groups, n))


def scale_dtype(scale_a: torch.Tensor, scale_b: torch.Tensor, who: str) -> str:
    """The BlockScale dtype of both scales, or a TypeError naming the dtypes that work."""
    if scale_a.dtype != scale_b.dtype or scale_a.dtype not in SCALE_DTYPES:
        raise TypeError(f"{who}: block scales must both be float32 (or both float8_e8m0fnu, power-of-two "
                        f"exponents): got scale_a {describe(scale_a)}, scale_b {describe(scale_b)}")
    return SCALE_DTYPES[scale_a.dtype]


def as_scale_array(t: torch.Tensor) -> torch.Tensor:
    """A scale as the kernel reads it: f32 as it is, e8m0 as its uint8 exponents (the same bytes)."""
    return t.view(torch.uint8) if t.dtype == torch.float8_e8m0fnu else t


def per_mx_group(scale_a: torch.Tensor, scale_b: torch.Tensor, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """1x128 / 128x128 scales as MX_SCALES' (..., M, ceil(K/32)) and (..., ceil(K/32), N) (a grouped
    GEMM's leading group dimension kept): every K group of a 128-wide block, and every column of a
    128-wide block of B, takes the block's scale."""
    per_block, groups = SCALE_BLOCK_K // MX_GROUP, -(-k // MX_GROUP)
    sa = scale_a.repeat_interleave(per_block, dim=-1)[..., :groups]
    sb = scale_b.repeat_interleave(per_block, dim=-2)[..., :groups, :]
    sb = sb.repeat_interleave(SCALE_BLOCK_K, dim=-1)[..., :n]
    return sa.contiguous(), sb.contiguous()


def block_scale_for(target: str, dtype: str, who: str = "ptxgen.torch.scaled_mm") -> ptxgen.BlockScale:
    """The BlockScale `target`'s kernel applies: 1x128 / 128x128 where wgmma's promotion does,
    else MX_SCALES, which takes power-of-two scales only (an error says how to give them)."""
    if ptxgen_target(target).wgmma:
        return ptxgen.BlockScale(dtype=dtype)
    if dtype != "ue8m0":
        raise TypeError(f"{who}: on {target} the MMA applies block scales as power-of-two "
                        f"exponents (MX, 32 of K at a time), so float32 scales would be rounded: round them to "
                        f"powers of two and pass float8_e8m0fnu tensors (DeepGEMM's UE8M0 recipe), or run on "
                        f"Hopper (sm_90a), whose kernels take float32 block scales")
    return MX_SCALES


def run_block_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                     out: torch.dtype, bias: Vector | None, mx: bool = False) -> torch.Tensor:
    """(a * scale_a) @ (b * scale_b) by 128-wide K blocks (`mx`: by 32-wide MX groups), then + bias:
    the block-scaled kernel (compiled once per signature), into a C PyTorch allocates."""
    dtype = scale_dtype(scale_a, scale_b, "ptxgen.torch.scaled_mm")
    key = signature(a, b, "mx-scaled" if mx else "block-scaled", out, dtype, scale_a.shape, scale_a.stride(),
                    scale_b.stride(), None if bias is None else (bias.kind, bias.data.dtype))
    prepared = signatures.get(key)
    if prepared is None:
        target = arch_for(a.device, True, None)
        a2, b2, g = gemm_problem(a, b, out, bias, None, 1.0, 0.0, None)
        g = replace(g, block_scale=MX_SCALES if mx else block_scale_for(target, dtype))
        prepared = signatures[key] = (kernel_for(g, target), a2 is not a, b2 is not b)
    kernel, copy_a, copy_b = prepared
    c = a.new_empty((a.shape[0], b.shape[1]), dtype=out)
    sa, sb = as_scale_array(scale_a), as_scale_array(scale_b)
    if kernel.gemm.block_scale == MX_SCALES and not mx:
        sa, sb = per_mx_group(sa, sb, a.shape[1], b.shape[1])
    run_checked(kernel, a.contiguous() if copy_a else a, b.contiguous() if copy_b else b, c,
                None if bias is None else bias.data, scale_a=sa, scale_b=sb)
    return c
