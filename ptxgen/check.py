"""Correctness checking shared by the tests, the CLI and the benchmarks.

Inputs are random and never zero (a zero would hide a dropped element), the output is poisoned
before a run, and every element of a result is compared with a float64 numpy reference within
the error a correct kernel can make there (`compare`). 8-bit outputs are compared element by
element after rounding the reference.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .schedule.group_rows import grouped_reference, stray_writes, untouched_rows
from .schedule.grouping import PER_GROUP_C
from .schedule.block_scale import BlockScale, expand_scales, expanded_product, scaled_product
from .schedule.problem import FP8_DTYPES, FP8_PROMOTION_K, INTEGER_DTYPES, QUANTIZED_DTYPES, Epilogue, Gemm, numpy_dtype

#: atol in units of the reference's RMS when `compare` gets only a dtype name (K unknown), and
#: the relative Frobenius error `tolerance` reports: f32 accumulation error plus the output's
#: own rounding (f16 keeps 11 significant bits, bf16 8).
TOLERANCE = {"f32": 1e-3, "f16": 2e-3, "bf16": 1e-2, "s32": 0.0, "s8": 0.0, "u8": 0.0}
#: tf32 keeps 10 mantissa bits of each f32 input (cvt.rna), so products err by about 2^-11.
TF32_TOLERANCE = 5e-3
#: f16 accumulation rounds the running sum to 11 bits after every mma (K/16 roundings).
F16_ACC_TOLERANCE = 1e-2
#: K per rounding of an f16 accumulator: each mma.sync m16n8k16 / wmma m16n16k16 adds its 16
#: products to the f16 sum and rounds once (the simulator's model: `run --instruction wmma --acc
#: f16` errs by at most 0.1% of the largest element, where rounding every add would give 0.5%).
F16_ACC_K_STEP = 16
#: Standard deviations of that rounding error allowed per element: the largest of ~10^6 gaussian
#: errors stays under 6.
F16_ACC_SIGMAS = 6.0
#: fp8 inputs: Hopper's fp8 wgmma is reported to keep about 14 bits when it adds each k32 product
#: group into the f32 accumulator (DeepSeek-V3 technical report, arXiv 2412.19437, §3.3.2: about
#: 2% worst relative error at K = 4096 on H800; not verified here, no GPU). `FP8_ACC_UNIT_ROUNDOFF`
#: once per `FP8_K_GROUP` of K models it; the products themselves are exact. The sm_90a kernel
#: promotes by default (Gemm.fast_accum=False, targets/sm90/promotion.py): the wgmma's reduced
#: precision then spans at most FP8_PROMOTION_K of K (4 groups) before an f32 add, so the bound
#: counts those groups, not K's (`fp8_reduced_groups`); only fast_accum=True keeps the wide bound.
FP8_ACC_UNIT_ROUNDOFF = 2.0 ** -14
FP8_K_GROUP = 32
#: Relative Frobenius error of the single-level (fast_accum=True) fp8 kernel.
FP8_TOLERANCE = 1e-2
#: GELU and SiLU use ex2.approx.f32 (about 2^-22 relative) and f32 arithmetic on the way.
APPROX_ACTIVATION_TOLERANCE = 2e-3
#: 8-bit outputs must equal the float64 value x rounded to nearest even and saturated, except that
#: where x lies within TIE_WINDOW * (|x| + 256) of a rounding tie k + 0.5 the element may be either
#: neighbour, k or k + 1 (saturated): the kernel evaluates the epilogue in f32 (a few roundings of
#: 2^-24 relative to the terms), which may land on the other side of such a tie. The window is
#: 2^-9 at least, far above that f32 error for terms up to ~2^13 (our random operands stay well
#: below), and covers ~0.4% of values, so any systematic rounding error still fails.
TIE_WINDOW = 2.0 ** -17


def tolerance(g: Gemm) -> float:
    """The relative Frobenius error a correct kernel for `g` stays under."""
    tol = TOLERANCE[g.out_dtype]
    if g.dtype == "tf32":
        tol = max(tol, TF32_TOLERANCE)
    if g.acc_dtype == "f16":
        tol = max(tol, F16_ACC_TOLERANCE)
    if g.dtype in FP8_DTYPES and g.fast_accum:  # promoted (the default): within the output's own
        tol = max(tol, FP8_TOLERANCE)
    if g.epi.activation in ("gelu", "silu"):
        tol = max(tol, APPROX_ACTIVATION_TOLERANCE)
    return tol


def fp8_reduced_groups(g: Gemm) -> int:
    """k32 groups an fp8 sum adds at reduced precision before an exact f32 add: all of K's with
    fast_accum=True, at most FP8_PROMOTION_K / FP8_K_GROUP with promotion (the default)."""
    groups = -(-g.k // FP8_K_GROUP)
    return groups if g.fast_accum else min(groups, FP8_PROMOTION_K // FP8_K_GROUP)


#: Poison for outputs before a run: NaN for floats, INT32_MIN for s32 (our exact integer
#: results stay far from it), so an element the kernel never wrote is always detectable.
S32_POISON = np.iinfo(np.int32).min
#: 8-bit outputs have no spare value: the byte patterns 0x55 and 0xAA are legal results. An
#: unwritten element still shows as a mismatch unless the poison is the right answer, so tests
#: run twice, once with each (`variant`): no value is within 1 of both.
BYTE_POISON = {"s8": (0x55, -0x56), "u8": (0x55, 0xAA)}


def poisoned(shape: tuple[int, ...], out_dtype: str, variant: int = 0) -> np.ndarray:
    dt = numpy_dtype(out_dtype)
    fill = BYTE_POISON[out_dtype][variant] if out_dtype in BYTE_POISON else (
        S32_POISON if out_dtype == "s32" else np.nan)
    return np.full(shape, fill, dtype=dt)


def unwritten(c: np.ndarray) -> np.ndarray:
    """Mask of elements still holding the poison (never written). For 8-bit outputs this is the
    first `BYTE_POISON` value, which a written element may also hold: use it to find stray
    writes outside the written region, not to prove every element was written."""
    c = np.asarray(c)
    if c.dtype.itemsize == 1:
        return c == np.array(BYTE_POISON["s8" if c.dtype.kind == "i" else "u8"][0]).astype(c.dtype)
    return c == S32_POISON if c.dtype.kind in "iu" else np.isnan(c.astype(np.float64))


def random_operands(g: Gemm, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Logical A (M x K) and B (K x N) in the gemm's storage layouts, values in ±[0.5, 1.5].

    Float inputs are drawn in float64 and rounded to the input dtype, so every value is exactly
    representable there (fp8: 13 e4m3 or 7 e5m2 magnitudes from 0.5 to 1.5), never zero, finite.

    Batched problems get (batch, M, K) and (batch, K, N) arrays, each matrix in its layout.
    Grouped ones (schedule/grouping.py) get B (G, K, N) and A (M_total, K) contiguous or
    (G, max_m, K) masked, A (M, K_total) and B (K_total, N) k-contiguous; draw their sizes with
    `schedule.grouping.random_counts`.
    """
    rng = np.random.default_rng(seed)
    lead = (g.batch,) if g.batch > 1 else (g.groups,) if g.grouping == "masked" else ()
    lead_b = (g.groups,) if g.grouping in ("contiguous", "masked") else lead  # k-contiguous: one B (K_total, N)

    def draw(rows: int, cols: int, layout: str, lead: tuple[int, ...] = lead, dtype: str = g.dtype) -> np.ndarray:
        store = (rows, cols) if layout == "row" else (cols, rows)
        if g.dtype in ("s8", "u8"):  # non-zero integers; u8 stays positive
            mag = rng.integers(1, 12, size=lead + store)
            sign = rng.choice([-1, 1], size=lead + store) if g.dtype == "s8" else 1
            x = (mag * sign).astype(numpy_dtype(g.dtype))
            return x if layout == "row" else np.swapaxes(x, -1, -2)
        mag = rng.uniform(0.5, 1.5, size=lead + store)
        x = (mag * rng.choice([-1.0, 1.0], size=lead + store)).astype(numpy_dtype(dtype))
        return x if layout == "row" else np.swapaxes(x, -1, -2)

    return draw(g.m, g.k, g.a_layout), draw(g.k, g.n, g.b_layout, lead_b, getattr(g, "b_dtype", None) or g.dtype)


