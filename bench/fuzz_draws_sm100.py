"""The sm_100a (tcgen05) draws of bench/fuzz.py (`--arch sm_100a`): every built design of the
warp-specialised persistent tcgen05 kernel, each with a fair share of the draws:

* families: one CTA per MMA ("1cta"), the CTA pair ("2cta": cta_group=2, BM = 256 in a (2, 1)
  cluster, cta_pair.py), cta_group=1 clusters with TMA multicast ("cluster CMxCN": 2x1, 1x2, 2x2,
  4x1, 1x4 and now and then 8 CTAs, cluster.py), and cluster launch control ("clc": one CTA per
  tile, tile_scheduler.py); the static ones now and then on a small grid (`sms`), so CTAs walk
  several tiles through both TMEM accumulators ("walk"), and batched ("batched", dense kinds);
* kinds: every dense dtype (f16/bf16 in both majors, tf32, e4m3/e5m2 and mixed, s8/u8 with every
  output) and the block-scaled ones (kinds.py, scales.py), on one CTA, in clusters and on CTA
  pairs: MXFP8 (kind::mxf8f6f4), MXFP4 (kind::mxf4) and NVFP4 (kind::mxf4nvf4, its per-tensor
  scale as the epilogue's alpha), with random never-zero scales over several decades passed as
  `scale_a` / `scale_b`;
* problems: M and N a few tiles (whole clusters or not, the last full or cut) or odd sizes, K
  edges, leading dimensions padded by 16 bytes (ldc also by odd counts), fused epilogues, the
  TMA-store epilogue or direct stores (`epilogue_via_smem` None/False/True where TMA can write C).

One draw in twenty is a probe ("probe ..."): a legal schedule the lowering refuses (PROBES: cluster
launch control in a cluster or on a pair, block scaling on an M = 128 pair, MN-major 8-bit or fp4 operands,
an M = 128 pair, a pair in a bigger cluster, split-K, Stream-K), which must come back "rejected";
every other draw passes the verifier (tests/runtime/test_bench_sm100.py checks both). The simulated
work is kept under MAX_TILES (the simulator's time grows with the tiles and CTAs).

`draw(rng)` returns a fuzz_draws_llm.Draw (gemm, schedule, arch, design, arrays); `design(g, s)`
names the family for fuzz.py's per-design counts, e.g. "mxf4nvf4 cluster 2x1 walk"."""
from __future__ import annotations

from typing import Callable

import numpy as np

from fuzz_draws_llm import Draw

ARCH = "sm_100a"
#: Families and their weights (probes are drawn apart).
FAMILIES = ("1cta",) * 3 + ("2cta",) * 2 + ("cluster",) * 4 + ("clc",) * 2
#: cta_group=1 clusters (CM, CN): pairs most, then 4 CTAs, now and then 8 (the portable limit).
CLUSTERS = ((2, 1), (1, 2)) * 3 + ((2, 2),) * 2 + ((4, 1), (1, 4), (4, 2), (2, 4))
#: Dense input dtypes (f16/bf16 twice: the only ones drawn MN-major).
DENSE_DTYPES = ("f16", "bf16") * 2 + ("tf32", "e4m3", "e5m2", "s8", "u8")
#: Block-scaled kinds: (input dtypes, BlockScale arguments, BK choices in elements).
MX = {"a": (1, 32), "b": (32, 1), "dtype": "ue8m0"}
NV = {"a": (1, 16), "b": (16, 1), "dtype": "ue4m3"}
SCALED = {"mxf8f6f4": (("e4m3", "e5m2"), MX, (128, 256)), "mxf4": (("e2m1",), MX, (128, 256)),
          "mxf4nvf4": (("e2m1",), NV, (64, 128, 256))}
