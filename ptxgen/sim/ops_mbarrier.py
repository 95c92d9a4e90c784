"""mbarrier: init, inval, arrive (with count, expect_tx), expect_tx, complete_tx, test_wait/try_wait
with a state token or a phase parity (docs/ptx_facts/mbarrier.md §9e; semantics in async_proxy.py).

Accepted spaces: .shared / .shared::cta, generic addresses inside the shared window, and for
arrive (with or without expect_tx) .shared::cluster addresses of any CTA of the cluster (mapa; a
remote arrive, ordered against the owner's init by cluster.CrossTags). Other operations take
.shared::cluster addresses of the executing CTA's own barriers only. The .sem/.scope qualifiers
(.release/.relaxed/.acquire, .cta/.cluster) are accepted: the ordering they give is modelled by
starting a new race-detection epoch when a phase completes (_completed). A failed wait sets
cta.polled, so a spinning thread group lets the others run (warps.py). The state token is the
phase number the arrival belonged to.
"""
from __future__ import annotations

import numpy as np

from . import async_order
from .cluster import CLUSTER_STRIDE, foreign, own_offsets, targets as cluster_targets
from .async_proxy import (MAX_COUNT, Barrier, add_tx, arrive, barrier_at, check_barrier_address, hopper,
                          note_stall, require, try_complete)
from .errors import Fault
from .memory import SHARED_GENERIC_BASE
from .operands import Lit, Name
from .ops_mem import address_getter, per_thread
from .parse import Instr
from .program import mark
from .state import CtaState, scatter

SEMS = {"release", "relaxed", "acquire"}
SCOPES = {"cta", "cluster"}
SPACES = {"shared": "shared", "shared::cta": "shared", "shared::cluster": "shared"}
KINDS = {("init",), ("inval",), ("arrive",), ("arrive", "expect_tx"), ("expect_tx",), ("complete_tx",),
         ("test_wait",), ("test_wait", "parity"), ("try_wait",), ("try_wait", "parity")}


def _split_mods(ins: Instr, ctx) -> tuple[tuple[str, ...], str]:
    """(operation words, space) of an mbarrier instruction; the type must be .b64."""
    mods = list(ins.mods)
    if not mods or mods[-1] != "b64":
        raise ctx.fail("mbarrier instructions need the type .b64 as their last modifier")
    mods.pop()
    kind, space = [], "generic"
    for m in mods:
        if m in SPACES:
            space = SPACES[m]
        elif m in SEMS or m in SCOPES:
            continue
        else:
            kind.append(m)
    if tuple(kind) not in KINDS:
        raise ctx.fail(f"mbarrier.{'.'.join(ins.mods)} is not supported (init, inval, arrive{{.expect_tx}}, "
                       "expect_tx, complete_tx, test_wait/try_wait{.parity}; pending_count, "
                       ".noComplete and remote-CTA barriers are not simulated)")
    if kind[-1] in ("expect_tx", "complete_tx") or "shared::cluster" in mods or any(m in SEMS or m in SCOPES for m in mods):
        require(ctx, f"mbarrier.{'.'.join(ins.mods)}", (8, 0), 90)
    elif kind[0] == "try_wait":
        require(ctx, "mbarrier.try_wait", (7, 8), 90)
    else:
        cta_space = "shared::cta" in mods
        require(ctx, "mbarrier" + (" with .shared::cta" if cta_space else ""), (7, 8) if cta_space else (7, 0), 80)
    return tuple(kind), space


def _addr_getter(ctx, op, space: str):
    mem = ctx.mem(op)
    get = address_getter(ctx, mem, space)
    if space == "shared":
        return get
    return lambda R: get(R) - SHARED_GENERIC_BASE


def _count_getter(ctx, op, what: str):
    if isinstance(op, Lit) and (op.kind != "int" or not 0 <= op.value <= MAX_COUNT):
        raise ctx.fail(f"{what} {op.value} is outside 0..{MAX_COUNT}")
    return ctx.src(op, "u32")


def _barriers(cta: CtaState, tids, get_addr, what: str):
    """[(barrier address, thread positions)] for the acting threads."""
    addrs = per_thread(get_addr(cta.R), tids)
    if foreign(cta, addrs).any():     # another CTA's window (mapa): only arrives reach it
        cluster_targets(cta, addrs, 8, what)        # a rank outside the cluster is refused first
        raise Fault("unsupported", f"{what} on another CTA's mbarrier: the simulator reaches a peer's "
                    "mbarrier with mbarrier.arrive{.expect_tx}.shared::cluster only")
    addrs = own_offsets(cta, addrs, what)
    check_barrier_address(cta, addrs, what)
    first = int(addrs[0])
    if (addrs == first).all():
        return [(first, np.arange(len(tids)))]
    uniq, inverse = np.unique(addrs, return_inverse=True)
    return [(int(a), np.flatnonzero(inverse == k)) for k, a in enumerate(uniq.tolist())]


