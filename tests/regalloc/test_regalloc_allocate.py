"""Hand-built allocation cases: loops, loop-carried values, guarded defs, errors, text, speed."""
from __future__ import annotations


import pytest

from ptxgen.ir import Addr, Imm, Instr, Label, Sym, Vec, VReg
from ptxgen.regalloc import allocate

from regalloc_programs import gemm_like, run


def r(i: int) -> VReg:
    return VReg("b32", i)


P = VReg("pred", 100)


def mov(d: VReg, src=None) -> Instr:
    return Instr("mov.b32", (d, src if src is not None else Imm("0")), 1)


def add(d: VReg, a: VReg, b) -> Instr:
    return Instr("add.s32", (d, a, b), 1)


def loop_tail(ctr: VReg, label: str, trips: int = 3) -> list[Instr]:
    return [Instr("ctr.inc", (ctr, ctr), 1), Instr("ctr.test", (P, ctr, Imm(str(trips))), 1),
            Instr("bra", (Sym(label),), 0, P)]


def test_value_defined_before_loop_and_used_after_keeps_its_register():
    x, ctr, t1, t2, t3 = r(1), r(2), r(3), r(4), r(5)
    items = [mov(x, Imm("7")), Instr("ctr.init", (ctr,), 1), Label("$loop"),
             mov(t1), add(t2, t1, Imm("1")), add(t3, t2, t2), Instr("st.b32", (Addr(t3),), 0),
             *loop_tail(ctr, "$loop"), Instr("st.b32", (x,), 0)]
    alloc = allocate(items)
    lo, hi = alloc.intervals[x]
    assert lo == 0 and hi == len(items) - 1
    for v in (ctr, t1, t2, t3):
        assert alloc.name(v) != alloc.name(x)
    assert run(items, alloc.name) == run(items, lambda v: v)
    # t1 and t3 have disjoint lives and share; t2 touches both (closed intervals)
    assert alloc.name(t1) == alloc.name(t3) != alloc.name(t2)
    assert alloc.counts["b32"] == 4


def test_loop_carried_accumulator_not_clobbered_after_its_last_textual_use():
    acc, ctr, t, late = r(1), r(2), r(3), r(4)
    items = [mov(acc), Instr("ctr.init", (ctr,), 1), Label("$loop"),
             Instr("ld.b32", (t, Addr(ctr)), 1), add(acc, acc, t),
             mov(late, Imm("5")), Instr("st.b32", (Addr(late),), 0),   # after acc's last use in the body
             *loop_tail(ctr, "$loop"), Instr("st.b32", (acc,), 0)]
    alloc = allocate(items)
    assert alloc.name(late) != alloc.name(acc), "acc is live across the back edge"
    assert alloc.intervals[acc][0] == 0 and alloc.intervals[acc][1] == len(items) - 1
    assert run(items, alloc.name) == run(items, lambda v: v)


def test_guarded_def_keeps_the_registers_old_contents_alive():
    # A predicated write whose guard may be false leaves the old contents in place, so x's register
    # is occupied from the entry on; the interval model must not hand it to y in between.
    x, y = r(1), r(2)
    items = [Instr("setp.ne.s32", (P, Imm("1"), Imm("0")), 1),
             mov(y, Imm("3")), Instr("st.b32", (Addr(y),), 0),
             Instr("mov.b32", (x, Imm("2")), 1, P),
             Instr("st.b32", (x,), 0)]
    alloc = allocate(items)
    assert alloc.intervals[x] == (0, 4)
    assert alloc.name(y) != alloc.name(x)
    # with an unguarded write, x's life starts at it and y's register is free again
    plain = items[:3] + [mov(x, Imm("2")), items[4]]
    alloc = allocate(plain)
    assert alloc.intervals[x] == (3, 4)
    assert alloc.name(y) == alloc.name(x)


