"""Test helpers for ptxgen.regalloc: random structured programs, an abstract interpreter, a
naive reference liveness, and a GEMM-shaped program for timing.

Random programs are built from a `Chooser` so the same generator serves hypothesis (shrinkable
draws) and plain `random.Random` (subprocess determinism checks, benchmarks). Every vreg is
defined on all paths before it is read; guarded definitions only target already-defined vregs
(a false guard keeps the old value, which must therefore exist).

Abstract semantics (used by `run`):
  ctr.init d        -> d = 0
  ctr.inc  d, s     -> d = s + 1
  ctr.test d, s, K  -> d = 1 if s < K else 0
  bra / bra.uni L   -> jump if unguarded or guard holds
  exit              -> stop if unguarded or guard holds
  anything else     -> each destination j = hash((item index, j, values read))
A guard holds when (value & 1) != negated.
"""
from __future__ import annotations

import random
from typing import Callable, Protocol

from hypothesis import strategies as st

from ptxgen.ir import Builder
from ptxgen.ir import Addr, Comment, Imm, Instr, Item, Label, Param, Sym, Vec, VReg

CLASSES = ("pred", "b16", "b32", "b64", "f32")


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...


class RandomChooser:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DrawChooser:
    """Adapts hypothesis' `draw` so every choice shrinks toward `lo`."""

    def __init__(self, draw: Callable):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


class ProgramGen:
    """Builds one random structured program: straight code, do-while loops, skipped blocks."""

    def __init__(self, ch: Chooser, *, loops: bool = True, guards: bool = True, ssa: bool = False,
                 max_instrs: int = 120, segments: int = 3):
        self.ch = ch
        self.loops = loops
        self.guards = guards
        self.ssa = ssa  # no redefinitions, no guarded defs: intervals are then exact
        self.max_instrs = max_instrs
        self.segments = segments  # top-level block() calls, at most
        self.items: list[Item] = []
        self.next_id = 0
        self.next_label = 0
        self.reserved: set[VReg] = set()  # loop counters / loop predicates: never redefined at random

    def fresh(self, cls: str) -> VReg:
        self.next_id += 1
        return VReg(cls, self.next_id)

    def label(self) -> str:
        self.next_label += 1
        return f"$L{self.next_label}"

    def pick(self, seq: list[VReg]) -> VReg:
        return seq[self.ch.integer(0, len(seq) - 1)]

    def emit(self, ins: Instr) -> None:
        self.items.append(ins)

    def budget_left(self) -> bool:
        return sum(isinstance(i, Instr) for i in self.items) < self.max_instrs

    def program(self) -> list[Item]:
        defined: dict[VReg, None] = {}  # insertion-ordered set: deterministic choices
        for cls in CLASSES[: self.ch.integer(1, len(CLASSES))] + ("pred",):
            v = self.fresh(cls)
            self.emit(Instr("init", (v,), 1))
            defined[v] = None
        for _ in range(self.ch.integer(1, self.segments)):
            self.block(defined, depth=0)
        keep = list(defined)[-self.ch.integer(0, min(4, len(defined))):] if defined else []
        self.emit(Instr("st.sink", tuple(keep), 0))
        self.emit(Instr("exit"))
        return self.items

    def block(self, defined: dict[VReg, None], depth: int) -> None:
        for _ in range(self.ch.integer(1, 8)):
            if not self.budget_left():
                return
            kind = self.ch.integer(0, 9)
            if kind == 7 and self.loops and depth < 3:
                self.loop(defined, depth)
            elif kind == 8 and self.loops and depth < 3:
                self.skip(defined, depth)
            elif kind == 9 and self.guards:
                self.early_exit(defined)
            else:
                self.op(defined)

    def op(self, defined: dict[VReg, None]) -> None:
        pool = list(defined)
        uses: list = []
        for _ in range(self.ch.integer(0, 3)):
            v = self.pick(pool)
            shape = self.ch.integer(0, 5)
            uses.append(Addr(v, 8) if shape == 4 else Vec((v, self.pick(pool))) if shape == 5 else v)
        guard = None
        if self.guards and not self.ssa and self.ch.integer(0, 3) == 0:
            guard = self.pick([v for v in pool if v.cls == "pred"])
        writable = [v for v in pool if v not in self.reserved]
        defs: list[VReg] = []
        for _ in range(self.ch.integer(0 if uses else 1, 3)):
            if guard is not None or (writable and not self.ssa and self.ch.integer(0, 2) == 0):
                if writable:
                    defs.append(self.pick(writable))
            else:
                defs.append(self.fresh(CLASSES[self.ch.integer(0, len(CLASSES) - 1)]))
        defs = list(dict.fromkeys(defs))  # one instruction writes a register at most once
        if not defs and not uses:
            return
        dst: tuple = (Vec(tuple(defs)),) if len(defs) > 1 and self.ch.integer(0, 1) else tuple(defs)
        self.emit(Instr("op", dst + tuple(uses), len(dst), guard, bool(guard and self.ch.integer(0, 1))))
        for v in defs:
            defined[v] = None

    def loop(self, defined: dict[VReg, None], depth: int) -> None:
        ctr, pred = self.fresh("b32"), self.fresh("pred")
        self.reserved.update((ctr, pred))
        head = self.label()
        self.emit(Instr("ctr.init", (ctr,), 1))
        defined[ctr] = None
        self.items.append(Label(head))
        self.block(defined, depth + 1)  # body runs at least once: its defs reach the exit
        self.emit(Instr("ctr.inc", (ctr, ctr), 1))
        self.emit(Instr("ctr.test", (pred, ctr, Imm(str(self.ch.integer(1, 3)))), 1))
        self.emit(Instr("bra", (Sym(head),), 0, pred))
        defined[pred] = None

    def skip(self, defined: dict[VReg, None], depth: int) -> None:
        end = self.label()
        preds = [v for v in defined if v.cls == "pred"]
        if self.ch.integer(0, 4) == 0:
            self.emit(Instr("bra.uni", (Sym(end),)))  # the block becomes dead code
        else:
            self.emit(Instr("bra", (Sym(end),), 0, self.pick(preds), bool(self.ch.integer(0, 1))))
        self.items.append(Comment("maybe skipped"))
        self.block(dict(defined), depth + 1)  # its new defs are not guaranteed afterwards
        self.items.append(Label(end))

    def early_exit(self, defined: dict[VReg, None]) -> None:
        preds = [v for v in defined if v.cls == "pred"]
        self.emit(Instr("exit", (), 0, self.pick(preds), bool(self.ch.integer(0, 1))))