def reference(a: np.ndarray, b: np.ndarray, epilogue: Epilogue | None = None, c: np.ndarray | None = None,
              bias: np.ndarray | None = None, scale: np.ndarray | None = None, *, offs: np.ndarray | None = None,
              masked_m: np.ndarray | None = None, block_scale: BlockScale | None = None,
              scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None) -> np.ndarray:
    """float64 act(alpha * scale * A @ B + beta * C + bias), the formulas Epilogue documents,
    before any cast (8-bit outputs: `compare` rounds it, `quantize` gives the rounded values).

    Grouped GEMMs: given `offs` (contiguous) or `masked_m` (masked), computed group by group
    (schedule.group_rows.grouped_reference); rows no group owns hold C's previous value (`c`, or NaN
    for a poisoned C), which `compare(..., untouched=...)` requires unchanged. `offs` with a 2-D
    `b` (K_total, N) is the k-contiguous product: C (G, M, N), C_g from A's and B's slice of K
    offs[g-1]..offs[g] (an empty group: the epilogue of a zero product).
    Block-scaled (`scale_a`, `scale_b` given; `block_scale` default BlockScale()): A @ B is the sum
    over 128-K blocks of (A_blk * sa) @ (B_blk * sb) (schedule/block_scale.py)."""
    if offs is not None or masked_m is not None:
        return grouped_reference(reference, a, b, epilogue, c, bias, scale, offs=offs, masked_m=masked_m,
                                 block_scale=block_scale, scale_a=scale_a, scale_b=scale_b)
    if scale_a is not None or scale_b is not None:
        x = scaled_product(a, b, block_scale or BlockScale(), scale_a, scale_b)
    else:
        x = a.astype(np.float64) @ b.astype(np.float64)
    return epilogue_reference(x, epilogue, c, bias, scale)