#: Share of the 1cta, cluster and clc draws that are block-scaled.
SCALED_SHARE = 0.35
SCALED_BN = (32, 64, 128, 256)
#: BN values for the dense kinds (multiples of 8 only where an M = 64 MMA takes them).
DENSE_BN = (16, 32, 48, 64, 96, 128, 192, 256, 8, 24, 40)
#: Persistent grids of a walk, in clusters (pairs, CTAs).
WALK_CLUSTERS = (1, 1, 2, 3)
TILE_COUNTS = (1, 2, 3)
SIZES = (1, 7, 16, 17, 63, 100, 129, 200)
#: At most this many 128x128 tiles' worth of output (every batch, the grid rounded up to whole
#: clusters): the simulator's time goes with the tiles.
MAX_TILES = 6
#: Outputs of f32 accumulators, and of s32 ones (s8/u8 inputs: exact, quantised, dequantised).
FLOAT_OUTPUTS = ("f32", "f16", "bf16")
INT_OUTPUTS = ("s32", "s8", "u8", "f32", "f16", "bf16")
#: The probes: name -> the field the refusal names (LoweringNotBuilt, or the K-major-only rule).
PROBES = {"clc in a cluster": "schedule.tile_scheduler", "clc on a pair": "schedule.tile_scheduler",
          "block scaling on an M=128 pair": "schedule.block.BM", "MN-major 8-bit": "gemm.layout",
          "MN-major fp4": "gemm.layout", "pair M=128": "schedule.block.BM", "pair in a 4x1 cluster": "schedule.cluster",
          "split-K": "schedule.split_k", "Stream-K": "schedule.decomposition"}
PROBE_SHARE = 0.05


def family(s) -> str:
    """1cta, 2cta, cluster CMxCN or clc: the part of the kernel the schedule selects."""
    cm, cn = s.cluster if s.cluster is not None else (1, 1)
    if s.cta_group == 2:
        return "2cta" + (f" {cm}x{cn}" if (cm, cn) != (2, 1) else "")
    name = "clc" if s.tile_scheduler == "clc" else "1cta"
    return name if (cm, cn) == (1, 1) else f"cluster {cm}x{cn}" + (" clc" if name == "clc" else "")


def kind(g) -> str:
    """The block-scaled kind of `g` (SCALED), or "dense"."""
    bs = g.block_scale
    if bs is None:
        return "dense"
    return {"mx": "mxf4" if g.dtype == "e2m1" else "mxf8f6f4", "nv": "mxf4nvf4"}[bs.family]


def walks(g, s) -> bool:
    """A static grid smaller than the tiles: some CTA (cluster, pair) walks several."""
    from dataclasses import replace

    from ptxgen.targets.sm100.plan import persistent_ctas

    if s.tile_scheduler == "clc" or s.sms is None:
        return False
    return persistent_ctas(g, s, s.sms) < persistent_ctas(g, replace(s, sms=None), 1 << 20)


def design(g, s) -> str:
    """The kernel family, e.g. "dense 2cta batched", "mxf4nvf4 cluster 2x1 walk"."""
    return " ".join([kind(g), family(s)] + ["batched"] * (g.batch > 1) + ["walk"] * walks(g, s))


def _picker(rng: np.random.Generator) -> Callable:
    return lambda xs: xs[int(rng.integers(len(xs)))]


def _epilogue(rng: np.random.Generator, integer: bool, alpha: float | None):
    from ptxgen import Epilogue

    pick = _picker(rng)
    if alpha is None and rng.random() >= 0.45:
        return None
    if alpha is not None and rng.random() >= 0.45:  # NVFP4's per-tensor scale alone
        return Epilogue(alpha=alpha)
    return Epilogue(alpha=alpha if alpha is not None else pick([1.0, 0.5, -2.0]), beta=pick([0.0, 0.0, 1.0, -0.5]),
                    bias=pick([None, "row", "col"]), activation=pick([None, "relu", "gelu", "silu"]),
                    scale=pick([None, None, "col", "row"] if integer else [None] * 3 + ["col", "row"]))


def _fit(g, fields: dict) -> dict:
    """Fewest changes that fit the ring, the TMA-store buffers and the scales' TMEM columns: fewer
    stages, then direct stores."""
    from ptxgen import Schedule
    from ptxgen.schedule.targets import target
    from ptxgen.targets.sm100.plan import TMEM_COLUMNS, sm100_plan

    limit = target(ARCH).smem_per_block
    while True:
        plan = sm100_plan(g, Schedule(**fields))
        if plan.smem_bytes <= limit and plan.tmem_columns <= TMEM_COLUMNS:
            return fields
        if fields["stages"] > 1:
            fields["stages"] -= 1
        elif fields.get("epilogue_via_smem"):
            fields["epilogue_via_smem"] = None
        else:
            return fields   # no fit: the verifier names it (never for the blocks drawn here)


