"""`ptxgen::grouped_mm`: one GEMM per group (a mixture-of-experts layer's experts), in the
`torch._grouped_mm` convention, by ptxgen's grouped kernels (`Gemm(groups=G, grouping=...)`,
schedule/grouping.py), whichever target builds them for the arch (the mma.sync path on sm_80 and
sm_90, which CPU tensors simulate; on a Hopper or B200 device the sm_90a or sm_100a kernel where its
lowering builds one for the problem, else the sm_90 one: dispatch.device_kernel).

* contiguous (`offs`): a (M_total, K) holds every group's rows, concatenated; `offs` is an int32
  (G,) tensor of cumulative row ends (group g owns rows offs[g-1] .. offs[g]); b is (G, K, N);
  C is (M_total, N).
* masked (`masked_m`): a (G, max_m, K), one fixed slot per group, `masked_m` int32 (G,) valid
  rows per slot; C is (G, max_m, N): a fixed launch, CUDA-graph capturable.
* k-contiguous (`offs` with a 2-D b, torch._grouped_mm's 2-D x 2-D case: weight gradients): a
  (M, K_total), b (K_total, N), `offs` int32 (G,) cumulative ends along K; C (G, M, N) with
  C_g = a[:, offs[g-1]:offs[g]] @ b[offs[g-1]:offs[g]] (an empty group's C_g is zero). The kernel
  takes a column-major (dB = Xᵀ·dY: pass x.mT, which is) and b row-major; others are copied.

The counts stay where they are (on the GPU for CUDA tensors: the kernel reads them, so the sizes
may change between calls without a recompile or a host synchronisation). Rows no group owns are
zero in C (torch._grouped_mm leaves them undefined; a fresh C here is zeroed so the operator is a
function of its inputs). fp8 inputs take block scales as `scaled_mm`'s, with the group dimension
where the operand has one (contiguous scale_a (M_total, ceil(K/128)), masked (G, max_m, ...);
scale_b (G, ceil(K/128), ceil(N/128))), for the arch whose grouped kernel is block-scaled.
Gradients (f16/bf16): dA by the grouped kernel with B's transposed view; dB: contiguous, by the
k-contiguous kernel over the token dimension (dB_g = A_gᵀ·dC_g, no host synchronisation); masked,
by one batched GEMM with the invalid rows of dC zeroed. A k-contiguous product's gradients are
contiguous grouped GEMMs over K's rows (dAᵀ = B·dC_gᵀ and dB = Aᵀ·dC_g per group slice).
"""
from __future__ import annotations

from dataclasses import replace

import torch

import ptxgen
from ptxgen.torch.convert import DEFAULT_OUT, FP8, input_dtype, matrix_layout, output_dtype
from ptxgen.torch.dispatch import (_address_alignment, arch_for, describe, device_kernel, run_checked, schedule_text,
                                   signature, signatures)
from ptxgen.torch.ops import eager_direct
from ptxgen.torch.scales import MX_GROUP, MX_SCALES, as_scale_array, block_scale_for, blocks, per_mx_group, \
    scale_dtype

GROUPED_MM_SCHEMA = ("(Tensor a, Tensor b, Tensor? offs=None, Tensor? masked_m=None, ScalarType? out_dtype=None, "
                     "Tensor? scale_a=None, Tensor? scale_b=None, str? schedule=None, str? arch=None) -> Tensor")
WHO = "ptxgen.torch.grouped_mm"


def _check_counts(counts: torch.Tensor, name: str, groups: int, device: torch.device) -> None:
    if counts.dim() != 1 or counts.shape[0] != groups:
        raise ValueError(f"{WHO}: {name} has shape {tuple(counts.shape)}: give one int32 per group, ({groups},), "
                         f"as b has {groups} groups")
    if counts.dtype != torch.int32:
        raise TypeError(f"{WHO}: {name} has dtype {counts.dtype}: pass {name}.to(torch.int32)")
    if counts.device != device:
        raise ValueError(f"{WHO}: {name} is on {counts.device} but a is on {device}: the kernel reads {name} "
                         f"where a is; move it there ({name}.to(a.device))")


