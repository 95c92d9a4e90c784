"""Liveness and CFG: checked against a naive per-item set-based solver and hand-built cases."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from ptxgen.ir import REG_CLASSES, Comment, Imm, Instr, Label, Sym, VReg
from ptxgen.regalloc import build_cfg, compute_liveness

from regalloc_programs import programs, reference_liveness

P, X, Y, Z = VReg("pred", 1), VReg("b32", 2), VReg("b32", 3), VReg("b32", 4)


def mov(d: VReg, *srcs) -> Instr:
    return Instr("mov.b32", (d,) + tuple(srcs or (Imm("0"),)), 1)


@settings(max_examples=100, deadline=None)
@given(programs())
def test_matches_reference_solver(items):
    live = compute_liveness(items)
    ref_in, ref_out = reference_liveness(items)
    for i in range(len(items)):
        assert set(live.live_in(i)) == ref_in[i], f"live-in differs at item {i}: {items[i]}"
        assert set(live.live_out(i)) == ref_out[i], f"live-out differs at item {i}: {items[i]}"


@settings(max_examples=100, deadline=None)
@given(programs())
def test_peak_is_max_occupancy_per_class(items):
    live = compute_liveness(items)
    ref_in, _ = reference_liveness(items)
    expect = {cls: 0 for cls in REG_CLASSES}
    for i, it in enumerate(items):
        if isinstance(it, Instr):
            at = ref_in[i] | set(it.defs())
            for cls in REG_CLASSES:
                expect[cls] = max(expect[cls], sum(v.cls == cls for v in at))
    assert live.peak == expect


def test_cfg_blocks_and_edges():
    items = [
        mov(X),                                   # 0  block 0
        Label("$head"),                           # 1  block 1
        mov(Y, X),                                # 2
        Instr("setp.lt.s32", (P, Y, Imm("4")), 1),  # 3
        Instr("bra", (Sym("$head"),), 0, P),      # 4  -> block 1, falls to block 2
        Comment("after"),                         # 5  block 2
        Instr("bra.uni", (Sym("$end"),)),         # 6  -> block 4 only
        mov(Z),                                   # 7  block 3 (dead)
        Instr("ret"),                             # 8  no successor
        Label("$end"),                            # 9  block 4
        Instr("exit"),                            # 10
    ]
    blocks = build_cfg(items)
    assert [(b.start, b.end, b.succs) for b in blocks] == [
        (0, 1, (1,)),
        (1, 5, (1, 2)),
        (5, 7, (4,)),
        (7, 9, ()),
        (9, 11, ()),
    ]


def test_guarded_ret_falls_through():
    items = [Instr("ret", (), 0, P), mov(X)]
    assert [b.succs for b in build_cfg(items)] == [()]  # one block: a guarded ret does not end it
    items = [mov(X), Instr("ret"), mov(Y)]
    assert [b.succs for b in build_cfg(items)] == [(), ()]


def test_cfg_rejects_bad_labels():
    with pytest.raises(ValueError, match="placed twice"):
        build_cfg([Label("$a"), Label("$a")])
    with pytest.raises(ValueError, match=r"\$nowhere"):
        build_cfg([Instr("bra", (Sym("$nowhere"),))])


def test_guarded_def_does_not_kill():
    items = [mov(X), Instr("setp.ne.s32", (P, X, Imm("0")), 1), Instr("mov.b32", (X, Imm("1")), 1, P),
             Instr("st.b32", (X,), 0)]
    live = compute_liveness(items)
    assert X in live.live_in(2)          # old value still needed if the guard is false
    assert live.live_in(2) == (X, P)  # (cls, id) order: b32 before pred
    unguarded = items[:2] + [mov(X, Imm("1")), items[3]]
    assert X not in compute_liveness(unguarded).live_in(2)


def test_value_live_through_loop():
    # x defined before the loop and read after it is live at every item of the loop.
    items = [mov(X), mov(Z), Label("$l"), mov(Y, Z), Instr("add.s32", (Z, Y, Imm("1")), 1),
             Instr("setp.lt.s32", (P, Z, Imm("9")), 1), Instr("bra", (Sym("$l"),), 0, P),
             Instr("st.b32", (X,), 0)]
    live = compute_liveness(items)
    for i in range(2, 7):
        assert X in live.live_in(i) and X in live.live_out(i)
    # z is loop-carried: live at the loop head and across the back edge.
    assert Z in live.live_in(2) and Z in live.live_out(6)
    assert live.peak["b32"] == 3


def test_empty_and_non_instruction_items():
    assert compute_liveness([]).peak == {cls: 0 for cls in REG_CLASSES}
    live = compute_liveness([Comment("x"), Label("$a")])
    assert live.live_in_bits == (0, 0) and live.vregs == ()


def test_unknown_class_rejected():
    with pytest.raises(ValueError, match="unknown register class"):
        compute_liveness([Instr("mov", (VReg("u8", 1), Imm("0")), 1)])