def epilogue_reference(x: np.ndarray, epilogue: Epilogue | None = None, c: np.ndarray | None = None,
                       bias: np.ndarray | None = None, scale: np.ndarray | None = None) -> np.ndarray:
    """`reference`'s epilogue applied to the float64 product x."""
    e = epilogue or Epilogue()
    x = e.alpha * x
    if e.scale == "col":
        x = x * np.asarray(scale, dtype=np.float64)[None, :]
    elif e.scale == "row":
        x = x * np.asarray(scale, dtype=np.float64)[:, None]
    if e.beta != 0.0:
        x = x + e.beta * np.asarray(c, dtype=np.float64)
    if e.bias == "col":
        x = x + np.asarray(bias, dtype=np.float64)[None, :]
    elif e.bias == "row":
        x = x + np.asarray(bias, dtype=np.float64)[:, None]
    if e.activation == "relu":
        x = np.maximum(x, 0.0)
    elif e.activation == "gelu":
        # 0.5 x (1 + tanh(y)) written as x / (1 + e^(-2y)): the same function, without 1 + tanh(y)'s
        # cancellation for large negative x (1 + tanh(-17.8) = 6.6e-16 lands on float64's 1.1e-16 grid)
        y = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)
        with np.errstate(over="ignore"):  # e^(-2y) = inf for x << 0: x / inf = -0, the right limit
            x = x / (1.0 + np.exp(-2.0 * y))
    elif e.activation == "silu":
        with np.errstate(over="ignore"):  # exp(-x) = inf for x << 0: x / inf = -0, the right limit
            x = x / (1.0 + np.exp(-x))
    return x


def reference_tile(a: np.ndarray, b: np.ndarray, epilogue: Epilogue | None, rows: slice, cols: slice,
                   c: np.ndarray | None = None, bias: np.ndarray | None = None,
                   scale: np.ndarray | None = None, *, block_scale: BlockScale | None = None,
                   scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None) -> np.ndarray:
    """`reference` for C[rows, cols] only (2-D operands: one batch): the rows of A and columns of B
    it needs, so checking a few sampled tiles of a large problem costs a few tiles, not all of C."""
    e = epilogue or Epilogue()

    def vector(v: np.ndarray | None, by: str | None) -> np.ndarray | None:
        return None if v is None or by is None else np.asarray(v)[cols if by == "col" else rows]

    if scale_a is not None:  # block-scaled: the tile's own rows of sa and columns of the expanded sb
        per_row, per_col = expand_scales(block_scale or BlockScale(), scale_a, scale_b, a.shape[0], b.shape[1])
        x = expanded_product(a[rows], b[:, cols], per_row[rows], per_col[:, cols],
                             (block_scale or BlockScale()).group_k)
        return epilogue_reference(x, e, None if c is None else c[rows, cols], vector(bias, e.bias),
                                  vector(scale, e.scale))

    return reference(a[rows], b[:, cols], e, None if c is None else c[rows, cols], vector(bias, e.bias),
                     vector(scale, e.scale))


def quantize(x: np.ndarray, out_dtype: str) -> np.ndarray:
    """float64 values rounded to nearest even and saturated to an 8-bit dtype, as the kernel's
    cvt.rni.sat does (still float64)."""
    info = np.iinfo(numpy_dtype(out_dtype))
    return np.clip(np.rint(x), info.min, info.max)


