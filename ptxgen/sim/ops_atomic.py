"""atom / red on global and shared memory, and fence / membar: what split-K and Stream-K fix-ups
synchronise with.

Lanes of one instruction that hit the same address are applied one after another in thread order
(lane order, then warp order), each atom lane getting the value its own turn saw. Atomics of
different CTAs on the same global bytes are strong (.gpu/.sys scope) accesses and never race; their
release/acquire effects follow sync.py (an RMW keeps the release clock already on the word, the
"release sequence", and adds its own). Shared-memory atomics (.shared::cta, .shared::cluster and
generic addresses in a shared window) are in shared_atomic.py. add.noftz on f16/bf16 (and x2)
rounds the exact sum once; f32 add flushes subnormals on global memory only (PTX ISA, atom).
"""
from __future__ import annotations

import numpy as np

from . import numerics as nx
from .errors import Fault
from .async_proxy import require
from .ops_mem import address_getter, check_aligned, global_write, per_thread, read_memory
from .parse import Instr
from .program import mark
from .ptxtypes import STORAGE_DTYPE, TYPE_BITS, VIEW_DTYPE
from .shared_atomic import shared_rmw, split_spaces
from .state import CtaState, scatter
from .sync import check_scope, group_by_clock, merge

ATOM_TYPES = {
    "add": {"u32", "s32", "u64", "f32", "f64"},
    "min": {"u32", "s32", "u64", "s64"}, "max": {"u32", "s32", "u64", "s64"},
    "inc": {"u32"}, "dec": {"u32"},
    "and": {"b32", "b64"}, "or": {"b32", "b64"}, "xor": {"b32", "b64"},
    "exch": {"b32", "b64"}, "cas": {"b32", "b64"},
}
HALF_ADD_TYPES = {"f16", "f16x2", "bf16", "bf16x2"}     # add.noftz only; rounded once, subnormals kept
ATOM_SEMS = {"relaxed", "acquire", "release", "acq_rel"}
SCOPES = {"cta", "cluster", "gpu", "sys"}
FLOAT_SMALLEST_NORMAL = np.float32(2.0 ** -126)


def _ftz(x: np.ndarray) -> np.ndarray:
    """Flush f32 subnormals to sign-preserving zero."""
    return np.where(np.abs(x) < FLOAT_SMALLEST_NORMAL, np.copysign(np.float32(0), x), x).astype(np.float32)


