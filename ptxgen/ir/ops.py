"""Typed instruction helpers: the type suffix of an instruction comes from a `PtxType` value, and
how each operation spells its opcode for a type lives in one table (`SPELLING`), not in strings
typed at every use (the way tinygrad's PTX renderer keys its instruction table by op and dtype).

The IR's registers are untyped bits (b32, b64, pred, ...): a value's type is the one its
instruction says, so each helper takes the type first, as PTX writes it (`add.u32 d, a, b` is
`ops.add(b, U32, a, c)`). A helper writes a fresh register of the result's class and returns it,
or writes `into=` an existing one (a loop-carried counter, a register defined on two paths).
Integers given as sources become immediates, as in `Builder.emit`.

Spellings follow the PTX ISA's instruction sections ("Integer Arithmetic Instructions",
"Floating-Point Instructions", "Comparison and Selection Instructions", "Logic and Shift
Instructions", "Data Movement and Conversion Instructions").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from .builder import Builder
from .nodes import Addr, Operand, Sym, Vec, VReg

Src = Union[Operand, int]


@dataclass(frozen=True)
class PtxType:
    """A PTX fundamental type: kind "u", "s", "f", "b" (untyped bits) or "pred", and its width."""

    kind: str
    bits: int

    def __str__(self) -> str:
        return "pred" if self.kind == "pred" else f"{self.kind}{self.bits}"

    @classmethod
    def named(cls, name: str) -> "PtxType":
        """The type PTX spells `name` ("u32", "f16", "bf16", "pred")."""
        if name == "pred":
            return PRED
        kind = name.rstrip("0123456789")
        if kind not in ("u", "s", "f", "b", "bf", "tf") or not name[len(kind):].isdigit():
            raise ValueError(f"{name!r} is not a PTX type name (u32, s64, f16, bf16, b32, pred, ...)")
        return cls(kind, int(name[len(kind):]))

    @property
    def is_float(self) -> bool:
        return self.kind in ("f", "bf", "tf")

    @property
    def is_int(self) -> bool:
        return self.kind in ("u", "s")

    @property
    def reg_class(self) -> str:
        """The IR register class that holds a value of this type (8-bit values live in 32 bits)."""
        if self.kind == "pred":
            return "pred"
        if self.kind == "f" and self.bits == 32:
            return "f32"
        return {8: "b32", 16: "b16", 32: "b32", 64: "b64"}[self.bits]

    @property
    def untyped(self) -> "PtxType":
        """The bit type of the same width (`b32` for u32/s32/f32): logic ops and shl take it."""
        return self if self.kind == "pred" else PtxType("b", self.bits)


PRED = PtxType("pred", 1)
B8, B16, B32, B64 = PtxType("b", 8), PtxType("b", 16), PtxType("b", 32), PtxType("b", 64)
U8, S8, U16, U32, S32, U64, S64 = (PtxType("u", 8), PtxType("s", 8), PtxType("u", 16), PtxType("u", 32),
                                   PtxType("s", 32), PtxType("u", 64), PtxType("s", 64))
F16, F32, BF16, TF32 = PtxType("f", 16), PtxType("f", 32), PtxType("bf", 16), PtxType("tf", 32)
#: setp comparisons (signed/unsigned/float alike; lo/ls/hi/hs are the unsigned spellings).
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")


def _integer(op: str, spell: Callable[[PtxType], str]) -> Callable[[PtxType], str]:
    def check(t: PtxType) -> str:
        if not t.is_int:
            raise ValueError(f"{op} is an integer instruction; {t} is not u/s: give an integer type "
                             f"(float division and remainder need a rounding mode)")
        return spell(t)
    return check


#: op -> opcode spelled for a type: the one place type suffixes are written.
SPELLING: dict[str, Callable[[PtxType], str]] = {
    "add": lambda t: f"add.{t}",
    "sub": lambda t: f"sub.{t}",
    "mul": lambda t: f"mul.{t}" if t.is_float else f"mul.lo.{t}",
    "mul.wide": _integer("mul.wide", lambda t: f"mul.wide.{t}"),
    "mad": _integer("mad", lambda t: f"mad.lo.{t}"),
    "mad.wide": _integer("mad.wide", lambda t: f"mad.wide.{t}"),
    "fma": lambda t: f"fma.rn.{t}",
    "div": _integer("div", lambda t: f"div.{t}"),
    "rem": _integer("rem", lambda t: f"rem.{t}"),
    "min": lambda t: f"min.{t}",
    "max": lambda t: f"max.{t}",
    "neg": lambda t: f"neg.{t}",
    "rcp": lambda t: f"rcp.rn.{t}",
    "rcp.approx": lambda t: f"rcp.approx.ftz.{t}",   # 1 ulp, no subroutine (the wgmma epilogue's)
    "and": lambda t: f"and.{t.untyped}",
    "or": lambda t: f"or.{t.untyped}",
    "xor": lambda t: f"xor.{t.untyped}",
    "not": lambda t: f"not.{t.untyped}",
    "shl": lambda t: f"shl.{t.untyped}",
    "shr": lambda t: f"shr.{t}",      # u and b: logical, s: arithmetic
    "mov": lambda t: f"mov.{t}",
    "selp": lambda t: f"selp.{t}",
    "prmt": lambda t: f"prmt.{t.untyped}",
    "bfe": _integer("bfe", lambda t: f"bfe.{t}"),   # the extension follows the type's sign
    "ex2": lambda t: f"ex2.approx.{t}",
    "cvta.to.global": lambda t: f"cvta.to.global.{t}",
    "cvta.param": lambda t: f"cvta.param.{t}",   # a kernel parameter's generic address (by-value CUtensorMap)
}


def opcode(op: str, ty: PtxType) -> str:
    """The opcode of `op` on values of type `ty`."""
    if op not in SPELLING:
        raise ValueError(f"no spelling for {op!r}: add it to ops.SPELLING (known: {sorted(SPELLING)})")
    return SPELLING[op](ty)


def _result(b: Builder, cls: str, into: VReg | None) -> VReg:
    return b.reg(cls) if into is None else into


def emit(b: Builder, op: str, ty: PtxType, *srcs: Src, into: VReg | None = None,
         result: PtxType | None = None, comment: str | None = None, guard: VReg | None = None) -> VReg:
    """`op` on `ty`, written into `into` or a fresh register of `result`'s class (default `ty`'s)."""
    d = _result(b, (result or ty).reg_class, into)
    b.emit(opcode(op, ty), d, *srcs, ndefs=1, comment=comment, guard=guard)
    return d


def _op(name: str) -> Callable[..., VReg]:
    def helper(b: Builder, ty: PtxType, *srcs: Src, into: VReg | None = None, comment: str | None = None,
               guard: VReg | None = None) -> VReg:
        return emit(b, name, ty, *srcs, into=into, comment=comment, guard=guard)
    helper.__name__ = name.replace(".", "_")
    helper.__doc__ = f"`{name}` on values of the given type (ops.SPELLING)."
    return helper


add, sub, mul, mad, fma, div, rem = (_op(n) for n in ("add", "sub", "mul", "mad", "fma", "div", "rem"))
min_, max_, neg, rcp, ex2, mov, prmt, bfe = (_op(n) for n in ("min", "max", "neg", "rcp", "ex2", "mov", "prmt", "bfe"))
rcp_approx = _op("rcp.approx")
#: A generic address made a global one (cvta.to.global).
to_global = _op("cvta.to.global")
#: A kernel parameter's generic address (cvta.param: a by-value CUtensorMap's, for TMA).
to_param = _op("cvta.param")
and_, or_, xor, not_, shl, shr = (_op(n) for n in ("and", "or", "xor", "not", "shl", "shr"))


def _wide(name: str) -> Callable[..., VReg]:
    def helper(b: Builder, ty: PtxType, *srcs: Src, into: VReg | None = None,
               comment: str | None = None) -> VReg:
        return emit(b, name, ty, *srcs, into=into, result=PtxType(ty.kind, 2 * ty.bits), comment=comment)
    helper.__name__ = name.replace(".", "_")
    helper.__doc__ = f"`{name}`: a double-width result of two `ty` values."
    return helper


mul_wide, mad_wide = _wide("mul.wide"), _wide("mad.wide")


def split(b: Builder, ty: PtxType, value: Src, parts: Vec) -> None:
    """`mov.ty {p0, p1, ...}, value`: a `ty` word split into the narrower registers of `parts`,
    lowest bits first."""
    b.emit(opcode("mov", ty), parts, value, ndefs=1)


def setp(b: Builder, cmp: str, ty: PtxType, a: Src, c: Src, *, into: VReg | None = None,
         comment: str | None = None) -> VReg:
    """`setp.cmp.ty`: a predicate."""
    if cmp not in COMPARISONS:
        raise ValueError(f"setp comparison {cmp!r} is not one of {COMPARISONS}")
    d = _result(b, "pred", into)
    b.emit(f"setp.{cmp}.{ty}", d, a, c, ndefs=1, comment=comment)
    return d


def selp(b: Builder, ty: PtxType, a: Src, c: Src, p: VReg, *, into: VReg | None = None,
         comment: str | None = None) -> VReg:
    """`selp.ty d, a, c, p`: a where p, else c."""
    return emit(b, "selp", ty, a, c, p, into=into, comment=comment)


def cvt(b: Builder, dst: PtxType, src: PtxType, a: Src, *, rounding: str | None = None,
        into: VReg | None = None, comment: str | None = None) -> VReg:
    """`cvt[.rounding].dst.src`: the result in a register of `dst`'s class."""
    d = _result(b, dst.reg_class, into)
    b.emit(f"cvt{'.' + rounding if rounding else ''}.{dst}.{src}", d, a, ndefs=1, comment=comment)
    return d


