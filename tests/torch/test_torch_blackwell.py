"""ptxgen.torch on a B200 (compute capability 10.0): the operators compile sm_100a's tcgen05 kernels,
fall back to sm_90's mma.sync PTX (which a B200 also runs) only for problems the device's own
lowering does not build and only where ptxgen picked the arch, ignore use_fast_accum (tcgen05
accumulates fp8 in f32), and run 1x128 / 128x128 power-of-two block scales as MX scales.

No B200 here: `device` makes CPU tensors take the arch a CUDA device of that capability would
(dispatch.capability_arch), so each call is chosen exactly as on the device and then simulated."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
import ptxgen.torch as pt
from ptxgen.check import compare, reference, untouched_rows
from ptxgen.schedule.block_scale import random_block_scales
from ptxgen.torch import dispatch
from ptxgen.torch.scales import MX_SCALES
from tests.torch.tensors import f64, fp8, rand


def become(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int]) -> str:
    """CPU tensors from now on choose as a GPU of `capability` would (the arch is ptxgen's pick, so
    the fallback applies), on fresh caches. Returns that arch."""
    arch = dispatch.capability_arch(capability)
    monkeypatch.setattr(dispatch, "CPU_ARCH", arch)
    monkeypatch.setattr(dispatch, "CPU_FP8_ARCH", arch)
    pt.clear_caches()
    return arch


@pytest.fixture
def device(monkeypatch):
    """`device((10, 0))`: `become` that GPU for this test."""
    yield lambda capability: become(monkeypatch, capability)
    pt.clear_caches()


def last_kernel() -> ptxgen.Kernel:
    return pt.cached_kernels()[-1]


@pytest.mark.parametrize("capability, arch", [((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 7), "sm_86"),
                                              ((8, 9), "sm_89"), ((9, 0), "sm_90a"), ((10, 0), "sm_100a"),
                                              ((10, 3), "sm_90"), ((12, 0), "sm_90"), ((7, 5), "sm_80")])
def test_each_capability_gets_the_arch_its_gpu_runs_best(capability, arch):
    """A GPU's own target where ptxgen has one; sm_100a code runs on 10.0 only, so 10.3 and 12.0
    take sm_90's PTX, which their driver assembles for them."""
    assert dispatch.capability_arch(capability) == arch


def test_linear_on_b200_is_a_tcgen05_kernel(device):
    device((10, 0))
    x, w = rand(96, 64, dtype=torch.bfloat16, seed=1), rand(80, 64, dtype=torch.bfloat16, seed=2)
    bias = rand(80, dtype=torch.float32, seed=3)
    y = pt.linear(x, w, bias, "gelu")
    k = last_kernel()
    assert (k.arch, k.schedule.instruction) == ("sm_100a", "tcgen05") and "tcgen05.mma" in k.ptx
    result = compare(f64(y), reference(f64(x), f64(w).T, k.gemm.epi, bias=f64(bias)), k.gemm)
    assert result.ok, result


@pytest.mark.parametrize("capability", [(10, 0), (9, 0)])
def test_a_problem_tma_cannot_describe_falls_back_to_the_mma_sync_kernel(device, capability):
    """K = 19 halves: rows of 38 bytes, which no tensor map takes (sm_100a and sm_90a load by TMA);
    the same device runs sm_90's mma.sync kernel, and the result is right."""
    own = device(capability)
    a, b = rand(33, 19, dtype=torch.float16, seed=4), rand(19, 47, dtype=torch.float16, seed=5)
    c = pt.gemm(a, b)
    k = last_kernel()
    assert k.arch == "sm_90" and k.schedule.instruction.startswith("m16n8")
    result = compare(f64(c), reference(f64(a), f64(b), k.gemm.epi), k.gemm)
    assert result.ok, result
    with pytest.raises(ptxgen.ScheduleError, match="lda"):  # the caller's own arch: no fallback
        pt.gemm(a, b, arch=own)


