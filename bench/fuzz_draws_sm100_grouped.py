"""The sm_100a grouped draws of bench/fuzz.py (`--designs grouped-sm100a`): mixture-of-experts
GEMMs in the 1-CTA warp-specialised persistent tcgen05 kernel (targets/sm100/grouped.py).

* groupings: contiguous (`offs`, groups straddling tiles, empty groups, rows past offs[-1]) and
  masked (`masked_m` from 0 to max_m, an empty and a full slot now and then), 1 to 16 groups;
* kinds: f16/bf16 (B either layout, a masked A either layout) and dense e4m3/e5m2 (K-major), and
  masked e4m3/e5m2 with MXFP8 block scales (ue8m0 per 32 of K, random per group over up to four
  decades; BM 128, BN 32..256, BK 128 or 256); f32/f16/bf16 outputs; the epilogues a grouped
  kernel takes (no per-row vectors);
* tiles: BM 64 (TMEM layout F) or 128, BN by the MMA's N rule, BK 32..128 bytes, 1..5 stages;
  persistent grids of one CTA walking every tile, a few, or the device's (`sms`).

One draw in twenty asks for a legal part the grouped kernel does not build (a cluster, a CTA pair,
cluster launch control), named "grouped sm_100a unbuilt (refused)": it must come back "rejected".
The simulated work stays under the sm_90a grouped draws' bounds (fuzz_draws_llm.py)."""
from __future__ import annotations

import numpy as np

from fuzz_draws_llm import (GROUPED_SMS, GROUPED_UNBUILT, Draw, _epilogue, _grouped_extent_n, _grouped_rows, _pick,
                            fit_grouped)

ARCH = "sm_100a"
#: BN per BM: multiples of 16 (8 with M = 64) up to 256.
BNS = {128: (16, 32, 48, 64, 96, 128, 256), 64: (8, 16, 24, 32, 64, 128)}
#: The unbuilt parts a refused draw asks for (Schedule fields).
UNBUILT = ({"cluster": (2, 1), "sms": None}, {"cta_group": 2, "sms": None}, {"tile_scheduler": "clc", "sms": None})


def draw_grouped_sm100a(rng: np.random.Generator) -> Draw:
    """A grouped problem in the sm_100a tcgen05 kernel (module docstring)."""
    from ptxgen import BlockScale, Gemm, Schedule
    from ptxgen.schedule.block_scale import random_grouped_scales
    from ptxgen.schedule.grouping import random_counts

    pick = _pick(rng)
    grouping = pick(["contiguous", "masked"])
    groups = pick([1, 2, 3, 4, 5, 8, 12, 16])
    dtype = pick(["f16", "bf16", "f16", "bf16", "e4m3", "e5m2"])
    fp8 = dtype in ("e4m3", "e5m2")
    esize = 1 if fp8 else 2
    b_layout = "col" if fp8 else pick(["row", "col"])   # 8-bit operands K-major only
    a_layout = pick(["row", "col"]) if grouping == "masked" and not fp8 else "row"
    refused = rng.random() < GROUPED_UNBUILT
    unbuilt = pick(UNBUILT) if refused else {}
    mx = fp8 and grouping == "masked" and not refused and rng.random() < 0.5
    bm = 256 if "cta_group" in unbuilt else 128 if mx else pick([64, 128, 128])
    bns = [x for x in BNS[min(bm, 128)] if b_layout == "col" or x * esize % 32 == 0]   # an MN-major B: a swizzle
    bn = pick([32, 64, 128, 256] if mx else bns)   # block-scaled: the scale blocks' BN rule (sm100/scales.py)
    # 32..128 bytes of K: whole MMAs (32 bytes each); MX: whole 128x4 scale blocks, 128 of K or 256
    bk = pick([128, 128, 256]) if mx else pick([32, 64, 128]) // esize
    k = (16 // esize) * int(rng.integers(1, 25))   # 16-byte rows for TMA; rarely a multiple of BK
    n = _grouped_extent_n(rng, bn)
    m = _grouped_rows(rng, grouping, groups, bm)
    align_m, align_n = (8 if a_layout == "col" else 1), (8 if b_layout == "row" else 1)

    m, n, k, groups = fit_grouped(m, n, k, groups, grouping, (bm, bn, bk), (align_m, align_n))
    bs = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0") if mx else None
    g = Gemm(m, n, k, dtype=dtype, out_dtype=pick(["f32", "f16", "bf16"]), a_layout=a_layout, b_layout=b_layout,
             epilogue=_epilogue(rng, 0.3), groups=groups, grouping=grouping, block_scale=bs)
    counts = random_counts(g, rng, empty=pick([0.0, 0.25, 0.5]))
    if grouping == "masked" and groups > 1 and rng.random() < 0.5:
        counts[rng.permutation(groups)[:2]] = (0, m)   # an empty and a full slot
    stages = max(1, min(int(rng.integers(1, 6)), 96 * 1024 // ((bm + bn) * bk * esize)))
    fields = {"sms": pick(GROUPED_SMS), "epilogue_via_smem": pick([None, False]), **unbuilt}
    s = Schedule(block=(bm, bn, bk), instruction="tcgen05", stages=stages, **fields)
    arrays = {"offs" if grouping == "contiguous" else "masked_m": counts}
    if mx:
        sa, sb = random_grouped_scales(bs, g, seed=int(rng.integers(1 << 30)), decades=pick([0.5, 2.0, 4.0]))
        arrays.update(scale_a=sa, scale_b=sb)
    kind = "MXFP8" if mx else "fp8" if fp8 else "f16/bf16"
    design = "grouped sm_100a unbuilt (refused)" if refused else f"grouped sm_100a {grouping} {kind}"
    return Draw(g, s, ARCH, design, arrays, refused)