# -- memory --------------------------------------------------------------------------------------
def memory_opcode(kind: str, space: str, ty: PtxType, width: int = 1, sem: str = "") -> str:
    """`ld`/`st` of `width` (1, 2, 4) values of `ty` in state space `space` ("global", "shared",
    "param"), with an optional memory-order qualifier (`sem`: "release.gpu", "relaxed.gpu", ...)."""
    if kind not in ("ld", "st") or width not in (1, 2, 4):
        raise ValueError(f"memory op {kind!r} x{width}: use 'ld' or 'st' of 1, 2 or 4 values")
    vec = "" if width == 1 else f".v{width}"
    return f"{kind}{'.' + sem if sem else ''}.{space}{vec}.{ty}"


def load(b: Builder, space: str, ty: PtxType, addr: Addr, *, into: VReg | Vec | None = None, width: int = 1,
         sem: str = "", comment: str | None = None, guard: VReg | None = None) -> VReg | Vec:
    """`ld.space[.vN].ty` into `into` (a register or a Vec) or a fresh register (width 1) / Vec."""
    if into is None:
        regs = b.regs(ty.reg_class, width)
        into = regs[0] if width == 1 else Vec(regs)
    b.emit(memory_opcode("ld", space, ty, width, sem), into, addr, ndefs=1, comment=comment, guard=guard)
    return into