@pytest.mark.parametrize("fast", [False, True])
def test_scaled_mm_on_b200_accumulates_in_f32_with_or_without_use_fast_accum(device, fast):
    """torch._scaled_mm's use_fast_accum selects Hopper's single-level wgmma kernel; tcgen05 has no
    promotion step to skip, so on B200 both calls run the same full-precision kernel."""
    device((10, 0))
    a, b = fp8(64, 256, seed=6), fp8(48, 256, seed=7).t()
    got = pt.scaled_mm(a, b, torch.tensor(0.5), torch.tensor(2.0), torch.bfloat16, use_fast_accum=fast)
    k = last_kernel()
    assert (k.arch, k.gemm.fast_accum) == ("sm_100a", False) and "kind::f8f6f4" in k.ptx
    want = (a.double() * 0.5) @ (b.double() * 2.0)
    result = compare(f64(got), want.numpy(), k.gemm)
    assert result.ok, result


def block_operands(m: int, n: int, k: int, dtype: str, seed: int):
    a, b = fp8(m, k, seed=seed), fp8(n, k, seed=seed + 1).t()
    sa, sb = random_block_scales(ptxgen.BlockScale(dtype=dtype), m, n, k, seed=seed + 2)
    if dtype == "ue8m0":
        return a, b, torch.from_numpy(sa).view(torch.float8_e8m0fnu), torch.from_numpy(sb).view(torch.float8_e8m0fnu)
    return a, b, torch.from_numpy(sa), torch.from_numpy(sb)


def check_scaled(got, a, b, bias, bs: ptxgen.BlockScale, sa, sb) -> None:
    """`got` (the last kernel's C) against the float64 reference with e8m0 scales `sa`, `sb` read as
    `bs`'s groups, and shown to differ from the unscaled product (so the scales were applied)."""
    kernel = last_kernel()
    as_bytes = lambda t: t.view(torch.uint8).numpy()  # noqa: E731
    ref = reference(f64(a), f64(b), kernel.gemm.epi, bias=f64(bias), block_scale=bs, scale_a=as_bytes(sa),
                    scale_b=as_bytes(sb))
    result = compare(f64(got), ref, kernel.gemm)
    assert result.ok, result
    assert not compare(f64(got), reference(f64(a), f64(b), kernel.gemm.epi, bias=f64(bias)), kernel.gemm).ok


def test_e8m0_block_scales_run_as_mx_scales_on_b200(device):
    """1x128 / 128x128 power-of-two scales, K with a partial block and N with a partial n-block,
    scale_a in DeepGEMM's M-contiguous storage: the MX kernel's result equals the float64
    reference of the 128-wide blocks (the expansion to 32-wide groups is ptxgen's, the reference's
    is not)."""
    device((10, 0))
    m, n, k = 40, 144, 336
    a, b, sa, sb = block_operands(m, n, k, "ue8m0", seed=8)
    bias = torch.linspace(-1, 1, n)
    got = pt.scaled_mm(a, b, sa.t().contiguous().t(), sb, torch.float32, bias=bias)
    kernel = last_kernel()
    assert (kernel.arch, kernel.gemm.block_scale) == ("sm_100a", MX_SCALES) and "block_scale" in kernel.ptx
    check_scaled(got, a, b, bias, ptxgen.BlockScale(dtype="ue8m0"), sa, sb)


def test_f32_block_scales_on_b200_say_to_give_powers_of_two(device):
    device((10, 0))
    a, b, sa, sb = block_operands(40, 144, 336, "f32", seed=9)
    with pytest.raises(TypeError, match="sm_100a.*power-of-two.*float8_e8m0fnu.*sm_90a"):
        pt.scaled_mm(a, b, sa, sb, torch.bfloat16)


