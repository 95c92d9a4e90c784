"""PTX IR: an instruction list over typed virtual registers.

Lowering produces a flat list of `Item`s (instructions, labels, comments). Registers are
`VReg`s with no bound on their number; `ptxgen.regalloc` later maps each to a physical PTX
register of its class. Every instruction says which of its operands it defines, so liveness
needs no knowledge of individual opcodes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

#: Register classes and the PTX declaration type and physical-name prefix of each.
REG_CLASSES: dict[str, tuple[str, str]] = {
    "pred": (".pred", "%p"),
    "b16": (".b16", "%h"),
    "b32": (".b32", "%r"),
    "b64": (".b64", "%rd"),
    "f32": (".f32", "%f"),
    "b128": (".b128", "%rq"),   # sm_100a cluster launch control responses (PTX 8.6)
}


@dataclass(frozen=True, slots=True)
class VReg:
    """A virtual register of one class; identity is (cls, id)."""

    cls: str
    id: int

    def __str__(self) -> str:  # readable in debug dumps; renderer substitutes physical names
        return f"%v{self.cls}_{self.id}"


@dataclass(frozen=True, slots=True)
class Imm:
    """An immediate operand, already spelled as PTX (e.g. "16", "0f3F800000")."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Sym:
    """A named operand: a parameter, a shared-memory symbol, a label or a special register."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Addr:
    """A memory operand `[base+offset]`; base is a register or a symbol."""

    base: Union[VReg, Sym]
    offset: int = 0


@dataclass(frozen=True, slots=True)
class Vec:
    """A brace-enclosed register list `{r0, r1, ...}` (vector ld/st, ldmatrix, mma)."""

    regs: tuple[VReg, ...]


@dataclass(frozen=True, slots=True)
class TensorRef:
    """A TMA tensor operand `[tmap, {c0, c1, ...}]`: the tensor map's generic address and its
    .s32 coordinates, innermost first (docs/ptx_facts/tma.md)."""

    tmap: VReg
    coords: tuple[Union[VReg, Imm], ...]


@dataclass(frozen=True, slots=True)
class RegPair:
    """A two-destination operand `d|p` (elect.sync's lane id and predicate, setp's pair of
    predicates): each half a register, or None for PTX's sink `_`; at least one is a register."""

    first: VReg | None
    second: VReg | None

    def __post_init__(self) -> None:
        if self.first is None and self.second is None:
            raise ValueError("a d|p pair needs at least one register (both `_` discards every result)")


Operand = Union[VReg, Imm, Sym, Addr, Vec, TensorRef, RegPair]


def operand_regs(op: Operand) -> Iterator[VReg]:
    """The virtual registers an operand mentions."""
    if isinstance(op, VReg):
        yield op
    elif isinstance(op, Vec):
        yield from op.regs
    elif isinstance(op, RegPair):
        yield from (r for r in (op.first, op.second) if r is not None)
    elif isinstance(op, Addr) and isinstance(op.base, VReg):
        yield op.base
    elif isinstance(op, TensorRef):
        yield op.tmap
        yield from (c for c in op.coords if isinstance(c, VReg))


@dataclass(frozen=True, slots=True)
class Instr:
    """One PTX instruction.

    `op` is the full opcode with its modifiers ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32").
    The first `ndefs` operands are destinations (an `Addr` is never a destination: stores
    define nothing). `guard` is the `@p` / `@!p` predicate.
    """

    op: str
    operands: tuple[Operand, ...] = ()
    ndefs: int = 0
    guard: VReg | None = None
    guard_negated: bool = False
    comment: str | None = None

    def defs(self) -> tuple[VReg, ...]:
        out: list[VReg] = []
        for o in self.operands[: self.ndefs]:
            if isinstance(o, (VReg, Vec, RegPair)):
                out.extend(operand_regs(o))
        return tuple(out)

    def uses(self) -> tuple[VReg, ...]:
        """Registers read. A guarded instruction also reads its guard."""
        out: list[VReg] = []
        for o in self.operands[: self.ndefs]:
            if isinstance(o, Addr):  # defensive: addresses are always reads
                out.extend(operand_regs(o))
        for o in self.operands[self.ndefs :]:
            out.extend(operand_regs(o))
        if self.guard is not None:
            out.append(self.guard)
        return tuple(out)

    @property
    def is_branch(self) -> bool:
        return self.op.split(".")[0] == "bra"

    @property
    def is_return(self) -> bool:
        return self.op in ("ret", "exit") and self.guard is None

    @property
    def branch_target(self) -> str:
        assert self.is_branch and isinstance(self.operands[0], Sym)
        return self.operands[0].name


@dataclass(frozen=True, slots=True)
class Label:
    name: str


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment line; `banner=True` makes a section banner (prologue / main loop / epilogue)."""

    text: str
    banner: bool = False


Item = Union[Instr, Label, Comment]


@dataclass(frozen=True, slots=True)
class Param:
    ptx_type: str  # ".u64", ".u32"
    name: str


@dataclass
class Function:
    """A kernel entry: parameters, directives, shared declarations and the body items."""

    name: str
    params: list[Param]
    body: list[Item] = field(default_factory=list)
    directives: list[str] = field(default_factory=list)  # e.g. ".maxntid 128, 1, 1"
    #: (name, align, size or None for `.extern` dynamic shared memory)
    shared: list[tuple[str, int, int | None]] = field(default_factory=list)
    #: The lowest `.version` its instructions need, when above the target's (None: the target's).
    min_ptx_version: tuple[int, int] | None = None

    def instructions(self) -> Iterator[Instr]:
        return (it for it in self.body if isinstance(it, Instr))
