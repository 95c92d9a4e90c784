"""bench/fuzz_draws_sm100_grouped.py (`fuzz.py --designs grouped-sm100a`): every draw is a legal
schedule the verifier accepts but the deliberate probes of unbuilt parts (clusters, CTA pairs,
cluster launch control, refused with LoweringNotBuilt); the draws reach both groupings, 1 to 16
groups, empty slots and full ones, both B layouts, fp8 (masked MXFP8 too), BM 64 and 128, one CTA
walking several groups' tiles; and the first built draws of each kind run correct on the simulator."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import ptxgen

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import fuzz  # noqa: E402
from fuzz_draws_llm import DRAWS  # noqa: E402
from ptxgen.errors import LoweringNotBuilt  # noqa: E402

DRAW = DRAWS["grouped-sm100a"]


def test_every_draw_is_legal_but_the_probes():
    for seed in range(300):
        d = DRAW(np.random.default_rng(seed))
        if d.refused:
            with pytest.raises(LoweringNotBuilt):
                ptxgen.verify(d.gemm, d.schedule, d.arch)
        else:
            ptxgen.verify(d.gemm, d.schedule, d.arch)


def test_the_draws_reach_every_case():
    seen = set()
    for seed in range(300):
        d = DRAW(np.random.default_rng(seed))
        g, s, counts = d.gemm, d.schedule, next(iter(d.arrays.values()))
        seen |= {g.grouping, f"BM {s.bm}", f"B {g.b_layout}", g.dtype}
        seen |= {"one group"} if g.groups == 1 else {"12+ groups"} if g.groups >= 12 else set()
        if g.grouping == "masked":
            seen |= ({"empty slot"} if (counts == 0).any() else set()) | ({"full slot"} if (counts == g.m).any() else set())
        elif (np.diff(np.concatenate([[0], counts])) == 0).any():
            seen.add("empty group")
        if s.sms == 1:
            seen.add("one CTA walking every tile")
        if d.refused:
            seen.add("probe")
        if g.block_scale is not None:
            seen |= {"MXFP8", f"MXFP8 BN {s.bn}"}
    want = {"contiguous", "masked", "BM 64", "BM 128", "B row", "B col", "f16", "bf16", "e4m3", "e5m2",
            "one group", "12+ groups", "empty slot", "full slot", "empty group", "one CTA walking every tile", "probe",
            "MXFP8", "MXFP8 BN 32", "MXFP8 BN 256"}
    assert want <= seen, want - seen


def test_grouped_sm100a_draws_run_correct_on_the_simulator():
    """End to end through fuzz.run_one: the first draws of each kind match the float64 reference
    (the probes come back "rejected")."""
    want = {"contiguous f16/bf16", "contiguous fp8", "masked f16/bf16", "masked fp8", "masked MXFP8",
            "unbuilt (refused)"}
    for seed in range(200):
        d = DRAW(np.random.default_rng(seed))
        kind = d.design.removeprefix("grouped sm_100a ")
        if kind in want:
            outcome, detail, _, design = fuzz.run_one(seed, designs=("grouped-sm100a",))
            assert design == d.design and outcome == ("rejected" if d.refused else "correct"), detail
            want.discard(kind)
        if not want:
            break
    assert not want, want
