"""ptxgen.torch.grouped_mm (torch._grouped_mm's convention; ptxgen/torch/grouped.py) on CPU tensors
through the simulator: random groups (1-16, empty and tile-straddling, masked counts 0..max_m)
against the float64 group-by-group reference with rows no group owns required zero, opcheck,
torch.compile with new sizes and no recompile, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ptxgen
import ptxgen.torch as pt
from ptxgen.check import compare, reference, untouched_rows
from ptxgen.schedule.grouping import random_counts
from tests.torch.tensors import f64, rand

OPS = torch.ops.ptxgen
TORCH_DTYPE = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def counts_kw(grouping: str, counts) -> dict:
    return {"offs": counts} if grouping == "contiguous" else {"masked_m": counts}


def check(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, grouping: str, counts: torch.Tensor) -> None:
    """Elementwise against float64, group by group; rows no group owns must hold exactly zero."""
    g = pt.cached_kernels()[-1].gemm
    assert (g.groups, g.grouping) == (b.shape[0], grouping)
    kw = counts_kw(grouping, counts.numpy())
    ref = reference(f64(a), f64(b), c=np.zeros(got.shape), **kw)
    result = compare(f64(got), ref, g, untouched=untouched_rows(g, **kw))
    assert result.ok, result


def draw(seed: int, grouping: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """a, b and the counts of a random problem: 1-16 groups, K not a multiple of the tile, b in
    either layout (a transposed view is a layout, not a copy), some groups empty, contiguous ones
    starting inside tiles, masked counts from 0 to max_m."""
    rng = np.random.default_rng(seed)
    groups = int(rng.integers(1, 17))
    m = int(rng.integers(1, 70)) if grouping == "masked" else int(rng.integers(1, 150))
    k, n = 8 * int(rng.integers(1, 7)), int(rng.integers(1, 40))
    dtype = (torch.float16, torch.bfloat16)[seed % 2]
    a = rand(*((groups, m, k) if grouping == "masked" else (m, k)), dtype=dtype, seed=seed)
    b = rand(groups, k, n, dtype=dtype, seed=seed + 100)
    if seed % 2:
        b = b.transpose(1, 2).contiguous().transpose(1, 2)  # (G, K, N) column-major per group
    gemm = ptxgen.Gemm(m, n, k, dtype="f16", groups=groups, grouping=grouping)
    counts = random_counts(gemm, rng, empty=0.3)
    if grouping == "masked" and groups > 1:
        counts[:2] = (0, m)  # an empty and a full slot
    return a, b, torch.from_numpy(counts)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_random_groups_match_float64(grouping, seed):
    a, b, counts = draw(seed, grouping)
    out = (torch.float32, None)[seed % 2]
    got = pt.grouped_mm(a, b, **counts_kw(grouping, counts), out_dtype=out)
    assert got.dtype == (out or a.dtype)
    check(got, a, b, grouping, counts)


def test_the_draws_reach_empty_straddling_full_and_many_groups():
    seen = set()
    for seed in range(4):
        for grouping in ("contiguous", "masked"):
            a, b, counts = draw(seed, grouping)
            c = counts.numpy()
            sizes = np.diff(np.concatenate([[0], c])) if grouping == "contiguous" else c
            seen |= {"empty"} if (sizes == 0).any() else set()
            if grouping == "contiguous":  # a group starting inside a 16-row tile (the smallest BM)
                seen |= {"straddle"} if (np.concatenate([[0], c[:-1]])[sizes > 0] % 16).any() else set()
            else:
                seen |= {"full"} if (c == a.shape[1]).any() else set()
            seen |= {"many"} if b.shape[0] >= 8 else set()
    assert seen == {"empty", "straddle", "full", "many"}, seen


def test_new_sizes_rerun_the_same_kernel_and_compile_captures_one_node():
    a = rand(48, 32, dtype=torch.float16, seed=1)
    b = rand(4, 32, 24, dtype=torch.float16, seed=2)
    pt.clear_caches()
    f = torch.compile(lambda a, b, offs: pt.grouped_mm(a, b, offs) * 2, fullgraph=True)
    for offs in ([0, 0, 0, 48], [1, 17, 17, 40], [0, 0, 0, 0], [48, 48, 48, 48]):
        offs_t = torch.tensor(offs, dtype=torch.int32)
        got = f(a, b, offs_t) / 2
        check(got, a, b, "contiguous", offs_t)
    assert len(pt.cached_kernels()) == 1  # the counts are read by the kernel: no new kernel per size


def test_opcheck_contiguous_and_masked():
    a = rand(40, 16, dtype=torch.bfloat16, seed=3)
    b = rand(3, 16, 24, dtype=torch.bfloat16, seed=4)
    torch.library.opcheck(OPS.grouped_mm.default, (a, b, torch.tensor([5, 5, 33], dtype=torch.int32)))
    am = rand(3, 12, 16, dtype=torch.bfloat16, seed=5)
    torch.library.opcheck(OPS.grouped_mm.default, (am, b), {"masked_m": torch.tensor([0, 12, 7], dtype=torch.int32),
                                                            "out_dtype": torch.float32})


def test_a_column_major_a_is_copied_for_the_contiguous_layout():
    a = rand(16, 40, dtype=torch.float16, seed=6).t()  # (40, 16) column-major: groups start at any row
    b = rand(2, 16, 8, dtype=torch.float16, seed=7)
    offs = torch.tensor([9, 31], dtype=torch.int32)
    check(pt.grouped_mm(a, b, offs), a, b, "contiguous", offs)
    assert pt.cached_kernels()[-1].gemm.a_layout == "row"


def test_a_hopper_device_runs_a_grouped_kernel_whichever_lowering_builds_it(monkeypatch):
    """Where ptxgen picks sm_90a (a Hopper device; here the CPU arch patched to it) it runs the
    sm_90a grouped kernel if that lowering builds one, else the sm_90 mma.sync one; an arch the
    caller names is kept (its own refusal, if any)."""
    monkeypatch.setattr("ptxgen.torch.dispatch.CPU_ARCH", "sm_90a")
    a, b, counts = draw(2, "contiguous")
    pt.clear_caches()
    got = pt.grouped_mm(a, b, counts)
    k = pt.cached_kernels()[-1]
    assert (k.arch, k.schedule.instruction) in (("sm_90a", "wgmma"), ("sm_90", "m16n8k16")), (k.arch, k.schedule)
    check(got, a, b, "contiguous", counts)
    if k.arch == "sm_90":  # the sm_90a lowering refused it: naming that arch is refused the same way
        with pytest.raises(ptxgen.LoweringNotBuilt):
            pt.grouped_mm(a, b, counts, arch="sm_90a")


def test_empty_problems_and_refusals():
    b = rand(2, 16, 8, dtype=torch.float16, seed=8)
    offs = torch.tensor([0, 0], dtype=torch.int32)
    assert pt.grouped_mm(torch.empty(0, 16, dtype=torch.float16), b, offs).shape == (0, 8)
    a = rand(10, 16, dtype=torch.float16, seed=9)
    with pytest.raises(ValueError, match="exactly one of offs="):
        pt.grouped_mm(a, b, offs, masked_m=offs)
    with pytest.raises(ValueError, match="exactly one of offs="):
        pt.grouped_mm(a, b)
    with pytest.raises(TypeError, match=r"offs.to\(torch.int32\)"):
        pt.grouped_mm(a, b, offs.long())
    with pytest.raises(ValueError, match=r"give one int32 per group, \(2,\)"):
        pt.grouped_mm(a, b, torch.tensor([3], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"a must be 3-D \(2, max_m, K\)"):
        pt.grouped_mm(a, b, masked_m=offs)
    with pytest.raises(ValueError, match=r"b must be 3-D \(G, K, N\)"):
        pt.grouped_mm(a.reshape(2, 5, 16), b[0], masked_m=offs)
    with pytest.raises(ValueError, match=r"a must be 2-D \(M, K_total\)"):  # a 2-D b: groups along K
        pt.grouped_mm(a, b[0, :8], offs)
    with pytest.raises(ValueError, match="give both scale_a and scale_b"):
        pt.grouped_mm(a, b, offs, scale_a=torch.ones(10, 1))
    with pytest.raises(TypeError, match="block scales multiply fp8 products"):
        pt.grouped_mm(a, b, offs, scale_a=torch.ones(10, 1), scale_b=torch.ones(2, 1, 1))


def reference_grads(a, b, grouping: str, counts, dc) -> tuple[np.ndarray, np.ndarray]:
    """float64 dA and dB of C_g = A_g @ B_g, group by group (rows no group owns: dA zero)."""
    a64, b64, dc64 = f64(a), f64(b), f64(dc)
    da, db = np.zeros_like(a64), np.zeros_like(b64)
    ends = counts.tolist()
    for i in range(b.shape[0]):
        rows = slice(ends[i - 1] if i else 0, ends[i]) if grouping == "contiguous" else slice(0, ends[i])
        ai, dci = (a64[rows], dc64[rows]) if grouping == "contiguous" else (a64[i, rows], dc64[i, rows])
        grad_a = dci @ b64[i].T
        if grouping == "contiguous":
            da[rows] = grad_a
        else:
            da[i, rows] = grad_a
        db[i] = ai.T @ dci
    return da, db


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_gradients_match_float64_group_by_group(grouping):
    """dA by the grouped kernel (B transposed), dB by one batched GEMM over masked slots; the rows
    no group owns get no gradient, an empty group's weight a zero one."""
    a, b, counts = draw(5, grouping)
    counts[0] = 0 if grouping == "masked" else counts[0]
    a.requires_grad_(), b.requires_grad_()
    y = pt.grouped_mm(a, b, **counts_kw(grouping, counts), out_dtype=torch.float32)
    dc = rand(*y.shape, dtype=a.dtype, seed=50)
    y.backward(dc.float())
    want_a, want_b = reference_grads(a, b, grouping, counts, dc)
    m_rows, n, k, rows = y.shape[-2], y.shape[-1], a.shape[-1], a.shape[-2]
    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[a.dtype]
    for got, want, gemm in ((a.grad, want_a, ptxgen.Gemm(m_rows, k, n, dtype=name, out_dtype=name)),
                            (b.grad, want_b, ptxgen.Gemm(k, n, max(rows, 1), dtype=name, out_dtype=name))):
        assert got.dtype == a.dtype and got.shape == want.shape
        result = compare(f64(got), want, gemm)
        assert result.ok, result