def random_epilogue_operands(g: Gemm, seed: int = 1) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(C, bias) the epilogue reads: C when beta != 0, bias when requested; non-zero values.

    8-bit outputs get C spanning the whole integer range and an f32 bias of tens of units, so
    both move the rounded result."""
    rng = np.random.default_rng(seed)
    dt = numpy_dtype(g.out_dtype)
    lead = (g.batch,) if g.batch > 1 else (g.groups,) if g.grouping in PER_GROUP_C else ()
    c = None
    if g.epi.beta != 0.0 and g.out_dtype in QUANTIZED_DTYPES:
        info = np.iinfo(dt)
        c = rng.integers(1, info.max + 1, size=lead + (g.m, g.n))
        c = (c * rng.choice([-1, 1], size=c.shape) if info.min < 0 else c).astype(dt)
    elif g.epi.beta != 0.0:
        c = rng.uniform(-1.5, 1.5, size=lead + (g.m, g.n)).astype(dt)
    n = {"col": g.n, "row": g.m, None: 0}[g.epi.bias]
    mag = 20.0 if g.out_dtype in QUANTIZED_DTYPES else 1.0
    bias = ((rng.uniform(0.5, 1.5, n) * mag * rng.choice([-1.0, 1.0], n)).astype(numpy_dtype(g.bias_dtype))
            if g.epi.bias else None)
    return c, bias


def random_scale(g: Gemm, seed: int = 2) -> np.ndarray | None:
    """The f32 scale vector the epilogue multiplies by (None without one): positive, like
    quantisation scales, and sized from the spread of random_operands' dot products so that
    scaled 8-bit outputs have an rms around 80 (about one in eight saturating) and float outputs around 1."""
    if g.epi.scale is None:
        return None
    rng = np.random.default_rng(seed)
    if g.dtype in INTEGER_DTYPES:  # magnitudes uniform in 1..11: E[m] = 6, E[m^2] = 46
        mean, square = (36.0 if g.dtype == "u8" else 0.0), 46.0 ** 2
    else:  # magnitudes uniform in [0.5, 1.5), random signs: E[m^2] = 13/12
        mean, square = 0.0, (13 / 12) ** 2
    typical = np.sqrt(g.k * square + g.k * (g.k - 1) * mean ** 2)  # rms of one dot product
    target = 60.0 if g.out_dtype in QUANTIZED_DTYPES else 1.0
    n = g.n if g.epi.scale == "col" else g.m
    return (target / typical * rng.uniform(0.25, 2.5, n)).astype(np.float32)


#: Unit roundoff (half an ulp, relative) of each float dtype: a correctly rounded cast is within
#: u * |x| of x. tf32 keeps 10 mantissa bits (cvt.rna: 2^-11 relative per input).
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8, "tf32": 2.0 ** -11}
#: Largest finite value and the overflow threshold (max + half an ulp: anything at or beyond it
#: rounds to inf) of each float output dtype.
OVERFLOW = {"f32": float(np.finfo(np.float32).max) * (1 + 2.0 ** -24), "f16": 65520.0,
            "bf16": float.fromhex("0x1.ffp127")}
#: f32 roundings in the epilogue (int->f32, alpha*scale, * acc, beta*C fma, + bias, activation).
EPILOGUE_ROUNDINGS = 8
#: ex2.approx.f32 and the f32 steps around it (GELU, SiLU): relative error about 2^-21 at worst.
APPROX_ACTIVATION_RTOL = 2.0 ** -18
#: Accumulation error allowed per element, in standard deviations of the random-operand model
#: (`atol`): the largest of ~10^6 gaussian errors stays under 6 sigma; 16 leaves room for
#: hardware that truncates inside the mma rather than rounding.
ERROR_SIGMAS = 16.0
#: Relative error of one product of two tf32 inputs: below 2 x 2^-10. The sm_80 path rounds each
#: f32 input (cvt.rna, 2^-11), but wgmma on sm_90a reads the f32 words TMA copied and ignores their
#: low 13 bits (docs/ptx_facts/wgmma.md §9a): truncation towards zero, up to 2^-10 per input, all
#: of one sign where the products are (the bound must hold for both paths).
TF32_PRODUCT_ERROR = 4 * UNIT_ROUNDOFF["tf32"]
#: tf32's input rounding, in units of 2^-11 times the result's RMS (see accumulation_error).
TF32_INPUT_SIGMAS = 6.0
#: Relative error of a tf32 result from the mean of wgmma's truncation (sm_90a): every product
#: loses E[t_a + t_b] <= 2 x 2^-11 of itself towards zero (each input's dropped 13 bits average at
#: most 2^-11 of it), so the sum loses that fraction of itself; only the spread around the mean is
#: random (TF32_INPUT_SIGMAS covers it). An RMS-based atol misses it at large elements (seen:
#: 3.6 x RMS came out 1.85 x 2^-10 small), so `rtol` adds it per element. The sm_80 path rounds
#: (cvt.rna: mean zero) and needs none of it; the bound path (`gamma`) already has the worst case.
TF32_TRUNCATION_RTOL = 2 * UNIT_ROUNDOFF["tf32"]
#: How many of the worst elements a failing comparison names.
WORST_SHOWN = 5


def rtol(g: Gemm | str) -> float:
    """Relative error per element: the output cast, the f32 epilogue, approximate activations, and
    the mean of tf32's truncation on sm_90a."""
    dtype = g.out_dtype if isinstance(g, Gemm) else g
    if dtype not in UNIT_ROUNDOFF:
        return 0.0  # s32: exact
    r = UNIT_ROUNDOFF[dtype] + EPILOGUE_ROUNDINGS * UNIT_ROUNDOFF["f32"]
    if isinstance(g, Gemm) and g.epi.activation in ("gelu", "silu"):
        r += APPROX_ACTIVATION_RTOL
    if isinstance(g, Gemm) and g.dtype == "tf32":  # wgmma truncates tf32 inputs (see the constant)
        r += TF32_TRUNCATION_RTOL
    return r


