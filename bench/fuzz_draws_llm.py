"""The LLM-shaped draws of bench/fuzz.py (issue 24), chosen with `--designs grouped,block-scale`:

* grouped: mixture-of-experts GEMMs (schedule/grouping.py), half of them on each built kernel:
  - the mma.sync path (sm_80 and sm_90): contiguous, masked or k-contiguous (groups split K: A
    column-major, B row-major, K_total of any length), 1-16 groups, offs with empty groups and
    groups starting inside tiles, masked counts from 0 to max_m (an empty and a full slot now and
    then), either B layout, f16/bf16 into f32/f16/bf16, the epilogues the grouped kernel takes
    (column bias and scale, alpha, beta, activations);
  - the sm_90a warp-specialised persistent wgmma kernel (targets/sm90/grouped.py; also alone as
    `grouped-sm90a`): the same groupings, sizes and epilogues, f16/bf16 (B either layout, masked
    A either layout) and e4m3/e5m2 (K-major), mostly block-scaled (the DeepSeek MoE layer: 1x128
    and 128x128 blocks, f32 or ue8m0 scales, sa per group transposed now and then, sb too), 1 or 2
    consumers, BM 64-256, a few rows per group on average, a small persistent grid (`sms` 1-5) so
    one CTA walks several tiles across the groups; one draw in twenty asks for a legal part the
    grouped kernel does not build (a cluster, the TMA-store epilogue, a non-persistent grid),
    named "grouped sm_90a unbuilt (refused)" in the report: it must come back "rejected".
* block-scale: block-scaled fp8 on sm_90a (schedule/block_scale.py): every built design of the
  promoted wgmma kernel (warp-specialised persistent, with clusters, one tile per CTA; the simpler
  kernel), K a multiple of 16 but rarely of 128, BK and BN dividing 128 or multiples of it, the
  group shapes built (A 1x128, B 128x128) with f32 or ue8m0 scales over several decades, stored
  row-major or transposed (DeepGEMM's M-contiguous sa), e4m3/e5m2 into f32/f16/bf16, epilogues.

Every other draw is legal by construction (the verifier accepts it: tests/common/test_fuzz_llm_draws.py
checks that over many seeds), so it runs; a "rejected" outside the "unbuilt (refused)" row is a bug
in the draws. `DRAWS[name](rng)` returns a `Draw`: the problem, its schedule and arch, the design it
names for the report, and the run-time arrays (`offs` / `masked_m`, `scale_a` / `scale_b`).
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
#: sm_90a grouped draws: most simulated work, in 128x128 tiles' worth (the walk computes every
#: group's partial tile),
#: persistent grids (one CTA walking every tile across the groups, a few, or the device's), and
#: the share asking for a legal part the grouped kernel does not build.
GROUPED_MAX_TILES = 8
#: ... and at most this many tile steps: k-tiles per tile plus GROUPED_TILE_STEPS for its walk and
#: epilogue (many narrow tiles of a long K cost the simulator more than their area says).
GROUPED_MAX_STEPS = 160
GROUPED_TILE_STEPS = 2
GROUPED_SMS = (1, 1, 2, 3, 5, None)
GROUPED_UNBUILT = 0.05


@dataclass
class Draw:
    """One fuzz draw: (gemm, schedule) for `arch`, its design's name and its run-time arrays."""

    gemm: Any
    schedule: Any
    arch: str
    design: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    #: A legal part not built (the verifier raises LoweringNotBuilt): its "rejected" is expected.
    refused: bool = False


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


