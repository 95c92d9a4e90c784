"""torch.library.opcheck for every ptxgen operator and every dtype the built kernels take
(schema, fake tensors, autograd registration, AOT dispatch with dynamic shapes), on CPU tensors
through the simulator, plus each result against float64 numpy (`ptxgen.check.compare`)."""
from __future__ import annotations

import pytest
import torch

import ptxgen
import ptxgen.torch as pt
from ptxgen.check import compare, reference
from tests.torch.tensors import f64, rand

OPS = torch.ops.ptxgen


def check_against_numpy(got: torch.Tensor, a, b, out_dtype: str, in_dtype: str, epilogue=None, bias=None, c=None):
    k = a.shape[-1]
    g = ptxgen.Gemm(a.shape[-2], b.shape[-1], k, dtype=in_dtype, out_dtype=out_dtype, epilogue=epilogue)
    ref = reference(f64(a), f64(b), epilogue, None if c is None else f64(c), None if bias is None else f64(bias))
    result = compare(f64(got) if got.dtype != torch.int32 else got.numpy(), ref, g)
    assert result.ok, result


@pytest.mark.parametrize("dtype, out", [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                                        (torch.float32, torch.float32), (torch.float16, torch.float32)])
def test_gemm_opcheck_float(dtype, out):
    a = rand(16, 32, dtype=dtype, seed=1, grad=True)
    w = rand(32, 32, dtype=dtype, seed=2, grad=True)  # b = w.t(): a column-major view, not a copy
    bias = rand(32, dtype=out if out != torch.float32 else torch.float32, seed=3, grad=True)
    kwargs = {"out_dtype": out, "bias": bias, "activation": "relu"}
    torch.library.opcheck(OPS.gemm.default, (a, w.t()), kwargs)
    got = OPS.gemm(a, w.t(), **kwargs)
    in_dtype = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "tf32"}[dtype]
    out_name = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}[out]
    check_against_numpy(got, a, w.t(), out_name, in_dtype, ptxgen.Epilogue(bias="col", activation="relu"), bias)


def test_gemm_opcheck_int8_to_s32():
    g = torch.Generator().manual_seed(4)
    a = torch.randint(-8, 8, (16, 64), dtype=torch.int8, generator=g)
    b = torch.randint(-8, 8, (64, 32), dtype=torch.int8, generator=g)
    torch.library.opcheck(OPS.gemm.default, (a, b))
    got = OPS.gemm(a, b)
    assert got.dtype == torch.int32
    assert torch.equal(got, a.to(torch.int32) @ b.to(torch.int32))


def test_gemm_epilogue_beta_scale_and_batch():
    a = rand(2, 16, 32, dtype=torch.float16, seed=5, grad=True)
    b = rand(2, 32, 16, dtype=torch.float16, seed=6, grad=True)
    c = rand(2, 16, 16, dtype=torch.float32, seed=7, grad=True)
    scale = rand(16, dtype=torch.float32, seed=8, grad=True)
    kwargs = {"out_dtype": torch.float32, "alpha": 0.5, "beta": 2.0, "c": c, "scale": scale}
    torch.library.opcheck(OPS.gemm.default, (a, b), kwargs)
    got = OPS.gemm(a, b, **kwargs)
    want = 0.5 * scale.double() * (a.double() @ b.double()) + 2.0 * c.double()
    for i in range(2):
        g = ptxgen.Gemm(16, 16, 32, dtype="f16", out_dtype="f32",
                        epilogue=ptxgen.Epilogue(alpha=0.5, beta=2.0, scale="col"))
        assert compare(f64(got[i]), want[i].detach().numpy(), g).ok


def test_linear_opcheck_with_leading_dims():
    x = rand(2, 8, 32, dtype=torch.float16, seed=9, grad=True)
    w = rand(16, 32, dtype=torch.float16, seed=10, grad=True)
    bias = rand(16, dtype=torch.float16, seed=11, grad=True)
    torch.library.opcheck(OPS.linear.default, (x, w, bias, "silu"))
    got = pt.linear(x, w, bias, "silu")
    assert got.shape == (2, 8, 16) and got.dtype == torch.float16
    check_against_numpy(got.reshape(16, 16), x.reshape(16, 32), w.t(), "f16", "f16",
                        ptxgen.Epilogue(bias="col", activation="silu"), bias)


