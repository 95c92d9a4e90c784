"""Traced executors: the program a traced launch runs is compiled with every executor wrapped in a
closure that records what the instruction did into `cta.trace` (trace.py) and then, for untraced
CTAs (`cta.trace is None`), just calls it. Untraced launches use the plain program (machine.py's
compile_entry) and pay nothing.

Each wrapper knows its instruction statically: its activity kind (`classify`), its PTX comments
(`source_markers`: the banners and stage comments before it) and, for the synchronising
instructions, getters of the operands it needs (barrier address, parity, copy coordinates) built
with the same CompileContext the executor was built with.
"""
from __future__ import annotations

import bisect
import functools
import re

import numpy as np

from .cluster import CLUSTER_STRIDE
from .errors import Fault
from .memory import SHARED_GENERIC_BASE
from .ops_mem import address_getter, per_thread
from .parse import parse_module
from .program import build_program

STAGE_WORDS = re.compile(r"\b(stages?|k-tiles?|tiles?|chunks?|splits?|phase)\b", re.I)
BANNER_RULE = re.compile(r"^\s*//\s*={8,}\s*$")


# -------------------------------------------------------------------- PTX comments
def source_markers(lines: list[str]) -> dict[int, list[tuple[str, bool]]]:
    """{line of a standalone comment: [(text, is_banner)]}: a banner is the title between two
    `// ====` rules; other standalone comments are kept when they name a stage, k-tile, tile or
    chunk (ptxgen's stage comments). Read from the raw lines, so the parser stays as it is."""
    out: dict[int, list[tuple[str, bool]]] = {}
    n = len(lines)
    i = 0
    while i < n:
        text = lines[i].strip()
        if BANNER_RULE.match(lines[i]):
            j = i + 1
            title = []
            while j < n and lines[j].strip().startswith("//") and not BANNER_RULE.match(lines[j]):
                title.append(lines[j].strip()[2:].strip())
                j += 1
            if title and j < n and BANNER_RULE.match(lines[j]):
                out[j + 1] = [(" ".join(title), True)]
                i = j + 1
                continue
        if text.startswith("//") and STAGE_WORDS.search(text):
            out[i + 1] = [(text[2:].strip(), False)]
        i += 1
    return out


def role_maker(title: str):
    """A banner naming warps ("Producer warpgroup 2: ...", "Consumer warpgroups 0..1: ...") gives
    the warps that enter it a role; None for banners of phases (Main loop, Epilogue)."""
    head = title.split(":")[0].strip()
    if not re.search(r"\bwarp", head, re.I):
        return None
    m = re.match(r"(.*?)\s*warpgroups\s+\d+\s*\.\.\s*\d+$", head, re.I)
    if m:
        base = m.group(1).lower()
        return lambda w: f"{base} warpgroup {w // 4}"
    name = head[0].lower() + head[1:]
    return lambda w: name


# -------------------------------------------------------------------- kinds
def classify(ins) -> tuple[str, str] | None:
    """(activity kind, span name) of an instruction, or None (arithmetic, control: no span)."""
    op, mods = ins.opcode, ins.mods
    if op == "mma" or (op == "wmma" and mods[:1] == ("mma",)):
        return "mma.sync", "mma.sync"
    if op == "ldmatrix":
        return "smem load", "ldmatrix"
    if op == "stmatrix":
        return "smem store", "stmatrix"
    if op == "wmma":
        return ("smem load", "wmma.load") if mods[:1] == ("load",) else ("global store", "wmma.store")
    if op in ("ld", "st"):
        space = next((m.split("::")[0] for m in mods if m in ("global", "shared", "shared::cta", "shared::cluster",
                                                                "param", "param::entry")), "generic")
        if space == "param":
            return None
        where = "smem" if space == "shared" else "global"
        return (f"{where} {'load' if op == 'ld' else 'store'}", f"{op}.{space}")
    if op in ("atom", "red"):
        return "atomic", f"{op}.{'.'.join(m for m in mods if m in ('global', 'shared', 'add', 'cas', 'exch'))}"
    if op == "tcgen05":
        return "tcgen05", "tcgen05." + (mods[0] if mods else "")
    return None


# -------------------------------------------------------------------- compiling
def compile_traced(ptx_text: str, entry: str):
    """The traced Program of (text, entry), compiled once like machine.compile_entry (per the
    values of the environment variables compilers read, machine.COMPILE_ENV)."""
    from .machine import compile_options

    return _compile_traced(ptx_text, entry, compile_options())


@functools.lru_cache(maxsize=16)
def _compile_traced(ptx_text: str, entry: str, options: tuple[str, ...]):
    from .machine import REGISTRY

    module = parse_module(ptx_text)
    start = module.entries[entry].line if entry in module.entries else 0
    return build_program(module, entry, traced_registry(REGISTRY, module.lines, start))


