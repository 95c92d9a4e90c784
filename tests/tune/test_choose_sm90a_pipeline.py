"""The sm_90a chooser tells pipeline depths and clusters apart (issue 21, point 5): a stage's round
trip (memory latency, its bytes at the SM's share of L2 bandwidth, a multicast peer's release) over
the S - 1 stages in flight sets a latency floor per k-tile (Little's law), so a deeper ring is never
predicted slower while it fits at the same occupancy, and the 8192^3 bf16 pick uses 4 or more
stages where they fit; 2x1 and 1x2 multicast clusters are proposed, their L2 saving is priced, and
where the best unclustered kernel is L2-bound a cluster ranks first; the top 8 do not tie."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from ptxgen import Gemm, Schedule, ScheduleError, verify
from ptxgen.targets.sm90 import choose as choose_hopper
from ptxgen.tune.choose import rank, same_up_to_raster
from tests.tune.test_cost_terms import cluster_mirrors
from ptxgen.tune.costmodel import predict

ARCH = "sm_90a"
BIG = Gemm(8192, 8192, 8192, dtype="bf16", out_dtype="bf16")
#: 64 tiles of 128x128 or smaller on 132 SMs, each with a long K: the best unclustered kernel
#: moves more bytes from L2 than the chip's L2 bandwidth delivers in its compute time.
L2_BOUND = Gemm(1024, 1024, 16384, dtype="bf16", out_dtype="bf16")


def clustered(s: Schedule) -> bool:
    return s.cluster is not None and tuple(s.cluster) != (1, 1)


def test_8192_bf16_pick_uses_at_least_4_stages_where_they_fit():
    ranked = rank(BIG, ARCH)
    best = ranked[0].schedule
    depths = sorted({r.schedule.stages for r in ranked if replace(r.schedule, stages=best.stages) == best})
    assert depths[-1] >= 4, depths  # 4 stages of the picked kernel fit (else the check below is empty)
    assert best.stages >= 4, best
    # and the model, not a tie-break, put it there: each shallower ring of that kernel is slower
    by_depth = {r.schedule.stages: r.prediction.time_s for r in ranked
                if replace(r.schedule, stages=best.stages) == best}
    assert all(by_depth[n] > by_depth[best.stages] for n in depths if n < best.stages), by_depth


SIZES = [64, 200, 1024, 4096, 8192]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_a_deeper_ring_is_never_predicted_slower_while_it_fits_at_the_same_occupancy(data):
    g = Gemm(data.draw(st.sampled_from(SIZES), label="M"), data.draw(st.sampled_from(SIZES), label="N"),
             data.draw(st.sampled_from(SIZES), label="K"),
             dtype=data.draw(st.sampled_from(["bf16", "e4m3", "tf32"]), label="dtype"), out_dtype="bf16")
    bm, consumers = data.draw(st.sampled_from(choose_hopper.BLOCK_ROWS), label="BM, consumers")
    ws = data.draw(st.booleans(), label="warp-specialised")
    s = Schedule(block=(bm, data.draw(st.sampled_from(choose_hopper.BLOCK_COLS), label="BN"), 128 // g.in_bytes),
                 instruction="wgmma", consumers=consumers, warp_specialized=ws, persistent=ws,
                 stages=data.draw(st.integers(1, 7), label="stages"),
                 cluster=data.draw(st.sampled_from([(1, 1), (2, 1), (1, 2)]), label="cluster") if ws else (1, 1),
                 epilogue_via_smem=data.draw(st.sampled_from([None, False]), label="epilogue"),
                 split_k=1 if ws else data.draw(st.sampled_from([1, 2]), label="split-K"))
    deeper = replace(s, stages=s.stages + 1)
    try:
        verify(g, s, ARCH)
        verify(g, deeper, ARCH)
    except ScheduleError:
        assume(False)
    shallow, deep = predict(g, s, ARCH), predict(g, deeper, ARCH)
    assume(shallow.ctas_per_sm == deep.ctas_per_sm)
    assert deep.time_s <= shallow.time_s, (s, shallow.terms, deep.terms)
    # the floor itself falls with depth (one stage to two: the same round trip, now overlapped)
    assert deep.terms["latency"] < shallow.terms["latency"] or s.stages == 1


def test_the_ranked_list_at_8192_includes_clusters_and_prices_their_l2_saving():
    ranked = rank(BIG, ARCH)
    shapes = {tuple(r.schedule.cluster) for r in ranked}
    assert {(2, 1), (1, 2)} <= shapes, shapes
    for r in ranked[:20]:
        if clustered(r.schedule):
            alone = predict(BIG, replace(r.schedule, cluster=(1, 1), multicast=None), ARCH)
            # the multicast operand's box is read once per cluster from L2, not once per CTA
            assert r.prediction.l2_bytes < alone.l2_bytes, r.schedule


def test_where_l2_binds_a_cluster_ranks_first(monkeypatch):
    ranked = rank(L2_BOUND, ARCH)
    alone = next(r for r in ranked if not clustered(r.schedule))
    assert alone.prediction.bound == "L2", alone.prediction.summary()
    assert clustered(ranked[0].schedule), ranked[0].schedule
    assert ranked[0].prediction.terms["L2"] < alone.prediction.terms["L2"]

    # planted: a model that misses multicast's saving (every CTA reads its whole boxes) ranks
    # the clusters below their unclustered kernels (they only pay the peers' release), so the
    # check above can fail
    def whole_boxes(g, s, plan):
        return (s.bm + s.bn) * s.bk * g.in_bytes

    monkeypatch.setattr(choose_hopper, "loaded_bytes_per_stage", whole_boxes)
    assert not clustered(rank(L2_BOUND, ARCH)[0].schedule)


@pytest.mark.parametrize("g", [BIG, Gemm(4096, 4096, 4096, dtype="bf16", out_dtype="bf16"),
                               Gemm(64, 4096, 4096, dtype="bf16", out_dtype="bf16"), L2_BOUND],
                         ids=lambda g: f"{g.m}x{g.n}x{g.k}")
def test_no_two_of_the_top_8_tie_unless_the_same_kernel_up_to_raster(g):
    top = rank(g, ARCH)[:8]
    for i, a in enumerate(top):
        for b in top[i + 1:]:
            if a.prediction.time_s == pytest.approx(b.prediction.time_s, rel=1e-9, abs=0):  # equal but for rounding
                assert same_up_to_raster(a.schedule, b.schedule) or cluster_mirrors(a.schedule, b.schedule), \
                    (a.schedule, b.schedule)
