"""Property tests of `allocate` over random straight-line and looped programs."""
from __future__ import annotations

from hypothesis import given, settings

from ptxgen.ir import REG_CLASSES, Instr
from ptxgen.regalloc import allocate
from ptxgen.regalloc.allocate import UNSHARED_CLASSES

from regalloc_programs import programs, reference_liveness, run

SETTINGS = settings(max_examples=100, deadline=None)


@SETTINGS
@given(programs())
def test_simultaneously_live_vregs_never_share(items):
    alloc = allocate(items)
    ref_in, ref_out = reference_liveness(items)
    for i, it in enumerate(items):
        together = [ref_in[i] | set(it.defs()) if isinstance(it, Instr) else ref_in[i], ref_out[i]]
        for group in together:
            names = [alloc.name(v) for v in group]
            assert len(names) == len(set(names)), f"item {i}: {sorted(group, key=lambda v: (v.cls, v.id))}"


@SETTINGS
@given(programs())
def test_every_use_reads_its_last_definition(items):
    alloc = allocate(items)
    virtual = run(items, lambda v: v)
    assert all(x is not None for _, vals in virtual for x in vals), "generator read an undefined vreg"
    physical = run(items, alloc.name)
    assert physical == virtual


@SETTINGS
@given(programs(loops=False))
def test_straight_line_execution(items):
    alloc = allocate(items)
    assert run(items, alloc.name) == run(items, lambda v: v)


@SETTINGS
@given(programs())
def test_counts_are_max_interval_overlap(items):
    alloc = allocate(items)
    ref_in, _ = reference_liveness(items)
    for i, it in enumerate(items):  # every live position lies inside the vreg's interval
        if isinstance(it, Instr):
            for v in ref_in[i] | set(it.defs()):
                lo, hi = alloc.intervals[v]
                assert lo <= i <= hi
    for cls in REG_CLASSES:
        events = sorted(
            (pos, kind) for v, (lo, hi) in alloc.intervals.items() if v.cls == cls
            for pos, kind in ((lo, 0), (hi, 1))  # at equal positions, starts before ends: closed
        )
        depth = best = 0
        for _, kind in events:
            depth += 1 if kind == 0 else -1
            best = max(best, depth)
        if cls in UNSHARED_CLASSES:   # one register per vreg (allocate.py's docstring says why)
            assert alloc.counts[cls] == sum(1 for v in alloc.intervals if v.cls == cls)
        else:
            assert alloc.counts[cls] == best
        assert alloc.counts[cls] >= alloc.peak[cls]
        used = {alloc.phys[v] for v in alloc.phys if v.cls == cls}
        prefix = REG_CLASSES[cls][1]
        assert used == {f"{prefix}{n}" for n in range(alloc.counts[cls])}  # dense numbering


@SETTINGS
@given(programs(loops=False, guards=False, ssa=True))
def test_ssa_straight_line_meets_peak(items):
    # Without loops or redefinitions intervals are exact live ranges, so nothing is wasted.
    alloc = allocate(items)
    shared = [cls for cls in alloc.counts if cls not in UNSHARED_CLASSES]
    assert {c: alloc.counts[c] for c in shared} == {c: alloc.peak.get(c, 0) for c in shared}


@settings(max_examples=50, deadline=None)
@given(programs())
def test_deterministic_in_process(items):
    a, b = allocate(items), allocate(list(items))
    assert list(a.phys.items()) == list(b.phys.items())
    assert a.declarations() == b.declarations()