def accumulation_error(g: Gemm | str) -> float:
    """Error of one dot product relative to the reference's RMS, for never-zero random operands.

    A K-long sum rounds K partial sums of the size of the result (u_acc * sqrt(K) in RMS; plus
    2 K u for f32, the bias if the hardware truncates instead of rounding), and
    tf32 rounds each input (2 * 2^-11 per product, independent: about that times the result's
    RMS). Without the Gemm (dtype string only) K is unknown: the per-dtype `TOLERANCE` stands in.
    """
    if not isinstance(g, Gemm):
        return TOLERANCE[g]
    if g.accumulator == "s32":
        # Exact integer sums, but the f32 epilogue rounds terms the size of the result's RMS
        # (alpha*scale*acc, beta*C, the bias), which may cancel to a much smaller element.
        return 2 * EPILOGUE_ROUNDINGS * UNIT_ROUNDOFF["f32"]
    if g.accumulator == "f16":
        return f16_accumulation_error(g.k)
    err = ERROR_SIGMAS * UNIT_ROUNDOFF[g.accumulator] * np.sqrt(g.k)
    if g.accumulator == "f32":  # tensor cores may truncate: up to 1 ulp (2u) per add, all of one
        err += 2 * g.k * UNIT_ROUNDOFF["f32"]  # sign while a partial sum keeps its sign
    if g.dtype == "tf32":  # bounded by 2^-10 |p| per product; RMS 2^-11 sqrt(2/3) of the sum's: 7 sigma
        err += TF32_INPUT_SIGMAS * UNIT_ROUNDOFF["tf32"]
    if g.dtype in FP8_DTYPES:  # ~14-bit adds of each k32 group (FP8_ACC_UNIT_ROUNDOFF), may truncate;
        # promoted, each chunk's error is relative to the chunk (sqrt(P/K) of the result's RMS) and the
        # K/P chunks' errors add in quadrature: the chunk's relative error, whatever K
        groups = fp8_reduced_groups(g)
        err += ERROR_SIGMAS * FP8_ACC_UNIT_ROUNDOFF * np.sqrt(groups) + 2 * groups * FP8_ACC_UNIT_ROUNDOFF
    return float(err)


def f16_accumulation_error(k: int) -> float:
    """The f16 accumulator's error, as a multiple of (the result's RMS + the element's size), from
    K and f16's precision. The sum is rounded n = K/16 times (`F16_ACC_K_STEP`); the j-th time at a
    partial sum of about j/n of the element (its drift) plus sqrt(j/n) of the RMS (a random walk);
    each rounding errs uniformly within half an ulp (2u|x|: deviation 2u|x|/sqrt(12)). Summed, the
    deviation is at most u/sqrt(3) * sqrt((n+1)/2) * (RMS + |element|): `F16_ACC_SIGMAS` of it is
    0.8% of an element as large as the RMS at K = 128, so 1% off fails (the old 16 sigma * u *
    sqrt(K) of the RMS was 9% of it)."""
    n = -(-k // F16_ACC_K_STEP)
    return float(F16_ACC_SIGMAS * UNIT_ROUNDOFF["f16"] / np.sqrt(3) * np.sqrt((n + 1) / 2))


def magnitude(a: np.ndarray, b: np.ndarray, epilogue: Epilogue | None = None, c: np.ndarray | None = None,
              bias: np.ndarray | None = None, scale: np.ndarray | None = None, *, offs: np.ndarray | None = None,
              masked_m: np.ndarray | None = None, block_scale: BlockScale | None = None,
              scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None) -> np.ndarray:
    """|alpha * scale| * (|A| @ |B|) + |beta * C| + |bias|: the size of every term of each element,
    for the standard GEMM error bound gamma_K * magnitude (pass it to `compare` as `bound=`)."""
    e = epilogue or Epilogue()
    lipschitz = 1.2 if e.activation in ("gelu", "silu") else 1.0  # |d act/dx| <= 1.13 (GELU), 1.1 (SiLU)
    absolute = Epilogue(alpha=abs(e.alpha), beta=abs(e.beta), bias=e.bias, scale=e.scale)
    return reference(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)), absolute,
                     None if c is None else np.abs(np.asarray(c, dtype=np.float64)),
                     None if bias is None else np.abs(np.asarray(bias, dtype=np.float64)),
                     None if scale is None else np.abs(np.asarray(scale, dtype=np.float64)),
                     offs=offs, masked_m=masked_m, block_scale=block_scale, scale_a=scale_a,
                     scale_b=scale_b) * lipschitz


