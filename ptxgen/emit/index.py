"""Per-thread index expressions: written once, evaluated in numpy and emitted as PTX.

Address math in a GEMM kernel is a small expression of the thread index (row/column of a copy
chunk, of an ldmatrix row, XOR swizzles). Writing each as an `Expr` lets the lowering
1. evaluate it for every thread of the CTA with numpy, to decide which address sites differ
   from an existing base register by a per-thread-constant immediate (then they share it),
2. emit exactly the same expression as u32 PTX for the sites that need a register of their own.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from ..ir import Builder
from ..ir import Imm, VReg
from ..ir import ops as ptx
from ..ir.ops import U32


class Expr:
    """An integer expression of the thread index; operators build the tree."""

    def _bin(self, op: str, other: "Expr | int") -> "Expr":
        return Bin(op, self, other if isinstance(other, Expr) else Const(int(other)))

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return Const(int(o))._bin("add", self)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return Const(int(o))._bin("mul", self)
    def __rshift__(self, o): return self._bin("shr", o)
    def __lshift__(self, o): return self._bin("shl", o)
    def __and__(self, o): return self._bin("and", o)
    def __xor__(self, o): return self._bin("xor", o)
    def __floordiv__(self, o): return self._bin("div", o)
    def __mod__(self, o): return self._bin("rem", o)


@dataclass(frozen=True, eq=True)
class Tid(Expr):
    """%tid.x: the thread's index in a 1-D CTA."""


@dataclass(frozen=True, eq=True)
class Const(Expr):
    value: int


@dataclass(frozen=True, eq=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr


_NUMPY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "mul": np.multiply, "shr": np.right_shift, "shl": np.left_shift,
    "and": np.bitwise_and, "xor": np.bitwise_xor, "div": np.floor_divide, "rem": np.remainder,
}
#: The `ops.SPELLING` operation of each expression operation (all on .u32 values).
_OPS = {"add": "add", "mul": "mul", "shr": "shr", "shl": "shl", "and": "and", "xor": "xor", "div": "div",
        "rem": "rem"}
_COMMUTATIVE = {"add", "mul", "and", "xor"}


def evaluate(e: Expr, tid: np.ndarray) -> np.ndarray:
    """The expression's value for each thread index in `tid` (int64)."""
    if isinstance(e, Tid):
        return tid.astype(np.int64)
    if isinstance(e, Const):
        return np.full(tid.shape, e.value, dtype=np.int64)
    assert isinstance(e, Bin)
    return _NUMPY[e.op](evaluate(e.a, tid), evaluate(e.b, tid))


def _fold(e: Expr) -> Expr:
    """Constant-fold and strength-reduce so the emitted PTX has no needless instructions."""
    if not isinstance(e, Bin):
        return e
    a, b = _fold(e.a), _fold(e.b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(int(_NUMPY[e.op](np.int64(a.value), np.int64(b.value))))
    if isinstance(a, Const) and e.op in _COMMUTATIVE:
        a, b = b, a
    if isinstance(b, Const):
        v = b.value
        if (e.op in ("add", "shr", "shl", "xor") and v == 0) or (e.op in ("mul", "div") and v == 1):
            return a
        if (e.op == "mul" and v == 0) or (e.op == "and" and v == 0) or (e.op == "rem" and v == 1):
            return Const(0)  # x & 0 (a swizzle over one chunk) and x % 1: no instruction at all
        if v > 0 and v & (v - 1) == 0 and e.op in ("mul", "div", "rem"):
            sh = v.bit_length() - 1
            return Bin({"mul": "shl", "div": "shr", "rem": "and"}[e.op], a, Const(sh if e.op != "rem" else v - 1))
    return Bin(e.op, a, b)


class ExprEmitter:
    """Emits expressions as u32 PTX, sharing common subexpressions within one builder."""

    def __init__(self, b: Builder, tid: VReg):
        self.b = b
        self.memo: dict[Expr, VReg] = {Tid(): tid}

    @contextmanager
    def scoped(self) -> Iterator[None]:
        """For code that only some paths execute: registers it emits are not reused after it
        (they would hold nothing on the paths that skipped it)."""
        saved = dict(self.memo)
        try:
            yield
        finally:
            self.memo.clear()
            self.memo.update(saved)

    def emit(self, e: Expr) -> VReg | Imm:
        e = _fold(e)
        if isinstance(e, Const):
            return Imm(str(e.value))
        if e in self.memo:
            return self.memo[e]
        assert isinstance(e, Bin)
        a, c = self.emit(e.a), self.emit(e.b)
        if isinstance(a, Imm):  # non-commutative op with a constant left operand
            a = ptx.mov(self.b, U32, a)
        d = ptx.emit(self.b, _OPS[e.op], U32, a, c)
        self.memo[e] = d
        return d

    def reg(self, e: Expr) -> VReg:
        v = self.emit(e)
        if isinstance(v, Imm):
            return ptx.mov(self.b, U32, v)
        return v


@dataclass
class SiteBases:
    """Address sites grouped onto as few base expressions as possible.

    `site[i] = (base index, immediate)` such that for every thread
    `evaluate(sites[i]) == evaluate(bases[base]) + immediate`.
    """

    bases: list[Expr]
    site: list[tuple[int, int]]


def share_bases(sites: list[Expr], threads: int) -> SiteBases:
    tid = np.arange(threads)
    bases: list[Expr] = []
    values: list[np.ndarray] = []
    out: list[tuple[int, int]] = []
    for e in sites:
        v = evaluate(e, tid)
        for i, bv in enumerate(values):
            d = v - bv
            if np.all(d == d[0]):
                out.append((i, int(d[0])))
                break
        else:
            bases.append(e)
            values.append(v)
            out.append((len(bases) - 1, 0))
    return SiteBases(bases, out)