@st.composite
def programs(draw, **kwargs) -> list[Item]:
    return ProgramGen(DrawChooser(draw), **kwargs).program()


def random_program(seed: int, **kwargs) -> list[Item]:
    kwargs.setdefault("segments", 40)
    return ProgramGen(RandomChooser(seed), **kwargs).program()


# ----------------------------------------------------------------------------------------------
# Abstract execution


def run(items: list[Item], where: Callable[[VReg], object], max_steps: int = 200_000) -> list[tuple]:
    """Execute `items`, storing each vreg under `where(vreg)`; return every value read, in order."""
    labels = {it.name: i for i, it in enumerate(items) if isinstance(it, Label)}
    regs: dict[object, int] = {}
    trace: list[tuple] = []
    pc = steps = 0
    while pc < len(items):
        steps += 1
        assert steps < max_steps, "runaway execution"
        ins = items[pc]
        if not isinstance(ins, Instr):
            pc += 1
            continue
        vals = tuple(regs.get(where(v)) for v in ins.uses())
        trace.append((pc, vals))
        guard_ok = True
        if ins.guard is not None:
            g = regs.get(where(ins.guard))
            guard_ok = g is not None and bool(g & 1) != ins.guard_negated
        if ins.is_branch:
            pc = labels[ins.branch_target] if guard_ok else pc + 1
            continue
        if ins.op == "exit":
            if guard_ok:
                break
            pc += 1
            continue
        if guard_ok:
            defs = ins.defs()
            if ins.op == "ctr.init":
                out = [0]
            elif ins.op == "ctr.inc":
                out = [vals[0] + 1]
            elif ins.op == "ctr.test":
                out = [1 if vals[0] < int(ins.operands[2].text) else 0]
            else:
                out = [hash((pc, j, vals)) & 0xFFFFFFFF for j in range(len(defs))]
            for v, x in zip(defs, out):
                regs[where(v)] = x
        pc += 1
    return trace


# ----------------------------------------------------------------------------------------------
# Naive reference liveness: per-item successor sets and Python sets, no blocks, no bitsets.


def successors(items: list[Item]) -> list[list[int]]:
    labels = {it.name: i for i, it in enumerate(items) if isinstance(it, Label)}
    out: list[list[int]] = []
    for i, it in enumerate(items):
        nxt = [i + 1] if i + 1 < len(items) else []
        if isinstance(it, Instr) and it.is_branch:
            out.append([labels[it.branch_target]] + (nxt if it.guard is not None else []))
        elif isinstance(it, Instr) and it.is_return:
            out.append([])
        else:
            out.append(nxt)
    return out


