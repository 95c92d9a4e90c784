"""The `ptxgen::gemm`, `ptxgen::linear` and `ptxgen::scaled_mm` operators, with their fake
(shape and dtype only) implementations so `torch.compile` traces them as single graph nodes.

Why `torch.library.custom_op`: an operator PyTorch knows is opaque to Dynamo (no graph break),
has a shape function for symbolic sizes (M may vary without recompiling), and gets autograd
(`ptxgen.torch.autograd`). The schemas take no keyword-only arguments and a schedule as JSON
text, since schemas have no Schedule type; the Python wrappers below take a `ptxgen.Schedule`.
"""
from __future__ import annotations

import torch

from ptxgen.torch.convert import DEFAULT_OUT, FP8, input_dtype, output_dtype
from ptxgen.torch.dispatch import Vector, describe, prepare, run, schedule_text, signature, signatures
from ptxgen.torch.fp4 import check_fp4_scaled, is_fp4, run_fp4_scaled
from ptxgen.torch.scales import MX_GROUP, blocks, is_block_scaled, is_mx_scaled, run_block_scaled, scale_dtype

ACTIVATIONS = ("relu", "gelu", "silu")

GEMM_SCHEMA = ("(Tensor a, Tensor b, ScalarType? out_dtype=None, Tensor? bias=None, str? activation=None, "
               "float alpha=1.0, float beta=0.0, Tensor? c=None, Tensor? scale=None, str? schedule=None, "
               "str? arch=None) -> Tensor")
LINEAR_SCHEMA = "(Tensor x, Tensor weight, Tensor? bias=None, str? activation=None) -> Tensor"
SCALED_MM_SCHEMA = ("(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, ScalarType out_dtype, "
                    "Tensor? bias=None, bool use_fast_accum=False) -> Tensor")


# -- argument checks shared by the real and the fake implementations ---------------------------
def check_gemm(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None,
               activation: str | None) -> tuple[list, torch.dtype]:
    """(C's shape, C's dtype) of a @ b, or an error naming the problem and the fix."""
    if a.dim() not in (2, 3) or b.dim() != a.dim():
        raise ValueError(f"ptxgen.torch.gemm: a and b must both be 2-D (M, K) @ (K, N) or both 3-D (batch, M, K) @ "
                         f"(batch, K, N): got a {describe(a)}, b {describe(b)}; for more leading dims use "
                         f"ptxgen.torch.linear or reshape")
    if a.shape[-1] != b.shape[-2] or (a.dim() == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"ptxgen.torch.gemm: shapes do not multiply: a {describe(a)} @ b {describe(b)}")
    if a.dtype != b.dtype:
        raise TypeError(f"ptxgen.torch.gemm: a and b must have one dtype: got a {describe(a)}, b {describe(b)}; "
                        f"convert one (e.g. b.to(a.dtype))")
    if a.device != b.device:
        raise ValueError(f"ptxgen.torch.gemm: a is on {a.device} but b is on {b.device}: move them to one device")
    input_dtype(a, "a")
    out = DEFAULT_OUT[a.dtype] if out_dtype is None else out_dtype
    output_dtype(out)
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r} is not one ptxgen's epilogue applies: use one of {ACTIVATIONS} "
                         f"(gelu is the tanh approximation, torch's gelu(approximate='tanh'))")
    return [*a.shape[:-1], b.shape[-1]], out


def vector(name: str, v: torch.Tensor | None, m, n, batched: bool) -> str | None:
    """The epilogue kind of a bias or scale by its shape, as it broadcasts against C: (N,) or
    (1, N) per column, (M, 1) per row (2-D GEMMs only)."""
    if v is None:
        return None
    shape = tuple(v.shape)
    if shape in ((n,), (1, n)):
        return "col"
    if not batched and shape == (m, 1):
        return "row"
    rows = "" if batched else f", or ({m}, 1) per row"
    raise ValueError(f"ptxgen.torch: {name} has shape {shape}: give ({n},) or (1, {n}) for one value per output "
                     f"column{rows}")