def underflow_floor(dtype: str) -> float:
    """The absolute error underflow allows whatever the problem's scale: the f32 epilogue may
    flush a result below f32's smallest normal to zero (e.g. SiLU of a large negative sum, 1e-137
    in float64), and the cast to a 16-bit output rounds to its subnormal spacing."""
    import ml_dtypes  # its finfo knows bfloat16 as well as numpy's floats

    out = numpy_dtype(dtype) if dtype != "tf32" else np.dtype(np.float32)
    return float(np.finfo(np.float32).tiny) + float(ml_dtypes.finfo(out).smallest_subnormal) / 2


def gamma(g: Gemm) -> float:
    """The worst-case relative error of the K-long sum and the epilogue: gamma_n = n u / (1 - n u)
    over K + EPILOGUE_ROUNDINGS roundings (u doubled: tensor cores may truncate rather than round),
    plus tf32's input rounding (Higham, Accuracy and Stability of Numerical Algorithms, 3.1)."""
    if g.accumulator == "s32":
        return EPILOGUE_ROUNDINGS * UNIT_ROUNDOFF["f32"]
    nu = (g.k + EPILOGUE_ROUNDINGS) * 2 * UNIT_ROUNDOFF[g.accumulator]  # 2u: hardware may truncate
    if g.dtype in FP8_DTYPES:  # plus one ~14-bit add per k32 group of a chunk (FP8_ACC_UNIT_ROUNDOFF): the
        nu += fp8_reduced_groups(g) * 2 * FP8_ACC_UNIT_ROUNDOFF  # chunks' magnitudes sum to the element's
    if g.block_scale is not None:  # per 128-K block: sa * sb rounded, and the fma's rounding
        nu += 2 * -(-g.k // FP8_PROMOTION_K) * 2 * UNIT_ROUNDOFF["f32"]
    out = nu / (1 - nu) if nu < 1 else np.inf
    return float(out + (TF32_PRODUCT_ERROR if g.dtype == "tf32" else 0.0))


@dataclass(frozen=True)
class Comparison:
    max_abs_error: float  # over elements both finite (information)
    rel_frobenius: float  # information only: every element is checked (`bad`)
    tolerance: float  # the atol (float outputs; 0 for exact ones)
    unwritten: int  # NaN-poisoned elements the kernel never wrote (NaN where the reference is not)
    #: 8-bit outputs only: elements off by more than the tie rule allows, and those off by one at a tie.
    mismatches: int | None = None
    at_ties: int = 0
    #: Float and s32 outputs: elements outside |got - want| <= atol + rtol |want| (or a wrong inf/NaN).
    bad: int = 0
    rtol: float = 0.0
    #: The worst elements: (index, got, want), worst first.
    worst: tuple = ()
    #: Grouped GEMMs: elements no group owns that the kernel changed (`compare`'s `untouched`).
    stray: int = 0

    @property
    def ok(self) -> bool:
        if self.stray:
            return False
        if self.mismatches is not None:
            return self.unwritten == 0 and self.mismatches == 0
        return self.unwritten == 0 and self.bad == 0

    def _worst_text(self) -> str:
        if not self.worst:
            return ""
        items = ", ".join(f"{list(i) if len(i) > 1 else i[0]}: got {g:.6g} want {w:.6g}" for i, g, w in self.worst)
        return f"; worst: {items}"

    def __str__(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        extra = f", {self.unwritten} elements never written" if self.unwritten else ""
        extra += f", {self.stray} elements outside every group written (they must stay untouched)" if self.stray else ""
        if self.mismatches is not None:
            return (f"{verdict}: max abs error {self.max_abs_error:g} after rounding the float64 reference; "
                    f"{self.mismatches} elements wrong, {self.at_ties} off by one at a rounding tie "
                    f"(allowed){extra}")
        return (f"{verdict}: {self.bad} elements outside |got - want| <= atol + rtol |want| "
                f"(atol {self.tolerance:.2e}, rtol {self.rtol:.2e}){extra}; max abs error {self.max_abs_error:.3e}, "
                f"relative Frobenius error {self.rel_frobenius:.3e}{self._worst_text()}")


def _worst(score: np.ndarray, got: np.ndarray, want: np.ndarray) -> tuple:
    """The WORST_SHOWN elements with the largest score (inf for wrong inf/NaN), worst first."""
    flat = np.nan_to_num(score.ravel(), nan=np.inf)
    order = np.argsort(-flat, kind="stable")[:WORST_SHOWN]
    return tuple((tuple(int(x) for x in np.unravel_index(i, score.shape)), float(got.ravel()[i]),
                  float(want.ravel()[i])) for i in order if flat[i] > 0)


def compare(c: np.ndarray, ref: np.ndarray, out_dtype: str | Gemm, rows=None, cols=None, *,
            bound: np.ndarray | None = None, untouched: np.ndarray | None = None) -> Comparison:
    """Check every element of C against the float64 reference.

    Float and s32 outputs: |got - want| <= atol + rtol |want| per element, as
    numpy.testing.assert_allclose does. rtol covers the output cast and the f32 epilogue (`rtol`);
    atol the accumulation: `gamma(gemm) * bound` where `bound` (see `magnitude`) is given, else
    `accumulation_error` times the reference's RMS. Where the reference is +-inf (or beyond the
    output dtype's range, so the cast overflows) the element must be the same inf; where it is
    NaN, NaN. A NaN elsewhere is poison never overwritten (`unwritten`).

    8-bit outputs are compared element by element with the rounded, saturated reference: equal,
    or the tie's other neighbour within TIE_WINDOW of a rounding tie (see there). They have no unwritable poison,
    so an unwritten element shows as a mismatch (see BYTE_POISON).

    Grouped GEMMs: `untouched` (`untouched_rows`: rows no group owns) marks elements
    that must still hold the reference's value there, C's previous value (NaN = NaN): each one
    changed counts in `stray` and fails the comparison; they are left out of the rest."""
    dtype = out_dtype.out_dtype if isinstance(out_dtype, Gemm) else out_dtype
    raw = np.asarray(c)
    ref = np.asarray(ref, dtype=np.float64)
    if untouched is not None:
        if rows is not None:
            raise ValueError("compare(..., untouched=) checks the whole C: leave rows/cols None")
        stray = stray_writes(raw, ref, untouched)
        # checked: now equal to the reference (only those elements are cast, so no value of the
        # reference outside them can overflow C's dtype)
        raw = np.where(untouched, ref, raw.astype(np.float64)).astype(raw.dtype)
        bound = None if bound is None else np.where(untouched, 0.0, bound)  # exact there
        result = compare(raw, ref, out_dtype, bound=bound)
        return result if not stray else Comparison(**{**result.__dict__, "stray": stray})
    if dtype in QUANTIZED_DTYPES:
        got = raw.astype(np.float64)
        if rows is not None:
            got, ref = got[np.ix_(rows, cols)], ref[np.ix_(rows, cols)]
        diff = got - quantize(ref, dtype)
        below = np.floor(ref)  # a tie below + 0.5 may round to either neighbour, nothing else
        near_tie = np.abs(ref - (below + 0.5)) <= TIE_WINDOW * (np.abs(ref) + 256.0)
        either = (got == quantize(below, dtype)) | (got == quantize(below + 1.0, dtype))
        at_tie = (diff != 0) & near_tie & either
        wrong = (diff != 0) & ~at_tie
        norm = float(np.linalg.norm(quantize(ref, dtype))) or 1.0
        return Comparison(float(np.abs(diff).max(initial=0.0)), float(np.linalg.norm(diff)) / norm, 0.0, 0,
                          int(wrong.sum()), int(at_tie.sum()))
    missing = unwritten(raw)
    got = np.where(missing, np.nan, raw.astype(np.float64))
    if rows is not None:
        got, ref = got[np.ix_(rows, cols)], ref[np.ix_(rows, cols)]
        bound = None if bound is None else np.asarray(bound)[np.ix_(rows, cols)]
    if dtype in OVERFLOW:  # the cast of a finite value beyond the range is inf
        want = np.where(np.abs(ref) >= OVERFLOW[dtype], np.copysign(np.inf, ref), ref)
    else:
        want = ref
    finite = np.isfinite(want)
    relative = rtol(out_dtype)
    if dtype not in UNIT_ROUNDOFF:  # s32: exact
        atol = np.zeros_like(want)
    elif bound is not None:
        if not isinstance(out_dtype, Gemm):
            raise ValueError("compare(..., bound=) needs the Gemm (for K and the accumulator), not a dtype "
                             "name: pass the kernel's gemm as the third argument")
        atol = gamma(out_dtype) * np.asarray(bound, dtype=np.float64)
    else:
        rms = float(np.sqrt(np.mean(np.square(want[finite])))) if finite.any() else 0.0
        atol = np.full_like(want, accumulation_error(out_dtype) * rms)
        if isinstance(out_dtype, Gemm) and out_dtype.accumulator == "f16":  # grows with the element too
            atol = accumulation_error(out_dtype) * (rms + np.where(finite, np.abs(want), 0.0))
    if dtype in UNIT_ROUNDOFF:  # underflow: the f32 epilogue flushes below f32's smallest normal, and
        atol = atol + underflow_floor(dtype)  # the cast rounds to the output's subnormal grid
    never_written = np.isnan(got) & ~np.isnan(want)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want)
        allowed = atol + relative * np.abs(want)
        right_special = ~finite & (np.isnan(got) & np.isnan(want) | (got == want))
        score = np.where(finite, err / np.where(allowed > 0, allowed, 1.0) * (err > allowed), np.inf)
        score = np.where(right_special | never_written, 0.0, np.nan_to_num(score, nan=np.inf))
    outside = score > 0
    both = finite & np.isfinite(got)
    with np.errstate(invalid="ignore"):  # inf - inf where both are special; masked out
        diff = np.where(both, got - want, 0.0)
    norm = float(np.linalg.norm(np.where(finite, want, 0.0))) or 1.0
    atol_shown = float(np.max(atol, initial=0.0))
    return Comparison(float(np.abs(diff).max(initial=0.0)), float(np.linalg.norm(diff)) / norm, atol_shown,
                      int(never_written.sum()), bad=int(outside.sum()), rtol=relative,
                      worst=_worst(score, got, want))


def check_simulated(kernel, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, bias: np.ndarray | None = None,
                    scale: np.ndarray | None = None, *, offs: np.ndarray | None = None,
                    masked_m: np.ndarray | None = None, **block_scales: np.ndarray) -> Comparison:
    """Simulate `kernel` (a ptxgen.Kernel) and compare with `reference` (see check_kernel)."""
    return check_kernel(kernel, a, b, c, bias, scale, run=kernel.simulate, offs=offs, masked_m=masked_m,
                        **block_scales)


def check_kernel(kernel, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, bias: np.ndarray | None = None,
                 scale: np.ndarray | None = None, run=None, *, offs: np.ndarray | None = None,
                 masked_m: np.ndarray | None = None, **block_scales: np.ndarray) -> Comparison:
    """Run `kernel` with `run` (Kernel.simulate, or the kernel itself on a GPU) on numpy operands
    and compare with `reference`: the first failing comparison, else the last. C is a fresh
    array with the gemm's ldc, holding a given `c` (beta != 0; `c` itself is not updated).
    8-bit outputs run once per BYTE_POISON value, so an element never written cannot pass by
    holding the answer. Grouped kernels take `offs` / `masked_m`; the rows no group owns must
    come back unchanged (poisoned, or `c`'s values)."""
    run = run or kernel.simulate
    g = kernel.gemm
    groups = {"offs": offs, "masked_m": masked_m} if g.grouped else {}
    bs = {"block_scale": g.block_scale, **block_scales} if block_scales else {}  # scale_a=, scale_b=
    ref = reference(a, b, g.epilogue, c, bias, scale, **groups, **bs)
    bound = None if g.out_dtype in QUANTIZED_DTYPES else magnitude(a, b, g.epilogue, c, bias, scale, **groups, **bs)
    untouched = None
    if g.grouped:
        untouched = untouched_rows(g, **groups)
    result = None
    for variant in range(len(BYTE_POISON.get(g.out_dtype, (None,)))):
        lead = (g.batch,) if g.batch > 1 else (g.groups,) if g.grouping in PER_GROUP_C else ()
        out = poisoned(lead + (g.m, g.leading_dims()[2]), g.out_dtype, variant)[..., :g.n]  # ldc honoured
        if c is not None:
            out[...] = c
        run(a, b, c=out, bias=bias, scale=scale, **groups, **block_scales)  # written in place (a strided view when ldc > N)
        result = compare(out, ref, g, bound=bound, untouched=untouched)
        if not result.ok:
            return result
    assert result is not None
    return result