def test_grouped_mm_on_b200_is_the_tcgen05_grouped_kernel(device):
    device((10, 0))
    a = rand(3, 40, 64, dtype=torch.bfloat16, seed=10)
    b = rand(3, 64, 72, dtype=torch.bfloat16, seed=11)
    counts = torch.tensor([40, 0, 17], dtype=torch.int32)
    got = pt.grouped_mm(a, b, masked_m=counts)
    k = last_kernel()
    assert (k.arch, k.gemm.grouping) == ("sm_100a", "masked")
    ref = reference(f64(a), f64(b), c=np.zeros(got.shape), masked_m=counts.numpy())
    result = compare(f64(got), ref, k.gemm, untouched=untouched_rows(k.gemm, masked_m=counts.numpy()))
    assert result.ok, result


def test_fp8_that_no_kernel_of_the_device_runs_gets_the_devices_own_error(device):
    """sm_90 has no fp8 mma.sync kernel, so an fp8 problem TMA cannot describe has no fallback: the
    error is sm_100a's, naming the leading dimension and the padding that fixes it."""
    device((10, 0))
    a, b = fp8(32, 36, seed=12), fp8(24, 36, seed=13).t()  # rows of 36 bytes
    with pytest.raises(ptxgen.ScheduleError, match="pad lda to a multiple of 16 elements$"):
        pt.scaled_mm(a, b, torch.tensor(1.0), torch.tensor(1.0), torch.float32)  # no sm_80 for fp8


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_drawn_problems_on_b200_run_right_on_whichever_kernel_builds_them(monkeypatch, data):
    """Any shape (odd leading dimensions included), either layout of b, f16/bf16/f32 inputs, an
    epilogue: the call gives the float64 result on sm_100a wherever sm_100a builds the problem
    (TMA-describable rows, K-major tf32), else on the sm_90 fallback, and never on another arch."""
    become(monkeypatch, (10, 0))
    m, n, k = (data.draw(st.integers(1, 96), label=d) for d in "MNK")
    dtype = data.draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32]), label="dtype")
    a = rand(m, k, dtype=dtype, seed=m * 7 + k)
    b = rand(n, k, dtype=dtype, seed=n * 3 + k).t() if data.draw(st.booleans(), label="b col-major") \
        else rand(k, n, dtype=dtype, seed=n * 3 + k)
    activation = data.draw(st.sampled_from([None, "relu", "gelu"]), label="activation")
    bias = rand(n, dtype=torch.float32, seed=n) if data.draw(st.booleans(), label="bias") else None
    c = pt.gemm(a, b, bias=bias, activation=activation)
    kernel = last_kernel()
    try:
        ptxgen.compile(kernel.gemm, arch="sm_100a")
        builds = True
    except ptxgen.ScheduleError:
        builds = False
    assert kernel.arch == ("sm_100a" if builds else "sm_90"), (kernel.arch, kernel.gemm)
    ref = reference(f64(a), f64(b), kernel.gemm.epi, bias=None if bias is None else f64(bias))
    result = compare(f64(c), ref, kernel.gemm)
    assert result.ok, result


def mx_operands(m: int, n: int, k: int, seed: int):
    """fp8 a (M, K), b (K, N) column-major, and MX scales: e8m0 sa (M, ceil(K/32)), sb (ceil(K/32), N)."""
    a, b = fp8(m, k, seed=seed), fp8(n, k, seed=seed + 1).t()
    sa, sb = random_block_scales(MX_SCALES, m, n, k, seed=seed + 2)
    return a, b, torch.from_numpy(sa).view(torch.float8_e8m0fnu), torch.from_numpy(sb).view(torch.float8_e8m0fnu)