def _vector(name: str, v: torch.Tensor | None, kind: str | None, out: torch.dtype) -> Vector | None:
    if v is None:
        return None
    keep = v.dtype == torch.float32 or (name == "bias" and v.dtype == out and out in (torch.float16, torch.bfloat16))
    if keep and v.dim() == 1 and v.is_contiguous():
        return Vector(kind, v)
    data = v.reshape(-1) if keep else v.reshape(-1).float()
    return Vector(kind, data.contiguous())


def _epilogue_only(shape: list, out: torch.dtype, device, bias, bias_kind, activation, beta, c) -> torch.Tensor:
    """A K = 0 product (no kernel has an empty K loop): the epilogue of a zero accumulator."""
    z = torch.zeros(shape, dtype=torch.float32, device=device)
    if beta != 0.0:
        z = z + beta * c.float()
    if bias is not None:
        z = z + (bias.float().reshape(-1) if bias_kind == "col" else bias.float().reshape(-1, 1))
    if activation is not None:
        z = {"relu": torch.relu, "silu": torch.nn.functional.silu,
             "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[activation](z)
    return z.to(out)


def gemm_impl(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None, bias: torch.Tensor | None = None,
              activation: str | None = None, alpha: float = 1.0, beta: float = 0.0, c: torch.Tensor | None = None,
              scale: torch.Tensor | None = None, schedule: str | None = None, arch: str | None = None) -> torch.Tensor:
    """`ptxgen::gemm` (its schema: no fast_accum, which only scaled_mm takes, as torch._scaled_mm)."""
    return run_gemm(a, b, out_dtype, bias, activation, alpha, beta, c, scale, schedule, arch)


def run_gemm(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None, bias: torch.Tensor | None,
             activation: str | None, alpha: float, beta: float, c: torch.Tensor | None, scale: torch.Tensor | None,
             schedule: str | None, arch: str | None, fast_accum: bool = False) -> torch.Tensor:
    """Check a call (once per signature), find its kernel, allocate C and run. fast_accum: the
    single-level fp8 kernel (`Gemm.fast_accum`), part of the signature so a fast and a promoted
    call never share a kernel."""
    if a.dim() == 3 and a.shape[0] == 1 and b.dim() == 3 and b.shape[0] == 1:  # a batch of one: a 2-D GEMM
        c2 = c[0] if c is not None and c.dim() == 3 else c
        return run_gemm(a[0], b[0], out_dtype, bias, activation, alpha, beta, c2, scale, schedule, arch,
                        fast_accum).unsqueeze(0)
    key = signature(a, b, out_dtype, None if bias is None else (bias.dtype, bias.shape, bias.stride()),
                    None if scale is None else (scale.dtype, scale.shape, scale.stride()), activation, alpha, beta,
                    c is None, schedule, arch, fast_accum)
    checked = signatures.get(key)
    if checked is None:  # the first call with this signature: check everything, find the kernel
        shape, out = check_gemm(a, b, out_dtype, activation)
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        bias_kind = vector("bias", bias, m, n, a.dim() == 3)
        scale_kind = vector("scale", scale, m, n, a.dim() == 3)
        if beta != 0.0 and c is None:
            raise ValueError(f"ptxgen.torch.gemm: beta={beta} reads c: pass c=, a tensor broadcastable to "
                             f"{tuple(shape)}")
        if m * n == 0 or k == 0:  # nothing to launch (not kept: rare)
            if m * n == 0:
                return torch.empty(shape, dtype=out, device=a.device)
            return _epilogue_only(shape, out, a.device, bias, bias_kind, activation, beta, c)
        vb, vs = _vector("bias", bias, bias_kind, out), _vector("scale", scale, scale_kind, out)
        checked = signatures[key] = (shape, out, bias_kind, scale_kind,
                                     prepare(a, b, out, vb, activation, alpha, beta, vs, schedule, arch,
                                             a.dtype in FP8, fast_accum))
    shape, out, bias_kind, scale_kind, prepared = checked
    result = a.new_empty(shape, dtype=out)  # PyTorch's allocator, A's device
    if beta != 0.0:
        result.copy_(c)  # the kernel reads it and updates it in place
    vb, vs = _vector("bias", bias, bias_kind, out), _vector("scale", scale, scale_kind, out)
    run(prepared, a, b, result, vb, vs)
    return result


def _gemm_fake(a, b, out_dtype=None, bias=None, activation=None, alpha=1.0, beta=0.0, c=None, scale=None,
               schedule=None, arch=None):
    shape, out = check_gemm(a, b, out_dtype, activation)
    vector("bias", bias, a.shape[-2], b.shape[-1], a.dim() == 3)
    vector("scale", scale, a.shape[-2], b.shape[-1], a.dim() == 3)
    return a.new_empty(shape, dtype=out)


def check_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> list:
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"ptxgen.torch.linear: x {describe(x)} and weight {describe(weight)} do not fit: weight must be "
                         f"(out_features, in_features) with in_features = x.shape[-1], as torch.nn.functional.linear")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"ptxgen.torch.linear: bias {describe(bias)} must have shape ({weight.shape[0]},)")
    return [*x.shape[:-1], weight.shape[0]]