def traced_registry(registry: dict, lines: list[str], start: int = 0) -> dict:
    """`registry` with every compile function wrapped; comments after line `start` (the entry's
    first line, so the module's header comments are not markers) go to the instruction after them."""
    markers = source_markers(lines)
    marker_lines = sorted(markers)
    state = {"prev": start, "section": 0, "mid": 0}

    def wrap_compile(compile_fn):
        def compile_traced_op(ins, ctx):
            fn = compile_fn(ins, ctx)
            lo = state["prev"]
            state["prev"] = ins.line
            marks = []
            for ln in marker_lines[_bisect(marker_lines, lo):]:
                if ln >= ins.line:
                    break
                for text, banner in markers[ln]:
                    if banner:
                        state["section"] += 1
                    state["mid"] += 1
                    marks.append((state["mid"], text, banner, state["section"], role_maker(text) if banner else None))
            wrapped = _semantic(fn, ins, ctx)
            if marks:
                wrapped = _with_markers(wrapped, marks)
            for attr in ("yields", "communicates", "releases"):
                if hasattr(fn, attr):
                    setattr(wrapped, attr, getattr(fn, attr))
            return wrapped
        return compile_traced_op
    return {op: wrap_compile(fn) for op, fn in registry.items()}


def _bisect(xs: list[int], v: int) -> int:
    return bisect.bisect_right(xs, v)


def _with_markers(inner, marks):
    def run(cta, mask):
        ct = cta.trace
        res = inner(cta, mask)
        if ct is not None:
            for mid, text, banner, section, role in marks:
                ct.marker(cta, mid, text, banner, section, role)
        return res
    return run


def _plain(fn, line: int, kind=None, name=None):
    if kind is None:
        def run(cta, mask):
            ct = cta.trace
            if ct is None:
                return fn(cta, mask)
            ct.rec.step += 1
            try:
                return fn(cta, mask)
            except Fault as f:
                ct.fault(cta, f.kind, f.detail, line)
                raise
        return run
    key = (kind, name)

    def run_kind(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        ct.rec.step += 1
        ct.act(cta, kind, name, key)
        try:
            return fn(cta, mask)
        except Fault as f:
            ct.fault(cta, f.kind, f.detail, line)
            raise
    return run_kind


def _semantic(fn, ins, ctx):
    """The wrapper for one instruction: a synchronising one records its meaning, others their kind."""
    from . import trace_sync
    op, mods, line = ins.opcode, ins.mods, ins.line
    try:
        if op == "mbarrier":
            kind = [m for m in mods if m not in ("b64", "shared", "shared::cta", "shared::cluster", "release", "relaxed",
                                                 "acquire", "cta", "cluster")]
            if kind and kind[0] in ("try_wait", "test_wait"):
                return trace_sync.mbarrier_wait(fn, ins, ctx)
            if kind and kind[0] in ("arrive", "expect_tx", "complete_tx"):
                return trace_sync.mbarrier_arrive(fn, ins, ctx, kind)
        if op == "cp" and mods[:2] == ("async", "bulk"):
            rest = mods[2:]
            if rest[:1] == ("tensor",) or (rest and rest[0] in ("shared::cluster", "shared::cta", "global")):
                return trace_sync.bulk_copy(fn, ins, ctx)
            if rest[:1] == ("wait_group",):
                return _plain(fn, line, "wait async", "cp.async.bulk.wait_group")
            return _plain(fn, line)
        if op == "cp" and mods[:1] == ("async",):
            return trace_sync.cp_async(fn, ins, ctx)
        if op == "wgmma":
            return trace_sync.wgmma(fn, ins, ctx)
        if op in ("bar", "barrier") and not (mods and mods[0] == "cluster"):
            return trace_sync.named_barrier(fn, ins, ctx)
        if op == "barrier" and mods[:1] == ("cluster",):
            return trace_sync.cluster_barrier(fn, ins, ctx)
    except (Fault, ImportError, IndexError, KeyError, AttributeError, TypeError, ValueError):
        pass          # operands the getters cannot describe: record the kind only
    kind = classify(ins)
    return _plain(fn, line, *(kind or (None, None)))


# -------------------------------------------------------------------- operand helpers for trace_sync
def shared_address(ctx, op):
    """Getter of a shared address operand (generic addresses mapped into the window)."""
    mem = ctx.mem(op)
    return address_getter(ctx, mem, "shared")


def first_value(getter, cta, mask) -> int:
    return int(per_thread(getter(cta.R), cta.threads(mask))[0])


def barrier_targets(cta, addrs: np.ndarray) -> list[tuple[object, int]]:
    """[(CTA owning the barrier, offset)] for barrier addresses (own or .shared::cluster)."""
    out = []
    for a in np.unique(addrs).tolist():
        if a >= SHARED_GENERIC_BASE:
            a -= SHARED_GENERIC_BASE
        if cta.cluster is not None:           # rank r's window starts at r * CLUSTER_STRIDE (cluster.py)
            rank = a // CLUSTER_STRIDE
            members = cta.cluster.cluster.members
            peer = members[rank] if 0 <= rank < len(members) else None
            if peer is not None:
                out.append((peer, a % CLUSTER_STRIDE))
        else:
            out.append((cta, a % CLUSTER_STRIDE))
    return out


def barrier_of(cta, addr: int):
    st = cta.hopper
    return None if st is None else st.barriers.get(addr)