@pytest.mark.parametrize("fast", [False, True])
def test_mxfp8_scales_on_b200(device, fast):
    """OCP MXFP8: an exponent per 32 of K for every row of a and column of b, K with a partial group,
    N not a multiple of the tile; use_fast_accum changes nothing on tcgen05."""
    device((10, 0))
    m, n, k = 40, 72, 208  # K: six whole groups of 32 and a half one
    a, b, sa, sb = mx_operands(m, n, k, seed=14)
    bias = torch.linspace(-1, 1, n)
    got = pt.scaled_mm(a, b, sa, sb, torch.bfloat16, bias=bias, use_fast_accum=fast)
    kernel = last_kernel()
    assert (kernel.arch, kernel.gemm.block_scale) == ("sm_100a", MX_SCALES) and got.shape == (m, n)
    check_scaled(got, a, b, bias, MX_SCALES, sa, sb)


def test_mxfp8_opcheck_and_torch_compile(device):
    device((10, 0))
    a, b, sa, sb = mx_operands(16, 32, 64, seed=15)
    # test_schema compares inputs with torch.allclose, which CPU fp8 tensors lack (test_torch_opcheck.py)
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.ptxgen.scaled_mm.default, (a, b, sa, sb, torch.float32), test_utils=utils)
    pt.clear_caches()
    got = torch.compile(lambda *x: pt.scaled_mm(*x, torch.float32), fullgraph=True)(a, b, sa, sb)
    assert last_kernel().gemm.block_scale == MX_SCALES
    want = pt.scaled_mm(a, b, sa, sb, torch.float32)
    assert torch.equal(got, want)


def test_mxfp8_scales_on_hopper_name_the_b200_kernel(device):
    device((9, 0))
    a, b, sa, sb = mx_operands(40, 72, 208, seed=16)
    with pytest.raises(ptxgen.ScheduleError, match="mx block scaling .* sm_100a"):
        pt.scaled_mm(a, b, sa, sb, torch.bfloat16)


def fp4_operands(m: int, n: int, k: int, bs: ptxgen.BlockScale, seed: int):
    """(a, b, sa, sb as torch tensors, the float4 numpy a and b, the scale codes): a (M, K/2) and
    b (K/2, N) column-major float4_e2m1fn_x2 packed from never-zero e2m1 values."""
    from ptxgen.check import random_operands
    from ptxgen.runtime.fp4 import pack_rows

    g = ptxgen.Gemm(m, n, k, dtype="e2m1", out_dtype="f32", a_layout="row", b_layout="col", block_scale=bs)
    a, b = random_operands(g, seed)
    sa, sb = random_block_scales(bs, m, n, k, seed=seed + 1)
    scale = torch.float8_e4m3fn if bs.dtype == "ue4m3" else torch.float8_e8m0fnu
    ta = torch.from_numpy(pack_rows(a)).view(torch.float4_e2m1fn_x2)
    tb = torch.from_numpy(pack_rows(np.asarray(b).T)).view(torch.float4_e2m1fn_x2).t()
    return ta, tb, torch.from_numpy(sa).view(scale), torch.from_numpy(sb).view(scale), (a, b, sa, sb)