def _touch(cta: CtaState, tids, addr: int, what: str) -> None:
    """Barrier accesses by other threads after an init need a bar.sync in between (race check)."""
    cta.smem.read(tids, np.full(len(tids), addr, dtype=np.int64), 8, cta.epoch, what)


def _mask(cta: CtaState, tids: np.ndarray) -> np.ndarray:
    mask = np.zeros(cta.n, dtype=bool)
    mask[tids] = True
    return mask


def _landed(cta: CtaState, bar: Barrier, chunks: list, line: int) -> None:
    """TMA/bulk loads landed at this wait: visible only to threads ordered after a wait that observed
    the phase (async_order.py), so every completed phase of the barrier carries them from now on."""
    lines = ", ".join(str(n) for n in sorted({c.line for c in chunks}))
    rid = async_order.retire(cta, np.concatenate([c.idx for c in chunks]), np.zeros(cta.n, dtype=bool),
                             f"the TMA/bulk load(s) issued at line {lines} (landed at the wait at line {line})",
                             f"mbarrier {bar.addr:#x}", line, landed=True)
    if rid is not None:
        bar.carried.add((cta.smem.retired, rid))


def _completed(cta: CtaState, bar: Barrier, phase: int) -> None:
    """A phase that completed orders the arrivals' earlier shared accesses before the accesses of
    the threads that then observe it: a new race-detection epoch (one per CTA, as for bar.sync)."""
    if bar.phase != phase:
        cta.epoch += 1


def compile_mbarrier(ins: Instr, ctx):
    kind, space = _split_mods(ins, ctx)
    ops = ins.operands
    name = "mbarrier." + ".".join(kind)
    if kind in (("init",), ("inval",), ("expect_tx",), ("complete_tx",)):
        want = 1 if kind == ("inval",) else 2
        if len(ops) != want:
            raise ctx.fail(f"{name} takes [addr]" + (", count" if want == 2 else ""))
        get_addr = _addr_getter(ctx, ops[0], space)
        get_n = _count_getter(ctx, ops[1], "count") if want == 2 else None
        return {"init": _init, "inval": _inval, "expect_tx": _tx, "complete_tx": _tx}[kind[0]](
            get_addr, get_n, name, kind)
    if kind[0] == "arrive":
        return _compile_arrive(ctx, ops, space, kind, name, "shared::cluster" in ins.mods)
    return _compile_wait(ctx, ops, space, kind, name)


def _init(get_addr, get_n, name, kind):
    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        n = per_thread(get_n(cta.R), tids)
        for addr, rows in _barriers(cta, tids, get_addr, name):
            count = int(n[rows[0]])
            if not 1 <= count <= MAX_COUNT:
                raise Fault("out-of-bounds", f"{name}: count {count} is outside 1..{MAX_COUNT}")
            if len(rows) > 1 and (n[rows] != count).any():
                raise Fault("race", f"{name}: threads initialise mbarrier {addr:#x} with different counts")
            state = hopper(cta)
            old = state.barriers.get(addr)
            if old is not None and old.inflight:
                raise Fault("async-pending", f"{name} re-initialises {old.describe()} while copies "
                            "completing on it are in flight")
            cta.smem.write(tids[rows[:1]], np.array([addr], dtype=np.int64),
                           np.zeros((1, 8), dtype=np.uint8), cta.epoch, name)
            state.barriers[addr] = Barrier(addr, count, count)
    return run


def _inval(get_addr, get_n, name, kind):
    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        for addr, rows in _barriers(cta, tids, get_addr, name):
            bar = barrier_at(cta, addr, name)
            if bar.inflight:
                raise Fault("async-pending", f"{name} of {bar.describe()} while copies completing on it "
                            "are in flight")
            _touch(cta, tids[rows], addr, name)
            del hopper(cta).barriers[addr]
    return run


def _tx(get_addr, get_n, name, kind):
    sign = 1 if kind == ("expect_tx",) else -1

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        n = per_thread(get_n(cta.R), tids).astype(np.int64)
        for addr, rows in _barriers(cta, tids, get_addr, name):
            bar = barrier_at(cta, addr, name)
            _touch(cta, tids[rows], addr, name)
            phase = bar.phase
            add_tx(bar, sign * int(n[rows].sum()), name)
            _completed(cta, bar, phase)
    return run