def linear_impl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                activation: str | None = None) -> torch.Tensor:
    shape = check_linear(x, weight, bias)
    x2 = x.reshape(-1, x.shape[-1])
    y = gemm_impl(x2, weight.t(), x.dtype if x.dtype in (torch.float16, torch.bfloat16, torch.float32) else None,
                  bias, activation)
    return y.reshape(shape)


def _linear_fake(x, weight, bias=None, activation=None):
    shape = check_linear(x, weight, bias)
    check_gemm(x.reshape(-1, x.shape[-1]), weight.t(), None, activation)
    return x.new_empty(shape, dtype=DEFAULT_OUT[x.dtype])


def scaled_vector(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> str:
    """Which single epilogue scale vector carries scale_a * scale_b (torch._scaled_mm's
    conventions: per-tensor scales have one element, row-wise scale_a is (M, 1), column-wise
    scale_b is (1, N)), or "block" for 1x128 / 128x128 block scales (ptxgen.torch.scales); an
    outer product of both vectors is refused."""
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    if is_block_scaled(a, b, scale_a, scale_b):
        return "block"
    if is_mx_scaled(a, b, scale_a, scale_b):
        return "mx"
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        raise TypeError(f"ptxgen.torch.scaled_mm: scale_a and scale_b must be float32, got {scale_a.dtype}, "
                        f"{scale_b.dtype}")
    rowwise = scale_a.numel() != 1
    colwise = scale_b.numel() != 1
    blockwise = (f"; or block scales: scale_a ({m}, {blocks(k)}) per 1x128 and scale_b ({blocks(k)}, {blocks(n)}) "
                 f"per 128x128, or float8_e8m0fnu MX scales ({m}, {-(-k // MX_GROUP)}) and ({-(-k // MX_GROUP)}, {n})")
    if rowwise and tuple(scale_a.shape) != (m, 1):
        raise ValueError(f"ptxgen.torch.scaled_mm: scale_a has shape {tuple(scale_a.shape)}: give one element "
                         f"(per tensor) or ({m}, 1) (per row){blockwise}")
    if colwise and tuple(scale_b.shape) != (1, n):
        raise ValueError(f"ptxgen.torch.scaled_mm: scale_b has shape {tuple(scale_b.shape)}: give one element "
                         f"(per tensor) or (1, {n}) (per column){blockwise}")
    if rowwise and colwise:
        raise ValueError("ptxgen.torch.scaled_mm: row-wise scale_a together with column-wise scale_b is an outer "
                         "product of two vectors, but ptxgen's epilogue multiplies by one vector: make one of "
                         "them per-tensor, or fold it into the fp8 operand before quantising")
    return "row" if rowwise else "col"


def check_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum: bool = False) -> str:
    if is_fp4(a) or is_fp4(b):  # NVFP4 / MXFP4 (ptxgen.torch.fp4); use_fast_accum means nothing on tcgen05
        check_fp4_scaled(a, b, scale_a, scale_b, out_dtype)
        vector("bias", bias, a.shape[0], b.shape[1], False)
        return "fp4"
    if a.dim() != 2 or b.dim() != 2 or a.dtype not in FP8 or b.dtype not in FP8 or a.dtype != b.dtype:
        raise TypeError(f"ptxgen.torch.scaled_mm: a and b must be 2-D of one fp8 dtype (float8_e4m3fn or "
                        f"float8_e5m2): got a {describe(a)}, b {describe(b)}")
    check_gemm(a, b, out_dtype, None)
    if out_dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"ptxgen.torch.scaled_mm: out_dtype {out_dtype} is not float32, float16 or bfloat16")
    vector("bias", bias, a.shape[0], b.shape[1], False)
    kind = scaled_vector(a, b, scale_a, scale_b)
    if kind in ("block", "mx"):
        scale_dtype(scale_a, scale_b, "ptxgen.torch.scaled_mm")
        if use_fast_accum and kind == "block":  # MX scales run on tcgen05 only, which has no fast mode
            raise ValueError("ptxgen.torch.scaled_mm: use_fast_accum=True with block scales: the scales are applied "
                             "where each 128-wide K slice is promoted into the f32 accumulator, which fast "
                             "accumulation removes; pass use_fast_accum=False")
    return kind


