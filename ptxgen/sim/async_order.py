"""Happens-before from the wait that ends an async-proxy access of shared memory to later accesses.

An async-proxy read of shared memory (a bulk/TMA store's source, a wgmma operand) may happen at any
time from issue until the wait that covers it returns in the issuing thread(s):
`cp.async.bulk.wait_group{.read}` of the thread that committed the store (docs/ptx_facts/tma.md
§9d), `wgmma.wait_group` of the warpgroup (wgmma.md §9b). Until then the bytes are `pending`
(memory.SharedMemory). After the wait, a write to them by any *other* thread is still a race unless
a barrier or an mbarrier phase orders it after that wait; a barrier between the issue and the wait
orders nothing about the read. The race-detection epochs (one per CTA, bumped by every barrier of
any thread group) cannot see that, so each retired read keeps its own set of threads ordered after
its wait, grown only by synchronisation that the waiting threads took part in after the wait:

* a named barrier phase (bar.sync / barrier.sync / bar.arrive) that an ordered thread arrived at
  orders every thread that waited on that phase (named_barriers.py);
* an mbarrier arrival by an ordered thread makes the phase carry the read; a thread whose wait
  observes a carrying phase complete is ordered (ops_mbarrier.py, async_proxy.try_complete);
* a barrier.cluster wait that every thread of the CTA passed orders all of them, and orders them
  after the waits of the other CTAs of the cluster too (cluster.py).

Across a cluster (TMA multicast into a peer's stage, consumers releasing every CTA's empty barrier
with remote arrives), a record also keeps, per peer rank, the peer threads ordered after its wait:
an arrival carries (record owner, id) pairs, so a peer's thread that waits on a phase a remote
arrive carried is ordered too. Generic DSMEM stores into a peer's retired bytes are not checked.

A write (generic store, atomic, cp.async, TMA/bulk load issue) by an ordered thread is fine and ends
the record for those bytes (later writers are ordered against it by the usual checks); by any other
thread it is a race naming the wait.

The same records serve the other direction, an async-proxy *write*: a TMA/bulk load's bytes land
when a wait observes its mbarrier phase complete (async_proxy.py), and they are visible only to
threads whose own wait observed that phase (or a later one) or that a barrier/mbarrier phase orders
after such a wait (mbarrier.md §9e: the wait's acquire). The landing makes a record carried by
every completed phase of the barrier; a generic read or write of the bytes by a thread not ordered
after it is a race.

Completed tensor-memory writes (tcgen05.st after wait::st, tcgen05.cp/shift after their commit's
phase is observed) are records of the same kind, kept per CTA in tmem_order.TmemWrites; `_states`
yields them beside the shared-memory records, so the same synchronisation orders them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .errors import Fault

_ids = itertools.count()


@dataclass
class RetiredRead:
    """Shared bytes an async-proxy access held until a wait, and the threads ordered after it."""
    rid: int
    idx: np.ndarray          # shared byte indices still covered
    ordered: np.ndarray      # bool per thread of the CTA
    what: str                # the operation, e.g. "the bulk store issued at line 12 by thread 0"
    waiter: str              # who waited, e.g. "thread 0"
    line: int                # the wait's PTX line
    landed: bool = False     # an async-proxy write (TMA load): generic reads need ordering too
    remote: dict = field(default_factory=dict)   # cluster rank -> bool per thread of that CTA

    def ordered_in(self, rank: int | None, n: int) -> np.ndarray:
        """Threads of this CTA (rank None) or of cluster CTA `rank` ordered after the wait."""
        if rank is None:
            return self.ordered
        got = self.remote.get(rank)
        return np.zeros(n, dtype=bool) if got is None else got


class RetiredReads:
    """One CTA's retired async-proxy reads (kept on SharedMemory.retired, made on the first)."""

    def __init__(self, size: int):
        self.covered = np.zeros(size, dtype=np.int16)   # live records covering each byte
        self.records: list[RetiredRead] = []
        self.landed = False                              # some record is an async write

    def retire(self, idx: np.ndarray, waiters: np.ndarray, what: str, waiter: str, line: int,
               landed: bool = False) -> int | None:
        """The access of `idx` ended at a wait executed by the threads in `waiters` (bool per
        thread); the new record's id, None if it covers no byte."""
        idx = np.unique(idx)
        if len(idx) == 0:
            return None
        rec = RetiredRead(next(_ids), idx, waiters.copy(), what, waiter, line, landed)
        self.records.append(rec)
        self.covered[idx] += 1
        self.landed = self.landed or landed
        return rec.rid

    def check_read(self, idx: np.ndarray, tid: np.ndarray, what: str) -> None:
        """A generic read of `idx` by threads `tid` (one per byte): landed async writes must be ordered
        before it."""
        if not self.landed:
            return
        hit = self.covered[idx] > 0
        if not hit.any():
            return
        idx, tid = idx[hit], tid[hit]
        for rec in self.records:
            if rec.landed:
                bad = np.isin(idx, rec.idx) & ~rec.ordered[tid]
                if bad.any():
                    k = int(np.flatnonzero(bad)[0])
                    raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x}, which "
                                f"{rec.what} wrote through the async proxy; its bytes are visible only to "
                                "threads whose mbarrier wait observed the phase (or a later one), or that a "
                                "barrier orders after such a wait, and this thread is neither: wait on the "
                                "mbarrier in this thread too, or put a barrier after a waiting thread's wait")

    def check_write(self, idx: np.ndarray, tid: np.ndarray, what: str, rank: int | None = None,
                    n: int = 0) -> None:
        """A write of bytes `idx` by threads `tid` (one per byte; of cluster CTA `rank` with `n`
        threads, None: this CTA): race unless ordered after the wait of every retired access
        covering them; ordered writes end those records for these bytes."""
        hit = self.covered[idx] > 0
        if not hit.any():
            return
        idx, tid = idx[hit], tid[hit]
        keep = []
        for rec in self.records:
            inside = np.isin(idx, rec.idx)
            if inside.any():
                bad = inside & ~rec.ordered_in(rank, n)[tid]
                if bad.any() and rec.landed:
                    k = int(np.flatnonzero(bad)[0])
                    raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x}, which "
                                f"{rec.what} wrote through the async proxy, and no mbarrier wait that observed "
                                "its phase (nor a barrier after one) orders this write after it: wait on the "
                                "mbarrier first")
                if bad.any():
                    k = int(np.flatnonzero(bad)[0])
                    raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x}, which "
                                f"{rec.what} read through the async proxy until {rec.waiter}'s wait at line "
                                f"{rec.line}; no barrier or mbarrier phase orders this write after that wait "
                                "(the async proxy may read the bytes until the wait returns, so a barrier "
                                "before the wait does not help): after the wait, put a barrier (bar.sync, or "
                                "a named barrier among the waiting thread and the writers) before the write")
                gone = np.isin(rec.idx, idx)
                self.covered[rec.idx[gone]] -= 1
                rec.idx = rec.idx[~gone]
            if len(rec.idx):
                keep.append(rec)
        self.records = keep

    def ordered_ids(self, mask: np.ndarray, rank: int | None) -> set:
        """(owner, id) of the records some thread in `mask` (of this CTA, or of cluster CTA `rank`)
        is ordered after: what its arrival at a barrier carries."""
        return {(self, rec.rid) for rec in self.records if (rec.ordered_in(rank, len(mask)) & mask).any()}

    def order(self, rids: set[int], mask: np.ndarray, rank: int | None) -> None:
        """The threads in `mask` (of this CTA, or of cluster CTA `rank`) completed a wait on a phase
        that carried the records `rids`."""
        if not rids or not mask.any():
            return
        keep = []
        for rec in self.records:
            if rec.rid in rids:
                if rank is not None:
                    rec.remote[rank] = rec.ordered_in(rank, len(mask)) | mask
                else:
                    rec.ordered |= mask
                    if rec.ordered.all() and not rec.remote:   # nothing left to check here
                        self.covered[rec.idx] -= 1
                        continue
            keep.append(rec)
        self.records = keep


