"""The GEMM problem: logical shapes, dtypes and storage layouts of the operands."""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from . import field_checks as check
from .grouping import GROUPINGS, check_grouping_fields
from .block_scale import BlockScale, check_gemm_block_scale
from .scalars import normalise

#: Input dtypes, and the numpy dtype that holds them. e4m3/e5m2 (fp8) are wgmma-only (sm_90a).
INPUT_DTYPES = ("f16", "bf16", "tf32", "s8", "u8", "e4m3", "e5m2", "e2m1")
OUTPUT_DTYPES = ("f32", "f16", "bf16", "s32", "s8", "u8")
INTEGER_DTYPES = ("s8", "u8")
#: 8-bit floats (PTX .e4m3 / .e5m2; numpy: ml_dtypes float8_e4m3fn, float8_e5m2): f32 accumulation,
#: f32/f16/bf16 output. Only wgmma multiplies them, so only arch="sm_90a" takes them.
FP8_DTYPES = ("e4m3", "e5m2")
#: 4-bit floats (e2m1, PTX .e2m1; numpy: ml_dtypes float4_e2m1fn, one value per byte): MXFP4/NVFP4,
#: block-scaled only (sm_100a's tcgen05). The kernels read them packed two per byte along K, the
#: lower K index in bits 3:0 (docs/ptx_facts/sm100_formats.md §2); runtime/fp4.py packs them.
FP4_DTYPES = ("e2m1",)
#: Values per stored byte along K (the packed fp4 operands).
K_PACK = {"e2m1": 2}
#: K per promotion of an fp8 wgmma's partial sums into the kernel's separate f32 accumulator
#: (at most this much; `Gemm.fast_accum=False`, the default): CUTLASS's mma_promotion_interval of
#: 4 k32 instructions, DeepGEMM's per-128-K promotion (targets/sm90/promotion.py).
FP8_PROMOTION_K = 128
#: Outputs that round the f32 epilogue value to 8 bits (cvt.rni.sat: nearest even, saturated).
QUANTIZED_DTYPES = ("s8", "u8")
#: The mma.sync shape (m, n, k) each input dtype issues: every k-step covers 32 bytes of K.
MMA_MNK = {"f16": (16, 8, 16), "bf16": (16, 8, 16), "tf32": (16, 8, 8), "s8": (16, 8, 32), "u8": (16, 8, 32)}
MMA_SHAPE = {dtype: "m{}n{}k{}".format(*mnk) for dtype, mnk in MMA_MNK.items()}
#: The K of one wgmma per input dtype (32 bytes of K, docs/ptx_facts/wgmma.md §9a); M is always 64
#: per warpgroup and N is the block's BN.
WGMMA_M = 64
WGMMA_K = {"f16": 16, "bf16": 16, "tf32": 8, "s8": 32, "u8": 32, "e4m3": 32, "e5m2": 32}
#: wmma's only lowered shape (f16/bf16 inputs).
WMMA_MNK = (16, 16, 16)
LAYOUTS = ("row", "col")
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "s8": 1, "u8": 1, "s32": 4, "e4m3": 1, "e5m2": 1,
               "e2m1": 1}   # e2m1: its numpy container; packed two per byte in the kernel (K_PACK)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds a ptxgen dtype (bf16, e4m3 and e5m2 come from ml_dtypes; e4m3 is
    the "fn" variant PTX uses: no infinities, NaN = S.1111.111, largest finite 448)."""
    if name in ("bf16", "e4m3", "e5m2", "e2m1"):
        import ml_dtypes

        return np.dtype({"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
                         "e5m2": ml_dtypes.float8_e5m2, "e2m1": ml_dtypes.float4_e2m1fn}[name])
    return np.dtype({"f16": np.float16, "f32": np.float32, "tf32": np.float32, "s8": np.int8,
                     "u8": np.uint8, "s32": np.int32}[name])


#: Accumulator dtypes a Gemm names (s32 is what integer inputs always use).
ACC_DTYPES = ("f32", "f16", "s32")
BIAS_DTYPES = ("f32", "f16", "bf16")
#: Other names of the dtypes: numpy's and ml_dtypes' names (np.dtype(x).name), so `np.float16`,
#: `"float16"`, `ml_dtypes.bfloat16` and `a.dtype` all mean "f16"/"bf16". float32 means "f32",
#: which as an input dtype is refused with the fix tf32 (what the tensor cores multiply).
DTYPE_ALIASES = {"float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "single": "f32",
                 "int8": "s8", "uint8": "u8", "int32": "s32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
                 "float4_e2m1fn": "e2m1"}


def dtype_name(value: object) -> object:
    """ptxgen's name for a dtype given as a name or alias, a numpy/ml_dtypes scalar type or a
    np.dtype; any other value unchanged (for the field check to name)."""
    if isinstance(value, str):
        return DTYPE_ALIASES.get(value.lower(), value.lower() if value.lower() in DTYPE_BYTES else value)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        try:
            return DTYPE_ALIASES.get(np.dtype(value).name, value)
        except TypeError:
            return value
    return value


def check_dtype(field: str, value: object, options: tuple[str, ...]) -> None:
    """A dtype from `options`, with a fix for the near misses (float32 inputs, fp8 outputs)."""
    fix = ""
    if value == "f32" and "tf32" in options:
        fix = "write dtype='tf32': float32 operands are multiplied by the tensor cores as tf32"
    elif value in ("e4m3", "e5m2") and field.endswith("out_dtype"):
        fix = "write out_dtype='f32', 'f16' or 'bf16' (fp8 is an input dtype only)"
    elif field.endswith("bias_dtype"):
        fix = "use bias_dtype='f32' (the default), or an f16/bf16 output's own dtype"
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        fix = f"write {field.split('.')[-1]}={options[0]!r}: a dtype is a name or a numpy dtype (np.float16), not a number"
    check.choice(field, value, options, fix=fix)


ACTIVATIONS = ("relu", "gelu", "silu")
#: Per-row (length M) or per-column (length N) vectors: the bias and the scale.
VECTOR_KINDS = ("row", "col")
BIAS_KINDS = VECTOR_KINDS


@dataclass(frozen=True)
class Epilogue:
    """D = act(alpha * scale * acc + beta * C + bias), then cast to the output dtype.

    Everything is evaluated in f32, in this order: acc (an s32 accumulator first converted with
    cvt.rn.f32.s32); times `alpha * scale[i]` (that product rounded to f32 once per row or column;
    just alpha without a scale); + beta * C (one fma); + bias; the activation; the cast.

    * `scale="col"`: a runtime f32 vector of length N multiplying column n (per-channel weight
      quantisation scales); `"row"`: length M (per-token activation scales). `alpha` is the
      per-tensor scale; both may be given.
    * `bias="col"`: a length-N vector added to every row (a linear layer's bias); `"row"`: length M.
      The bias is f32 (`Gemm.bias_dtype`; f16/bf16 outputs may take a bias of their own dtype).
    * 8-bit outputs (`out_dtype="s8"/"u8"`) round to nearest even and saturate
      (cvt.rni.sat.s8.f32 / .u8.f32); beta != 0 reads C back as 8-bit integers.
    * `activation`: "relu" = max(x, 0); "gelu" = the tanh approximation
      0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); "silu" = x sigmoid(x). Both are computed as
      x sigmoid(z) = x / (1 + 2^(-z log2 e)) with ex2.approx.f32 (relative error about 2^-22) and
      rcp.rn.f32, which keeps relative accuracy where 1 + tanh would cancel.
    * `beta != 0` reads C before overwriting it (an in-place update).
    * `alpha` and `beta` are f32 in the kernel: each must be finite and, once rounded to f32, 0 or
      a normal number (magnitude 2^-126 to about 3.4e38). The verifier refuses values that f32
      would turn into infinity, 0 or a subnormal, rather than change the result silently.
    """

    alpha: float = 1.0
    beta: float = 0.0
    bias: str | None = None
    activation: str | None = None
    scale: str | None = None

    def __post_init__(self) -> None:
        normalise(self, tuple(f.name for f in fields(self)))
        check_epilogue(self)

    @property
    def is_identity(self) -> bool:
        return (self.alpha == 1.0 and self.beta == 0.0 and self.bias is None and self.activation is None
                and self.scale is None)


@dataclass(frozen=True)
class Gemm:
    """C[M,N] = A[M,K] @ B[K,N], accumulated in f32.

    Operands are always the logical matrices. A layout says how one is stored: "row" means
    the last index is contiguous (a C-contiguous array), "col" the first (F-contiguous, or
    `x.T` of a C-contiguous array). C is always row-major.
    """

    m: int
    n: int
    k: int
    dtype: str = "f16"
    out_dtype: str = "f32"
    a_layout: str = "row"
    b_layout: str = "col"

    @property
    def in_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def out_bytes(self) -> int:
        return DTYPE_BYTES[self.out_dtype]

    #: Leading dimensions in elements; None means dense (K or M for A, N or K for B, N for C).
    #: 0 is refused, not read as dense.
    lda: int | None = None
    ldb: int | None = None
    ldc: int | None = None
    #: Byte alignment guaranteed for every base pointer and leading dimension (16, 8, 4, 2, or 1
    #: for s8/u8).
    #: None picks the largest that the leading dimensions allow; copies narrow to match.
    align: int | None = None
    #: Accumulator dtype: "f32", or "f16" (f16 inputs and output only: the half-precision mma).
    #: Integer inputs always accumulate in s32 (see `accumulator`).
    acc_dtype: str = "f32"
    epilogue: Epilogue | None = None
    #: Independent GEMMs in one launch: operands (batch, M, K), (batch, K, N), (batch, M, N) with
    #: batch strides given at run time (0 broadcasts one matrix to every batch).
    batch: int = 1
    #: The bias vector's dtype (the kernel's `bias` parameter's elements): "f32" for every output,
    #: as in CUTLASS's bias epilogues (the epilogue adds it in f32), or, for f16/bf16 outputs, the
    #: output dtype (half the bytes). An f32-bias kernel also takes a host f16/bf16 bias, widened
    #: exactly at launch.
    bias_dtype: str = "f32"
    #: fp8 (e4m3/e5m2) inputs on sm_90a's wgmma only. False (the default): the wgmma accumulates at
    #: most FP8_PROMOTION_K of K into a temporary, which is then added into a separate f32
    #: accumulator in registers (Hopper's fp8 wgmma is reported to keep only about 14 bits when it
    #: adds each k32 product group, docs/ptx_facts/wgmma.md §9b′); True: the single-level kernel,
    #: every k-tile accumulated by the wgmma itself (faster, less accurate at large K; cuBLASLt's
    #: CUBLASLT_MATMUL_DESC_FAST_ACCUM, torch._scaled_mm(use_fast_accum=True)).
    fast_accum: bool = False
    #: Grouped GEMMs (mixture-of-experts; schedule/grouping.py): `groups` products, one weight each,
    #: their rows split by `grouping` = "contiguous" (m = M_total: A (M_total, K), C (M_total, N),
    #: run-time `offs` of cumulative row ends) or "masked" (m = max_m: A (G, max_m, K), C (G, max_m,
    #: N), run-time `masked_m` of valid rows); B is (G, K, N). "k-contiguous" splits K instead (k =
    #: K_total: A (M, K_total) column-major, B (K_total, N) row-major, C (G, M, N), run-time `offs`
    #: of cumulative ends along K). None: not grouped (groups must be 1).
    groups: int = 1
    grouping: str | None = None
    #: Block-scaled fp8 (schedule/block_scale.py): a `BlockScale` naming the group shapes of the
    #: run-time scales `scale_a` (M x ceil(K/128)) and `scale_b` (ceil(K/128) x ceil(N/128)), applied
    #: at each 128-wide K slice's promotion; None: no block scaling.
    block_scale: BlockScale | None = None
    #: B's dtype where it differs from A's: mixed fp8, dtype="e4m3" with b_dtype="e5m2" or the reverse
    #: (sm_100a's kind::f8f6f4 / mxf8f6f4 take A and B types separately); None: B is `dtype`.
    b_dtype: str | None = None

    def __post_init__(self) -> None:
        normalise(self, tuple(f.name for f in fields(self) if f.name not in ("epilogue", "block_scale")))
        for name in ("dtype", "out_dtype", "acc_dtype", "bias_dtype", "b_dtype"):
            object.__setattr__(self, name, dtype_name(getattr(self, name)))
        if self.b_dtype == self.dtype:
            object.__setattr__(self, "b_dtype", None)  # one dtype: the same Gemm as without b_dtype
        check_gemm(self)
        if self.b_dtype is not None and not (self.dtype in FP8_DTYPES and self.b_dtype in FP8_DTYPES):
            raise check.ScheduleError("gemm.b_dtype", self.b_dtype, "a B dtype of its own is built for mixed fp8 "
                                      "only (e4m3 x e5m2 or e5m2 x e4m3)", "drop b_dtype, or use dtype and "
                                      "b_dtype from 'e4m3' and 'e5m2'")

    @property
    def in_dtype_b(self) -> str:
        """B's input dtype (`b_dtype`, else `dtype`)."""
        return self.b_dtype or self.dtype

    @property
    def accumulator(self) -> str:
        """The accumulator actually used: s32 for s8/u8 inputs, else `acc_dtype`."""
        return "s32" if self.dtype in INTEGER_DTYPES else self.acc_dtype

    @property
    def k_step(self) -> int:
        """Elements of K one mma.sync consumes (32 bytes of K for every input dtype)."""
        return 32 // DTYPE_BYTES[self.dtype]

    @property
    def epi(self) -> Epilogue:
        return self.epilogue or Epilogue()

    def alignment(self) -> int:
        """Byte alignment of A and B, which sets the copy width: the stated alignment, or the
        largest of 16/8/4/2/1 that divides lda and ldb in bytes (1 only for byte-sized elements,
        whose copies then move single bytes)."""
        lda, ldb, _ = self.leading_dims()
        return self.align if self.align is not None else _largest_alignment(lda * self.in_bytes, ldb * self.in_bytes)

    def out_alignment(self) -> int:
        """Byte alignment of C, which sets the store width: the stated alignment, or the largest
        that divides ldc in bytes. Separate from `alignment`, so that C's rows (e.g. odd-length
        8-bit rows) never narrow the copies of A and B."""
        return self.align if self.align is not None else _largest_alignment(self.leading_dims()[2] * self.out_bytes)

    def leading_dims(self) -> tuple[int, int, int]:
        """(lda, ldb, ldc): the stride between rows ("row") or columns ("col"), in elements."""
        dense = self.min_leading_dims()
        return tuple(d if ld is None else ld for ld, d in zip((self.lda, self.ldb, self.ldc), dense))

    def min_leading_dims(self) -> tuple[int, int, int]:
        """The logical width each leading dimension must at least cover."""
        return (self.k if self.a_layout == "row" else self.m,
                self.n if self.b_layout == "row" else self.k, self.n)

    @property
    def flops(self) -> int:
        """2 M N K of one batch; grouped: of every row the launch may compute (contiguous M_total,
        masked G x max_m; k-contiguous: the groups' K slices sum to at most K_total), an upper bound
        since the groups' sizes are only known at run time."""
        rows = self.m * (self.groups if self.grouping == "masked" else 1)
        return 2 * rows * self.n * self.k

    @property
    def grouped(self) -> bool:
        return self.grouping is not None