@pytest.mark.parametrize("bs", [ptxgen.BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3"), MX_SCALES],
                         ids=["nvfp4", "mxfp4"])
def test_fp4_scaled_mm_on_b200(device, bs):
    """NVFP4 (e4m3 scales per 16 of K) and MXFP4 (e8m0 per 32) from PyTorch's packed
    float4_e2m1fn_x2, K with a partial scale group, a bias: float64 group by group."""
    device((10, 0))
    m, n, k = 40, 72, 160
    a, b, sa, sb, (na, nb, nsa, nsb) = fp4_operands(m, n, k, bs, seed=20)
    assert a.shape == (m, k // 2) and b.shape == (k // 2, n) and b.stride(0) == 1
    bias = torch.linspace(-1, 1, n)
    got = pt.scaled_mm(a, b, sa, sb, torch.bfloat16, bias=bias)
    kernel = last_kernel()
    assert (kernel.arch, kernel.gemm.dtype, kernel.gemm.k, kernel.gemm.block_scale) == ("sm_100a", "e2m1", k, bs)
    ref = reference(na, nb, kernel.gemm.epi, bias=f64(bias), block_scale=bs, scale_a=nsa, scale_b=nsb)
    result = compare(f64(got), ref, kernel.gemm)
    assert result.ok, result
    assert not compare(f64(got), reference(na, nb, kernel.gemm.epi, bias=f64(bias)), kernel.gemm).ok


def test_fp4_refusals_name_the_fix(device):
    device((10, 0))
    nv = ptxgen.BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")
    a, b, sa, sb, _ = fp4_operands(32, 48, 128, nv, seed=21)
    with pytest.raises(TypeError, match="fp4 multiplies block-scaled only: give NVFP4"):
        pt.scaled_mm(a, b, torch.tensor(1.0), torch.tensor(1.0), torch.float32)
    with pytest.raises(ValueError, match=r"scale_b has shape \(4, 48\): .* makes it \(8, 48\)"):
        pt.scaled_mm(a, b, sa, sb[:4], torch.float32)
    with pytest.raises(ValueError, match="K-major only.*w.t()"):
        pt.scaled_mm(a, b.contiguous(), sa, sb, torch.float32)


def masked_fp8_groups(groups: int, max_m: int, n: int, k: int, seed: int):
    """fp8 a (G, max_m, K), b (G, K, N) K-major, and masked counts with an empty, a full and a partial slot."""
    a = fp8(groups * max_m, k, seed=seed).reshape(groups, max_m, k)
    b = fp8(groups * n, k, seed=seed + 1).reshape(groups, n, k).transpose(1, 2)
    counts = torch.tensor(([0, max_m, max_m - 37] * groups)[:groups], dtype=torch.int32)
    return a, b, counts


@pytest.mark.parametrize("kind", ["1x128", "mx"])
def test_masked_fp8_grouped_mm_with_block_scales_on_b200(device, kind):
    """MoE decode on B200: masked fp8 groups with 1x128 / 128x128 e8m0 scales (repeated per 32 of K
    by ptxgen) or MXFP8 scales, on sm_100a's block-scaled grouped kernel, group by group against
    float64 (rows past each group's count zero)."""
    device((10, 0))
    groups, max_m, n, k = 3, 130, 72, 208
    a, b, counts = masked_fp8_groups(groups, max_m, n, k, seed=30)
    bs = ptxgen.BlockScale(dtype="ue8m0") if kind == "1x128" else MX_SCALES
    from ptxgen.schedule.block_scale import random_grouped_scales

    g = ptxgen.Gemm(max_m, n, k, dtype="e4m3", groups=groups, grouping="masked", block_scale=bs)
    sa, sb = random_grouped_scales(bs, g, seed=31)
    got = pt.grouped_mm(a, b, masked_m=counts, scale_a=torch.from_numpy(sa).view(torch.float8_e8m0fnu),
                        scale_b=torch.from_numpy(sb).view(torch.float8_e8m0fnu), out_dtype=torch.float32)
    kernel = last_kernel()
    assert (kernel.arch, kernel.gemm.grouping, kernel.gemm.block_scale) == ("sm_100a", "masked", MX_SCALES)
    ref = reference(f64(a), f64(b), c=np.zeros(got.shape), masked_m=counts.numpy(), block_scale=bs, scale_a=sa,
                    scale_b=sb)
    result = compare(f64(got), ref, kernel.gemm, untouched=untouched_rows(kernel.gemm, masked_m=counts.numpy()))
    assert result.ok, result


def test_contiguous_fp8_groups_with_block_scales_on_b200_say_to_use_masked(device):
    device((10, 0))
    a = fp8(40, 128, seed=32)
    b = fp8(2 * 64, 128, seed=33).reshape(2, 64, 128).transpose(1, 2)
    offs = torch.tensor([10, 40], dtype=torch.int32)
    sa = torch.full((40, 1), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    sb = torch.full((2, 1, 1), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    with pytest.raises(ptxgen.ScheduleError, match="grouping='masked'"):
        pt.grouped_mm(a, b, offs, scale_a=sa, scale_b=sb)