def scaled_mm_impl(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                   out_dtype: torch.dtype, bias: torch.Tensor | None = None,
                   use_fast_accum: bool = False) -> torch.Tensor:
    kind = check_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
    if kind == "fp4":
        bias_kind = vector("bias", bias, a.shape[0], b.shape[1], False)
        return run_fp4_scaled(a, b, scale_a, scale_b, out_dtype, _vector("bias", bias, bias_kind, out_dtype))
    if kind in ("block", "mx"):
        bias_kind = vector("bias", bias, a.shape[0], b.shape[1], False)
        return run_block_scaled(a, b, scale_a, scale_b, out_dtype, _vector("bias", bias, bias_kind, out_dtype),
                                mx=kind == "mx")
    if kind == "col":  # one f32 vector over N: scale_a times scale_b (per tensor or per column)
        scale = (scale_b.reshape(-1) * scale_a.reshape(1)).expand(b.shape[1])
    else:  # over M: scale_a's rows times the per-tensor scale_b
        scale = (scale_a.reshape(-1) * scale_b.reshape(1)).reshape(-1, 1)
    return run_gemm(a, b, out_dtype, bias, None, 1.0, 0.0, None, scale.contiguous(), None, None, use_fast_accum)


def _scaled_mm_fake(a, b, scale_a, scale_b, out_dtype, bias=None, use_fast_accum=False):
    check_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


gemm_op = torch.library.custom_op("ptxgen::gemm", gemm_impl, mutates_args=(), schema=GEMM_SCHEMA)
gemm_op.register_fake(_gemm_fake)
linear_op = torch.library.custom_op("ptxgen::linear", linear_impl, mutates_args=(), schema=LINEAR_SCHEMA)
linear_op.register_fake(_linear_fake)
scaled_mm_op = torch.library.custom_op("ptxgen::scaled_mm", scaled_mm_impl, mutates_args=(), schema=SCALED_MM_SCHEMA)
scaled_mm_op.register_fake(_scaled_mm_fake)


# -- the Python entry points --------------------------------------------------------------------
def eager_direct(*tensors: torch.Tensor | None) -> bool:
    """Whether this call may run the implementation without PyTorch's dispatcher, which costs a
    Python operator 15-35 us per call: only in plain eager execution, with no gradient to record,
    no torch.compile tracing, no dispatch or function mode (fake tensors, functionalisation), and
    plain tensors (no subclass, no vmap/functorch wrapper). Everything else, and
    `torch.ops.ptxgen.*` always, goes through the registered operator. (The price: such direct
    calls show in the profiler as their own work, not under the operator's name.)"""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() or \
            torch._C._is_torch_function_mode_enabled() or torch._C._functorch.peek_interpreter_stack() is not None:
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None and (type(t) is not torch.Tensor or (grad and t.requires_grad)):
            return False
    return True