def _check_block_scales(a, b, scale_a, scale_b, grouping: str) -> str | None:
    """The block scales' kind: "block" (1x128 / 128x128), "mx" (MXFP8: float8_e8m0fnu per 32 of K
    for each row of a and column of b, B200's), or None without scales; else an error with the fix."""
    if (scale_a is None) != (scale_b is None):
        raise ValueError(f"{WHO}: give both scale_a and scale_b (block scales), or neither")
    if scale_a is None:
        return None
    if a.dtype not in FP8:
        raise TypeError(f"{WHO}: block scales multiply fp8 products, but a is {describe(a)}: quantise a and b to "
                        f"float8_e4m3fn or float8_e5m2, or drop scale_a/scale_b")
    scale_dtype(scale_a, scale_b, WHO)
    k, n, groups = a.shape[-1], b.shape[-1], b.shape[0]
    rows = (a.shape[0],) if grouping == "contiguous" else (groups, a.shape[1])
    kb, kg = blocks(k), -(-k // MX_GROUP)
    block = (rows + (kb,), (groups, kb, blocks(n)))
    mx = (rows + (kg,), (groups, kg, n))
    given = (tuple(scale_a.shape), tuple(scale_b.shape))
    if given == block:
        return "block"
    if given == mx and scale_a.dtype == torch.float8_e8m0fnu:
        return "mx"
    raise ValueError(f"{WHO}: scale_a {given[0]} and scale_b {given[1]} are not a {grouping} grouped GEMM's block "
                     f"scales: give {block[0]} and {block[1]} (one per 1x128 block of a's rows, per 128x128 block of "
                     f"each group's b), or float8_e8m0fnu MXFP8 scales {mx[0]} and {mx[1]} (one per 32 of K)")


def _check_same_dtype_and_device(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dtype != b.dtype:
        raise TypeError(f"{WHO}: a and b must have one dtype: got a {describe(a)}, b {describe(b)}; convert one "
                        f"(e.g. b.to(a.dtype))")
    if a.device != b.device:
        raise ValueError(f"{WHO}: a is on {a.device} but b is on {b.device}: move them to one device")


def check_grouped(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None, masked_m: torch.Tensor | None,
                  out_dtype: torch.dtype | None, scale_a: torch.Tensor | None = None,
                  scale_b: torch.Tensor | None = None) -> tuple[list, torch.dtype, str]:
    """(C's shape, C's dtype, the grouping), or an error naming the problem and the fix."""
    if (offs is None) == (masked_m is None):
        raise ValueError(f"{WHO}: give exactly one of offs= (contiguous: a (M_total, K), int32 cumulative row ends, "
                         f"torch._grouped_mm's) and masked_m= (masked: a (G, max_m, K), int32 valid rows per group)")
    if offs is not None and b.dim() == 2:
        return check_k_grouped(a, b, offs, out_dtype, scale_a)
    grouping = "contiguous" if offs is not None else "masked"
    if b.dim() != 3:
        raise ValueError(f"{WHO}: b must be 3-D (G, K, N), one weight per group: got b {describe(b)}")
    groups, k, n = b.shape
    want = "2-D (M_total, K)" if grouping == "contiguous" else f"3-D ({groups}, max_m, K)"
    if a.dim() != (2 if grouping == "contiguous" else 3) or a.shape[-1] != k or \
            (grouping == "masked" and a.shape[0] != groups):
        raise ValueError(f"{WHO}: with {'offs' if offs is not None else 'masked_m'}= a must be {want} for b "
                         f"{describe(b)}: got a {describe(a)}")
    _check_same_dtype_and_device(a, b)
    _check_counts(offs if offs is not None else masked_m, "offs" if offs is not None else "masked_m", groups,
                  a.device)
    input_dtype(a, "a")
    out = DEFAULT_OUT[a.dtype] if out_dtype is None else out_dtype
    output_dtype(out)
    _check_block_scales(a, b, scale_a, scale_b, grouping)
    shape = [a.shape[0], n] if grouping == "contiguous" else [groups, a.shape[1], n]
    return shape, out, grouping


def check_k_grouped(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, out_dtype: torch.dtype | None,
                    scale_a: torch.Tensor | None) -> tuple[list, torch.dtype, str]:
    """The k-contiguous call's (C's shape (G, M, N), C's dtype, "k-contiguous"), or the error."""
    if a.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"{WHO}: with offs= and a 2-D b (K_total, N) (groups along K), a must be 2-D (M, K_total) "
                         f"for b {describe(b)}: got a {describe(a)}")
    _check_same_dtype_and_device(a, b)
    if offs.dim() != 1:
        raise ValueError(f"{WHO}: offs has shape {tuple(offs.shape)}: give a 1-D int32 tensor of G cumulative ends "
                         f"along K")
    _check_counts(offs, "offs", offs.shape[0], a.device)
    if scale_a is not None or a.dtype in FP8:
        raise TypeError(f"{WHO}: the k-contiguous grouped GEMM is built for f16/bf16 without block scales: got a "
                        f"{describe(a)}{' with scales' if scale_a is not None else ''}; use bf16 or f16 inputs")
    input_dtype(a, "a")
    out = DEFAULT_OUT[a.dtype] if out_dtype is None else out_dtype
    output_dtype(out)
    return [offs.shape[0], a.shape[0], b.shape[1]], out, "k-contiguous"


def as_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """A dense copy of matrix `x`, row-major ("row") or column-major ("col")."""
    return x.contiguous() if layout == "row" else x.mT.contiguous().mT


def grouped_problem(a: torch.Tensor, b: torch.Tensor, out: torch.dtype, grouping: str,
                    scales: ptxgen.BlockScale | None,
                    offs_groups: int = 1) -> tuple[torch.Tensor, torch.Tensor, ptxgen.Gemm]:
    """(A, B as used, their Gemm): layouts from strides; a contiguous grouping's A row-major (its
    groups start at any row), a k-contiguous one's A column-major and B row-major (theirs start at
    any k), copied only if they are not (`as_layout`)."""
    a2, la = matrix_layout(a)
    b2, lb = matrix_layout(b)
    if grouping == "contiguous" and la.layout == "col":
        a2, la = matrix_layout(as_layout(a, "row"))
    if grouping == "k-contiguous":
        if la.layout != "col":
            a2, la = matrix_layout(as_layout(a, "col"))
        if lb.layout != "row":
            b2, lb = matrix_layout(as_layout(b, "row"))
    groups = offs_groups if grouping == "k-contiguous" else b.shape[0]
    g = ptxgen.Gemm(a.shape[-2], b.shape[-1], a.shape[-1], dtype=input_dtype(a, "a"), out_dtype=output_dtype(out),
                    a_layout=la.layout, b_layout=lb.layout, lda=la.ld, ldb=lb.ld, groups=groups,
                    grouping=grouping, block_scale=scales)
    limit = _address_alignment(a2, b2)
    if limit < g.alignment():  # narrower copies for operands whose addresses are less aligned
        g = replace(g, align=max(limit, a.element_size()))
    return a2, b2, g


def _meta(t: torch.Tensor | None) -> tuple | None:
    return None if t is None else (t.dtype, t.shape, t.stride(), t.device)


def grouped_mm_impl(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
                    masked_m: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
                    scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
                    schedule: str | None = None, arch: str | None = None) -> torch.Tensor:
    """`ptxgen::grouped_mm`: check a call (once per signature), find its kernel, run into a zeroed C."""
    key = signature(a, b, "grouped", _meta(offs), _meta(masked_m), out_dtype, _meta(scale_a), _meta(scale_b),
                    schedule, arch)
    checked = signatures.get(key)
    if checked is None:
        shape, out, grouping = check_grouped(a, b, offs, masked_m, out_dtype, scale_a, scale_b)
        if a.numel() == 0 or b.numel() == 0:  # no rows, no K or no N: nothing to launch (not kept: rare)
            return torch.zeros(shape, dtype=out, device=a.device)
        target = arch_for(a.device, a.dtype in FP8, arch)
        kind = _check_block_scales(a, b, scale_a, scale_b, grouping)
        scales = (None if kind is None else MX_SCALES if kind == "mx"
                  else block_scale_for(target, scale_dtype(scale_a, scale_b, WHO), WHO))
        a2, b2, g = grouped_problem(a, b, out, grouping, scales, shape[0])
        kernel = device_kernel(g, target, schedule, arch is None)
        copy_a = g.a_layout if a2 is not a else None  # the layout a copy takes (per call: the data change)
        copy_b = g.b_layout if b2 is not b else None
        checked = signatures[key] = (shape, out, kernel, copy_a, copy_b, kind)
    shape, out, kernel, copy_a, copy_b, kind = checked
    c = torch.zeros(shape, dtype=out, device=a.device)  # rows no group owns stay zero
    sa, sb = (None, None) if scale_a is None else (as_scale_array(scale_a), as_scale_array(scale_b))
    if kind == "block" and kernel.gemm.block_scale == MX_SCALES:  # sm_100a: each block's scale per 32 of K
        sa, sb = per_mx_group(sa, sb, a.shape[-1], b.shape[-1])
    run_checked(kernel, as_layout(a, copy_a) if copy_a else a, as_layout(b, copy_b) if copy_b else b, c, offs=offs,
                masked_m=masked_m, scale_a=sa, scale_b=sb)
    return c


def _grouped_mm_fake(a, b, offs=None, masked_m=None, out_dtype=None, scale_a=None, scale_b=None, schedule=None,
                     arch=None):
    shape, out, _ = check_grouped(a, b, offs, masked_m, out_dtype, scale_a, scale_b)
    return a.new_empty(shape, dtype=out)


def _setup(ctx, inputs, output) -> None:
    a, b, offs, masked_m, out_dtype, scale_a, scale_b, schedule, arch = inputs
    ctx.save_for_backward(a, b, offs, masked_m)
    ctx.arch = arch


def _backward(ctx, grad):
    """dA = dC_g @ B_g^T per group (a grouped GEMM with B's transposed view, the same counts);
    dB_g = A_g^T @ dC_g: contiguous, the k-contiguous grouped GEMM over the token dimension (aᵀ's
    column-major view and dC, the same offs: no host synchronisation); masked, one batched GEMM
    with the invalid rows of dC zeroed. A k-contiguous product's: `_k_grouped_backward`."""
    a, b, offs, masked_m = ctx.saved_tensors
    if a.dtype in FP8:
        raise NotImplementedError(f"{WHO}: no gradient for fp8 inputs (8-bit products are for inference)")
    need = ctx.needs_input_grad
    dc = grad.to(a.dtype)
    if offs is not None and b.dim() == 2:
        return _k_grouped_backward(ctx, a, b, offs, dc)
    da = db = None
    if need[0]:
        da = torch.ops.ptxgen.grouped_mm(dc, b.mT, offs, masked_m, a.dtype, arch=ctx.arch)
    if need[1]:
        if masked_m is not None:
            valid = torch.arange(a.shape[1], device=a.device)[None, :] < masked_m[:, None]
            db = torch.ops.ptxgen.gemm(a.mT, dc * valid[..., None], out_dtype=b.dtype, arch=ctx.arch).reshape(b.shape)
        else:  # (G, K, N): group g from rows offs[g-1]..offs[g] of a and dC
            db = torch.ops.ptxgen.grouped_mm(a.mT, dc, offs, None, b.dtype, arch=ctx.arch)
    return da, db, None, None, None, None, None, None, None


def _k_grouped_backward(ctx, a, b, offs, dc):
    """C_g = a[:, s_g] @ b[s_g] for the K slices s_g: dA[:, s_g]ᵀ = b[s_g] @ dC_gᵀ and dB[s_g] =
    a[:, s_g]ᵀ @ dC_g, each a contiguous grouped GEMM whose rows are K's (k past offs[-1]: zero)."""
    need = ctx.needs_input_grad
    da = db = None
    if need[0]:
        da = torch.ops.ptxgen.grouped_mm(b, dc.mT, offs, None, a.dtype, arch=ctx.arch).mT
    if need[1]:
        db = torch.ops.ptxgen.grouped_mm(a.mT, dc, offs, None, b.dtype, arch=ctx.arch)
    return da, db, None, None, None, None, None, None, None


grouped_mm_op = torch.library.custom_op("ptxgen::grouped_mm", grouped_mm_impl, mutates_args=(),
                                        schema=GROUPED_MM_SCHEMA)
grouped_mm_op.register_fake(_grouped_mm_fake)
torch.library.register_autograd("ptxgen::grouped_mm", _backward, setup_context=_setup)


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None, *,
               masked_m: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
               scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None, schedule=None,
               arch: str | None = None) -> torch.Tensor:
    """One GEMM per group (`torch.ops.ptxgen.grouped_mm`), as torch._grouped_mm(a, b, offs=offs):
    a (M_total, K) with int32 `offs` of G cumulative row ends, b (G, K, N) -> C (M_total, N); or
    masked: a (G, max_m, K) with int32 `masked_m` valid rows per group -> C (G, max_m, N); or
    k-contiguous (2-D b): a (M, K_total), b (K_total, N), `offs` cumulative ends along K ->
    C (G, M, N), C_g = a[:, offs[g-1]:offs[g]] @ b[offs[g-1]:offs[g]]. Rows no group owns are zero. out_dtype: default the input's (f32 for fp8); fp8 takes block scales
    scale_a/scale_b (module docstring). schedule: a `ptxgen.Schedule` (default: ptxgen chooses);
    arch: default the CUDA device's, or "sm_80" for CPU tensors (simulated; "sm_90a" for fp8)."""
    args = (a, b, offs, masked_m, out_dtype, scale_a, scale_b, schedule_text(schedule), arch)
    if eager_direct(a, b, offs, masked_m, scale_a, scale_b):
        return grouped_mm_impl(*args)
    return grouped_mm_op(*args)
