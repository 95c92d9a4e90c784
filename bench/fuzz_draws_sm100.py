"""The sm_100a (tcgen05) draws of bench/fuzz.py: the warp-specialised persistent kernel over every
built dtype and layout, edges in M, N and K, epilogues, and small `sms` so one CTA walks several
tiles through both TMEM accumulator buffers; now and then a legal part not built yet (a CTA pair,
a batch, an input dtype the lowering lacks), which must come back "rejected".

Open to the designs landing in targets/sm100: the dtypes come from the plan's KIND table (a
dtype added there is drawn), and CTA pairs are drawn whenever Sm100Options has `cta_group` (the
verifier says whether they are built). `draw(rng)` returns (Gemm, Schedule); `design(s)` names
the kernel family for the per-design counts."""
from __future__ import annotations

import numpy as np

#: BN values drawn: multiples of 16 (legal for both M) and a few multiples of 8 (M = 64 only).
BN = (16, 32, 48, 64, 96, 128, 192, 256, 24, 40)
#: Persistent grids: one CTA walking every tile, a few, or one per tile (None: the device's SMs).
SMS = (1, 2, 3, None, None)
TILE_COUNTS = (1, 2, 3)
SIZES = (1, 7, 16, 17, 63, 100, 129)
#: At most this many 128x128 tiles' worth of output: the simulator's time goes with the tiles.
MAX_TILES = 6
#: Dtypes drawn as "not built" probes (refused until a dtype helper adds them to plan.KIND); every
#: dense dtype is built now (fp8 and int8 landed with the block-scaled kinds).
PROBE_DTYPES: tuple[str, ...] = ()
#: KIND's dtypes that need a block scale (drawn by none of these dense draws).
BLOCK_SCALED_ONLY = ("e2m1",)
#: Outputs of s32 accumulators (s8/u8 inputs): exact, or dequantised through the f32 epilogue.
INT_OUTPUTS = ("s32", "f32", "f16", "bf16")


def design(s) -> str:
    """The kernel family `s` selects: the 1-CTA or CTA-pair tcgen05 kernel, a short persistent
    walk (`sms` set) named apart."""
    pair = (getattr(s, "cta_group", None) or 1) > 1
    return f"tcgen05 {'2cta' if pair else '1cta'}" + (" walk" if s.sms else "")


def draw(rng: np.random.Generator):
    """A (Gemm, Schedule) for arch sm_100a (see the module docstring)."""
    from ptxgen import Epilogue, Gemm, Schedule
    from ptxgen.schedule.problem import DTYPE_BYTES
    from ptxgen.targets.sm100.options import BLACKWELL_FIELDS
    from ptxgen.targets.sm100.plan import KIND, MMA_K

    def pick(xs):
        return xs[int(rng.integers(len(xs)))]

    unbuilt = rng.random() < 0.05
    dense = sorted(d for d in KIND if d not in BLOCK_SCALED_ONLY)
    dtype = pick(PROBE_DTYPES) if PROBE_DTYPES and unbuilt and rng.random() < 0.5 else pick(dense)
    esize = DTYPE_BYTES[dtype]
    integer = dtype in ("s8", "u8")
    out = pick(INT_OUTPUTS if integer else ("f32", "f16", "bf16"))
    epi = None
    if rng.random() < 0.4:
        epi = Epilogue(alpha=pick([1.0, 0.5, -2.0]), beta=pick([0.0, 0.0, 1.0, -0.5]),
                       bias=pick([None, "row", "col"]), activation=pick([None, "relu", "gelu", "silu"]),
                       scale=pick([None] * 3 + ["col", "row"]))
    if esize == 2 or rng.random() < 0.05:  # tf32 (4 bytes) is K-major; now and then MN-major (rejected)
        a_layout, b_layout = pick(["row", "col"]), pick(["row", "col"])
    else:
        a_layout, b_layout = "row", "col"
    pair = "cta_group" in BLACKWELL_FIELDS and unbuilt and rng.random() < 0.5
    bm = pick([64, 128])
    bn = pick([x for x in BN if x % (8 if bm == 64 else 16) == 0] if rng.random() < 0.95 else BN)
    k_step = MMA_K.get(dtype, 32 // esize)
    bk = max(k_step, pick([32, 64, 128]) // esize)

    def extent(block: int) -> int:
        if rng.random() < 0.25:
            return pick(SIZES)
        return block * (pick(TILE_COUNTS) - 1) + pick([block, block, block // 2 + 1, 8, block - 1])

    m, n = extent(bm), extent(bn)
    batch = 2 if unbuilt and not pair and rng.random() < 0.5 else 1
    while -(-m // bm) * -(-n // bn) * batch * bm * bn > MAX_TILES * 128 * 128 and (m > bm or n > bn):
        if (m > bm and -(-m // bm) >= -(-n // bn)) or n <= bn:
            m -= bm
        else:
            n -= bn
    per16 = 16 // esize  # K rows, and MN-major operands' rows, 16-byte aligned for TMA
    k = per16 * int(rng.integers(1, 13 if esize == 2 else 9))
    if a_layout == "col":
        m = -(-m // per16) * per16
    if b_layout == "row":
        n = -(-n // per16) * per16
    acc = "s32" if integer else "f32"
    if integer and out == "s32":
        epi = None   # the exact s32 accumulators are stored as they are
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, acc_dtype=acc,
             epilogue=epi, batch=batch)
    fields: dict = {"cta_group": 2} if pair else {}
    s = Schedule(block=(2 * bm if pair else bm, bn, bk), instruction="tcgen05", stages=int(rng.integers(1, 6)),
                 raster=pick(["row", "grouped"]), group_m=pick([1, 2, 8]), sms=pick(SMS), **fields)
    return g, s
