"""Compile one parsed .entry into a Program: register slots plus one executor closure per instruction.

Everything that can be decided from the text alone (operand kinds, register widths, types, label
targets, symbol addresses, whether an instruction is supported at all) is decided here, once, so
that running an instruction is a single Python call into numpy code.

Executors may carry attributes the scheduler reads: `yields` (a CTA may switch after it),
`communicates` (it synchronises with other CTAs) and `releases` (it is a release).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import Fault, HazardError
from .operands import Lit, Mem, Name, NotPred, Vec
from .parse import Entry, Label, Module, ParamDecl
from .memory import CLUSTER_STRIDE
from .ptxtypes import STORAGE_DTYPE, TYPE_BITS, VIEW_DTYPE, immediate_array

Getter = Callable[[list], np.ndarray]
Executor = Callable[..., "int | None"]

SPECIAL_REGISTERS = tuple(
    f"%{base}.{axis}" for base in ("tid", "ntid", "ctaid", "nctaid") for axis in "xyz"
) + ("%laneid", "%warpid", "%nwarpid") + tuple(
    f"%{base}.{axis}" for base in ("cluster_ctaid", "cluster_nctaid", "clusterid", "nclusterid")
    for axis in "xyz") + ("%cluster_ctarank", "%cluster_nctarank")
SPECIAL_PREDICATES = ("%is_explicit_cluster",)

#: max shared bytes per block on sm_90 (docs/ptx_facts/module.md §10); larger launches fail
SMEM_LIMIT = 232448


@dataclass
class Program:
    entry: Entry
    lines: list[str]
    ops: list[tuple[Executor, int, bool]]   # (executor, guard slot or -1, guard negated)
    op_lines: list[int]
    slot_bits: list[int]
    special_slots: dict[str, int]
    params: list[ParamDecl]
    param_offsets: list[int]
    param_size: int
    shared_static: int        # bytes of static shared variables (incl. alignment padding)
    dynamic_offset: int | None  # where the extern array starts, if declared
    symbols: dict[str, int]
    yields: list[bool]          # a CTA may give way to another after this op (scheduler.py)
    communicates: bool          # some op synchronises with other CTAs: interleave them
    releases: bool              # some op releases: keep write logs (sync.py)


def mark(fn: Executor, yields: bool = False, communicates: bool = False,
         releases: bool = False) -> Executor:
    """Attach the scheduler's attributes to a freshly made executor closure (never a shared one)."""
    fn.yields, fn.communicates, fn.releases = yields, communicates, releases
    return fn


class CompileContext:
    """What an op compiler may ask about the entry while compiling one instruction."""

    def __init__(self, regs: dict[str, tuple[int, int]], symbols: dict[str, int],
                 params: dict[str, tuple[int, ParamDecl]], labels: dict[str, int]):
        self.regs, self.symbols, self.params, self.labels = regs, symbols, params, labels
        self.line = 0
        self.index = 0                       # the op's position in Program.ops (a branch target)
        # whole-program passes an op compiler registers (by key, once): fn(instrs, ops) -> ops
        self.passes: dict[str, Callable] = {}
        self.version, self.target = "", ""   # the module's .version and .target (feature floors)
        self.perf: dict[str, tuple[int, ...]] = {}   # the entry's performance directives (.maxnreg, ...)

    @staticmethod
    def fail(detail: str) -> Fault:
        return Fault("unsupported", detail)

    # -- registers
    def reg(self, op, what: str = "operand") -> tuple[int, int]:
        """(slot, bits) of a register operand."""
        if not isinstance(op, Name) or op.name not in self.regs:
            name = op.name if isinstance(op, Name) else op
            raise self.fail(f"{what} {name!r} is not a declared register")
        return self.regs[op.name]

    def dst(self, op, typ: str, relaxed: bool = False) -> tuple[int, int]:
        """Destination register of type `typ`; with relaxed (ld/cvt) it may be wider than the type."""
        slot, bits = self.reg(op, "destination")
        self._check_width(op, bits, typ, relaxed)
        return slot, bits

    def _check_width(self, op, bits: int, typ: str, relaxed: bool) -> None:
        want = TYPE_BITS[typ]
        if bits == want or (relaxed and bits > want and want != 1 and bits != 1):
            return
        raise self.fail(f"register {op.name} is {bits}-bit but the instruction type .{typ} is {want}-bit")

    def src(self, op, typ: str, relaxed: bool = False) -> Getter:
        """Getter returning the operand viewed as `typ` (registers wider than typ are truncated if relaxed)."""
        view = VIEW_DTYPE[typ]
        if isinstance(op, Lit):
            value = immediate_array(op.kind, op.value, typ)
            return lambda R: value
        if isinstance(op, Name) and op.name in self.regs:
            slot, bits = self.regs[op.name]
            self._check_width(op, bits, typ, relaxed)
            if bits == TYPE_BITS[typ]:
                if view == STORAGE_DTYPE[bits]:
                    return lambda R: R[slot]
                return lambda R: R[slot].view(view)
            narrow = STORAGE_DTYPE[TYPE_BITS[typ]]
            return lambda R: R[slot].astype(narrow).view(view)
        if isinstance(op, Name) and op.name in self.symbols:
            if TYPE_BITS[typ] not in (32, 64) or typ.startswith("f"):
                raise self.fail(f"symbol {op.name} used as a .{typ} value")
            return self.shared_symbol(op.name, typ, 0)
        if isinstance(op, NotPred) and typ == "pred":
            inner = self.src(op.name, "pred")
            return lambda R: ~inner(R)
        name = op.name if isinstance(op, Name) else op
        raise self.fail(f"operand {name!r} is not a register, immediate or shared symbol")

    def shared_symbol(self, name: str, typ: str, offset: int) -> Getter:
        """Getter of a shared symbol's .shared::cta address (+ offset) as `typ`: its offset in the
        window plus the executing CTA's window base, cluster rank * CLUSTER_STRIDE (cluster.py doc)."""
        value = immediate_array("int", self.symbols[name] + offset, typ)
        rank_slot = self.regs["%cluster_ctarank"][0]

        def get(R):
            rank = R[rank_slot][:1]
            return value if not rank[0] else value + (rank.astype(np.int64) * CLUSTER_STRIDE).astype(value.dtype)
        return get

    def vec(self, op, n_items: int | None, what: str) -> tuple:
        if not isinstance(op, Vec):
            raise self.fail(f"{what} must be a vector operand {{...}}")
        if n_items is not None and len(op.items) != n_items:
            raise self.fail(f"{what} needs {n_items} registers, got {len(op.items)}")
        return op.items

    def label(self, op) -> int:
        if not isinstance(op, Name) or op.name not in self.labels:
            raise self.fail(f"branch target {op!r} is not a label of this entry")
        return self.labels[op.name]

    def mem(self, op) -> Mem:
        if not isinstance(op, Mem):
            raise self.fail("expected an address operand [...]")
        return op