def _compile_arrive(ctx, ops, space, kind, name, cluster_space: bool):
    expect = kind == ("arrive", "expect_tx")
    if len(ops) not in ((3,) if expect else (2, 3)):
        raise ctx.fail(f"{name} takes state|_, [addr]" + (", txCount" if expect else "{, count}"))
    state_slot = None
    if not (isinstance(ops[0], Name) and ops[0].name == "_"):
        state_slot, _ = ctx.dst(ops[0], "b64")
    get_addr = _addr_getter(ctx, ops[1], space)
    get_n = _count_getter(ctx, ops[2], "count") if len(ops) == 3 else None
    if get_n is not None and not expect and isinstance(ops[2], Lit) and ops[2].value == 0:
        raise ctx.fail("mbarrier.arrive count must be at least 1")

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        n = per_thread(get_n(cta.R), tids).astype(np.int64) if get_n is not None else None
        if cluster_space:
            addrs = per_thread(get_addr(cta.R), tids)
            if foreign(cta, addrs).any():
                _cluster_arrive(cta, tids, addrs, n)
                return
        tokens = np.zeros(len(tids), dtype=np.uint64)
        for addr, rows in _barriers(cta, tids, get_addr, name):
            bar = barrier_at(cta, addr, name)
            _touch(cta, tids[rows], addr, name)
            tokens[rows] = phase = bar.phase
            if async_order.active(cta):
                bar.arriving |= async_order.carried_by(cta, _mask(cta, tids[rows]))
            if expect:
                add_tx(bar, int(n[rows].sum()), name)
                arrive(bar, len(rows), name)
            else:
                arrive(bar, int(n[rows].sum()) if n is not None else len(rows), name)
            _completed(cta, bar, phase)
        if state_slot is not None:
            scatter(cta, state_slot, tids, tokens, mask)

    def _cluster_arrive(cta: CtaState, tids, addrs, n) -> None:
        """Arrive on barriers named by .shared::cluster addresses (this CTA's or a peer's)."""
        if state_slot is not None:
            raise Fault("unsupported", f"{name} on a .shared::cluster address returns no state; write `_` "
                        "as the destination")
        for peer, sel, offs in cluster_targets(cta, addrs, 8, name):
            rows_all = np.arange(len(tids)) if sel is None else np.flatnonzero(sel)
            check_barrier_address(peer, offs, name)
            for off in np.unique(offs).tolist():
                rows = rows_all[offs == off]
                bar = barrier_at(peer, off, f"{name} (cluster CTA rank {peer.cluster.rank})")
                idx = off + np.arange(8)
                if peer is cta:
                    _touch(cta, tids[rows], off, name)
                elif peer.smem.cross is not None:
                    peer.smem.cross.access(np.tile(idx, len(rows)), np.repeat(tids[rows], 8), cta.cluster,
                                           False, name)
                if async_order.active(cta):         # a remote release carries this CTA's records
                    bar.arriving |= async_order.carried_by(cta, _mask(cta, tids[rows]))
                if expect:
                    add_tx(bar, int(n[rows].sum()), name)
                    arrive(bar, len(rows), name)
                else:
                    arrive(bar, int(n[rows].sum()) if n is not None else len(rows), name)
    return run


def _compile_wait(ctx, ops, space, kind, name):
    parity = kind[-1] == "parity"
    if len(ops) not in (3, 4) or (kind[0] == "test_wait" and len(ops) != 3):
        raise ctx.fail(f"{name} takes waitComplete, [addr], {'phaseParity' if parity else 'state'}"
                       + ("{, suspendTimeHint}" if kind[0] == "try_wait" else ""))
    pred_slot, _ = ctx.dst(ops[0], "pred")
    get_addr = _addr_getter(ctx, ops[1], space)
    get_phase = ctx.src(ops[2], "u32" if parity else "b64", relaxed=parity)
    line = ctx.line

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        want = per_thread(get_phase(cta.R), tids).astype(np.int64)
        ok = np.zeros(len(tids), dtype=bool)
        for addr, rows in _barriers(cta, tids, get_addr, name):
            bar = barrier_at(cta, addr, name)
            _touch(cta, tids[rows], addr, name)
            phase, flying = bar.phase, bar.inflight
            try_complete(bar, land=cta.smem)
            if flying and not bar.inflight:
                _landed(cta, bar, flying, line)
            _completed(cta, bar, phase)
            if parity:
                if ((want[rows] & ~1) != 0).any():
                    raise Fault("out-of-bounds", f"{name}: phaseParity must be 0 or 1, got "
                                f"{int(want[rows][(want[rows] & ~1) != 0][0])}")
                done = want[rows] != (bar.phase & 1)
            else:
                if (want[rows] > bar.phase).any():
                    raise Fault("race", f"{name}: state token names phase {int(want[rows].max())} but "
                                f"{bar.describe()} has not reached it (a token from another barrier?)")
                done = want[rows] < bar.phase
            ok[rows] = done
            if bar.carried and done.any():
                if len(bar.carried) > 64:      # records ended since (overwritten, all ordered)
                    bar.carried = async_order.live(cta, bar.carried)
                async_order.order(cta, bar.carried, _mask(cta, tids[rows][done]))
            note_stall(cta, line, bar, bool(done.all()))
        scatter(cta, pred_slot, tids, ok, mask)
        if not ok.all():
            cta.polled = True      # a waiting thread group lets the others run (warps.py)
    return mark(run, yields=True)


OPS = {"mbarrier": compile_mbarrier}
