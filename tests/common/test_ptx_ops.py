"""The typed instruction helpers (ptxgen/ir/ops.py): each op spelled per type as the PTX ISA writes
it, the result register's class, `into=`, immediates, and the refusals.

Expected opcodes are written out from the PTX ISA's instruction sections, not computed with the
module under test.
"""
from __future__ import annotations

import pytest

from ptxgen.ir import Addr, Builder, Imm, Instr, Sym, Vec
from ptxgen.ir import ops as ptx
from ptxgen.ir.ops import B16, B32, BF16, F16, F32, PRED, S8, S32, S64, TF32, U8, U32, U64, PtxType


def last(b: Builder) -> Instr:
    ins = b.body[-1]
    assert isinstance(ins, Instr)
    return ins


@pytest.mark.parametrize("helper, ty, opcode, cls", [
    (ptx.add, U32, "add.u32", "b32"), (ptx.add, S64, "add.s64", "b64"), (ptx.add, F32, "add.f32", "f32"),
    (ptx.sub, U32, "sub.u32", "b32"), (ptx.mul, U32, "mul.lo.u32", "b32"), (ptx.mul, U64, "mul.lo.u64", "b64"),
    (ptx.mul, F32, "mul.f32", "f32"), (ptx.div, U32, "div.u32", "b32"), (ptx.rem, U32, "rem.u32", "b32"),
    (ptx.min_, S32, "min.s32", "b32"), (ptx.max_, F32, "max.f32", "f32"),
    (ptx.and_, U32, "and.b32", "b32"), (ptx.and_, PRED, "and.pred", "pred"), (ptx.xor, U32, "xor.b32", "b32"),
    (ptx.shl, U32, "shl.b32", "b32"), (ptx.shl, U64, "shl.b64", "b64"), (ptx.shr, U32, "shr.u32", "b32"),
    (ptx.shr, S32, "shr.s32", "b32"), (ptx.mov, B16, "mov.b16", "b16"), (ptx.mov, U32, "mov.u32", "b32"),
    (ptx.prmt, B32, "prmt.b32", "b32"), (ptx.rcp, F32, "rcp.rn.f32", "f32"), (ptx.ex2, F32, "ex2.approx.f32", "f32"),
])
def test_binary_ops_are_spelled_from_the_type(helper, ty, opcode, cls):
    b = Builder("k", [])
    d = helper(b, ty, Sym("%tid.x"), 3)
    assert (last(b).op, d.cls, last(b).ndefs) == (opcode, cls, 1)
    assert last(b).operands[-1] == Imm("3")          # ints become immediates


def test_three_source_and_wide_ops():
    b = Builder("k", [])
    assert ptx.mad(b, S32, Imm("1"), Imm("2"), Imm("3")).cls == "b32" and last(b).op == "mad.lo.s32"
    assert ptx.fma(b, F32, Imm("1"), Imm("2"), Imm("3")).cls == "f32" and last(b).op == "fma.rn.f32"
    assert ptx.mul_wide(b, U32, Imm("1"), Imm("2")).cls == "b64" and last(b).op == "mul.wide.u32"
    assert ptx.mad_wide(b, U32, Imm("1"), Imm("2"), Imm("3")).cls == "b64" and last(b).op == "mad.wide.u32"
    assert ptx.bfe(b, S32, Imm("1"), 8, 8).cls == "b32" and last(b).op == "bfe.s32"
    assert ptx.selp(b, B32, 1, 0, b.reg("pred")).cls == "b32" and last(b).op == "selp.b32"


def test_setp_and_cvt():
    b = Builder("k", [])
    assert ptx.setp(b, "lt", U32, Imm("1"), Imm("2")).cls == "pred" and last(b).op == "setp.lt.u32"
    assert ptx.cvt(b, U64, U32, Imm("1")).cls == "b64" and last(b).op == "cvt.u64.u32"
    assert ptx.cvt(b, F32, S32, Imm("1"), rounding="rn").cls == "f32" and last(b).op == "cvt.rn.f32.s32"
    assert ptx.cvt(b, S8, F32, Imm("1"), rounding="rni.sat").cls == "b32"   # 8-bit values live in 32 bits
    assert last(b).op == "cvt.rni.sat.s8.f32"
    assert ptx.cvt(b, BF16, F32, Imm("1"), rounding="rn").cls == "b16" and last(b).op == "cvt.rn.bf16.f32"
    r = b.reg("b32")
    assert ptx.cvt(b, TF32, F32, r, rounding="rna", into=r) is r and last(b).op == "cvt.rna.tf32.f32"


def test_into_writes_an_existing_register():
    b = Builder("k", [])
    counter = b.reg("b32")
    assert ptx.add(b, U32, counter, 1, into=counter) is counter
    assert last(b).operands == (counter, counter, Imm("1")) and last(b).defs() == (counter,)


def test_memory_atomics_and_branches():
    b = Builder("k", [])
    v = ptx.load(b, "global", F32, Addr(Sym("p")), width=2)
    assert isinstance(v, Vec) and len(v.regs) == 2 and last(b).op == "ld.global.v2.f32"
    ptx.load(b, "param", U64, Addr(Sym("p")))
    assert last(b).op == "ld.param.u64"
    ptx.store(b, "global", U32, Addr(Sym("p")), 1, sem="release.gpu")
    assert (last(b).op, last(b).ndefs) == ("st.release.gpu.global.u32", 0)
    ptx.store(b, "shared", B32, Addr(Sym("p")), v, width=4)
    assert last(b).op == "st.shared.v4.b32"
    assert ptx.atom(b, "add", U32, Addr(Sym("c")), 1, sem="acq_rel.gpu").cls == "b32"
    assert last(b).op == "atom.acq_rel.gpu.global.add.u32"
    ptx.red(b, "add", F32, Addr(Sym("c")), Imm("0f3F800000"), sem="relaxed.gpu")
    assert (last(b).op, last(b).ndefs) == ("red.relaxed.gpu.global.add.f32", 0)
    ptx.bra(b, "$L_loop", guard=b.reg("pred"))
    assert last(b).op == "bra.uni" and last(b).operands == (Sym("$L_loop"),)


@pytest.mark.parametrize("name, ty", [("u32", U32), ("s64", S64), ("f16", F16), ("bf16", BF16), ("pred", PRED),
                                      ("u8", U8), ("b32", B32)])
def test_type_names_round_trip(name, ty):
    assert PtxType.named(name) == ty and str(ty) == name


def test_refusals_name_the_problem():
    b = Builder("k", [])
    with pytest.raises(ValueError, match="integer instruction"):
        ptx.div(b, F32, Imm("1"), Imm("2"))
    with pytest.raises(ValueError, match="setp comparison"):
        ptx.setp(b, "less", U32, Imm("1"), Imm("2"))
    with pytest.raises(ValueError, match="1, 2 or 4"):
        ptx.load(b, "shared", F32, Addr(Sym("p")), width=3)
    with pytest.raises(ValueError, match="no spelling"):
        ptx.emit(b, "popc", U32, Imm("1"))
    with pytest.raises(ValueError, match="not a PTX type name"):
        PtxType.named("int32")


def test_split_moves_a_word_into_narrower_registers():
    b = Builder("k", [])
    lo, hi = b.reg("b16"), b.reg("b16")
    ptx.split(b, B32, Imm("7"), Vec((lo, hi)))
    assert (last(b).op, last(b).defs()) == ("mov.b32", (lo, hi))
