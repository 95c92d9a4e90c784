"""bench/fuzz_draws_llm.py (`fuzz.py --designs grouped,block-scale`): every draw is a legal schedule
(the verifier accepts it, so none can hide as "rejected") but the deliberate probes of unbuilt
parts (refused with LoweringNotBuilt), and the draws reach what issue 24 asks the fuzz to cover:
the three groupings (contiguous, masked, k-contiguous), 1 to 16 groups, empty and tile-straddling groups,
masked counts 0 and max_m, groups ending inside a k-tile, both
mma.sync archs and the sm_90a wgmma grouped kernel (f16/bf16 in both B layouts, block-scaled
e4m3/e5m2 with f32 and ue8m0 scales, small persistent grids, epilogues); block-scaled fp8 in every
built design, K off and on multiples of 128, f32 and ue8m0 scales, transposed scale storage, both
fp8 dtypes."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import ptxgen

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import fuzz  # noqa: E402
from fuzz_draws_llm import (DRAWS, draw_block_scaled, draw_grouped, draw_grouped_mma_sync,  # noqa: E402
                            draw_grouped_sm90a)
from ptxgen.errors import LoweringNotBuilt  # noqa: E402

SEEDS = range(300)


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_every_draw_is_legal(name):
    for seed in SEEDS:
        d = DRAWS[name](np.random.default_rng(seed))
        if d.refused:  # a legal part not built: refused as such, never for a broken rule
            with pytest.raises(LoweringNotBuilt):
                ptxgen.verify(d.gemm, d.schedule, d.arch)
        else:
            ptxgen.verify(d.gemm, d.schedule, d.arch)  # raises ScheduleError naming the rule broken


def test_grouped_draws_take_both_kernels():
    archs = {draw_grouped(np.random.default_rng(seed)).arch for seed in range(40)}
    assert archs == {"sm_80", "sm_90", "sm_90a"}, archs


def test_mma_sync_grouped_draws_reach_every_case():
    seen = set()
    for seed in SEEDS:
        d = draw_grouped_mma_sync(np.random.default_rng(seed))
        g, s = d.gemm, d.schedule
        seen |= {g.grouping, d.arch, f"groups {1 if g.groups == 1 else 16 if g.groups == 16 else 'some'}"}
        if g.grouping == "contiguous":
            ends = d.arrays["offs"]
            sizes = np.diff(np.concatenate([[0], ends]))
            starts = np.concatenate([[0], ends[:-1]])
            seen |= {"empty"} if (sizes == 0).any() else set()
            seen |= {"straddle"} if (starts[sizes > 0] % s.bm).any() else set()
            assert ends[-1] <= g.m and (sizes >= 0).all()
        elif g.grouping == "k-contiguous":  # groups split K_total: some empty, some ending inside a k-tile
            ends = d.arrays["offs"]
            sizes = np.diff(np.concatenate([[0], ends]))
            seen |= {"k empty"} if (sizes == 0).any() else set()
            seen |= {"k unaligned"} if (ends % s.bk).any() else set()
            assert ends[-1] <= g.k and (sizes >= 0).all() and (g.a_layout, g.b_layout) == ("col", "row")
        else:
            counts = d.arrays["masked_m"]
            seen |= {"masked 0"} if (counts == 0).any() else set()
            seen |= {"masked max_m"} if (counts == g.m).any() else set()
            assert ((counts >= 0) & (counts <= g.m)).all()
        seen |= {"k-edge"} if g.k % s.bk else set()
    assert seen >= {"contiguous", "masked", "k-contiguous", "sm_80", "sm_90", "groups 1", "groups 16", "groups some",
                    "empty", "straddle", "masked 0", "masked max_m", "k-edge", "k empty", "k unaligned"}, seen


def test_block_scaled_draws_reach_every_case():
    seen = set()
    for seed in SEEDS:
        d = draw_block_scaled(np.random.default_rng(seed))
        g, bs = d.gemm, d.gemm.block_scale
        sa, sb = d.arrays["scale_a"], d.arrays["scale_b"]
        assert (sa.shape, sb.shape) == bs.shapes(g.m, g.n, g.k)
        assert (bs.values(sa) > 0).all() and (bs.values(sb) > 0).all()
        seen |= {d.design, g.dtype, bs.dtype, "k % 128" if g.k % 128 else "k = 128 j",
                 "sa transposed" if not sa.flags.c_contiguous else "sa row-major", f"a {bs.a}", f"b {bs.b}"}
    families = {f"block-scale {f}" for f in ("ws-persistent", "ws-cluster", "ws-one-tile", "one-tile")}
    assert seen >= families | {"e4m3", "e5m2", "f32", "ue8m0", "k % 128", "k = 128 j", "sa transposed",
                               "sa row-major", "a (1, 128)", "b (128, 128)"}, seen


def _group_sizes(d) -> np.ndarray:
    if d.gemm.grouping == "masked":
        return d.arrays["masked_m"]
    return np.diff(np.concatenate([[0], d.arrays["offs"]]))


def test_sm90a_grouped_draws_reach_every_case():
    """The wgmma grouped kernel's draws: both groupings, every input dtype, both B layouts of
    f16/bf16, block-scaled and per-tensor fp8, both scale dtypes and storages, empty and
    tile-straddling groups, one CTA walking tiles of several groups, epilogues, the probes."""
    seen = set()
    for seed in SEEDS:
        d = draw_grouped_sm90a(np.random.default_rng(seed))
        g, s = d.gemm, d.schedule
        assert d.arch == "sm_90a" and s.instruction == "wgmma" and d.design.startswith("grouped sm_90a")
        seen |= {g.grouping, g.dtype, f"b {g.dtype in ('f16', 'bf16')} {g.b_layout}", f"consumers {s.consumers}",
                 f"bm {s.bm}", "refused" if d.refused else "built"}
        sizes = _group_sizes(d)
        assert (sizes >= 0).all() and sizes.sum() <= g.m * (g.groups if g.grouping == "masked" else 1)
        seen |= {"empty"} if (sizes == 0).any() else set()
        seen |= {"k % 128"} if g.k % 128 else {"k = 128 j"}
        seen |= {"epilogue"} if g.epilogue is not None else set()
        if g.grouping == "contiguous":
            starts = d.arrays["offs"] - sizes
            seen |= {"straddle"} if (starts[sizes > 0] % s.bm).any() else set()
        else:
            seen |= {"masked 0"} if (sizes == 0).any() else set()
            seen |= {"masked max_m"} if (sizes == g.m).any() else set()
            seen |= {"masked a col"} if g.a_layout == "col" else set()
        tiles = int(sum(-(-int(r) // s.bm) for r in sizes)) * -(-g.n // s.bn)
        seen |= {"one CTA, several groups' tiles"} if s.sms == 1 and tiles > 1 and (sizes > 0).sum() > 1 else set()
        if g.block_scale is not None:
            bs, sa, sb = g.block_scale, d.arrays["scale_a"], d.arrays["scale_b"]
            lead = (g.groups,) if g.grouping == "masked" else ()
            sa_shape, sb_shape = bs.shapes(g.m, g.n, g.k)
            assert sa.shape == lead + sa_shape and sb.shape == (g.groups,) + sb_shape
            seen |= {f"scaled {g.dtype}", f"scales {bs.dtype}", f"sa {'row' if sa.strides[-1] == sa.itemsize else 'col'}",
                     f"sb {'row' if sb.strides[-1] == sb.itemsize else 'col'}"}
        elif g.dtype in ("e4m3", "e5m2"):
            seen |= {"fp8 unscaled"}
    want = {"contiguous", "masked", "f16", "bf16", "e4m3", "e5m2", "b True row", "b True col", "b False col",
            "consumers 1", "consumers 2", "bm 64", "bm 128", "bm 256", "refused", "built", "empty", "k % 128",
            "k = 128 j", "epilogue", "straddle", "masked 0", "masked max_m", "masked a col",
            "one CTA, several groups' tiles", "scaled e4m3", "scaled e5m2", "scales f32", "scales ue8m0",
            "sa row", "sa col", "sb row", "sb col", "fp8 unscaled"}
    assert want <= seen, want - seen


def test_sm90a_grouped_draws_run_correct_on_the_simulator():
    """End to end through fuzz.run_one: the first built draws of each kind compile, simulate and
    match the float64 reference (the probes come back "rejected")."""
    want = {"contiguous f16/bf16", "contiguous block-scale", "masked f16/bf16", "masked block-scale"}
    for seed in range(100):
        d = draw_grouped_sm90a(np.random.default_rng(seed))
        kind = d.design.removeprefix("grouped sm_90a ")
        if d.refused or kind in want:
            outcome, detail, _, design = fuzz.run_one(seed, designs=("grouped-sm90a",))
            assert design == d.design and outcome == ("rejected" if d.refused else "correct"), detail
            want.discard(kind)
        if not want:
            break
    assert not want, want
