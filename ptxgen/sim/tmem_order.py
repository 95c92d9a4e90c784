"""Happens-before from a completed write of tensor memory to the tcgen05.mma that reads it.

A tcgen05.mma reads tensor memory for A (`[a-tmem]`) and for the scale factors of the block-scaled
kinds; with `.cta_group::2` it reads them in both CTAs of the pair, though one thread of one CTA
issues it. Those cells are written by `tcgen05.st` (complete for its warp at `tcgen05.wait::st`)
and by `tcgen05.cp` / `tcgen05.shift` (complete when a thread observes the mbarrier phase of the
`tcgen05.commit` that covers them). The ISA's memory-consistency rules for tcgen05 (PTX ISA
§9.7.16.6.4; docs/ptx_facts/tcgen05.md §12j) order such a write before an operation of another
thread only through thread synchronisation: the writer's wait, then a barrier or an mbarrier
handoff, then the reader. So the MMA's issuing thread must be ordered after the wait that ended
each write of the cells it reads; a store issued after the writer arrived on the barrier the
issuer waits on (a real race) is reported.

Each completed write becomes a record (`TmemWrite`) holding the threads ordered after its wait:
the waiting warp for a store, the observing threads (and the issuing thread, for which cp -> mma
and shift -> mma are pipelined, §9.7.16.6.2) for a cp/shift. The records join the Hopper side's
ordering machinery (async_order.py): barriers, mbarrier arrivals and waits (also remote arrivals
of a cluster peer) and barrier.cluster grow the ordered sets exactly as for retired async-proxy
reads, so the same handoffs that order shared memory order tensor memory. A peer CTA's threads
are kept per cluster rank (`remote`), as there.

The fences: the ISA's pattern is `tcgen05.fence::before_thread_sync` before the synchronisation
and `::after_thread_sync` after it. The production compilers omit them, so (as for the missing
after_thread_sync fence, PTXGEN_SIM_TCGEN05_FENCES) their absence is not required here; only the
wait and the synchronisation are.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .errors import Fault

_ids = itertools.count()


@dataclass
class TmemWrite:
    """Tensor-memory cells written by a completed tcgen05.st/cp/shift, and the threads ordered after it."""
    rid: int
    regions: list            # tmem.Region
    ordered: np.ndarray      # bool per thread of the owning CTA
    what: str                # e.g. "warp 1's tcgen05.st at line 40 (waited at line 42)"
    remote: dict = field(default_factory=dict)   # cluster rank -> bool per thread of that CTA

    def ordered_in(self, rank: int | None, n: int) -> np.ndarray:
        if rank is None:
            return self.ordered
        got = self.remote.get(rank)
        return np.zeros(n, dtype=bool) if got is None else got

    def touches(self, region) -> bool:
        return any(r.overlaps(region) for r in self.regions)


def _contains(outer, inner) -> bool:
    return (outer.col0 <= inner.col0 and inner.col1 <= outer.col1
            and inner.mask & ~outer.mask == 0)


class TmemWrites:
    """One CTA's completed tensor-memory writes (kept on TmemState.writes). `peer`: the cluster rank
    of the CTA's pair peer (None outside a cluster pair), whose threads may read the cells too."""

    def __init__(self, n: int, peer: int | None):
        self.n, self.peer = n, peer
        self.records: list[TmemWrite] = []

    def add(self, regions: list, ordered: np.ndarray, what: str, rank: int | None = None) -> TmemWrite:
        """A write of `regions` completed; `ordered`: threads (of this CTA, or of cluster CTA `rank`)
        ordered after it. Older records whose cells it overwrites entirely are dropped."""
        self.records = [rec for rec in self.records
                        if not all(any(_contains(new, old) for new in regions) for old in rec.regions)]
        rec = TmemWrite(next(_ids), list(regions), np.zeros(self.n, dtype=bool), what)
        self.mark(rec, ordered, rank)
        self.records.append(rec)
        return rec

    def mark(self, rec: TmemWrite, mask: np.ndarray, rank: int | None) -> None:
        if rank is None:
            rec.ordered |= mask
        else:
            rec.remote[rank] = rec.ordered_in(rank, len(mask)) | mask

    def done(self, rec: TmemWrite) -> bool:
        """Every thread that may read the cells (this CTA's, the pair peer's) is ordered after it."""
        if not rec.ordered.all():
            return False
        return self.peer is None or (self.peer in rec.remote and rec.remote[self.peer].all())

    def drop_columns(self, col0: int, col1: int) -> None:
        """The columns were freed: their records end."""
        self.records = [rec for rec in self.records
                        if not all(col0 <= r.col0 and r.col1 <= col1 for r in rec.regions)]

    # the interface async_order uses for its records
    def ordered_ids(self, mask: np.ndarray, rank: int | None) -> set:
        return {(self, rec.rid) for rec in self.records if (rec.ordered_in(rank, len(mask)) & mask).any()}

    def order(self, rids: set, mask: np.ndarray, rank: int | None) -> None:
        if not rids or not mask.any():
            return
        keep = []
        for rec in self.records:
            if rec.rid in rids:
                self.mark(rec, mask, rank)
                if self.done(rec):
                    continue
            keep.append(rec)
        self.records = keep


