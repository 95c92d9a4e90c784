"""The chooser's swap-AB candidates (tune/swap_ab.py): proposed for decode-sized M, priced by the
cost model against the plain kernels (split-K and Stream-K among them), and reported by `info`.
Prediction-based: no problem of these sizes is simulated."""
from __future__ import annotations

import pytest

from ptxgen import Gemm
from ptxgen.tune.choose import choose, rank
from ptxgen.tune.costmodel import predict
from ptxgen.tune.swap_ab import STORE_TERM, SWAP_MAX_M, swap_candidates

ARCHS = ("sm_80", "sm_90a")


@pytest.mark.parametrize("arch", ARCHS)
def test_decode_against_a_large_weight_chooses_swap_ab(arch):
    ranked = rank(Gemm(8, 4096, 4096, out_dtype="f16"), arch)
    best = ranked[0]
    assert best.schedule.swap_ab, f"{best.schedule} chosen over every swap-AB candidate"
    plain = next(r for r in ranked if not r.schedule.swap_ab)
    assert best.prediction.time_s < plain.prediction.time_s
    # the swapped tile's N covers the caller's M in one tile, not the backend's 64+ columns
    assert best.schedule.bn <= 16


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape", [(64, 64, 4096), (2048, 2048, 2048)])
def test_square_problems_keep_the_plain_kernel(arch, shape):
    g = Gemm(*shape, out_dtype="f16")
    ranked = rank(g, arch)
    assert not ranked[0].schedule.swap_ab
    # 64 x 64 is decode-sized, so swap-AB was proposed and lost (a tie goes to the plain kernel)
    assert any(r.schedule.swap_ab for r in ranked) == (g.m <= SWAP_MAX_M)


def test_swap_ab_prediction_is_the_swapped_problems_plus_the_transposed_store():
    g = Gemm(8, 4096, 4096)
    s, p = swap_candidates(g, "sm_80")[0]
    assert p.terms[STORE_TERM] > 0 and p == predict(g, s, "sm_80")
    assert swap_candidates(Gemm(128, 4096, 4096), "sm_80") == []


def test_info_says_swap_ab_was_chosen_and_names_the_best_plain_kernel():
    choice = choose(Gemm(8, 4096, 4096, out_dtype="f16"), "sm_90a", check_spills=False)
    text = "\n".join(choice.lines())
    assert "--swap-ab" in text.splitlines()[0]
    assert "swap-AB  chosen" in text and "the best plain kernel" in text
    plain = choose(Gemm(64, 64, 4096, out_dtype="f16"), "sm_90a", check_spills=False)
    assert "swap-AB  not chosen" in "\n".join(plain.lines())


def test_a_tuned_swap_ab_schedule_survives_the_cache():
    from ptxgen.tune.cache import schedule_from_json, schedule_to_json

    s, _ = swap_candidates(Gemm(8, 4096, 4096), "sm_80")[0]
    assert schedule_to_json(s)["swap_ab"] is True and schedule_from_json(schedule_to_json(s)) == s