def test_a_contiguous_backward_with_every_group_empty_gives_zero_gradients():
    a = rand(12, 16, dtype=torch.float16, seed=13).requires_grad_()
    b = rand(3, 16, 8, dtype=torch.float16, seed=14).requires_grad_()
    pt.grouped_mm(a, b, torch.zeros(3, dtype=torch.int32)).float().sum().backward()
    assert not a.grad.any() and not b.grad.any()


def test_block_scaled_fp8_groups_match_the_block_by_block_reference():
    """fp8 with block scales on CPU tensors (sm_90a's grouped kernel): the torch layer passes the
    scales through the Gemm(groups=, block_scale=) API, and each group matches the block-by-block
    reference (B200's kernel: test_torch_blackwell.py)."""
    groups, m, k, n = 2, 24, 208, 32  # K: one full and one partial 128-wide block
    gen = torch.Generator().manual_seed(12)
    a = (torch.rand(m, k, generator=gen) + 0.5).to(torch.float8_e4m3fn)
    b = (torch.rand(groups, n, k, generator=gen) + 0.5).to(torch.float8_e4m3fn).transpose(1, 2)  # K-major
    sa = torch.rand(m, 2, generator=gen) + 0.5
    sb = torch.rand(groups, 2, 1, generator=gen) + 0.5
    offs = torch.tensor([10, 24], dtype=torch.int32)
    got = pt.grouped_mm(a, b, offs, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    from ptxgen.schedule.block_scale import scaled_product

    g = pt.cached_kernels()[-1].gemm
    want = np.zeros((m, n))
    for i, (start, end) in enumerate(((0, 10), (10, 24))):
        want[start:end] = scaled_product(f64(a[start:end]), f64(b[i]), g.block_scale, sa[start:end].numpy(),
                                         sb[i].numpy())
    result = compare(f64(got), want, g)
    assert result.ok, result


# -- k-contiguous: torch._grouped_mm's 2-D x 2-D case (groups along K: weight gradients) ----------
def check_k_grouped(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> None:
    """Every group's C_g = a[:, k0:k1] @ b[k0:k1] against float64 (an empty group's: zero)."""
    g = pt.cached_kernels()[-1].gemm
    assert (g.groups, g.grouping, g.a_layout, g.b_layout) == (offs.shape[0], "k-contiguous", "col", "row")
    assert tuple(got.shape) == (offs.shape[0], a.shape[0], b.shape[1])
    result = compare(f64(got), reference(f64(a), f64(b), offs=offs.numpy()), g)
    assert result.ok, result


@pytest.mark.parametrize("seed", range(3))
def test_k_grouped_forward_matches_float64(seed):
    """dB = Xᵀ·dY shapes: a is x.mT of a row-major (tokens, M) x (column-major, no copy), b the
    row-major dY; 1-16 groups, empty ones, offs[-1] short of the tokens; a row-major a is copied."""
    rng = np.random.default_rng(seed)
    groups, tokens, m, n = int(rng.integers(1, 17)), int(rng.integers(1, 120)), int(rng.integers(1, 48)), 8 * int(
        rng.integers(1, 5))
    dtype = (torch.float16, torch.bfloat16)[seed % 2]
    x = rand(tokens, m, dtype=dtype, seed=seed)
    dy = rand(tokens, n, dtype=dtype, seed=seed + 10)
    gemm = ptxgen.Gemm(m, n, tokens, groups=groups, grouping="k-contiguous", a_layout="col", b_layout="row")
    offs = torch.from_numpy(random_counts(gemm, rng, empty=0.3))
    a = x.mT if seed != 2 else x.mT.contiguous()  # seed 2: a row-major a, copied to column-major
    check_k_grouped(pt.grouped_mm(a, dy, offs, out_dtype=torch.float32), a, dy, offs)


def test_k_grouped_gradients_match_float64():
    """C_g = a[:, s_g] @ b[s_g]: dA[:, s_g] = dC_g b[s_g]ᵀ and dB[s_g] = a[:, s_g]ᵀ dC_g (zero past
    offs[-1]), by contiguous grouped GEMMs over K's rows."""
    a = rand(24, 40, dtype=torch.bfloat16, seed=30).t().contiguous().t().requires_grad_()  # (24, 40) col-major
    b = rand(40, 16, dtype=torch.bfloat16, seed=31, grad=True)
    offs = torch.tensor([9, 9, 33], dtype=torch.int32)
    y = pt.grouped_mm(a, b, offs, out_dtype=torch.float32)
    dc = rand(*y.shape, dtype=torch.bfloat16, seed=32)
    y.backward(dc.float())
    a64, b64, dc64 = f64(a), f64(b), f64(dc)
    want_a, want_b = np.zeros_like(a64), np.zeros_like(b64)
    for i, (k0, k1) in enumerate(zip([0, 9, 9], [9, 9, 33])):
        want_a[:, k0:k1] = dc64[i] @ b64[k0:k1].T
        want_b[k0:k1] = a64[:, k0:k1].T @ dc64[i]
    for got, want, gemm in ((a.grad, want_a, ptxgen.Gemm(24, 40, 16, dtype="bf16", out_dtype="bf16")),
                            (b.grad, want_b, ptxgen.Gemm(40, 16, 24, dtype="bf16", out_dtype="bf16"))):
        result = compare(f64(got), want, gemm)
        assert got.shape == want.shape and result.ok, result


def test_the_contiguous_backward_takes_db_from_the_k_grouped_kernel():
    """The contiguous grouped_mm's dB_g = A_gᵀ dC_g runs one k-contiguous kernel over the token
    dimension (no host synchronisation); its result is checked in test_gradients_match_float64."""
    a = rand(30, 16, dtype=torch.float16, seed=40, grad=True)
    b = rand(3, 16, 8, dtype=torch.float16, seed=41, grad=True)
    pt.clear_caches()
    pt.grouped_mm(a, b, torch.tensor([4, 4, 27], dtype=torch.int32)).float().sum().backward()
    groupings = {k.gemm.grouping for k in pt.cached_kernels()}
    assert "k-contiguous" in groupings and b.grad.shape == b.shape


def test_k_grouped_opcheck_and_refusals():
    a = rand(16, 40, dtype=torch.bfloat16, seed=42).t()  # (M, K_total) = (40, 16), column-major
    b = rand(16, 8, dtype=torch.bfloat16, seed=43)
    torch.library.opcheck(OPS.grouped_mm.default, (a, b, torch.tensor([5, 5, 16], dtype=torch.int32)))
    with pytest.raises(TypeError, match="built for f16/bf16 without block scales"):
        pt.grouped_mm(a, b, torch.tensor([5, 16], dtype=torch.int32), scale_a=torch.ones(1), scale_b=torch.ones(1))
    with pytest.raises(ValueError, match="a must be 2-D"):
        pt.grouped_mm(a[None], b, torch.tensor([5, 16], dtype=torch.int32))


def test_a_hopper_device_runs_the_k_grouped_product_on_mma_sync(monkeypatch):
    """sm_90a's wgmma kernel refuses k-contiguous: where ptxgen picked sm_90a it runs the sm_90
    mma.sync kernel on the same device; an sm_90a the caller names is refused naming sm_90."""
    monkeypatch.setattr("ptxgen.torch.dispatch.CPU_ARCH", "sm_90a")
    a = rand(40, 24, dtype=torch.bfloat16, seed=50).mT  # (24, 40) column-major
    b = rand(40, 16, dtype=torch.bfloat16, seed=51)
    offs = torch.tensor([7, 7, 40], dtype=torch.int32)
    pt.clear_caches()
    got = pt.grouped_mm(a, b, offs, out_dtype=torch.float32)
    k = pt.cached_kernels()[-1]
    assert (k.arch, k.schedule.instruction) == ("sm_90", "m16n8k16")
    check_k_grouped(got, a, b, offs)
    with pytest.raises(ptxgen.LoweringNotBuilt, match="arch='sm_90'"):
        pt.grouped_mm(a, b, offs, arch="sm_90a")