def draw(rng: np.random.Generator) -> Draw:
    """A (Gemm, Schedule) for arch sm_100a and its run-time scales (module docstring)."""
    from ptxgen import BlockScale, Gemm, Schedule
    from ptxgen.schedule.block_scale import random_block_scales
    from ptxgen.schedule.problem import DTYPE_BYTES, K_PACK
    from ptxgen.targets.sm100.kinds import MMA_K, i8_n_ok
    from ptxgen.targets.sm100.store_path import tma_store_refusal

    pick = _picker(rng)
    probe = pick(sorted(PROBES)) if rng.random() < PROBE_SHARE else None
    fam = {"clc in a cluster": "cluster", "clc on a pair": "2cta", "block scaling on an M=128 pair": "2cta",
           "pair M=128": "2cta", "pair in a 4x1 cluster": "2cta"}.get(probe or "", pick(FAMILIES))
    scaled = (probe in ("block scaling on an M=128 pair", "MN-major fp4")
              or (probe is None and rng.random() < SCALED_SHARE))
    kind_name = (pick(["mxf4", "mxf4nvf4"]) if probe == "MN-major fp4" else pick(sorted(SCALED))) if scaled else "dense"
    if scaled:
        dtypes, bs_args, bks = SCALED[kind_name]
        dtype = pick(dtypes)
    else:
        dtype = pick(("e4m3", "e5m2", "s8", "u8") if probe == "MN-major 8-bit" else DENSE_DTYPES)
    b_dtype = pick(["e4m3", "e5m2"]) if dtype in ("e4m3", "e5m2") and rng.random() < 0.25 else None
    esize, pack = DTYPE_BYTES[dtype], K_PACK.get(dtype, 1)
    integer = dtype in ("s8", "u8")
    out = pick(INT_OUTPUTS if integer else FLOAT_OUTPUTS)
    if esize == 2:
        a_layout, b_layout = pick(["row", "col"]), pick(["row", "col"])
    elif probe in ("MN-major 8-bit", "MN-major fp4"):
        a_layout, b_layout = pick([("col", "col"), ("row", "row"), ("col", "row")])
    else:
        a_layout, b_layout = "row", "col"
    cluster = pick(CLUSTERS) if fam == "cluster" else (4, 1) if probe == "pair in a 4x1 cluster" else \
        (2, 1) if fam == "2cta" else (1, 1)
    cm, cn = cluster
    pair = fam == "2cta"
    bm = (128 if probe in ("pair M=128", "block scaling on an M=128 pair") else 256) if pair else 128 if scaled else pick([64, 128])
    cta_m = bm // 2 if pair else bm   # one CTA's rows of A
    # BK: 32..128 bytes of K per row (whole scale blocks when scaled); an MN-major operand shared
    # by multicast loads 1/parts of its BK rows, whole swizzle atoms (8 rows) each
    if scaled:
        bk = pick(bks)
    else:
        bk = max(MMA_K[dtype], pick([32, 64, 128]) // esize)
        while (a_layout == "col" and bk % (8 * cn)) or (b_layout == "row" and bk % (8 * cm)):
            bk *= 2
    # BN: the MMA's N rule (kind::i8's own), B's rows a whole number of multicast slices, an
    # MN-major B's rows a multiple of 32 bytes (a swizzle)
    step = 8 if cta_m == 64 and not pair else 16
    if scaled:
        bns = list(SCALED_BN)
    else:
        bns = [x for x in DENSE_BN if x % step == 0 and (not integer or i8_n_ok(bm, x, 2 if pair else 1))]
    per_cta = 2 if pair else 1   # a pair's CTA holds BN/2 rows of B
    bns = [x for x in bns if (b_layout == "col" or x // per_cta * esize % 32 == 0)
           and (b_layout == "row" or pair or x % (8 * cm) == 0)]
    bn = pick(bns)
    tm_mult, tn_mult = (1, 1) if pair else (cm, cn)

    def extent(block: int, parts: int) -> int:
        """A tile count of `block` (whole clusters now and then), the last full or cut, or a size."""
        if rng.random() < 0.25:
            return pick(SIZES)
        return block * (pick(TILE_COUNTS) * (parts if rng.random() < 0.3 else 1) - 1) + pick(
            [block, block, block // 2 + 1, 8, block - 1])

    m, n = extent(bm, tm_mult), extent(bn, tn_mult)
    batch = pick([1, 1, 1, 1, 1, 2, 3]) if not scaled else 1

    def work() -> float:
        tm, tn = -(-(-(-m // bm)) // tm_mult) * tm_mult, -(-(-(-n // bn)) // tn_mult) * tn_mult
        return tm * tn * batch * bm * bn / 128 ** 2

    while work() > MAX_TILES and (m > bm or n > bn):
        if (m > bm and -(-m // bm) >= -(-n // bn)) or n <= bn:
            m -= bm
        else:
            n -= bn
    per16 = 16 // esize * pack   # elements in 16 bytes (fp4: 32): TMA's row strides
    if scaled:
        k = 32 * int(rng.integers(1, 9)) if pack > 1 else 16 * int(rng.integers(1, 17))
    else:
        k = per16 * int(rng.integers(1, 13 if esize == 2 else 9))
    if a_layout == "col":
        m = max(per16, -(-m // per16) * per16)
    if b_layout == "row":
        n = max(per16, -(-n // per16) * per16)
    alpha = None
    if kind_name == "mxf4nvf4":  # NVFP4's per-tensor f32 scale: global_a * global_b, as the alpha
        alpha = float(np.float32(rng.uniform(0.25, 4.0)) * np.float32(rng.uniform(0.25, 4.0)))
    epi = None if integer and out == "s32" else _epilogue(rng, integer, alpha)
    lds: dict = {}
    if pack == 1 and rng.random() < 0.2:   # A and B rows padded by 16 bytes (TMA strides)
        pad = 16 // esize
        lds = {"lda": (k if a_layout == "row" else m) + pad, "ldb": (n if b_layout == "row" else k) + pad}
    if rng.random() < 0.2:
        lds["ldc"] = n + pick([16, 3, 1])    # odd ldc: TMA cannot write C, direct stores
    bs = BlockScale(**bs_args) if scaled else None
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout,
             acc_dtype="s32" if integer else "f32", epilogue=epi, batch=batch, block_scale=bs, b_dtype=b_dtype, **lds)
    fields: dict = {"block": (bm, bn, bk), "instruction": "tcgen05", "stages": int(rng.integers(1, 6)),
                    "raster": pick(["row", "grouped"]), "group_m": pick([1, 2, 4, 8]) * cm}
    if pair:
        fields["cta_group"] = 2
        if cluster != (2, 1) or rng.random() < 0.3:
            fields["cluster"] = cluster
    elif cluster != (1, 1):
        fields["cluster"] = cluster
    size = cm * cn
    if fam == "clc" or probe in ("clc in a cluster", "clc on a pair"):
        fields["tile_scheduler"] = "clc"
    else:
        fields["sms"] = size * pick(WALK_CLUSTERS) if rng.random() < 0.4 else None
        if rng.random() < 0.2:
            fields["tile_scheduler"] = "static"
    via = pick([None, None, False] + ([True] if tma_store_refusal(g, Schedule(**fields)) is None else []))
    if via is not None:
        fields["epilogue_via_smem"] = via
    if probe == "split-K":
        fields["split_k"] = 2
    if probe == "Stream-K":
        fields["decomposition"] = "stream-k"
    fields = _fit(g, fields)
    s = Schedule(**fields)
    arrays = {}
    if bs is not None:
        sa, sb = random_block_scales(bs, m, n, k, seed=int(rng.integers(1 << 30)), decades=pick([0.5, 2.0, 4.0]))
        arrays = {"scale_a": sa, "scale_b": sb}
    return Draw(g, s, ARCH, f"probe {probe}" if probe else design(g, s), arrays)