def reference_liveness(items: list[Item]) -> tuple[list[set[VReg]], list[set[VReg]]]:
    succ = successors(items)
    n = len(items)
    live_in: list[set[VReg]] = [set() for _ in range(n)]
    live_out: list[set[VReg]] = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out = set().union(*(live_in[s] for s in succ[i]))
            it = items[i]
            if isinstance(it, Instr):
                d = set(it.defs())
                new_in = set(it.uses()) | (out | d if it.guard is not None else out - d)
            else:
                new_in = set(out)
            if new_in != live_in[i] or out != live_out[i]:
                live_in[i], live_out[i] = new_in, out
                changed = True
    return live_in, live_out


# ----------------------------------------------------------------------------------------------
# A GEMM-shaped kernel body for timing: prologue address math, a multistage main loop of
# cp.async / ldmatrix / mma with loop-carried f32 accumulators, an epilogue of cvt + stores.


def gemm_like(m_tiles: int = 4, n_tiles: int = 8, k_steps: int = 4, unroll: int = 12) -> list[Item]:
    b = Builder("gemm", [Param(".u64", "A"), Param(".u64", "B"), Param(".u64", "C"), Param(".u32", "K")])
    tid, k = b.reg("b32"), b.reg("b32")
    b.emit("mov.u32", tid, Sym("%tid.x"), ndefs=1)
    b.emit("ld.param.u32", k, Addr(Sym("K")), ndefs=1)
    bases = []
    for p in ("A", "B", "C"):
        r, g = b.reg("b64"), b.reg("b64")
        b.emit("ld.param.u64", r, Addr(Sym(p)), ndefs=1)
        b.emit("cvta.to.global.u64", g, r, ndefs=1)
        bases.append(g)
    smem_addrs = []
    for s in range(8):
        t, a = b.reg("b32"), b.reg("b32")
        b.emit("shl.b32", t, tid, 4, ndefs=1)
        b.emit("add.s32", a, t, s * 1024, ndefs=1)
        smem_addrs.append(a)
    acc = [b.reg("f32") for _ in range(m_tiles * n_tiles * 4)]
    for a in acc:
        b.emit("mov.f32", a, Imm("0f00000000"), ndefs=1)
    ctr, p = b.reg("b32"), b.reg("pred")
    b.emit("mov.u32", ctr, 0, ndefs=1)
    head = b.label("main_loop")
    b.place(head)
    for u in range(unroll):
        b.comment(f"stage {u}")
        for g in bases[:2]:
            for j in range(4):
                b.emit("cp.async.cg.shared.global", Addr(smem_addrs[j]), Addr(g, 16 * j), 16)
        b.emit("cp.async.commit_group")
        for kk in range(k_steps):
            addrs = []
            for i in range(m_tiles):
                off, addr = b.reg("b32"), b.reg("b32")
                b.emit("mad.lo.s32", off, tid, 64, kk * 32, ndefs=1)
                b.emit("add.s32", addr, smem_addrs[i % 8], off, ndefs=1)
                addrs.append(addr)
            afrag = [b.regs("b32", 4) for _ in range(m_tiles)]
            bfrag = [b.regs("b32", 2) for _ in range(n_tiles)]
            for i, fr in enumerate(afrag):
                b.emit("ldmatrix.sync.aligned.m8n8.x4.shared.b16", Vec(fr), Addr(addrs[i]), ndefs=1)
            for j in range(0, n_tiles, 2):
                b.emit("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", Vec(bfrag[j] + bfrag[j + 1]),
                       Addr(smem_addrs[(j + 4) % 8], kk * 32), ndefs=1)
            for i in range(m_tiles):
                for j in range(n_tiles):
                    c = tuple(acc[(i * n_tiles + j) * 4:(i * n_tiles + j) * 4 + 4])
                    b.emit("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", Vec(c), Vec(afrag[i]),
                           Vec(bfrag[j]), Vec(c), ndefs=1)
        for g in bases[:2]:
            b.emit("add.s64", g, g, 64, ndefs=1)
    b.emit("add.s32", ctr, ctr, 1, ndefs=1)
    b.emit("setp.lt.u32", p, ctr, k, ndefs=1)
    b.emit("bra", Sym(head), guard=p)
    b.banner("epilogue")
    for i, a in enumerate(acc):
        h, addr = b.reg("b16"), b.reg("b64")
        b.emit("cvt.rn.f16.f32", h, a, ndefs=1)
        b.emit("add.s64", addr, bases[2], 2 * i, ndefs=1)
        b.emit("st.global.b16", Addr(addr), h)
    b.emit("ret")
    return b.body
