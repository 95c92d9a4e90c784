"""Index expressions: numpy evaluation, constant folding, shared bases, and emitted PTX."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from ptxgen.ir import Builder
from ptxgen.emit.index import Const, ExprEmitter, Tid, evaluate, share_bases
from ptxgen.ir import Imm, Param

TID = np.arange(256)


def emitted_ops(e):
    b = Builder("k", [Param(".u32", "x")])
    tid = b.reg("b32")
    ex = ExprEmitter(b, tid)
    out = ex.emit(e)
    return [i.op for i in b.body], out


def test_evaluate_matches_python():
    e = ((Tid() >> 2) * 128 + ((Tid() & 3) ^ ((Tid() >> 3) & 3)) * 16) % 1000 + Tid() // 3
    want = [((t >> 2) * 128 + ((t & 3) ^ ((t >> 3) & 3)) * 16) % 1000 + t // 3 for t in range(256)]
    assert evaluate(e, TID).tolist() == want


def test_constants_fold_and_powers_of_two_become_shifts():
    ops, out = emitted_ops(Const(3) * 4 + 5)
    assert ops == [] and out == Imm("17")
    ops, _ = emitted_ops((Tid() * 8 + 0) // 4 % 16)
    assert ops == ["shl.b32", "shr.u32", "and.b32"]
    ops, _ = emitted_ops(Tid() // 3)
    assert ops == ["div.u32"]


def test_common_subexpressions_are_emitted_once():
    b = Builder("k", [])
    ex = ExprEmitter(b, b.reg("b32"))
    row = Tid() >> 2
    r1, r2 = ex.emit(row * 64), ex.emit(row * 64 + 16)
    assert len(b.body) == 3 and r1 != r2  # shr, shl shared; one add


def test_share_bases_uses_immediates_only_where_exact():
    sites = [Tid() * 16 + 4096 * i for i in range(4)] + [(Tid() ^ 1) * 16]
    sb = share_bases(sites, 128)
    assert len(sb.bases) == 2
    assert sb.site[:4] == [(0, 0), (0, 4096), (0, 8192), (0, 12288)] and sb.site[4] == (1, 0)
    for e, (i, imm) in zip(sites, sb.site):
        assert np.array_equal(evaluate(e, np.arange(128)), evaluate(sb.bases[i], np.arange(128)) + imm)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "mul", "shr", "and", "xor", "div", "rem"]),
                          st.integers(1, 64)), min_size=1, max_size=6))
def test_folded_expressions_keep_their_value(steps):
    from ptxgen.emit.index import _fold
    e = Tid()
    for op, c in steps:
        e = {"add": e + c, "mul": e * c, "shr": e >> (c % 8), "and": e & c, "xor": e ^ c,
             "div": e // c, "rem": e % c}[op]
    assert np.array_equal(evaluate(_fold(e), TID), evaluate(e, TID))