def check_epilogue(e: Epilogue) -> None:
    """Each Epilogue field on its own (on construction; whether f32 holds alpha and beta, and
    which epilogues a kernel takes, are the verifier's)."""
    for name in ("alpha", "beta"):
        check.number(f"epilogue.{name}", getattr(e, name))
    check.choice("epilogue.bias", e.bias, VECTOR_KINDS, optional=True)
    check.choice("epilogue.scale", e.scale, VECTOR_KINDS, optional=True)
    check.choice("epilogue.activation", e.activation, ACTIVATIONS, optional=True)


def check_gemm(g: Gemm) -> None:
    """Each Gemm field on its own (on construction); rules across fields are the verifier's."""
    for f in ("m", "n", "k", "batch", "groups"):
        check.integer(f"gemm.{f}", getattr(g, f), example=1 if f in ("batch", "groups") else 64)
    check_dtype("gemm.dtype", g.dtype, INPUT_DTYPES)
    check_dtype("gemm.out_dtype", g.out_dtype, OUTPUT_DTYPES)
    check.choice("gemm.a_layout", g.a_layout, LAYOUTS)
    check.choice("gemm.b_layout", g.b_layout, LAYOUTS)
    check_dtype("gemm.acc_dtype", g.acc_dtype, ACC_DTYPES)
    check_dtype("gemm.bias_dtype", g.bias_dtype, BIAS_DTYPES)
    check.boolean("gemm.fast_accum", g.fast_accum)
    for f in ("lda", "ldb", "ldc"):
        check.integer(f"gemm.{f}", getattr(g, f), optional=True, example=72)
    check.integer("gemm.align", g.align, optional=True, example=16)
    if g.align is not None and g.align not in (1, 2, 4, 8, 16):
        near = max(a for a in (1, 2, 4, 8, 16) if a <= g.align)
        raise check.ScheduleError("gemm.align", g.align, "must be 1, 2, 4, 8 or 16 bytes",
                                  f"state the alignment your pointers and leading dimensions guarantee, e.g. "
                                  f"align={near}, or None to infer it")
    if g.epilogue is not None and not isinstance(g.epilogue, Epilogue):
        raise check.ScheduleTypeError("gemm.epilogue", g.epilogue, f"must be a ptxgen.Epilogue or None, not "
                                      f"{check.type_name(g.epilogue)}",
                                      "pass epilogue=Epilogue(alpha=..., bias=..., ...)")
    check.choice("gemm.grouping", g.grouping, GROUPINGS, optional=True,
                 fix="grouping='contiguous' (offs of cumulative row ends), 'masked' (masked_m valid rows) or "
                     "'k-contiguous' (offs of cumulative ends along K: weight gradients), "
                     "or None for an ungrouped GEMM")
    check_grouping_fields(g)
    check_gemm_block_scale(g)