@pytest.mark.parametrize("rowwise", [False, True])
def test_scaled_mm_fp8_on_the_sm90a_simulator(rowwise):
    a = rand(16, 32, dtype=torch.float32, seed=12).to(torch.float8_e4m3fn)
    b = rand(32, 32, dtype=torch.float32, seed=13).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm
    scale_a = (rand(16, 1, dtype=torch.float32, seed=14).abs() if rowwise else torch.tensor(0.5))
    scale_b = torch.tensor(2.0)
    # opcheck's test_schema compares inputs before and after with torch.allclose, which PyTorch does
    # not implement for CPU fp8 tensors; the same checks (no input mutated, no output aliasing one)
    # are made below on the fp8 bytes, and every other opcheck test runs.
    utils = tuple(u for u in ("test_schema", "test_autograd_registration", "test_faketensor",
                              "test_aot_dispatch_dynamic") if u != "test_schema")
    torch.library.opcheck(OPS.scaled_mm.default, (a, b, scale_a, scale_b, torch.bfloat16), test_utils=utils)
    before = [t.view(torch.uint8).clone() for t in (a, b)]
    got = pt.scaled_mm(a, b, scale_a, scale_b, torch.bfloat16)
    assert all(torch.equal(t.view(torch.uint8), x) for t, x in zip((a, b), before))
    assert got.untyped_storage().data_ptr() not in (a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr())
    want = (f64(a) * f64(scale_a).reshape(-1, 1)) @ (f64(b) * 2.0) if rowwise else f64(a) @ f64(b)
    g = ptxgen.Gemm(16, 32, 32, dtype="e4m3", out_dtype="bf16",
                    epilogue=ptxgen.Epilogue(scale="row" if rowwise else "col"))
    assert compare(f64(got), want, g).ok


def test_transposed_views_are_layouts_not_copies():
    a = rand(32, 16, dtype=torch.float16, seed=15).t()  # (16, 32) column-major
    b = rand(32, 48, dtype=torch.float16, seed=16)
    pt.clear_caches()
    got = pt.gemm(a, b)
    (kernel,) = pt.cached_kernels()
    assert (kernel.gemm.a_layout, kernel.gemm.b_layout) == ("col", "row")
    check_against_numpy(got, a, b, "f16", "f16")
    pt.gemm(a, b)
    assert pt.cached_kernels() == [kernel]  # a repeated call is a lookup, not a compile


def test_bad_input_names_the_fix():
    a = rand(16, 32, dtype=torch.float16, seed=17)
    with pytest.raises(ValueError, match="do not multiply"):
        pt.gemm(a, rand(16, 32, dtype=torch.float16, seed=18))
    with pytest.raises(TypeError, match="float64"):
        pt.gemm(a.double(), a.double().t())
    with pytest.raises(ValueError, match="one vector"):
        a8 = a.to(torch.float8_e4m3fn)
        pt.scaled_mm(a8, a8.t(), torch.ones(16, 1), torch.ones(1, 16), torch.float32)
    with pytest.raises(ValueError, match="activation"):
        pt.linear(a, a, None, "tanh")


def test_eager_calls_skip_the_dispatcher_only_when_nothing_needs_it():
    from ptxgen.torch.ops import eager_direct

    x = rand(4, 4, dtype=torch.float16, seed=19)
    assert eager_direct(x, x, None)
    assert not eager_direct(x, x.clone().requires_grad_(True))  # autograd records the operator
    with torch.no_grad():
        assert eager_direct(x, x.clone().requires_grad_(True))
    assert torch.vmap(lambda t: torch.tensor(eager_direct(t)))(x).logical_not().all()  # functorch transform
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        assert not eager_direct(torch.empty(2, 2))


def test_offset_views_batch_of_one_and_empty_k():
    base = rand(16, 40, dtype=torch.float16, seed=20)
    a = base[:, 1:33]  # a 2-byte-aligned start and a padded leading dimension: used in place
    b = rand(32, 16, dtype=torch.float16, seed=21)
    check_against_numpy(pt.gemm(a, b), a, b, "f16", "f16")
    got = pt.gemm(a.unsqueeze(0), b.unsqueeze(0))
    assert got.shape == (1, 16, 16)
    check_against_numpy(got[0], a, b, "f16", "f16")
    bias = rand(16, dtype=torch.float32, seed=22)
    empty_k = pt.gemm(a[:, :0], b[:0], bias=bias, activation="relu", out_dtype=torch.float32)
    assert torch.equal(empty_k, torch.relu(bias).expand(16, 16))
