"""Block-scaled fp8 GEMMs (DeepSeek-V3, arXiv 2412.19437 §3.3): one scale per 1x128 block of A
(a row's 128 consecutive K elements) and per 128x128 block of B, applied while accumulating:

    C = sum over K-blocks kb of (A[:, kb] * sa[:, kb]) @ (B[kb, :] * sb[kb, :])   (then the epilogue)

with `sa` of shape (M, ceil(K/128)) and `sb` of shape (ceil(K/128), ceil(N/128)) in the logical
orientation. On sm_90a the promotion step of fp8 accumulation (targets/sm90/promotion.py) becomes
`acc += tmp * (sa[row, kb] * sb[kb, n-block])` per 128-wide K slice.

Scale dtypes: "f32" (float32 arrays), or "ue8m0" (DeepGEMM's power-of-two scales on Blackwell, the
OCP MX E8M0 format): uint8 biased exponents e, the scale 2^(e - 127), e from 1 to 254 (0 and 255,
2^-127 and NaN, are refused: the kernel turns e into an f32 by `e << 23`, a normal number only there).

The Blackwell families (sm_100a's tcgen05.mma block-scaled kinds, docs/ptx_facts/tcgen05.md §12h;
formats sm100_formats.md §1), one scale per row of A and column of B per `group` consecutive K:
* MX (OCP microscaling): `BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")`, MXFP8 (e4m3/e5m2
  inputs, kind::mxf8f6f4) and MXFP4;
* NVFP4: `BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")`, e4m3 without its sign bit (uint8 codes
  0x01..0x7E, the MSB 0).
sa is (M, ceil(K/group)) and sb (ceil(K/group), N), logical as above; the kernel's own layout of
them (the 128x4 blocks of CUTLASS/cuBLAS) is made by the runtime (runtime/scale_layout.py).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from . import field_checks as check
from .scalars import normalise

#: The families built: name -> (A's group, B's group, the scale dtypes it takes). "deepseek": A per
#: 1x128 block, B per 128x128 block (sm_90a's promoted wgmma); "mx" and "nv": Blackwell's per-32 and
#: per-16 K groups (sm_100a's tcgen05 block-scaled kinds).
FAMILIES = {"deepseek": ((1, 128), (128, 128), ("f32", "ue8m0")),
            "mx": ((1, 32), (32, 1), ("ue8m0",)),
            "nv": ((1, 16), (16, 1), ("ue4m3",))}
BUILT_A_GROUPS = tuple(f[0] for f in FAMILIES.values())
BUILT_B_GROUPS = tuple(f[1] for f in FAMILIES.values())
SCALE_DTYPES = ("f32", "ue8m0", "ue4m3")
#: K of one scale block (both operands' groups span 128 of K).
SCALE_BLOCK_K = 128
#: The numpy dtype of each scale dtype's arrays.
SCALE_NUMPY = {"f32": np.float32, "ue8m0": np.uint8, "ue4m3": np.uint8}
#: The code of the scale 1.0 per dtype (what padding rows and K groups of a scale layout hold).
SCALE_ONE = {"ue8m0": 127, "ue4m3": 0x38}
#: ue8m0's exponent bias, and the biased exponents the kernel turns into normal f32 values.
UE8M0_BIAS = 127
UE8M0_RANGE = (1, 254)


@dataclass(frozen=True)
class BlockScale:
    """Group shapes of A's scales (rows x K) and B's (K x columns), and the scales' dtype."""

    a: tuple[int, int] = (1, 128)
    b: tuple[int, int] = (128, 128)
    dtype: str = "f32"

    def __post_init__(self) -> None:
        normalise(self, ("dtype",), tuple(f.name for f in fields(self) if f.name != "dtype"))
        for name, built in (("a", BUILT_A_GROUPS), ("b", BUILT_B_GROUPS)):
            value = getattr(self, name)
            if value not in built:
                shown = " or ".join(str(x) for x in built)
                raise check.ScheduleError(f"block_scale.{name}", value, f"group shape not built (built: {name}={shown}: "
                                          "DeepSeek-V3's 1x128 activation and 128x128 weight blocks, or the "
                                          "Blackwell MX (32) and NVFP4 (16) K groups)",
                                          f"use BlockScale({name}={built[0]}), or per-tensor/per-channel scales "
                                          "through Epilogue(alpha=..., scale='row'/'col')")
        check.choice("block_scale.dtype", self.dtype, SCALE_DTYPES)
        a_family = next(f for f, (ga, _, _) in FAMILIES.items() if ga == self.a)
        ga, gb, dtypes = FAMILIES[a_family]
        if self.b != gb:
            raise check.ScheduleError("block_scale.b", self.b, f"A's {self.a} groups pair with B groups {gb} (one "
                                      "K group length for both operands)", f"use BlockScale(a={self.a}, b={gb}, "
                                      f"dtype={dtypes[0]!r})")
        if self.dtype not in dtypes:
            raise check.ScheduleError("block_scale.dtype", self.dtype, f"{a_family} groups {self.a}/{self.b} take "
                                      f"{' or '.join(dtypes)} scales (OCP MX: ue8m0; NVFP4: ue4m3)",
                                      f"use BlockScale(a={self.a}, b={self.b}, dtype={dtypes[0]!r})")

    @property
    def family(self) -> str:
        """"deepseek" (sm_90a), "mx" or "nv" (sm_100a): see FAMILIES."""
        return next(f for f, (ga, _, _) in FAMILIES.items() if ga == self.a)

    @property
    def group_k(self) -> int:
        """K of one scale group (both operands' groups span the same K)."""
        return self.a[1]

    @property
    def itemsize(self) -> int:
        return np.dtype(SCALE_NUMPY[self.dtype]).itemsize

    def shapes(self, m: int, n: int, k: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """(sa's shape, sb's shape) in the logical orientation: (M, ceil(K/128)), (ceil(K/128), ceil(N/128))."""
        kb = -(-k // self.a[1])
        return (-(-m // self.a[0]), kb), (-(-k // self.b[0]), -(-n // self.b[1]))

    def values(self, x: np.ndarray) -> np.ndarray:
        """The scales as float64 (ue8m0: 2^(e - 127))."""
        x = np.asarray(x)
        if self.dtype == "ue8m0":
            return np.exp2(x.astype(np.float64) - UE8M0_BIAS)
        if self.dtype == "ue4m3":  # e4m3 with the sign bit 0 (sm100_formats.md §1)
            import ml_dtypes

            return (x.astype(np.uint8) & 0x7F).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        return x.astype(np.float64)


def expand_scales(bs: BlockScale, sa: np.ndarray, sb: np.ndarray, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 scales per row and K-block (M, Kb) and per K-block and column (Kb, N)."""
    rows = np.repeat(bs.values(sa), bs.a[0], axis=0)[:m]
    cols = np.repeat(bs.values(sb), bs.b[1], axis=1)[:, :n]
    return rows, cols


def scaled_product(a: np.ndarray, b: np.ndarray, bs: BlockScale, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """float64 sum over K-blocks of (A_blk * sa) @ (B_blk * sb): the block-scaled A @ B."""
    return expanded_product(a, b, *expand_scales(bs, sa, sb, np.shape(a)[0], np.shape(b)[1]), bs.group_k)


def expanded_product(a: np.ndarray, b: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                     block_k: int = SCALE_BLOCK_K) -> np.ndarray:
    """`scaled_product` with the scales already per row (M, Kb) and per column (Kb, N), Kb blocks
    of `block_k`: any rows and columns of a problem (a tile) are computed from their own slices."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    (m, k), n = a.shape, b.shape[1]
    if block_k < SCALE_BLOCK_K:  # Blackwell's short groups: one product of the scaled operands
        ks = np.arange(k) // block_k
        return (a * rows[:, ks]) @ (b * cols[ks, :])
    out = np.zeros((m, n))
    for kb in range(-(-k // block_k)):
        ks = slice(kb * block_k, (kb + 1) * block_k)
        out += (a[:, ks] * rows[:, kb:kb + 1]) @ (b[ks, :] * cols[kb:kb + 1, :])
    return out


def random_block_scales(bs: BlockScale, m: int, n: int, k: int, seed: int = 3,
                        decades: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """Never-zero positive scales spanning `decades` orders of magnitude (centred on 1), in the
    logical orientation; ue8m0: biased exponents of the same spread."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in bs.shapes(m, n, k):
        log2 = rng.uniform(-decades / 2, decades / 2, shape) * np.log2(10.0)
        if bs.dtype == "ue8m0":
            out.append((np.rint(log2) + UE8M0_BIAS).astype(np.uint8))
        elif bs.dtype == "ue4m3":  # normal e4m3 codes (exponent field 1..14, any mantissa): never zero
            exponent = np.clip(np.rint(log2) + 7, 1, 14).astype(np.uint8)
            out.append((exponent << 3 | rng.integers(0, 8, shape).astype(np.uint8)).astype(np.uint8))
        else:
            out.append(np.exp2(log2).astype(np.float32))
    return out[0], out[1]


def random_grouped_scales(bs: BlockScale, g: object, seed: int = 3,
                          decades: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """`random_block_scales` for a grouped GEMM (schedule/grouping.py): sa (M_total, Kb)
    contiguous or (G, max_m, Kb) masked, sb (G, Kb, Nb)."""
    m, n, k, groups = (getattr(g, f) for f in ("m", "n", "k", "groups"))
    lead = (groups,) if getattr(g, "grouping") == "masked" else ()
    sa_shape, sb_shape = bs.shapes(m, n, k)
    rng = np.random.default_rng(seed)
    out = []
    for shape in (lead + sa_shape, (groups,) + sb_shape):
        log2 = rng.uniform(-decades / 2, decades / 2, shape) * np.log2(10.0)
        out.append((np.rint(log2) + UE8M0_BIAS).astype(np.uint8) if bs.dtype == "ue8m0"
                   else np.exp2(log2).astype(np.float32))
    return out[0], out[1]


def check_gemm_block_scale(g: object) -> None:
    """The Gemm's block_scale on construction: a BlockScale (or None), fp8 inputs, not fast_accum."""
    bs = getattr(g, "block_scale")
    if bs is None:
        if getattr(g, "dtype") == "e2m1":
            raise check.ScheduleError("gemm.dtype", "e2m1", "e2m1 (fp4) inputs are multiplied block-scaled only "
                                      "(MXFP4, NVFP4)", "add block_scale=BlockScale(a=(1, 32), b=(32, 1), "
                                      "dtype='ue8m0') (MXFP4) or BlockScale(a=(1, 16), b=(16, 1), dtype='ue4m3') "
                                      "(NVFP4)")
        return
    if not isinstance(bs, BlockScale):
        raise check.ScheduleTypeError("gemm.block_scale", bs, f"must be a ptxgen.BlockScale or None, not "
                                      f"{check.type_name(bs)}", "pass block_scale=ptxgen.BlockScale(a=(1, 128), "
                                      "b=(128, 128))")
    dtype = getattr(g, "dtype")
    if bs.family == "nv" and dtype != "e2m1":
        raise check.ScheduleError("gemm.block_scale", bs, f"NVFP4's ue4m3 per-16 scales multiply e2m1 (fp4) "
                                  f"inputs; the inputs are {dtype}", "use dtype='e2m1', or MXFP8: dtype='e4m3' "
                                  "with BlockScale(a=(1, 32), b=(32, 1), dtype='ue8m0')")
    if dtype == "e2m1" and bs.family == "deepseek":
        raise check.ScheduleError("gemm.block_scale", bs, "e2m1 (fp4) inputs take the Blackwell per-32 (MXFP4) "
                                  "or per-16 (NVFP4) scales", "use BlockScale(a=(1, 32), b=(32, 1), dtype='ue8m0') "
                                  "or BlockScale(a=(1, 16), b=(16, 1), dtype='ue4m3')")
    if dtype not in ("e4m3", "e5m2", "e2m1"):
        raise check.ScheduleError("gemm.block_scale", bs, f"block scaling multiplies fp8 (e4m3/e5m2) products; "
                                  f"the inputs are {dtype}", "use dtype='e4m3' or 'e5m2', or drop block_scale "
                                  "(per-row/column scales: Epilogue(scale='row'/'col'))")
    if getattr(g, "fast_accum"):
        raise check.ScheduleError("gemm.fast_accum", True, "block scaling is applied at the promotion of each "
                                  "128-wide K slice into the f32 accumulator, which fast_accum=True removes",
                                  "drop fast_accum (block-scaled kernels always promote)")
    if getattr(g, "batch") > 1:
        raise check.ScheduleError("gemm.block_scale", bs, "block scaling of a batched GEMM: not built yet",
                                  "run each batch as its own GEMM (batch=1)")


def verify_block_scale(g: object, s: object, arch: str) -> None:
    """Where a block-scaled kernel is built: sm_90a's wgmma (the promoted fp8 kernels), BK and BN
    dividing 128 or multiples of it (a k-tile's chunks, a tile's columns, each in one scale block),
    no split-K or Stream-K. `s`: the schedule, or the instruction the chooser picks among."""
    if getattr(g, "block_scale") is None:
        return
    from .rules import rules_for

    instruction = s if isinstance(s, str) else getattr(s, "instruction")
    rules = rules_for(instruction)
    families = getattr(rules, "block_scale_families", ("deepseek",) if getattr(rules, "block_scaled", False) else ())
    bs = getattr(g, "block_scale")
    if bs.family not in families:  # the target says (sm_90a's wgmma: deepseek; sm_100a's tcgen05: mx)
        where = ("sm_90a's promoted wgmma kernels (arch='sm_90a', instruction='wgmma')" if bs.family == "deepseek"
                 else "sm_100a's tcgen05 kernels (arch='sm_100a', instruction='tcgen05')")
        raise check.ScheduleError("gemm.block_scale", bs, f"{bs.family} block scaling {bs.a}/{bs.b} is built in "
                                  f"{where}, not instruction {instruction!r} on {arch}",
                                  f"use {where.split('(')[1].rstrip(')')}")
    if isinstance(s, str) or bs.family != "deepseek":  # the sm_100a rules: targets/sm100/scales.py
        return
    bm, bn, bk = getattr(s, "block")
    for name, value in (("BK", bk), ("BN", bn)):
        if SCALE_BLOCK_K % value and value % SCALE_BLOCK_K:
            raise check.ScheduleError(f"schedule.block.{name}", value, f"with block scaling each {name} slice must "
                                      f"lie in one 128-wide scale block: {name} must divide 128 or be a multiple "
                                      "of it", f"use {name}=64, 128 or 256")
    if getattr(s, "split_k") > 1 or getattr(s, "stream_k"):
        what = "split-K" if getattr(s, "split_k") > 1 else "Stream-K"
        raise check.ScheduleError("gemm.block_scale", getattr(g, "block_scale"), f"block scaling with {what}: "
                                  "not built yet (the k-range's scale blocks)",
                                  "use split_k=1 and decomposition='tiles' (the warp-specialised persistent kernel)")