def test_destinations_never_share_with_sources():
    a, b, c = r(1), r(2), r(3)
    d = tuple(VReg("f32", i) for i in range(10, 14))
    items = [mov(a), mov(b), add(c, a, b),
             Instr("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (Vec(d), Vec((a, b)), Vec((c,)), Vec(d)), 1),
             Instr("st.v4.f32", (Addr(c), Vec(d)), 0)]
    items = [Instr("mov.f32", (x, Imm("0f00000000")), 1) for x in d] + items
    alloc = allocate(items)
    assert alloc.name(c) not in {alloc.name(a), alloc.name(b)}
    assert len({alloc.name(x) for x in d}) == 4


def test_dead_def_gets_a_point_interval():
    a, dead = r(1), r(2)
    items = [mov(a), mov(dead), Instr("st.b32", (a,), 0)]
    alloc = allocate(items)
    assert alloc.intervals[dead] == (1, 1)
    assert alloc.name(dead) != alloc.name(a)  # a is live across item 1
    assert alloc.counts["b32"] == 2


def test_undefined_use_names_vreg_and_first_use():
    a, ghost = r(1), r(9)
    items = [mov(a), Label("$x"), add(a, a, Imm("1")), Instr("st.b32", (Addr(a), ghost), 0),
             Instr("st.b32", (ghost,), 0)]
    with pytest.raises(ValueError) as err:
        allocate(items)
    msg = str(err.value)
    assert str(ghost) in msg and "`st.b32`" in msg and "item 3" in msg


def test_declarations_text_and_names():
    p, h, x, y, w, f = VReg("pred", 1), VReg("b16", 2), r(3), r(4), VReg("b64", 5), VReg("f32", 6)
    items = [mov(x), mov(y), Instr("setp.lt.s32", (p, x, y), 1), Instr("cvt.u64.u32", (w, x), 1),
             Instr("cvt.rn.f32.s32", (f, y), 1), Instr("cvt.rn.f16.f32", (h, f), 1),
             Instr("st.b16", (Addr(w), h), 0, p)]
    alloc = allocate(items)
    assert alloc.declarations() == [".reg .pred %p<1>;", ".reg .b16 %h<1>;", ".reg .b32 %r<2>;",
                                    ".reg .b64 %rd<1>;", ".reg .f32 %f<1>;"]
    assert [alloc.name(v) for v in (p, h, x, y, w, f)] == ["%p0", "%h0", "%r0", "%r1", "%rd0", "%f0"]
    only_b32 = allocate([mov(x), Instr("st.b32", (x,), 0)])
    assert only_b32.declarations() == [".reg .b32 %r<1>;"]
    assert only_b32.counts["f32"] == 0
    with pytest.raises(KeyError, match="does not occur"):
        only_b32.name(y)


def test_empty_program():
    alloc = allocate([])
    assert alloc.phys == {} and alloc.declarations() == []


def test_gemm_like_kernel_is_tight():
    # Speed is measured by bench/compile_time.py, not asserted here.
    items = gemm_like()
    assert 2500 <= len(items) <= 3500
    alloc = allocate(items)
    assert alloc.counts["f32"] == alloc.peak["f32"] == 128  # accumulators exactly, nothing wasted
    assert alloc.counts["b32"] >= alloc.peak["b32"]



def test_both_halves_of_a_pair_destination_are_defined_and_get_registers_of_their_class():
    """elect.sync `d|p` defines two registers of different classes in one operand: each half's
    interval starts at the instruction, neither shares a register with a value live across it."""
    from ptxgen.ir import RegPair
    from ptxgen.ir.render import render_instr

    live, lane, p = r(1), r(2), VReg("pred", 7)
    elect = Instr("elect.sync", (RegPair(lane, p), Imm("0xffffffff")), 1)
    items = [mov(live, Imm("3")), elect, Instr("st.b32", (Addr(live), lane), 0),
             Instr("st.b32", (Addr(live), live), 0, p)]
    alloc = allocate(items)
    assert alloc.intervals[lane][0] == 1 and alloc.intervals[p] == (1, 3)
    assert alloc.name(lane) != alloc.name(live) and alloc.name(p).startswith("%p")
    assert render_instr(elect, alloc.name).strip() == f"elect.sync {alloc.name(lane)}|{alloc.name(p)}, 0xffffffff;"
    sink = Instr("elect.sync", (RegPair(None, p), Imm("0xffffffff")), 1)
    assert sink.defs() == (p,) and render_instr(sink, alloc.name).strip().startswith("elect.sync _|%p")
    with pytest.raises(ValueError, match="at least one register"):
        RegPair(None, None)



def test_64_bit_values_never_share_a_register():
    """Two 64-bit values whose lives do not overlap still get two registers (ptxas 13.5 keeps a
    wgmma descriptor uniform only when its register is its own: allocate.py), while 32-bit ones
    with the same lives share one."""
    d1, d2, w1, w2 = VReg("b64", 1), VReg("b64", 2), r(3), r(4)
    items = [Instr("mov.b64", (d1, Imm("1")), 1), Instr("st.b64", (Addr(r(9)), d1), 0),
             Instr("mov.b64", (d2, Imm("2")), 1), Instr("st.b64", (Addr(r(9)), d2), 0),
             mov(w1), Instr("st.b32", (Addr(r(9)), w1), 0), mov(w2), Instr("st.b32", (Addr(r(9)), w2), 0)]
    alloc = allocate([mov(r(9)), *items])
    assert alloc.name(d1) != alloc.name(d2) and alloc.counts["b64"] == 2
    assert alloc.name(w1) == alloc.name(w2)
