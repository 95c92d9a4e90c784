"""The LLM-shaped draws of bench/fuzz.py (issue 24), chosen with `--designs grouped,block-scale`:

* grouped: mixture-of-experts GEMMs on the mma.sync path (sm_80 and sm_90; schedule/grouping.py):
  contiguous or masked, 1-16 groups, offs with empty groups and groups starting inside tiles,
  masked counts from 0 to max_m (an empty and a full slot now and then), either B layout, f16/bf16
  into f32/f16/bf16, the epilogues the grouped kernel takes (column bias and scale, alpha, beta,
  activations).
* block-scale: block-scaled fp8 on sm_90a (schedule/block_scale.py): every built design of the
  promoted wgmma kernel (warp-specialised persistent, with clusters, one tile per CTA; the simpler
  kernel), K a multiple of 16 but rarely of 128, BK and BN dividing 128 or multiples of it, the
  group shapes built (A 1x128, B 128x128) with f32 or ue8m0 scales over several decades, stored
  row-major or transposed (DeepGEMM's M-contiguous sa), e4m3/e5m2 into f32/f16/bf16, epilogues.

Each draw is legal by construction (the verifier accepts it: tests/common/test_fuzz_llm_draws.py
checks that over many seeds), so every draw runs; a "rejected" in these rows is a bug in the draws.
`DRAWS[name](rng)` returns a `Draw`: the problem, its schedule and arch, the design it names for
the report, and the run-time arrays (`offs` / `masked_m`, `scale_a` / `scale_b`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

#: Most simulated work per draw, in 128x128 tiles' worth (the simulator's time goes with it).
MAX_TILES = 12
#: Block-scaled tile edges: BM per consumer warpgroup, BN from wgmma's N table that lies in one
#: 128-wide scale block or covers whole ones, BK (fp8 elements) the same.
SCALED_BM = (64, 128)
SCALED_BN = (16, 32, 64, 128)
SCALED_BK = (32, 64, 128, 256)
SCALED_FAMILIES = ("ws-persistent",) * 3 + ("ws-cluster",) * 2 + ("ws-one-tile", "one-tile")
SCALED_CLUSTERS = ((2, 1), (1, 2))
SMS_CLUSTERS = (1, 2, 3, 5, None)
#: A consumer warpgroup's rows x BN at most: 64 f32 registers per thread of promoted accumulator,
#: as many of the wgmma's temporary (targets/sm90/promotion.py), and the rest under 255.
PROMOTED_TILE_MAX = 64 * 128
#: The k-tile ring's bytes at most, leaving shared memory for the epilogue's staging.
STAGE_BYTES_MAX = 128 * 1024


@dataclass
class Draw:
    """One fuzz draw: (gemm, schedule) for `arch`, its design's name and its run-time arrays."""

    gemm: Any
    schedule: Any
    arch: str
    design: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def _pick(rng: np.random.Generator) -> Callable:
    return lambda xs: xs[int(rng.integers(len(xs)))]


def _epilogue(rng: np.random.Generator, p: float):
    """An epilogue with no per-row vector (a grouped kernel's rows are per group), or None."""
    from ptxgen import Epilogue

    pick = _pick(rng)
    if rng.random() >= p:
        return None
    return Epilogue(alpha=pick([1.0, 0.5, -2.0]), beta=pick([0.0, 0.0, 1.0, -0.5]), bias=pick([None, "col"]),
                    activation=pick([None, "relu", "gelu", "silu"]), scale=pick([None, None, "col"]))