def _largest_alignment(*row_bytes: int) -> int:
    return next(a for a in (16, 8, 4, 2, 1) if all(b % a == 0 for b in row_bytes))


def instruction_shape(g: "Gemm", instruction: str, block_n: int | None = None) -> tuple[int, int, int]:
    """(m, n, k) of the instruction the kernel actually issues: mma.sync's shape follows the input
    dtype (m16n8k16, m16n8k8 for tf32, m16n8k32 for int8); wmma is m16n16k16; wgmma is
    m64nNk(32 bytes) with N = the block's BN (`block_n`, required for wgmma). The tiling rules
    use this, not the schedule's `instruction` name, which only picks the instruction family."""
    if instruction == "wgmma":
        if block_n is None:
            raise ValueError("instruction_shape(g, 'wgmma', block_n): wgmma's N is the block's BN; pass it")
        return WGMMA_M, block_n, WGMMA_K[g.dtype]
    return WMMA_MNK if instruction == "wmma" else MMA_MNK[g.dtype]


def instruction_name(g: "Gemm", instruction: str, block_n: int | None = None) -> str:
    """What the kernel actually issues, e.g. "mma.sync m16n8k8" for tf32, "wmma m16n16k16" or
    "wgmma m64n128k32" (e4m3 with BN = 128)."""
    family = {"wmma": "wmma ", "wgmma": "wgmma "}.get(instruction, "mma.sync ")
    return family + "m{}n{}k{}".format(*instruction_shape(g, instruction, block_n))
