"""fp4 `scaled_mm` (B200's NVFP4 and MXFP4): PyTorch's packed `float4_e2m1fn_x2` operands, two e2m1
values per byte along K, with their block scales, run by sm_100a's block-scaled tcgen05 kernels
(targets/sm100/scales.py; the runtime takes packed bytes as they are, runtime/fp4.py).

* a (M, K/2) row-major and b (K/2, N) column-major (the transpose of an (N, K/2) packed weight,
  `w.t()`): both K-major, the only fp4 layout the MMA reads.
* NVFP4: float8_e4m3fn scale_a (M, ceil(K/16)) and scale_b (ceil(K/16), N), one per 16 of K (e4m3
  without its sign: ue4m3). Its per-tensor f32 scale is the caller's to apply to the result.
* MXFP4: float8_e8m0fnu scale_a (M, ceil(K/32)) and scale_b (ceil(K/32), N), one per 32 of K.

Scales are in the logical orientation (ptxgen makes the 128x4 blocks the MMA reads; torch._scaled_mm
takes them pre-swizzled).
"""
from __future__ import annotations

from dataclasses import replace

import torch

import ptxgen
from ptxgen.torch.convert import output_dtype
from ptxgen.torch.dispatch import Vector, _address_alignment, arch_for, describe, kernel_for, run_checked, signature, \
    signatures

#: PyTorch's packed fp4 dtype (None before it had one).
FP4 = getattr(torch, "float4_e2m1fn_x2", None)
WHO = "ptxgen.torch.scaled_mm"
#: scale dtype -> (BlockScale, format name) of the fp4 block-scaled kinds.
FP4_SCALES = {torch.float8_e4m3fn: (ptxgen.BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3"), "NVFP4"),
              torch.float8_e8m0fnu: (ptxgen.BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0"), "MXFP4")}


def is_fp4(t: torch.Tensor) -> bool:
    return FP4 is not None and t.dtype == FP4


def check_fp4_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                     out_dtype: torch.dtype) -> ptxgen.BlockScale:
    """The BlockScale of an fp4 call, or an error naming what to change."""
    if not (is_fp4(a) and is_fp4(b)) or a.dim() != 2 or b.dim() != 2:
        raise TypeError(f"{WHO}: fp4 operands are both 2-D float4_e2m1fn_x2 (two values per byte along K): got a "
                        f"{describe(a)}, b {describe(b)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{WHO}: packed shapes do not multiply: a {describe(a)} is (M, K/2), so b must be (K/2, N) "
                         f"= ({a.shape[1]}, N); got b {describe(b)}")
    if a.device != b.device:
        raise ValueError(f"{WHO}: a is on {a.device} but b is on {b.device}: move them to one device")
    if a.stride(1) != 1 or b.stride(0) != 1:
        raise ValueError(f"{WHO}: fp4 operands are read K-major only: a (M, K/2) row-major and b (K/2, N) "
                         f"column-major, i.e. w.t() of a packed (N, K/2) weight w; got strides {a.stride()} and "
                         f"{b.stride()}: pass a.contiguous() and w.t()")
    output_dtype(out_dtype)
    if out_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{WHO}: out_dtype {out_dtype} is not float32, float16 or bfloat16")
    m, k, n = a.shape[0], 2 * a.shape[1], b.shape[1]
    found = FP4_SCALES.get(scale_a.dtype)
    if found is None or scale_b.dtype != scale_a.dtype:
        raise TypeError(f"{WHO}: fp4 multiplies block-scaled only: give NVFP4 float8_e4m3fn scales ({m}, "
                        f"{-(-k // 16)}) and ({-(-k // 16)}, {n}), or MXFP4 float8_e8m0fnu scales ({m}, {-(-k // 32)}) "
                        f"and ({-(-k // 32)}, {n}); got scale_a {describe(scale_a)}, scale_b {describe(scale_b)}")
    bs, name = found
    groups = -(-k // bs.group_k)
    for arg, t, want in (("scale_a", scale_a, (m, groups)), ("scale_b", scale_b, (groups, n))):
        if tuple(t.shape) != want:
            raise ValueError(f"{WHO}: {name} {arg} has shape {tuple(t.shape)}: one scale per {bs.group_k} of K "
                             f"(K = {k}, two per byte of a's rows) makes it {want}")
        if t.device != a.device:
            raise ValueError(f"{WHO}: {arg} is on {t.device} but a is on {a.device}: move it there")
    return bs


def run_fp4_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                   out: torch.dtype, bias: Vector | None) -> torch.Tensor:
    """The fp4 block-scaled kernel for a checked call (compiled once per signature), into a C
    PyTorch allocates; every operand passed as its bytes (the runtime reads packed fp4 as uint8)."""
    key = signature(a, b, "fp4-scaled", out, scale_a.dtype, scale_a.stride(), scale_b.stride(),
                    None if bias is None else (bias.kind, bias.data.dtype))
    kernel = signatures.get(key)
    if kernel is None:
        bs = check_fp4_scaled(a, b, scale_a, scale_b, out)
        epilogue = ptxgen.Epilogue(bias=bias.kind) if bias is not None else None
        bias_dtype = output_dtype(bias.data.dtype) if bias is not None and bias.data.dtype != torch.float32 else "f32"
        g = ptxgen.Gemm(a.shape[0], b.shape[1], 2 * a.shape[1], dtype="e2m1", out_dtype=output_dtype(out),
                        a_layout="row", b_layout="col", lda=2 * a.stride(0), ldb=2 * b.stride(1), block_scale=bs,
                        epilogue=epilogue, bias_dtype=bias_dtype)
        limit = _address_alignment(a, b)
        if limit < g.alignment():  # CUDA operands used in place: what their addresses allow
            g = replace(g, align=limit)
        kernel = signatures[key] = kernel_for(g, arch_for(a.device, True, None))
    c = a.new_empty((a.shape[0], b.shape[1]), dtype=out)
    as_bytes = [t.view(torch.uint8) for t in (a, b, scale_a, scale_b)]
    run_checked(kernel, as_bytes[0], as_bytes[1], c, None if bias is None else bias.data, scale_a=as_bytes[2],
                scale_b=as_bytes[3])
    return c
