"""scaled_mm's use_fast_accum (torch._scaled_mm's argument; Gemm.fast_accum): False, the default,
compiles the promoted fp8 kernel and True the single-level one, each kept apart in the caches,
both correct against float64 numpy on the sm_90a simulator, through opcheck and torch.compile."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import ptxgen
import ptxgen.torch as pt
from ptxgen.check import compare
from ptxgen.errors import ScheduleError
from tests.torch.tensors import fp8

OPS = torch.ops.ptxgen
M, N, K = 16, 32, 256  # K: two 128-wide promotion chunks in the default kernel
PROMOTION = "// fp8 promotion ("


def operands() -> tuple[torch.Tensor, ...]:
    a = fp8(M, K, seed=31)
    b = fp8(N, K, seed=32).t()  # column-major, as torch._scaled_mm takes B
    return a, b, torch.tensor(0.5), torch.tensor(2.0)


def check(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, fast: bool) -> None:
    want = (a.double() * 0.5) @ (b.double() * 2.0)
    g = ptxgen.Gemm(M, N, K, dtype="e4m3", out_dtype="bf16", epilogue=ptxgen.Epilogue(scale="col"), fast_accum=fast)
    result = compare(got.double().numpy(), want.numpy(), g)
    assert result.ok, result


def test_default_promotes_and_use_fast_accum_compiles_the_single_level_kernel():
    a, b, sa, sb = operands()
    pt.clear_caches()
    promoted = pt.scaled_mm(a, b, sa, sb, torch.bfloat16)
    fast = pt.scaled_mm(a, b, sa, sb, torch.bfloat16, use_fast_accum=True)
    again = pt.scaled_mm(a, b, sa, sb, torch.bfloat16)  # the promoted call's kernel, not the fast one's
    kernels = pt.cached_kernels()
    assert [k.gemm.fast_accum for k in kernels] == [False, True]  # one signature each: never shared
    assert PROMOTION in kernels[0].ptx and PROMOTION not in kernels[1].ptx
    assert dataclasses.replace(kernels[0].gemm, fast_accum=True) == kernels[1].gemm  # nothing else differs
    check(promoted, a, b, fast=False)
    check(fast, a, b, fast=True)
    assert torch.equal(again, promoted)


def test_opcheck_with_use_fast_accum():
    a, b, sa, sb = operands()
    # test_schema compares inputs with torch.allclose, which CPU fp8 tensors lack (as in
    # test_torch_opcheck.py); the other opcheck tests run
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for fast in (True, False):
        torch.library.opcheck(OPS.scaled_mm.default, (a, b, sa, sb, torch.bfloat16, None, fast), test_utils=utils)
    pt.clear_caches()
    check(OPS.scaled_mm(a, b, sa, sb, torch.bfloat16, use_fast_accum=True), a, b, fast=True)
    assert [k.gemm.fast_accum for k in pt.cached_kernels()] == [True]


def test_torch_compile_passes_use_fast_accum_through():
    a, b, sa, sb = operands()

    def f(a, b, sa, sb):
        return pt.scaled_mm(a, b, sa, sb, torch.bfloat16, use_fast_accum=True) * 2

    pt.clear_caches()
    got = torch.compile(f, fullgraph=True)(a, b, sa, sb)
    assert [k.gemm.fast_accum for k in pt.cached_kernels()] == [True]
    check(got / 2, a, b, fast=True)


def test_use_fast_accum_must_be_a_bool_and_off_sm90a_fp8_is_refused_by_name(monkeypatch):
    a, b, sa, sb = operands()
    with pytest.raises(TypeError, match="use_fast_accum must be True or False"):
        pt.scaled_mm(a, b, sa, sb, torch.bfloat16, use_fast_accum=1)
    # an arch with no fp8 path (e.g. a CUDA device other than Hopper): fp8's own refusal and fix,
    # not "drop fast_accum" (which would only lead to the same refusal)
    monkeypatch.setattr("ptxgen.torch.dispatch.CPU_FP8_ARCH", "sm_89")
    pt.clear_caches()
    with pytest.raises(ScheduleError, match="multiplied only by wgmma, which needs arch='sm_90a'"):
        pt.scaled_mm(a, b, sa, sb, torch.bfloat16, use_fast_accum=True)