def _layout_shared(decls, extern_seen: list, symbols: dict[str, int], offset: int) -> int:
    for d in decls:
        if d.count is None:
            extern_seen.append(d)
            continue
        if d.name in symbols:
            raise Fault("unsupported", f"shared symbol {d.name} declared twice")
        offset = (offset + d.align - 1) // d.align * d.align
        symbols[d.name] = offset
        offset += d.elem_bytes * d.count
    return offset


def build_program(module: Module, entry_name: str, registry: dict[str, Callable]) -> Program:
    if entry_name not in module.entries:
        raise ValueError(f"entry {entry_name!r} not found; the PTX defines {sorted(module.entries)}")
    entry = module.entries[entry_name]
    lines = module.lines

    def hazard(line: int, fault: Fault) -> HazardError:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return HazardError(fault.kind, line, fault.detail, text)

    # shared layout: statics first (module scope, then function scope), then the extern array
    symbols: dict[str, int] = {}
    externs: list = []
    try:
        end = _layout_shared(module.shared + entry.shared, externs, symbols, 0)
    except Fault as f:
        raise hazard(entry.line, f) from None
    dynamic_offset = None
    if externs:
        align = max(d.align for d in externs)
        dynamic_offset = (end + align - 1) // align * align
        for d in externs:
            symbols[d.name] = dynamic_offset

    # registers
    regs: dict[str, tuple[int, int]] = {}
    slot_bits: list[int] = []
    special_slots: dict[str, int] = {}
    for name in SPECIAL_REGISTERS + SPECIAL_PREDICATES:
        bits = 1 if name in SPECIAL_PREDICATES else 32
        special_slots[name] = len(slot_bits)
        regs[name] = (len(slot_bits), bits)
        slot_bits.append(bits)
    for decl in entry.regs:
        bits = 128 if decl.type == "b128" else TYPE_BITS[decl.type]
        if decl.name in regs:
            if regs[decl.name][1] != bits:
                raise hazard(decl.line, Fault("unsupported", f"register {decl.name} redeclared with another width"))
            continue
        regs[decl.name] = (len(slot_bits), bits)
        slot_bits.extend([64, 64] if bits == 128 else [bits])     # .b128: low half, then high half

    # params
    params: dict[str, tuple[int, ParamDecl]] = {}
    offsets, offset = [], 0
    for p in entry.params:
        offset = (offset + p.align - 1) // p.align * p.align
        params[p.name] = (offset, p)
        offsets.append(offset)
        offset += p.size

    # labels -> instruction index
    labels: dict[str, int] = {}
    index = 0
    for item in entry.body:
        if isinstance(item, Label):
            if item.name in labels:
                raise hazard(item.line, Fault("unsupported", f"label {item.name} defined twice"))
            labels[item.name] = index
        else:
            index += 1

    ctx = CompileContext(regs, symbols, params, labels)
    ctx.version, ctx.target = module.version, module.target
    ctx.branchtargets = entry.branchtargets       # brx.idx target lists (ops_brx.py)
    ctx.perf = entry.perf
    ops: list[tuple[Executor, int, bool]] = []
    op_lines: list[int] = []
    instrs = []
    for item in entry.body:
        if isinstance(item, Label):
            continue
        instrs.append(item)
        ctx.line, ctx.index = item.line, len(ops)
        try:
            compile_fn = registry.get(item.opcode)
            if compile_fn is None:
                raise Fault("unsupported", f"instruction '{item.opcode}' is not supported by the simulator")
            executor = compile_fn(item, ctx)
            guard = -1
            if item.guard is not None:
                gslot, gbits = ctx.reg(Name(item.guard), "guard predicate")
                if gbits != 1:
                    raise Fault("unsupported", f"guard {item.guard} is not a .pred register")
                guard = gslot
        except Fault as f:
            raise hazard(item.line, f) from None
        ops.append((executor, guard, item.guard_negated))
        op_lines.append(item.line)
    for run_pass in ctx.passes.values():
        ops = run_pass(instrs, ops)
    executors = [op[0] for op in ops]
    return Program(entry, lines, ops, op_lines, slot_bits, special_slots, list(entry.params),
                   offsets, offset, end, dynamic_offset, symbols,
                   yields=[bool(getattr(ex, "yields", False)) for ex in executors],
                   communicates=any(getattr(ex, "communicates", False) for ex in executors),
                   releases=any(getattr(ex, "releases", False) for ex in executors))

