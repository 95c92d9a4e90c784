"""scaled_mm with block scales (DeepSeek-V3's 1x128 / 128x128; ptxgen/torch/scales.py) on CPU
tensors through the sm_90a simulator: against the float64 block-by-block reference (K not a
multiple of 128, scales over four decades, row-major and M-contiguous scale storage, f32 and e8m0
scales, a bias), opcheck and torch.compile, the per-tensor path kept apart, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ptxgen.torch as pt
from ptxgen.check import compare, reference
from ptxgen.schedule.block_scale import random_block_scales
from tests.torch.tensors import fp8

OPS = torch.ops.ptxgen
M, N, K = 40, 144, 336  # K: two full 128-wide blocks and a partial one; N: a full and a partial n-block


def operands(scale_dtype: str = "f32", seed: int = 0):
    a = fp8(M, K, seed=seed)
    b = fp8(N, K, seed=seed + 1).t()  # (K, N) column-major, as torch._scaled_mm takes b
    bs = __import__("ptxgen").BlockScale(dtype=scale_dtype)
    sa, sb = random_block_scales(bs, M, N, K, seed=seed + 2)
    if scale_dtype == "ue8m0":
        return a, b, torch.from_numpy(sa).view(torch.float8_e8m0fnu), torch.from_numpy(sb).view(torch.float8_e8m0fnu)
    return a, b, torch.from_numpy(sa), torch.from_numpy(sb)


def numpy_scale(t: torch.Tensor) -> np.ndarray:
    return (t.view(torch.uint8) if t.dtype == torch.float8_e8m0fnu else t).contiguous().numpy()


def check(got: torch.Tensor, a, b, sa, sb, bias=None) -> None:
    k = pt.cached_kernels()[-1]
    g = k.gemm
    assert g.block_scale is not None and g.dtype == "e4m3"
    f64 = lambda t: t.to(torch.float64).numpy()  # noqa: E731
    ref = reference(f64(a), f64(b), g.epilogue, bias=None if bias is None else f64(bias), block_scale=g.block_scale,
                    scale_a=numpy_scale(sa), scale_b=numpy_scale(sb))
    result = compare(f64(got), ref, g)
    assert result.ok, result
    plain = compare(f64(got), reference(f64(a), f64(b), g.epilogue, bias=None if bias is None else f64(bias)), g)
    assert not plain.ok, "the scales changed nothing: the comparison would not see them"


@pytest.mark.parametrize("scale_dtype", ["f32", "ue8m0"])
def test_block_scales_match_float64_block_by_block(scale_dtype):
    a, b, sa, sb = operands(scale_dtype)
    pt.clear_caches()
    got = pt.scaled_mm(a, b, sa, sb, torch.bfloat16)
    assert got.shape == (M, N) and got.dtype == torch.bfloat16
    assert pt.cached_kernels()[-1].gemm.block_scale.dtype == scale_dtype
    check(got, a, b, sa, sb)


def test_m_contiguous_scale_storage_and_a_bias():
    """DeepGEMM's scale_a storage, (ceil(K/128), M) row-major, passed as its transpose: no copy."""
    a, b, sa, sb = operands(seed=5)
    sa_storage = sa.t().contiguous()
    bias = torch.linspace(-1, 1, N)
    pt.clear_caches()
    got = pt.scaled_mm(a, b, sa_storage.t(), sb, torch.float32, bias=bias)
    check(got, a, b, sa, sb, bias)


def test_opcheck_and_torch_compile():
    a, b, sa, sb = operands(seed=7)
    # test_schema compares inputs with torch.allclose, which CPU fp8 tensors lack (test_torch_opcheck.py)
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(OPS.scaled_mm.default, (a, b, sa, sb, torch.float16), test_utils=utils)  # |C| < 65504
    pt.clear_caches()
    got = torch.compile(lambda *x: pt.scaled_mm(*x, torch.float32) * 2, fullgraph=True)(a, b, sa, sb)
    check(got / 2, a, b, sa, sb)


def test_per_tensor_scales_keep_their_kernel():
    a, b, _, _ = operands(seed=9)
    pt.clear_caches()
    pt.scaled_mm(a, b, torch.tensor(0.5), torch.tensor(2.0), torch.bfloat16)
    assert pt.cached_kernels()[-1].gemm.block_scale is None


def test_refusals_name_the_fix():
    a, b, sa, sb = operands(seed=11)
    with pytest.raises(ValueError, match="use_fast_accum=False"):
        pt.scaled_mm(a, b, sa, sb, torch.bfloat16, use_fast_accum=True)
    with pytest.raises(TypeError, match="both be float32"):
        pt.scaled_mm(a, b, sa, sb.double(), torch.bfloat16)
    with pytest.raises(ValueError, match=r"or block scales: scale_a \(40, 3\) per 1x128 and scale_b \(3, 2\)"):
        pt.scaled_mm(a, b, sa, sb[:, :1], torch.bfloat16)
