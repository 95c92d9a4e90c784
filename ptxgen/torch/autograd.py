"""Backward formulas of `ptxgen::gemm` and `ptxgen::linear`, themselves ptxgen GEMMs.

For C = act(Z), Z = alpha * scale * (A @ B) + beta * C0 + bias: dZ = dC * act'(Z), then
dA = (alpha scale dZ) @ B^T and dB = A^T @ (alpha scale dZ), where B^T and A^T are transposed
views (a layout for the kernel, not a copy). ReLU's derivative comes from the output; GELU's and
SiLU's need Z, which is recomputed by one more ptxgen GEMM (f32 output, no activation) rather
than kept from the forward. Gradients of 8-bit (integer, fp8) products are refused.
"""
from __future__ import annotations

import torch

from ptxgen.torch.convert import FP8

_NO_GRAD = (torch.int8, torch.uint8, *FP8)


def _act_backward(grad: torch.Tensor, activation: str | None, out: torch.Tensor, z) -> torch.Tensor:
    """dZ from dC: `z` is a function computing Z (only GELU and SiLU need it)."""
    if activation is None:
        return grad
    if activation == "relu":
        return torch.ops.aten.threshold_backward(grad, out, 0)
    zz = z()
    g32 = grad.to(torch.float32)
    if activation == "gelu":
        return torch.ops.aten.gelu_backward(g32, zz, approximate="tanh")
    return torch.ops.aten.silu_backward(g32, zz)


def _refuse_8bit(dtype: torch.dtype) -> None:
    if dtype in _NO_GRAD:
        raise NotImplementedError(f"ptxgen.torch: no gradient for {dtype} inputs (8-bit products are for inference; "
                                  f"train with float16, bfloat16 or float32 weights)")


# -- gemm -------------------------------------------------------------------------------------
def _gemm_setup(ctx, inputs, output) -> None:
    a, b, out_dtype, bias, activation, alpha, beta, c, scale, schedule, arch = inputs
    ctx.save_for_backward(a, b, bias, c, scale, output)
    ctx.activation, ctx.alpha, ctx.beta = activation, alpha, beta


def _gemm_backward(ctx, grad):
    a, b, bias, c, scale, out = ctx.saved_tensors
    _refuse_8bit(a.dtype)
    gemm = torch.ops.ptxgen.gemm
    m, n = a.shape[-2], b.shape[-1]

    def z() -> torch.Tensor:
        return gemm(a, b, torch.float32, bias, None, ctx.alpha, ctx.beta, c, scale)

    dz = _act_backward(grad, ctx.activation, out, z)
    col = scale is not None and tuple(scale.shape) in ((n,), (1, n))
    scale_b = None if scale is None else (scale.reshape(-1) if col else scale.reshape(-1, 1))
    dacc = dz * ctx.alpha if ctx.alpha != 1.0 else dz
    if scale_b is not None:
        dacc = dacc * scale_b
    need = ctx.needs_input_grad
    da = gemm(dacc.to(b.dtype), b.mT, a.dtype) if need[0] else None
    db = gemm(a.mT, dacc.to(a.dtype), b.dtype) if need[1] else None
    dbias = dc = dscale = None
    if bias is not None and need[3]:
        rows = tuple(bias.shape) == (m, 1) and tuple(bias.shape) not in ((n,), (1, n))
        dbias = dz.sum(dim=-1, keepdim=True) if rows else dz.sum(dim=tuple(range(dz.dim() - 1)))
        dbias = dbias.reshape(bias.shape).to(bias.dtype)
    if c is not None and need[7]:
        dc = (dz * ctx.beta).sum_to_size(c.shape).to(c.dtype)
    if scale is not None and need[8]:  # d scale = sum of alpha * acc * dZ along the other dimension
        acc = gemm(a, b, torch.float32)
        prod = dz.to(torch.float32) * acc * ctx.alpha
        dscale = (prod.sum(dim=tuple(range(prod.dim() - 1))) if col else prod.sum(dim=-1, keepdim=True))
        dscale = dscale.reshape(scale.shape).to(scale.dtype)
    return da, db, None, dbias, None, None, None, dc, dscale, None, None


# -- linear -----------------------------------------------------------------------------------
def _linear_setup(ctx, inputs, output) -> None:
    x, weight, bias, activation = inputs
    ctx.save_for_backward(x, weight, bias, output)
    ctx.activation = activation


def _linear_backward(ctx, grad):
    x, weight, bias, out = ctx.saved_tensors
    _refuse_8bit(x.dtype)
    gemm = torch.ops.ptxgen.gemm
    x2 = x.reshape(-1, x.shape[-1])

    def z() -> torch.Tensor:
        return gemm(x2, weight.t(), torch.float32, bias).reshape(out.shape)

    dz = _act_backward(grad, ctx.activation, out, z)
    dz2 = dz.reshape(-1, weight.shape[0])
    need = ctx.needs_input_grad
    dx = gemm(dz2.to(weight.dtype), weight, x.dtype).reshape(x.shape) if need[0] else None
    dw = gemm(dz2.t().to(x.dtype), x2, weight.dtype) if need[1] else None
    dbias = dz2.sum(dim=0).to(bias.dtype) if bias is not None and need[2] else None
    return dx, dw, dbias, None


def register() -> None:
    torch.library.register_autograd("ptxgen::gemm", _gemm_backward, setup_context=_gemm_setup)
    torch.library.register_autograd("ptxgen::linear", _linear_backward, setup_context=_linear_setup)
