"""Property tests of compiled GEMMs on hardware: random valid schedules, random non-zero
inputs, NaN-poisoned outputs, compared with a float64 reference (relative Frobenius error)."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import (compile_or_reject, device_compile_arch, draw_kernel, random_operands, record, reference,
                         require_gpu, sim_or)

require_gpu()

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ptxgen  # noqa: E402
from ptxgen.check import compare, poisoned  # noqa: E402

ARCH = device_compile_arch()
SETTINGS = settings(max_examples=sim_or(60, 4), deadline=None, derandomize=False, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def _check(g, kern, c, a, b, what: str) -> None:
    """Every element written, and within `ptxgen.check.tolerance(g)` (exact for s32 outputs)."""
    result = compare(np.asarray(c), reference(a, b), g)
    if not result.ok:
        record(f"gemm::{what}", gemm=str(g), schedule=str(kern.schedule), arch=kern.arch,
               unwritten=result.unwritten, rel_err=result.rel_frobenius, resources=str(kern.resources))
    assert result.unwritten == 0, f"{result.unwritten} output elements never written ({g}, {kern.schedule})"
    assert result.ok, f"{result} for {g}, {kern.schedule}"


@SETTINGS
@given(st.data())
def test_random_schedules_match_float64(data):
    g, s, kern = draw_kernel(data, ARCH, max_tiles=sim_or((3, 3, 6), (1, 1, 2)))
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    a, b = random_operands(g, seed)
    c = poisoned((g.m, g.n), g.out_dtype)  # NaN, or INT32_MIN for s32
    out = kern(a, b, c=c)
    assert out is c
    _check(g, kern, c, a, b, "property")


@SETTINGS
@given(st.data())
def test_int8_rows_of_the_dtype_table_match_float64(data):
    """s8/u8 inputs -> s32 (exact), s8/u8 (quantised: exact but for one LSB at rounding ties) or
    f32/f16/bf16 (dequantised), with alpha, per-row/column scale vectors, beta, bias and
    activations; 8-bit outputs run once per poison (check.BYTE_POISON, through check_kernel)."""
    from ptxgen.check import check_kernel, random_epilogue_operands, random_scale
    from ptxgen.check import random_operands as int_operands

    dtype = data.draw(st.sampled_from(["s8", "u8"]), label="dtype")
    out = data.draw(st.sampled_from(["s32", "s8", "s8", "u8", "f32", "f16", "bf16"]), label="out_dtype")
    epi = None if out == "s32" else ptxgen.Epilogue(
        alpha=data.draw(st.sampled_from([1.0, 0.5, -2.0]), label="alpha"),
        beta=data.draw(st.sampled_from([0.0, 0.0, 0.5]), label="beta"),
        bias=data.draw(st.sampled_from([None, "row", "col"]), label="bias"),
        activation=data.draw(st.sampled_from([None, "relu", "gelu", "silu"]), label="act"),
        scale=data.draw(st.sampled_from([None, "col", "row"]), label="scale"))
    m, n = (data.draw(st.sampled_from(sim_or([1, 7, 17, 64, 100, 256, 300], [1, 7, 17, 64, 100])), label=d)
            for d in "MN")
    k = data.draw(st.sampled_from(sim_or([16, 64, 100, 512, 1024], [16, 64, 100])), label="K")
    g = ptxgen.Gemm(m, n, k, dtype=dtype, out_dtype=out, epilogue=epi)
    s = ptxgen.Schedule(block=data.draw(st.sampled_from([(64, 64, 64), (128, 128, 64), (128, 64, 128), (32, 64, 32)]),
                                        label="block"),
                        warps=data.draw(st.sampled_from([(2, 2), (1, 1), (4, 2)]), label="warps"),
                        stages=data.draw(st.integers(1, 4), label="stages"),
                        epilogue_via_smem=data.draw(st.sampled_from([None, True, False]), label="via_smem"))
    kern = compile_or_reject(data, g, s, ARCH)
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    a, b = int_operands(g, seed)
    c0, bias = random_epilogue_operands(g, seed + 1)
    scale = random_scale(g, seed + 2)
    result = check_kernel(kern, a, b, c0, bias, scale, run=kern)  # two poisons for 8-bit outputs
    if not result.ok:
        record("gemm::int8", gemm=str(g), schedule=str(s), arch=kern.arch, result=str(result))
    assert result.ok, f"{g}, {s}: {result}"


@pytest.mark.parametrize("out_dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_fixed_schedules(out_dtype, b_layout):
    for block, warps, stages in (((128, 128, 32), (2, 2), 3), ((128, 256, 32), (2, 4), 3),
                                 ((256, 128, 32), (4, 2), 3), ((64, 64, 64), (2, 2), 4)):
        g = ptxgen.Gemm(*sim_or((512, 512, 256), (256, 256, 64)), dtype="f16", out_dtype=out_dtype,
                        b_layout=b_layout)
        try:
            kern = ptxgen.compile(g, ptxgen.Schedule(block=block, warps=warps, stages=stages), arch=ARCH)
        except ptxgen.ScheduleError as e:
            record("gemm::fixed_rejected", gemm=str(g), block=block, reason=str(e))
            continue
        a, b = random_operands(g, 1)
        _check(g, kern, kern(a, b), a, b, "fixed")  # fresh C: poisoned by the runtime


def test_padded_leading_dimensions_numpy():
    g = ptxgen.Gemm(256, 256, 128, dtype="bf16", out_dtype="f32", b_layout="col")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(128, 128, 32)), arch=ARCH)
    a0, b0 = random_operands(g, 3)
    a_store = np.zeros((256, 128 + 24), a0.dtype)
    a_store[:, :128] = a0
    b_store = np.zeros((256, 128 + 40), b0.dtype)  # (N, K + pad), B = store[:, :K].T
    b_store[:, :128] = b0.T
    c_store = np.full((256, 256 + 8), np.nan, np.float32)
    kern(a_store[:, :128], b_store[:, :128].T, c=c_store[:, :256])
    _check(g, kern, c_store[:, :256], a0, b0, "padded_numpy")
    assert np.isnan(c_store[:, 256:]).all()


def test_torch_device_arrays_streams_and_padding():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():  # a CPU build of torch has no device tensors
        pytest.skip("torch without CUDA (a CPU build): the torch device tests need a CUDA build and a GPU")
    g = ptxgen.Gemm(256, 384, 192, dtype="f16", out_dtype="f16", b_layout="col")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(128, 128, 32)), arch=ARCH)
    a0, b0 = random_operands(g, 4)
    a = torch.from_numpy(a0).cuda()
    b_store = torch.zeros(384, 192 + 8, dtype=torch.float16, device="cuda")
    b_store[:, :192] = torch.from_numpy(np.ascontiguousarray(b0.T)).cuda()
    b = b_store[:, :192].t()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = kern(a, b)  # default stream: torch's current stream (s)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float16 and c.is_cuda
    s.synchronize()
    _check(g, kern, c.cpu().numpy(), a0, b0, "torch_f16")
    c2 = torch.full((256, 384), float("nan"), dtype=torch.float16, device="cuda")
    kern(a, b, c=c2, stream=s)
    s.synchronize()
    _check(g, kern, c2.cpu().numpy(), a0, b0, "torch_explicit_stream")


def test_torch_bf16_goes_through_dlpack():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():  # a CPU build of torch has no device tensors
        pytest.skip("torch without CUDA (a CPU build): the torch device tests need a CUDA build and a GPU")
    g = ptxgen.Gemm(128, 128, 64, dtype="bf16", out_dtype="bf16", b_layout="col")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(128, 128, 32)), arch=ARCH)
    a0, b0 = random_operands(g, 5)
    a = torch.from_numpy(a0.view(np.int16)).cuda().view(torch.bfloat16)
    b = torch.from_numpy(np.ascontiguousarray(b0.T).view(np.int16)).cuda().view(torch.bfloat16).t()
    c = kern(a, b)
    torch.cuda.synchronize()
    _check(g, kern, c.float().cpu().numpy(), a0, b0, "torch_bf16")


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    g = ptxgen.Gemm(128, 256, 64, dtype="f16", out_dtype="f32", b_layout="row")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(128, 128, 32)), arch=ARCH)
    a0, b0 = random_operands(g, 6)
    c = kern(cupy.asarray(a0), cupy.asarray(b0))
    assert isinstance(c, cupy.ndarray)
    _check(g, kern, cupy.asnumpy(c), a0, b0, "cupy")


def test_torch_int8_inputs_give_a_torch_s32_output():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():  # a CPU build of torch has no device tensors
        pytest.skip("torch without CUDA (a CPU build): the torch device tests need a CUDA build and a GPU")
    g = ptxgen.Gemm(128, 128, 64, dtype="s8", out_dtype="s32", b_layout="row")
    kern = ptxgen.compile(g, ptxgen.Schedule(block=(128, 128, 64)), arch=ARCH)
    a0, b0 = random_operands(g, 7)
    c = kern(torch.from_numpy(a0).cuda(), torch.from_numpy(np.ascontiguousarray(b0)).cuda())
    torch.cuda.synchronize()
    assert isinstance(c, torch.Tensor) and c.dtype == torch.int32 and c.is_cuda
    _check(g, kern, c.cpu().numpy(), a0, b0, "torch_s32")
