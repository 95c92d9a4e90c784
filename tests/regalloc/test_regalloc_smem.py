"""Shared-memory planner: safety, alignment, determinism, reuse across disjoint lifetimes."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ptxgen.regalloc import SmemBuffer, SmemPlan, plan_shared


@st.composite
def buffer_sets(draw) -> list[SmemBuffer]:
    n = draw(st.integers(0, 12))
    out = []
    for i in range(n):
        first = draw(st.integers(0, 4))
        out.append(SmemBuffer(
            name=f"buf{i}",
            size=draw(st.sampled_from([1, 3, 16, 100, 512, 1024, 4096, 8192, 16384])),
            align=draw(st.sampled_from([1, 4, 16, 128, 1024])),
            first_use=first,
            last_use=first + draw(st.integers(0, 3)),
        ))
    return out


def overlaps(a: SmemBuffer, b: SmemBuffer) -> bool:
    return a.first_use <= b.last_use and b.first_use <= a.last_use


@settings(max_examples=300, deadline=None)
@given(buffer_sets())
def test_plan_is_safe_aligned_and_tight(buffers):
    plan = plan_shared(buffers)
    assert set(plan.offsets) == {b.name for b in buffers}
    for b in buffers:
        off = plan.offsets[b.name]
        assert off >= 0 and off % b.align == 0
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if overlaps(a, b):
                oa, ob = plan.offsets[a.name], plan.offsets[b.name]
                assert oa + a.size <= ob or ob + b.size <= oa, f"{a.name} and {b.name} collide"
    assert plan.total == max((plan.offsets[b.name] + b.size for b in buffers), default=0)
    # never worse than stacking every buffer; never better than the largest single phase
    stacked = 0
    for b in sorted(buffers, key=lambda b: (-b.size, b.name)):
        stacked = -(-stacked // b.align) * b.align + b.size
    assert plan.total <= stacked
    for phase in range(8):
        assert plan.total >= sum(b.size for b in buffers if b.first_use <= phase <= b.last_use)


def align_up(x: int, a: int) -> int:
    return -(-x // a) * a


@settings(max_examples=200, deadline=None)
@given(buffer_sets())
def test_each_offset_is_the_lowest_free_one_in_placement_order(buffers):
    plan = plan_shared(buffers)
    placed: list[SmemBuffer] = []
    for b in sorted(buffers, key=lambda b: (-b.size, b.name)):
        busy = [(plan.offsets[o.name], plan.offsets[o.name] + o.size) for o in placed if overlaps(b, o)]

        def free(off: int) -> bool:
            return all(off + b.size <= lo or hi <= off for lo, hi in busy)

        chosen = plan.offsets[b.name]
        assert free(chosen)
        # the lowest free aligned offset is 0 or the aligned end of some busy range
        candidates = [0] + [align_up(hi, b.align) for _, hi in busy]
        assert not [c for c in candidates if c < chosen and free(c)]
        placed.append(b)


@settings(max_examples=100, deadline=None)
@given(buffer_sets(), st.randoms(use_true_random=False))
def test_plan_is_deterministic_and_order_independent(buffers, rnd):
    shuffled = list(buffers)
    rnd.shuffle(shuffled)
    a, b = plan_shared(buffers), plan_shared(shuffled)
    assert a.offsets == b.offsets and a.total == b.total
    assert a.describe() == plan_shared(buffers).describe()


def test_epilogue_staging_reuses_stage_bytes():
    stages = [SmemBuffer(f"{m}_stage{s}", 16384, 1024, 0, 0) for m in "AB" for s in range(3)]
    staging = SmemBuffer("C_staging", 32768, 1024, 1, 1)
    plan = plan_shared(stages + [staging])
    assert plan.offsets["C_staging"] == 0  # the main loop's buffers are dead by the epilogue
    assert plan.total == 6 * 16384 < sum(b.size for b in stages) + staging.size
    assert sorted(plan.offsets[b.name] for b in stages) == [16384 * i for i in range(6)]
    text = plan.describe()
    assert "C_staging" in text and "total 98304 bytes (unshared sum 131072)" in text


def test_alignment_padding_and_first_fit():
    small = SmemBuffer("flags", 8, 8, 0, 1)
    tile = SmemBuffer("tile", 2048, 1024, 0, 1)
    late = SmemBuffer("late", 16, 16, 1, 1)
    plan = plan_shared([small, tile, late])
    assert plan.offsets == {"flags": 2064, "tile": 0, "late": 2048}  # larger first
    plan = plan_shared([SmemBuffer("a", 100, 4, 0, 0), SmemBuffer("b", 64, 1024, 0, 0)])
    assert plan.offsets == {"a": 0, "b": 1024} and plan.total == 1088
    # an exactly fitting gap is used: c_epi fits below b_both, where a_loop (dead by then) was
    plan = plan_shared([SmemBuffer("a_loop", 3072, 1024, 0, 0), SmemBuffer("b_both", 3072, 1024, 0, 1),
                        SmemBuffer("c_epi", 3072, 1024, 1, 1)])
    assert plan.offsets == {"a_loop": 0, "b_both": 3072, "c_epi": 0} and plan.total == 6144


def test_empty_plan():
    plan = plan_shared([])
    assert plan == SmemPlan(buffers=(), offsets={}, total=0)
    assert plan.describe().endswith("total 0 bytes (unshared sum 0)")


@pytest.mark.parametrize("kwargs, match", [
    (dict(size=0), "size"),
    (dict(size=-4), "size"),
    (dict(align=3), "power of two"),
    (dict(align=0), "power of two"),
    (dict(first_use=2, last_use=1), "first_use"),
    (dict(name=""), "name"),
])
def test_invalid_buffers_rejected(kwargs, match):
    base = dict(name="x", size=16, align=16, first_use=0, last_use=0)
    with pytest.raises(ValueError, match=match):
        SmemBuffer(**{**base, **kwargs})


def test_duplicate_names_rejected():
    b = SmemBuffer("x", 16, 16, 0, 0)
    with pytest.raises(ValueError, match="used twice"):
        plan_shared([b, SmemBuffer("x", 32, 16, 1, 1)])