def _operation(op: str, typ: str, flush: bool = True):
    """new = f(old, b, c) in the type's view dtype. Global atom.add.f32 flushes subnormal inputs and
    results (`flush`); on shared memory it keeps them (PTX ISA, atom)."""
    if typ in HALF_ADD_TYPES:
        return _half_add(typ)
    if op == "add" and typ == "f32" and flush:
        return lambda old, b, c: nx.canonical_nan_f32(_ftz(_ftz(old) + _ftz(b)))
    if op == "add" and typ == "f32":
        return lambda old, b, c: nx.canonical_nan_f32((old + b).astype(np.float32))
    if op == "add":
        return lambda old, b, c: old + b
    if op == "inc":
        return lambda old, b, c: np.where(old >= b, old.dtype.type(0), old + old.dtype.type(1))
    if op == "dec":
        return lambda old, b, c: np.where((old == 0) | (old > b), b, old - old.dtype.type(1))
    table = {"min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor}
    if op in table:
        fn = table[op]
        return lambda old, b, c: fn(old, b)
    if op == "exch":
        return lambda old, b, c: b.copy()
    return lambda old, b, c: np.where(old == b, c, old)          # cas


def _half_add(typ: str):
    """add.noftz of f16/bf16 (x2: per half) on the storage bits: the exact float64 sum of two 16-bit
    values rounded once to the 16-bit format (RNE, subnormals kept, NaN canonical)."""
    is_bf = typ.startswith("bf")
    dec = nx.bf16_bits_to_f64 if is_bf else nx.f16_bits_to_f64
    enc = nx.f64_to_bf16_bits if is_bf else nx.f64_to_f16_bits

    def add(old, b, c):
        halves = [np.ascontiguousarray(v).view(np.uint16) for v in (old, b)]
        with np.errstate(over="ignore", invalid="ignore"):
            total = dec(halves[0]) + dec(halves[1])
        return np.ascontiguousarray(enc(total)).view(old.dtype)
    return add


def _parse(ins: Instr, ctx):
    sem = scope = op = typ = None
    space, cache_hint, noftz = "generic", False, False
    for m in ins.mods:
        if m in ATOM_SEMS and sem is None:
            sem = m
        elif m in SCOPES and scope is None:
            scope = m
        elif m in ("global", "shared", "shared::cta"):
            space = m.split("::")[0]
        elif m == "shared::cluster":
            space = "cluster"
            require(ctx, f"{ins.opcode}.shared::cluster", (7, 8), 90)
        elif m in ATOM_TYPES and op is None:
            op = m
        elif m in TYPE_BITS and typ is None:
            typ = m
        elif m == "L2::cache_hint":
            cache_hint = True
        elif m == "noftz":
            noftz = True
        else:
            raise ctx.fail(f"{ins.opcode} modifier .{m} is not supported")
    if op is None or typ is None:
        raise ctx.fail(f"{ins.opcode} needs an operation and a type")
    if typ in HALF_ADD_TYPES and op == "add":
        if not noftz:
            raise ctx.fail(f"{ins.opcode}.add.{typ} needs .noftz ({ins.opcode}.add.noftz.{typ})")
        if typ.startswith("bf"):
            require(ctx, f"{ins.opcode}.add.noftz.{typ}", (7, 8), 90)
    elif noftz:
        raise ctx.fail(f"{ins.opcode}: .noftz belongs to add.{{f16,f16x2,bf16,bf16x2}} only")
    elif typ not in ATOM_TYPES[op]:
        extra = " and .noftz.f16/.f16x2/.bf16/.bf16x2" if op == "add" else ""
        raise ctx.fail(f"{ins.opcode}.{op}.{typ} is not supported (valid: "
                       f"{', '.join(sorted(ATOM_TYPES[op]))}{extra})")
    if ins.opcode == "red" and (op in ("exch", "cas") or sem in ("acquire", "acq_rel")):
        raise ctx.fail(f"red has no .{op if op in ('exch', 'cas') else sem}")
    if scope == "cluster" and space == "global":
        raise ctx.fail(f"{ins.opcode}.cluster on global memory is not simulated (use .gpu, or a .shared "
                       "space for cluster-scoped atomics)")
    return sem or "relaxed", scope or "gpu", space, op, typ, cache_hint


def compile_atomic(ins: Instr, ctx):
    sem, scope, space, op, typ, cache_hint = _parse(ins, ctx)
    # .cluster reaches only shared memory here (_parse refuses it on .global): no global clocks
    strong = False if scope == "cluster" else check_scope(scope, ctx.fail)
    is_atom = ins.opcode == "atom"
    ops = list(ins.operands)
    if cache_hint:
        if not ops:
            raise ctx.fail(".L2::cache_hint needs a cache-policy operand")
        ops.pop()
    want = (2 if not is_atom else 3) + (op == "cas")
    if len(ops) != want:
        raise ctx.fail(f"{ins.opcode}.{op} takes {want} operands, got {len(ops)}")
    if is_atom:
        d_slot = ctx.dst(ops.pop(0), typ)[0]
    get_addr = address_getter(ctx, ctx.mem(ops[0]), space)
    gb = ctx.src(ops[1], typ)
    gc = ctx.src(ops[2], typ) if op == "cas" else None
    size = TYPE_BITS[typ] // 8
    view, storage = VIEW_DTYPE[typ], STORAGE_DTYPE[TYPE_BITS[typ]]
    apply_global, apply_shared = _operation(op, typ), _operation(op, typ, flush=False)
    may_be_global = space in ("global", "generic")
    releases = strong and sem in ("release", "acq_rel") and may_be_global
    acquires = strong and sem in ("acquire", "acq_rel")
    line = ctx.line
    what = f"{ins.opcode}.{op}"

    def serializer(apply):
        return lambda t, a, bb, cc, read, write: serialize(t, a, bb, cc, apply, op, view, storage, size,
                                                           read, write)

    serialize_shared = serializer(apply_shared)

    def run_global(cta: CtaState, mask, tids, addrs, b, c) -> np.ndarray:
        if scope == "cluster":
            raise Fault("unsupported", f"{what}.cluster on a generic address in global memory is not simulated "
                        "(.cluster scope is modelled on shared memory only; use .gpu for global memory)")
        sync = cta.sync
        model = sync.model
        words = model.words(addrs, size).reshape(-1)
        nw = len(words) // max(len(addrs), 1)
        had_clocks = strong and bool(model.clocks)
        old_clocks = model.lookup(words) if had_clocks else None
        acquired = group_by_clock(model, words, np.repeat(tids, nw), cta.n) if had_clocks else []

        def read(pos):
            return read_memory(cta, "global", tids[pos], addrs[pos], size, 0, what + " reads", strong)

        def write(pos, data):
            global_write(cta, tids[pos], addrs[pos], data, what + " writes", strong, atomic=True, progress=False)

        old, changed = serializer(apply_global)(tids, addrs, b, c, read, write)
        _note_progress(cta, changed, old)
        if not strong:
            return old
        for m, clock in acquired:
            if acquires:
                sync.acquire(m, clock, cta.active)
            else:
                sync.observe(m, clock)
        if releases:
            snap = sync.release(mask, cta.gmem)
            mine = [snap] * len(tids)
        elif sync.fence_clocks or had_clocks:
            mine = sync.fence_clock_of(tids)
        else:
            return old
        written = np.ones(len(tids), dtype=bool) if op != "cas" else (old == b)
        new_clocks = [merge(None if old_clocks is None else old_clocks[k], mine[k // nw])
                      for k in range(len(words))]
        keep = np.repeat(written, nw)
        model.attach(words[keep], [clk for clk, w in zip(new_clocks, keep) if w])
        return old

    def _note_progress(cta: CtaState, changed: bool, old: np.ndarray) -> None:
        if changed:
            cta.sync.iter_fresh = True
        else:
            cta.sync.note_load(line, old.view(np.uint8))

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        addrs = per_thread(get_addr(cta.R), tids)
        check_aligned(addrs, size, what)
        b = per_thread(gb(cta.R), tids)
        c = per_thread(gc(cta.R), tids) if gc is not None else b
        old = np.empty(len(tids), dtype=view)
        for part, sel, a in split_spaces(cta, space, addrs):
            t, bb, cc = (tids, b, c) if sel is None else (tids[sel], b[sel], c[sel])
            if part == "global":
                got = run_global(cta, mask, t, a, bb, cc)
            else:
                got, changed = shared_rmw(cta, part, t, a, bb, cc, size, what, line, serialize_shared)
                _note_progress(cta, changed, got)
            if sel is None:
                old = got
            else:
                old[sel] = got
        if is_atom:
            scatter(cta, d_slot, tids, old.view(storage), mask)
    return mark(run, yields=True, communicates=True, releases=releases)


def serialize(tids, addrs, b, c, apply, op, view, storage, size, read, write) -> tuple[np.ndarray, bool]:
    """Apply the operation lane by lane per address (rounds of distinct addresses, thread order):
    read(positions) gives the (m, size) bytes at those lanes' addresses, write(positions, bytes)
    stores them. (old value per lane, whether any byte changed)."""
    k = len(addrs)
    if k and len(np.unique(addrs)) == k:
        rounds = [np.arange(k)]
    else:
        order = np.lexsort((tids, addrs))
        sorted_addrs = addrs[order]
        starts = np.r_[True, sorted_addrs[1:] != sorted_addrs[:-1]]
        first = np.maximum.accumulate(np.where(starts, np.arange(k), 0))
        rank = np.empty(k, dtype=np.int64)
        rank[order] = np.arange(k) - first
        rounds = [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)] if k else []
    result = np.empty(k, dtype=view)
    changed = False
    for pos in rounds:
        bb, cc = b[pos], c[pos]
        old = np.ascontiguousarray(read(pos)).view(view).reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            new = apply(old, bb, cc).astype(view)
        rows = np.ones(len(pos), dtype=bool) if op != "cas" else (old == bb)
        if rows.any():
            write(pos[rows], np.ascontiguousarray(new[rows]).view(storage).view(np.uint8).reshape(-1, size))
        changed = changed or bool((old.view(storage) != new.view(storage)).any())
        result[pos] = old
    return result, changed


# ------------------------------------------------------------------ fences
FENCE_SEMS = {"sc", "acq_rel", "acquire", "release"}
MEMBAR_SCOPE = {"cta": "cta", "gl": "gpu", "sys": "sys"}


def compile_fence(ins: Instr, ctx):
    """fence{.sem}.scope and membar.level (a synonym of fence.sc since sm_70)."""
    mods = list(ins.mods)
    if ins.opcode == "membar":
        if len(mods) != 1 or mods[0] not in MEMBAR_SCOPE:
            raise ctx.fail(f"membar.{'.'.join(mods)} is not supported (membar.cta/.gl/.sys)")
        sem, scope = "sc", MEMBAR_SCOPE[mods[0]]
    else:
        sem = mods.pop(0) if mods and mods[0] in FENCE_SEMS else "acq_rel"
        if len(mods) != 1 or mods[0] not in SCOPES:
            raise ctx.fail(f"fence.{'.'.join(ins.mods)} is not supported (fence{{.sc,.acq_rel,.acquire,"
                           ".release}.{cta,gpu,sys}; proxy fences are not simulated)")
        scope = mods[0]
    if ins.operands:
        raise ctx.fail(f"{ins.opcode} takes no operands")
    strong = check_scope(scope, ctx.fail)
    acquire, release = sem != "release", sem != "acquire"

    def run(cta: CtaState, mask):
        if not strong:
            return              # a .cta fence orders nothing the lock-step CTA does not already
        if acquire:
            cta.sync.acquire_fence(mask, cta.active)
        if release:
            cta.sync.release_fence(mask, cta.gmem)
    return mark(run, communicates=True, releases=strong and release)


OPS = {"atom": compile_atomic, "red": compile_atomic, "fence": compile_fence, "membar": compile_fence}