def draw_grouped_mma_sync(rng: np.random.Generator) -> Draw:
    """A grouped problem on the mma.sync path (module docstring)."""
    from ptxgen import Gemm, Schedule
    from ptxgen.schedule.grouping import random_counts

    pick = _pick(rng)
    grouping = pick(["contiguous", "masked", "k-contiguous"])
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
    if grouping in ("masked", "k-contiguous"):  # G slots of M rows, or G products of M rows
        m = int(rng.integers(1, max(2, budget // groups) * bm + 1))
        m = min(m, max(1, (budget // groups) * bm))
        if grouping == "k-contiguous":  # K_total: a few k-tiles' worth shared among the groups, any length
            k = int(rng.integers(0, 3 * groups + 1)) * 8 + pick([0, 1, 7, bk])
    else:
        m = int(rng.integers(1, max(2, budget - groups) * bm + 1))
        m = max(1, min(m, (budget - groups) * bm))  # the grid bounds every group's partial tile
    out = pick(["f32", "f16", "bf16"])
    # k-contiguous: K is the strided dimension of both (A column-major, B row-major), so a group starting
    # at any k keeps the copies aligned; contiguous: A's rows hold the groups
    layouts = (("col", "row") if grouping == "k-contiguous" else
               ("row" if grouping == "contiguous" else pick(["row", "col"]), pick(["row", "col"])))
    g = Gemm(m, n, max(k, 1), dtype=pick(["f16", "bf16"]), out_dtype=out, a_layout=layouts[0], b_layout=layouts[1],
             epilogue=_epilogue(rng, 0.3), groups=groups, grouping=grouping)
    counts = random_counts(g, rng, empty=pick([0.0, 0.25, 0.5]))
    if grouping == "masked" and groups > 1 and rng.random() < 0.5:
        counts[rng.permutation(groups)[:2]] = (0, m)  # an empty and a full slot
    s = Schedule(block=(bm, bn, bk), warps=warps, stages=int(rng.integers(1, 5)),
                 smem_layout=pick(["swizzle", "pad", "plain"]), frag_double_buffer=bool(rng.integers(2)),
                 instruction="m16n8k16")
    name = "masked_m" if grouping == "masked" else "offs"
    return Draw(g, s, pick(["sm_80", "sm_90"]), f"grouped mma.sync {grouping}", {name: counts})


def _grouped_extent_n(rng: np.random.Generator, bn: int) -> int:
    """N: one to three tiles of `bn`, the last full, cut or 8 wide, or an odd size."""
    pick = _pick(rng)
    if rng.random() < 0.3:
        return pick([1, 7, 16, 17, 63, 100, 129, 200])
    return bn * (pick([1, 2, 3]) - 1) + pick([bn, bn // 2 + 1, 8])


def _grouped_rows(rng: np.random.Generator, grouping: str, groups: int, bm: int) -> int:
    """M_total (contiguous: a few rows per group on average, 2 to a tile and a bit) or max_m
    (masked: up to two tiles, small ones often)."""
    pick = _pick(rng)
    if grouping == "masked":
        return pick([1, 7, 8, 33, bm - 1, bm, bm + 1, int(rng.integers(1, 2 * bm + 1))])
    per = pick([2, 8, 24, bm // 2, bm, bm + 17])
    return max(1, int(groups * per * rng.uniform(0.5, 1.5)))


def fit_grouped(m: int, n: int, k: int, groups: int, grouping: str, block: tuple[int, int, int],
                align: tuple[int, int]) -> tuple[int, int, int, int]:
    """(m, n, k, groups) shrunk until the simulator's time fits: the tiles' area (every group's
    partial tile counted) and their k-tile steps (+ the walk and epilogue per tile); then M and N
    rounded up to `align` (TMA: 16-byte strides of an MN-major operand)."""
    bm, bn, bk = block

    def tiles() -> int:
        return (groups * -(-m // bm) if grouping == "masked" else -(-m // bm) + groups - 1) * -(-n // bn)

    def too_slow() -> bool:
        return (tiles() * bm * bn > GROUPED_MAX_TILES * 128 ** 2
                or tiles() * (-(-k // bk) + GROUPED_TILE_STEPS) > GROUPED_MAX_STEPS)

    while too_slow():
        if m > bm:
            m -= bm
        elif n > bn:
            n -= bn
        elif k > bk:
            k -= bk
        elif groups > 1:
            groups -= 1
        else:
            break
    return -(-m // align[0]) * align[0], -(-n // align[1]) * align[1], k, groups


def draw_grouped_sm90a(rng: np.random.Generator) -> Draw:
    """A grouped problem in the sm_90a warp-specialised persistent wgmma kernel (module docstring)."""
    from ptxgen import BlockScale, Gemm, Schedule
    from ptxgen.schedule.block_scale import random_grouped_scales
    from ptxgen.schedule.grouping import random_counts

    pick = _pick(rng)
    grouping = pick(["contiguous", "masked"])
    groups = pick([1, 2, 3, 4, 5, 8, 12, 16])
    dtype = pick(["f16", "bf16", "e4m3", "e4m3", "e5m2"])
    fp8 = dtype in ("e4m3", "e5m2")
    scaled = fp8 and rng.random() < 0.85  # mostly the DeepSeek layer; now and then per-tensor fp8
    esize = 1 if fp8 else 2
    b_layout = "col" if fp8 else pick(["row", "col"])  # wgmma reads fp8 K-major only
    a_layout = pick(["row", "col"]) if grouping == "masked" and not fp8 else "row"
    bm = pick(SCALED_BM if fp8 else (64, 128, 128, 256))
    consumers = 2 if bm == 256 else pick([1, 2]) if bm == 128 else 1
    bn = pick(SCALED_BN + ((8, 24, 40) if b_layout == "col" and not fp8 else ()))
    while fp8 and bm // consumers * bn > PROMOTED_TILE_MAX:
        bn //= 2  # the promoted accumulator and the wgmma's temporary fit one consumer's registers
    bk = pick(SCALED_BK) // esize  # 32..256 bytes of K (fp8: dividing 128 or whole multiples of it)
    k = (16 // esize) * int(rng.integers(1, 33))  # 16-byte rows for TMA; rarely a multiple of BK or 128
    n = _grouped_extent_n(rng, bn)
    m = _grouped_rows(rng, grouping, groups, bm)
    align_m, align_n = (8 if a_layout == "col" else 1), (8 if b_layout == "row" else 1)

    m, n, k, groups = fit_grouped(m, n, k, groups, grouping, (bm, bn, bk), (align_m, align_n))
    bs = BlockScale(dtype=pick(["f32", "f32", "ue8m0"])) if scaled else None
    g = Gemm(m, n, k, dtype=dtype, out_dtype=pick(["f32", "f16", "bf16"]), a_layout=a_layout, b_layout=b_layout,
             epilogue=_epilogue(rng, 0.3), block_scale=bs, groups=groups, grouping=grouping)
    counts = random_counts(g, rng, empty=pick([0.0, 0.25, 0.5]))
    if grouping == "masked" and groups > 1 and rng.random() < 0.5:
        counts[rng.permutation(groups)[:2]] = (0, m)  # an empty and a full slot
    fields: dict = {"sms": pick(GROUPED_SMS), "epilogue_via_smem": pick([None, False])}
    refused = rng.random() < GROUPED_UNBUILT
    if refused:  # legal, not built for grouped GEMMs: must come back "rejected" (LoweringNotBuilt)
        c_rows_aligned = n * g.out_bytes % 16 == 0  # the TMA store's own rule, checked before the grouped one
        fields.update(pick([{"cluster": (2, 1), "multicast": False, "sms": None}, {"persistent": False, "sms": None},
                            {"warp_specialized": False, "persistent": False, "sms": None}]
                           + [{"epilogue_via_smem": True}] * c_rows_aligned))
    stages = max(1, min(int(rng.integers(1, 5)), STAGE_BYTES_MAX // ((bm + bn) * bk * esize)))
    s = Schedule(block=(bm, bn, bk), instruction="wgmma", consumers=consumers, stages=stages,
                 swizzle=pick([None, None] + [w for w in (128, 64, 32) if bk * esize % w == 0
                                              and (b_layout == "col" or bn * esize % w == 0)]), **fields)
    arrays: dict[str, np.ndarray] = {"offs" if grouping == "contiguous" else "masked_m": counts}
    if bs is not None:
        sa, sb = random_grouped_scales(bs, g, seed=int(rng.integers(1 << 30)), decades=pick([0.5, 2.0, 4.0]))
        if rng.random() < 0.5:  # DeepGEMM's M-contiguous sa (per group), passed as its transpose
            sa = np.ascontiguousarray(np.swapaxes(sa, -1, -2)).swapaxes(-1, -2)
        if rng.random() < 0.3:  # each group's sb column-major
            sb = np.ascontiguousarray(np.swapaxes(sb, -1, -2)).swapaxes(-1, -2)
        arrays.update(scale_a=sa, scale_b=sb)
    kind = "block-scale" if scaled else "fp8" if fp8 else "f16/bf16"
    design = "grouped sm_90a unbuilt (refused)" if refused else f"grouped sm_90a {grouping} {kind}"
    return Draw(g, s, "sm_90a", design, arrays, refused)


def draw_grouped(rng: np.random.Generator) -> Draw:
    """A grouped problem: half on the mma.sync path, half in the sm_90a wgmma kernel."""
    return (draw_grouped_sm90a if rng.random() < 0.5 else draw_grouped_mma_sync)(rng)


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


def draw_grouped_sm100a(rng: np.random.Generator) -> Draw:
    """A grouped problem in the sm_100a tcgen05 kernel (fuzz_draws_sm100_grouped.py)."""
    from fuzz_draws_sm100_grouped import draw_grouped_sm100a as draw

    return draw(rng)


#: The designs `--designs` selects, by name.
DRAWS: dict[str, Callable[[np.random.Generator], Draw]] = {
    "grouped": draw_grouped, "grouped-sm90a": draw_grouped_sm90a, "grouped-sm100a": draw_grouped_sm100a,
    "block-scale": draw_block_scaled}


def operands(d: Draw, rng: np.random.Generator) -> tuple:
    """(A, B, C the epilogue reads, bias, scale) for a draw: dense operands in its layouts, with
    the group dimension where the grouping gives one (ptxgen.check.random_operands)."""
    from ptxgen.check import random_epilogue_operands, random_operands, random_scale

    a, b = random_operands(d.gemm, int(rng.integers(1 << 30)))
    c0, bias = random_epilogue_operands(d.gemm, int(rng.integers(1 << 30)))
    return a, b, c0, bias, random_scale(d.gemm, int(rng.integers(1 << 30)))