def gemm(a: torch.Tensor, b: torch.Tensor, *, out_dtype: torch.dtype | None = None, bias: torch.Tensor | None = None,
         activation: str | None = None, alpha: float = 1.0, beta: float = 0.0, c: torch.Tensor | None = None,
         scale: torch.Tensor | None = None, schedule=None, arch: str | None = None) -> torch.Tensor:
    """C = act(alpha * scale * (a @ b) + beta * c + bias) by a ptxgen kernel (`torch.ops.ptxgen.gemm`).

    a (M, K) and b (K, N), or (batch, M, K) and (batch, K, N), in any strides a row- or
    column-major layout covers (`w.t()` is a layout, not a copy). f32 inputs multiply as tf32.
    bias and scale: (N,) per column or (M, 1) per row. out_dtype: default the input's (s32 for
    8-bit integers, f32 for fp8). schedule: a `ptxgen.Schedule` (default: ptxgen chooses);
    arch: default the CUDA device's, or "sm_80" for CPU tensors (simulated; "sm_90a" for fp8)."""
    args = (a, b, out_dtype, bias, activation, float(alpha), float(beta), c, scale, schedule_text(schedule), arch)
    return gemm_impl(*args) if eager_direct(a, b, bias, c, scale) else gemm_op(*args)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           activation: str | None = None) -> torch.Tensor:
    """act(x @ weight.T + bias) as torch.nn.functional.linear (`torch.ops.ptxgen.linear`): weight is
    (out_features, in_features), x any (..., in_features); the activation is fused."""
    if eager_direct(x, weight, bias):
        return linear_impl(x, weight, bias, activation)
    return linear_op(x, weight, bias, activation)


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              out_dtype: torch.dtype, bias: torch.Tensor | None = None, use_fast_accum: bool = False) -> torch.Tensor:
    """(a * scale_a) @ (b * scale_b) + bias for fp8 a and b (`torch.ops.ptxgen.scaled_mm`), as
    torch._scaled_mm: f32 scales per tensor (one element), or per row of a ((M, 1)) or per column
    of b ((1, N)) but not both; or block scales (DeepSeek-V3's), scale_a (M, ceil(K/128)) per 1x128
    block of a and scale_b (ceil(K/128), ceil(N/128)) per 128x128 block of b, f32 or
    float8_e8m0fnu, in any row- or column-major strides (ptxgen.torch.scales), applied to each
    128-wide K slice as it is promoted; or MXFP8 scales (B200), float8_e8m0fnu scale_a (M, ceil(K/32))
    and scale_b (ceil(K/32), N) in the logical orientation, applied by tcgen05's block-scaled MMA; or
    fp4 (B200): float4_e2m1fn_x2 a (M, K/2) and b (K/2, N) column-major with NVFP4 float8_e4m3fn
    scales per 16 of K or MXFP4 float8_e8m0fnu scales per 32 (ptxgen.torch.fp4). fp8 runs on sm_90a (Hopper) and sm_100a (B200) kernels; on
    B200 block scales must be float8_e8m0fnu (its MMA applies power-of-two scales). use_fast_accum=False
    (torch's default) promotes Hopper's wgmma partial sums into a separate f32 accumulator every 128
    of K; True runs the single-level kernel (`Gemm.fast_accum`: faster, less accurate at large K).
    On B200 it changes nothing: tcgen05 accumulates fp8 in f32 at full rate."""
    if not isinstance(use_fast_accum, bool):
        raise TypeError(f"ptxgen.torch.scaled_mm: use_fast_accum must be True or False, got {use_fast_accum!r}")
    if eager_direct(a, b, scale_a, scale_b, bias):
        return scaled_mm_impl(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
    return scaled_mm_op(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