def retire(cta, idx: np.ndarray, waiters: np.ndarray, what: str, waiter: str, line: int,
           landed: bool = False) -> int | None:
    if cta.smem.retired is None:
        cta.smem.retired = RetiredReads(cta.smem.size)
    return cta.smem.retired.retire(idx, waiters, what, waiter, line, landed)


def _own_states(cta) -> list:
    """The CTA's record sets: retired shared-memory accesses, completed tensor-memory writes
    (tmem_order.TmemWrites, which the same synchronisation orders)."""
    states = [cta.smem.retired if cta.smem is not None else None]
    if cta.tmem is not None:
        states.append(cta.tmem.writes)
    return [s for s in states if s is not None and s.records]


def _states(cta) -> list[tuple[RetiredReads, int | None]]:
    """(records, rank the CTA's threads have there: None for its own) of the CTA and its peers."""
    out = [(state, None) for state in _own_states(cta)]
    member = cta.cluster
    if member is not None and member.cluster.size > 1:
        for peer in member.cluster.members:
            if peer is not None and peer is not cta:
                out += [(state, member.rank) for state in _own_states(peer)]
    return out


def active(cta) -> bool:
    """Some record exists in the CTA or (in a cluster) a peer: arrivals may carry something."""
    return bool(_states(cta))


def carried_by(cta, mask: np.ndarray) -> set:
    """What an arrival of the threads in `mask` carries (empty if nothing was retired)."""
    out: set = set()
    for state, rank in _states(cta):
        out |= state.ordered_ids(mask, rank)
    return out


def order(cta, items: set, mask: np.ndarray) -> None:
    """The threads in `mask` observed a phase that carried `items` ((owner, id) pairs)."""
    if not items:
        return
    for state, rank in _states(cta):
        rids = {rid for owner, rid in items if owner is state}
        if rids:
            state.order(rids, mask, rank)


def live(cta, items: set) -> set:
    """The (owner, id) pairs in `items` whose record still exists (to keep carried sets small)."""
    alive = {(state, rec.rid) for state, _ in _states(cta) for rec in state.records}
    return items & alive


def order_all(cta, cluster: bool = False) -> None:
    """Every thread of the CTA passed one barrier after every ordered thread arrived at it (with
    `cluster`, a barrier.cluster: after those of the peers too)."""
    live = np.ones(cta.n, dtype=bool)
    for state, rank in _states(cta):
        if rank is None or cluster:
            state.order({rec.rid for rec in state.records}, live, rank)


def check_write(cta, idx: np.ndarray, tid: int, what: str, issuer) -> None:
    """An async-proxy write of the CTA's bytes `idx` (a TMA/bulk load) issued by thread `tid` of
    CTA `issuer` (this CTA or a peer of its cluster)."""
    state = cta.smem.retired
    if state is None:
        return
    rank = None if issuer is cta else issuer.cluster.rank
    who = "" if rank is None else f" of cluster CTA rank {rank}"
    state.check_write(idx, np.full(len(idx), tid), f"{what} (issued by thread {tid}{who}) writes", rank, issuer.n)