def draw_grouped(rng: np.random.Generator) -> Draw:
    """A grouped problem on the mma.sync path (module docstring)."""
    from ptxgen import Gemm, Schedule
    from ptxgen.schedule.grouping import random_counts

    pick = _pick(rng)
    grouping = pick(["contiguous", "masked"])
    groups = int(rng.integers(1, 17))
    bm, bn = pick([16, 32, 64]), pick([16, 32, 64])
    warps = (pick([w for w in (1, 2) if bm // w >= 16]), pick([w for w in (1, 2) if bn // w >= 8]))
    threads = 32 * warps[0] * warps[1]
    # BK whose A and B tiles split into whole 16-byte copies per thread (one warp splits any)
    bks = [x for x in (16, 32, 64) if bm * x // 8 % threads == 0 and bn * x // 8 % threads == 0]
    if not bks:
        warps, bks = (1, 1), [16, 32, 64]
    bk = pick(bks)
    n = int(rng.integers(1, 3 * bn + 1))
    k = int(rng.integers(1, 9)) * 8 + pick([0, 0, bk])  # rarely a multiple of BK
    n_tiles = -(-n // bn)
    budget = MAX_TILES * 128 * 128 // (bm * bn * n_tiles)  # m-tiles affordable
    if grouping == "masked":
        m = int(rng.integers(1, max(2, budget // groups) * bm + 1))
        m = min(m, max(1, (budget // groups) * bm))
    else:
        m = int(rng.integers(1, max(2, budget - groups) * bm + 1))
        m = max(1, min(m, (budget - groups) * bm))  # the grid bounds every group's partial tile
    out = pick(["f32", "f16", "bf16"])
    g = Gemm(m, n, k, dtype=pick(["f16", "bf16"]), out_dtype=out, b_layout=pick(["row", "col"]),
             a_layout="row" if grouping == "contiguous" else pick(["row", "col"]), epilogue=_epilogue(rng, 0.3),
             groups=groups, grouping=grouping)
    counts = random_counts(g, rng, empty=pick([0.0, 0.25, 0.5]))
    if grouping == "masked" and groups > 1 and rng.random() < 0.5:
        counts[rng.permutation(groups)[:2]] = (0, m)  # an empty and a full slot
    s = Schedule(block=(bm, bn, bk), warps=warps, stages=int(rng.integers(1, 5)),
                 smem_layout=pick(["swizzle", "pad", "plain"]), frag_double_buffer=bool(rng.integers(2)),
                 instruction="m16n8k16")
    name = "offs" if grouping == "contiguous" else "masked_m"
    return Draw(g, s, pick(["sm_80", "sm_90"]), f"grouped {grouping}", {name: counts})


def draw_block_scaled(rng: np.random.Generator) -> Draw:
    """A block-scaled fp8 problem on sm_90a (module docstring)."""
    from ptxgen import BlockScale, Gemm, Schedule
    from ptxgen.schedule.block_scale import random_block_scales

    pick = _pick(rng)
    family = pick(SCALED_FAMILIES)
    cluster = pick(SCALED_CLUSTERS) if family == "ws-cluster" else (1, 1)
    bm, bn, bk = pick(SCALED_BM), pick([x for x in SCALED_BN if x % (8 * max(cluster)) == 0]), pick(SCALED_BK)
    consumers = pick([1, 2]) if bm == 128 else 1
    while bm // consumers * bn > PROMOTED_TILE_MAX:
        bn //= 2  # the promoted accumulator and the wgmma's temporary must fit one consumer's registers

    def extent(block: int, parts: int) -> int:
        """A few tiles of `block` (whole clusters or not), the last full or cut, or an odd size."""
        if rng.random() < 0.3:
            return pick([1, 7, 16, 17, 63, 100, 129, 200])
        return block * (pick([1, 2, 3]) * (parts if rng.random() < 0.3 else 1) - 1) + pick([block, block // 2 + 1, 8])

    m, n = extent(bm, cluster[0]), extent(bn, cluster[1])
    while -(-m // bm) * -(-n // bn) * bm * bn > MAX_TILES * 128 * 128 and (m > bm or n > bn):
        m, n = (m - bm, n) if m > bm else (m, n - bn)
    k = 16 * int(rng.integers(1, 41))  # TMA's 16-byte rows; a multiple of 128 one time in eight
    bs = BlockScale(dtype=pick(["f32", "f32", "ue8m0"]))
    g = Gemm(m, n, k, dtype=pick(["e4m3", "e5m2"]), out_dtype=pick(["f32", "f16", "bf16"]), a_layout="row",
             b_layout="col", epilogue=_epilogue(rng, 0.3), block_scale=bs)
    fields: dict = {"warp_specialized": family != "one-tile", "persistent": family in ("ws-persistent", "ws-cluster")}
    if fields["persistent"]:
        per = pick(SMS_CLUSTERS)
        fields["sms"] = None if per is None else per * cluster[0] * cluster[1]
    if family == "ws-cluster":
        fields.update(cluster=cluster, multicast=pick([None, True, False]))
    stages = min(int(rng.integers(1, 5)), STAGE_BYTES_MAX // ((bm + bn) * bk))
    s = Schedule(block=(bm, bn, bk), instruction="wgmma", consumers=consumers, stages=stages,
                 swizzle=pick([None, None] + [w for w in (128, 64, 32) if bk % w == 0]),
                 raster=pick(["row", "grouped"]), group_m=pick([1, 2, 4]) * cluster[0], **fields)
    sa, sb = random_block_scales(bs, m, n, k, seed=int(rng.integers(1 << 30)), decades=pick([0.5, 2.0, 4.0]))
    if rng.random() < 0.5:
        sa = np.ascontiguousarray(sa.T).T  # DeepGEMM's M-contiguous storage, passed as its transpose
    return Draw(g, s, "sm_90a", f"block-scale {family}", {"scale_a": sa, "scale_b": sb})


#: The designs `--designs` selects, by name.
DRAWS: dict[str, Callable[[np.random.Generator], Draw]] = {"grouped": draw_grouped, "block-scale": draw_block_scaled}


def operands(d: Draw, rng: np.random.Generator) -> tuple:
    """(A, B, C the epilogue reads, bias, scale) for a draw: dense operands in its layouts, with
    the group dimension where the grouping gives one (ptxgen.check.random_operands)."""
    from ptxgen.check import random_epilogue_operands, random_operands, random_scale

    a, b = random_operands(d.gemm, int(rng.integers(1 << 30)))
    c0, bias = random_epilogue_operands(d.gemm, int(rng.integers(1 << 30)))
    return a, b, c0, bias, random_scale(d.gemm, int(rng.integers(1 << 30)))