def store(b: Builder, space: str, ty: PtxType, addr: Addr, value: Src | Vec, *, width: int = 1, sem: str = "",
          comment: str | None = None, guard: VReg | None = None) -> None:
    """`st.space[.vN].ty [addr], value`."""
    b.emit(memory_opcode("st", space, ty, width, sem), addr, value, comment=comment, guard=guard)


def atom(b: Builder, op: str, ty: PtxType, addr: Addr, value: Src, *, sem: str = "", space: str = "global",
         comment: str | None = None, guard: VReg | None = None) -> VReg:
    """`atom[.sem].space.op.ty d, [addr], value`: the old value, in a fresh register."""
    d = b.reg(ty.reg_class)
    b.emit(f"atom{'.' + sem if sem else ''}.{space}.{op}.{ty}", d, addr, value, ndefs=1, comment=comment,
           guard=guard)
    return d


def red(b: Builder, op: str, ty: PtxType, addr: Addr, value: Src, *, sem: str = "", space: str = "global",
        comment: str | None = None, guard: VReg | None = None) -> None:
    """`red[.sem].space.op.ty [addr], value`: an atomic update whose old value nobody reads."""
    b.emit(f"red{'.' + sem if sem else ''}.{space}.{op}.{ty}", addr, value, comment=comment, guard=guard)


# -- control -------------------------------------------------------------------------------------
def bra(b: Builder, label: str, *, uniform: bool = True, guard: VReg | None = None, negate: bool = False,
        comment: str | None = None) -> None:
    """A branch to `label`; `uniform` (bra.uni) where every thread that runs it takes the same way."""
    b.emit("bra.uni" if uniform else "bra", Sym(label), guard=guard, negate=negate, comment=comment)
