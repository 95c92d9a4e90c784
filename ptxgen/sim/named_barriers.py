"""The CTA's sixteen named barriers (bar.sync / barrier.sync / bar.arrive) and bar.warp.sync.

PTX ISA (barrier): a barrier instruction makes the executing thread wait for the non-exited threads
of its warp and then marks the WARP's arrival. The barrier completes when `b` threads (b / 32 warps)
have arrived, or without `b` when every warp of the CTA with a non-exited thread has; then the
waiting threads restart and the barrier is reset for the next phase. bar.sync and barrier.sync wait;
bar.arrive / barrier.arrive only arrive. bar.sync, bar.arrive and barrier.*.aligned are `.aligned`:
every non-exited thread of a warp must execute the same instruction together (a part of a warp is a
divergence hazard). All participants must give the same thread count; a warp arriving twice in one
phase (bar.arrive followed by another barrier instruction on that barrier before it completed) is a
race. bar.warp.sync with a full mask is a barrier of one warp (key 16 + warp).

Race detection keeps one epoch per CTA (memory.SharedMemory), so a completing barrier starts a new
epoch for every thread, also those that did not take part: a race between two threads that no
barrier orders but that are separated by another group's barrier is not reported (never the
other way round).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import async_order
from .errors import Fault
from .warps import BLOCK, SPIN, release

WARP_KEY = 16           # bar.warp.sync of warp w is barrier key WARP_KEY + w


@dataclass
class NamedBarrier:
    """The phase of one barrier in progress."""
    count: int | None      # thread count the phase was started with (None: all threads)
    lanes: np.ndarray      # threads that executed a barrier instruction on it in this phase
    warps: np.ndarray      # warps whose arrival is marked
    waiting: np.ndarray    # threads that wait for the phase to complete
    line: int              # the first arrival's PTX line
    what: str
    carry: set = field(default_factory=set)   # retired async reads an arriving thread was ordered after
    #: warp -> line of an aligned barrier part of the warp executed while its other threads were
    #: still spinning in a loop (a one-thread poll: `_spinning`); they must execute the same one
    partial: dict = field(default_factory=dict)


def _name(key: int) -> str:
    return f"barrier {key}" if key < WARP_KEY else f"bar.warp.sync of warp {key - WARP_KEY}"


def describe(cta, key: int) -> str:
    """What barrier `key` waits for, for deadlock messages."""
    b = (cta.bars or {}).get(key)
    if b is None:
        return _name(key)
    want = f"{b.count} threads" if b.count is not None else "all non-exited threads of the CTA"
    return (f"{b.what} {_name(key)} (phase started at line {b.line}): {int(b.warps.sum())} warp(s) "
            f"arrived, the barrier needs {want}")


def arrive(cta, mask, key: int, count: int | None, wait: bool, aligned: bool, what: str, line: int):
    """The threads in `mask` execute a barrier instruction on `key`; None to go on, or BLOCK with
    cta.split naming the threads of the running group that must wait."""
    n = cta.n
    execd = np.ones(n, dtype=bool) if mask is None else mask
    if cta.bars is None:
        cta.bars = {}
    b = cta.bars.get(key)
    if b is None:
        z = np.zeros(n, dtype=bool)
        b = cta.bars[key] = NamedBarrier(count, z, np.zeros(n // 32, dtype=bool), z, line, what)
    elif b.lanes.any() and b.count != count:
        have = "no count (all threads)" if b.count is None else f"count {b.count}"
        mine = "no count (all threads)" if count is None else f"count {count}"
        raise Fault("divergence", f"{what} on {_name(key)} with {mine}, but its current phase was started "
                    f"at line {b.line} with {have}: every participant must give the same thread count")
    if (b.lanes & execd).any():
        t = int(np.flatnonzero(b.lanes & execd)[0])
        raise Fault("race", f"warp {t // 32} arrives at {_name(key)} a second time in one phase (first at "
                    f"line {b.line}): a bar.arrive followed by another barrier instruction on the same "
                    "barrier before it completed")
    lanes = execd.reshape(-1, 32)
    live = cta.active.reshape(-1, 32)
    touched = lanes.any(axis=1)
    if aligned:
        _check_aligned(cta, b, lanes, live, touched, what, line)
    if not b.lanes.any():
        b.count, b.line, b.what = count, line, what
    b.lanes = b.lanes | execd
    b.carry |= async_order.carried_by(cta, execd)
    if wait:
        b.waiting = b.waiting | execd
    _advance(cta, key, b)
    if wait:
        still = b.waiting & execd
        if still.any():
            cta.split = (key, still, line)
            return BLOCK
    return None


def _check_aligned(cta, b: NamedBarrier, lanes: np.ndarray, live: np.ndarray, touched: np.ndarray,
                   what: str, line: int) -> None:
    """An aligned barrier is executed by each warp's non-exited threads together. Part of a warp may
    go first only while the rest of it spins in a loop (one thread polling a flag, then `bar.sync`:
    the hardware reconverges the warp before the barrier); the rest must then execute the same
    instruction. Anything else is divergence."""
    prior = b.lanes.reshape(-1, 32)
    for w in np.flatnonzero(touched).tolist():
        have = lanes[w] | prior[w]
        if w in b.partial and b.partial[w] != line:
            raise Fault("divergence", f"{what} at line {line} is executed by threads of warp {w} whose other "
                        f"threads executed the aligned barrier at line {b.partial[w]}: an aligned barrier "
                        "(bar.sync, bar.arrive, barrier.*.aligned) must be one instruction for the whole warp")
        if (have == live[w]).all():
            b.partial.pop(w, None)
            continue
        if _spinning(cta, w, live[w] & ~have):
            b.partial[w] = line
            continue
        raise Fault("divergence", f"{what} is executed by {int(have.sum())} of the "
                    f"{int(live[w].sum())} non-exited threads of warp {w}; an aligned barrier (bar.sync, bar.arrive, "
                    "barrier.*.aligned) must be executed by the whole warp together (use barrier.sync / "
                    "barrier.arrive without .aligned in divergent code, or reconverge the warp first)")


def _spinning(cta, w: int, missing: np.ndarray) -> bool:
    """Whether every thread of warp `w` in `missing` is parked in a group that spins in a loop."""
    threads = w * 32 + np.flatnonzero(missing)
    covered = np.zeros(cta.n, dtype=bool)
    for g in cta.groups or []:
        if g.state == SPIN:
            covered |= g.mask
    return bool(threads.size) and bool(covered[threads].all())


def _advance(cta, key: int, b: NamedBarrier) -> None:
    """Mark warps whose non-exited threads have all arrived; complete phases as they fill up."""
    live = cta.active.reshape(-1, 32)
    arrived = (b.lanes.reshape(-1, 32) | ~live).all(axis=1) & live.any(axis=1) & ~b.warps
    for w in np.flatnonzero(arrived).tolist():
        b.warps[w] = True
        if b.count is not None and int(b.warps.sum()) == b.count // 32:
            _complete(cta, key, b)
    if b.count is None and b.warps.any() and int(b.warps.sum()) >= int(live.any(axis=1).sum()):
        _complete(cta, key, b)


def _complete(cta, key: int, b: NamedBarrier) -> None:
    done = np.repeat(b.warps, 32)
    freed = b.waiting & done
    async_order.order(cta, b.carry, freed)
    b.carry = set()
    b.waiting = b.waiting & ~done
    b.lanes = b.lanes & ~done
    b.partial = {w: line for w, line in b.partial.items() if not b.warps[w]}
    b.warps = np.zeros_like(b.warps)
    if not b.lanes.any():
        del cta.bars[key]               # idle again: bar.sync 0 may take the fast path
    if key < WARP_KEY or cta.n == 32:   # one epoch per CTA: a warp barrier orders only a 1-warp CTA
        cta.epoch += 1
        cta.sync.barrier()
    if cta.groups and freed.any():
        release(cta, key, freed)


def recheck(cta) -> None:
    """Threads exited: barriers waiting for them may complete now."""
    if not cta.bars:
        return
    live = cta.active.reshape(-1, 32)
    for key, b in list(cta.bars.items()):
        for w, line in b.partial.items():
            if not (live[w] & ~b.lanes.reshape(-1, 32)[w]).any():
                raise Fault("divergence", f"threads of warp {w} exited while the rest of the warp waited at the "
                            f"aligned barrier at line {line}: an aligned barrier must be executed by the whole "
                            "warp together")
        if key in cta.bars and b.lanes.any():
            _advance(cta, key, b)