def writes_of(cta) -> TmemWrites:
    """The CTA's records (its TMEM state must exist), made on first use."""
    st = cta.tmem
    if st.writes is None:
        member = cta.cluster
        peer = member.rank ^ 1 if member is not None and member.cluster.size > 1 else None
        st.writes = TmemWrites(cta.n, peer)
    return st.writes


def stored(cta, warp: int, regions: list, lines: list, wait_line: int) -> None:
    """Warp `warp` executed tcgen05.wait::st for its stores of `regions`."""
    mask = np.zeros(cta.n, dtype=bool)
    mask[32 * warp:32 * warp + 32] = True
    what = (f"warp {warp}'s tcgen05.st at line{'s' if len(set(lines)) > 1 else ''} "
            f"{', '.join(str(x) for x in sorted(set(lines)))} (waited for at line {wait_line})")
    writes_of(cta).add(regions, mask, what)


def completed(rec, observer, tids: np.ndarray) -> None:
    """The threads `tids` of CTA `observer` observed the mbarrier phase that completes the cp/shift
    record `rec` (a tmem.MmaRecord): they, and the issuing thread, are ordered after its write."""
    owner = rec.owner
    writes = writes_of(owner)
    mask = np.zeros(observer.n, dtype=bool)
    mask[tids] = True
    rank = None if observer is owner else observer.cluster.rank
    if rec.written is None:
        issuer = rec.issuer or owner
        own = np.zeros(issuer.n, dtype=bool)
        own[rec.thread] = True
        rec.written = writes.add([rec.d], own, f"the {rec.what} at line {rec.line} (issued by thread "
                                 f"{rec.thread})", None if issuer is owner else issuer.cluster.rank)
    if any(r is rec.written for r in writes.records):
        writes.mark(rec.written, mask, rank)


def check_mma_reads(owner, issuer, tid: int, regions: list, what: str) -> None:
    """The tcgen05.mma issued by thread `tid` of CTA `issuer` reads `regions` of `owner`'s tensor
    memory: every completed write of them must be ordered before it, and a cp/shift still in flight
    that writes them must be the issuing thread's own (the pipelined order holds within a thread)."""
    st = owner.tmem
    where = "" if owner is issuer else f" of its pair peer (cluster CTA rank {owner.cluster.rank})"
    for region in regions:
        for rec in st.mmas:
            if rec.what != "tcgen05.mma" and rec.d.overlaps(region) and (
                    (rec.issuer or rec.owner) is not issuer or rec.thread != tid):
                raise Fault("race", f"thread {tid} {what} {region.describe()}{where}, the destination of the "
                            f"{rec.what} at line {rec.line} issued by another thread and still in flight (a cp "
                            "or shift needs no wait before an MMA of the same thread only): wait on the "
                            "mbarrier its tcgen05.commit arrives on, then hand over through a barrier or "
                            "an mbarrier")
        if st.writes is None:
            continue
        rank = None if owner is issuer else issuer.cluster.rank
        for rec in st.writes.records:
            if rec.touches(region) and not rec.ordered_in(rank, issuer.n)[tid]:
                raise Fault("race", f"thread {tid} {what} {region.describe()}{where}, which {rec.what} wrote, "
                            "and no barrier or mbarrier phase orders this MMA after that write's wait: "
                            "complete the write (tcgen05.wait::st; for cp, its commit's mbarrier), then "
                            "synchronise with the issuing thread (bar.sync, or arrive on the mbarrier it "
                            "waits on) before the MMA, with tcgen05.fence::before_thread_sync / "
                            "::after_thread_sync around that synchronisation (PTX ISA §9.7.16.6.4)")
