"""Happens-before between CTAs: a small vector-clock model of PTX release/acquire.

Split-K and Stream-K fix-ups hand partial tiles from CTA to CTA through global memory guarded by a
flag or counter. On hardware that is only correct with a release on the writing side and an acquire
on the reading side; this module decides, for every global access, whether such an edge exists.

* Every CTA has an epoch, its own component of its vector clock `vc`. Each global write is tagged
  (memory.GlobalMemory) with the writer CTA, whether it was strong, and the writer's epoch.
* A release (st.release, atom/red .release or .acq_rel, or a release fence followed by a
  relaxed/volatile store or atomic) snapshots the CTA's clock, attaches it to the words it writes
  (SyncModel.clocks) and bumps the epoch, so later writes are not covered.
* An acquire (ld.acquire, atom .acquire or .acq_rel, or a relaxed/volatile load followed by an
  acquire fence) that reads such a word merges the snapshot into the reader's clock.
* A CTA may read or overwrite bytes another CTA wrote only if the writer's epoch is covered by its
  clock, except that two strong (.gpu/.sys scope) accesses never race (they are morally strong:
  atomics on one counter, a flag polled while it is being set). .cta-scoped operations are weak for
  other CTAs. An RMW keeps the clock already on the word (release sequence) and adds its own.

Inside a CTA threads run in lock step, but warps do not on hardware, so thread sets matter:
* a release by threads T covers every write made before the CTA's last bar.sync, but later writes by
  threads outside T are moved to the next epoch (the "write log"): the classic missing __syncthreads
  before thread 0 signals is then a race at the reader;
* an acquire by threads T makes data visible to T at once and to the other threads only after the
  next bar.sync;
* a fence makes a later relaxed store a release only for threads that executed the fence, and an
  earlier relaxed load an acquire only for threads that executed both.

The scheduler (scheduler.py) uses the spin bookkeeping at the end of CtaSync to detect deadlock.
"""
from __future__ import annotations

import numpy as np

from .errors import Fault


class SyncModel:
    """Launch-wide state: CTA names per slot and the release clocks attached to global words."""

    def __init__(self, names: list[tuple[int, int, int]], logging: bool):
        self.names = names
        self.nslots = len(names)
        self.logging = logging          # keep write logs (the program releases; several CTAs)
        self.clocks: dict[int, np.ndarray] = {}   # word address (addr >> 2) -> vector clock
        self._keys: np.ndarray | None = None

    def _key_array(self) -> np.ndarray:
        if self._keys is None:
            self._keys = np.fromiter(self.clocks.keys(), dtype=np.int64, count=len(self.clocks))
        return self._keys

    def words(self, addrs: np.ndarray, width: int) -> np.ndarray:
        """(k, words) word addresses covered by k accesses of `width` bytes."""
        if width <= 4:
            return (addrs >> 2)[:, None]
        return (addrs[:, None] + np.arange(0, width, 4)) >> 2

    def forget(self, addrs: np.ndarray, width: int) -> None:
        """A write without release semantics replaces whatever release the words carried."""
        if not self.clocks:
            return
        words = self.words(addrs, width).reshape(-1)
        hit = words[np.isin(words, self._key_array())]
        for w in np.unique(hit).tolist():
            del self.clocks[w]
        if len(hit):
            self._keys = None

    def attach(self, words: np.ndarray, clocks: list) -> None:
        """Set the release clock of each word (None removes it)."""
        for w, clock in zip(words.tolist(), clocks):
            if clock is None:
                self.clocks.pop(w, None)
            else:
                self.clocks[w] = clock
        self._keys = None

    def lookup(self, words: np.ndarray) -> list:
        """Release clock (or None) per word."""
        if not self.clocks:
            return [None] * len(words)
        get = self.clocks.get
        return [get(w) for w in words.tolist()]

    def name(self, slot: int) -> str:
        return str(self.names[slot]) if 0 <= slot < self.nslots else f"#{slot}"


def merge(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return np.maximum(a, b)


class CtaSync:
    """One CTA's vector clock, pending acquires, fences, write log and spin bookkeeping."""

    def __init__(self, model: SyncModel, slot: int, n: int):
        self.model = model
        self.slot = slot
        self.n = n
        self.vc = np.full(model.nslots, -1, dtype=np.int64)
        self.vc[slot] = 0
        self.pending_acq: list[tuple[np.ndarray, np.ndarray]] = []  # (thread mask, clock) until bar.sync
        self.observed: list[tuple[np.ndarray, np.ndarray]] = []     # relaxed loads awaiting a fence
        self.fence_of = np.full(n, -1, dtype=np.int64)                # newest release fence per thread
        self.fence_clocks: list[np.ndarray] = []
        self.log: list[tuple[int, np.ndarray, np.ndarray]] = []       # (array, byte index, thread per byte)
        # spin detection (scheduler.py): what this CTA did since its last backward branch
        self.seen: dict[int, bytes] = {}
        self.iter_stale = False
        self.iter_fresh = False
        self.stale_line = 0

    @property
    def epoch(self) -> int:
        return int(self.vc[self.slot])

    @property
    def logging(self) -> bool:
        return self.model.logging

    # ------------------------------------------------------------------ visibility
    def check(self, tags: np.ndarray, epochs: np.ndarray, tids: np.ndarray | None, strong: bool,
              what: str) -> None:
        """Race Fault unless each other-CTA write (tag = slot*2 + strong, epoch) is ordered before us."""
        writer = tags >> 1
        ok = epochs <= self.vc[writer]
        if strong:
            ok |= (tags & 1) == 1
        if not ok.all() and self.pending_acq and tids is not None:
            for mask, clock in self.pending_acq:
                ok |= mask[tids] & (epochs <= clock[writer])
        if ok.all():
            return
        k = int(np.flatnonzero(~ok)[0])
        who = self.model.name(int(writer[k]))
        kind = "strong" if tags[k] & 1 else "ordinary"
        hint = "" if tids is None else (
            f"; thread {int(tids[k])} has acquired no release made after that write"
            + (" (another thread's acquire reaches it only after a bar.sync)" if self.pending_acq else ""))
        raise Fault("race", f"{what} global bytes that CTA {who} wrote with an {kind} store, and no "
                    f"release/acquire pair orders that write before this access{hint}")

    # ------------------------------------------------------------------ release side
    def release(self, mask: np.ndarray | None, gmem) -> np.ndarray:
        """Clock snapshot of a release by the threads in `mask` (None = all); starts a new epoch.

        The snapshot includes what those threads acquired (causality is transitive). Writes made
        since the last bar.sync by threads outside `mask` are not ordered before the release, so
        they move to the new epoch."""
        new_epoch = self.epoch + 1
        if self.log:
            keep = []
            if mask is not None:
                for a, idx, tid in self.log:
                    outside = ~mask[tid]
                    if outside.any():
                        gmem.restamp(a, idx[outside], self.slot, new_epoch)
                        keep.append((a, idx[outside], tid[outside]))
            self.log = keep
        snap = self.vc.copy()
        for m, clock in self.pending_acq:      # what the releasing threads acquired themselves
            if mask is None or (m & mask).any():
                np.maximum(snap, clock, out=snap)
        self.vc[self.slot] = new_epoch
        return snap

    def release_fence(self, mask: np.ndarray | None, gmem) -> None:
        snap = self.release(mask, gmem)
        if mask is None:
            self.fence_of[:] = len(self.fence_clocks)
        else:
            self.fence_of[mask] = len(self.fence_clocks)
        self.fence_clocks.append(snap)

    def fence_clock_of(self, tids: np.ndarray) -> list:
        """Per thread: the snapshot of its newest release fence, or None."""
        if not self.fence_clocks:
            return [None] * len(tids)
        return [self.fence_clocks[i] if i >= 0 else None for i in self.fence_of[tids].tolist()]

    # ------------------------------------------------------------------ acquire side
    def acquire(self, mask: np.ndarray | None, clock: np.ndarray | None, active: np.ndarray) -> None:
        """Threads in `mask` (None = all) acquired `clock`; the others see it after the next bar.sync."""
        if clock is None:
            return
        if mask is None or not (active & ~mask).any():
            np.maximum(self.vc, clock, out=self.vc)
        else:
            _add(self.pending_acq, mask, clock)

    def observe(self, mask: np.ndarray | None, clock: np.ndarray | None) -> None:
        """A relaxed load read a released word: an acquire fence by the same threads completes it."""
        if clock is not None:
            _add(self.observed, np.ones(self.n, dtype=bool) if mask is None else mask, clock)

    def acquire_fence(self, mask: np.ndarray | None, active: np.ndarray) -> None:
        keep = []
        for m, clock in self.observed:
            both = m if mask is None else m & mask
            if both.any():
                self.acquire(None if both.all() else both, clock, active)
            rest = np.zeros_like(m) if mask is None else m & ~mask
            if rest.any():
                keep.append((rest, clock))
        self.observed = keep

    def barrier(self) -> None:
        """bar.sync: pending acquires reach every thread; earlier writes are ordered before any release."""
        for _, clock in self.pending_acq:
            np.maximum(self.vc, clock, out=self.vc)
        self.pending_acq = []
        self.log = []

    # ------------------------------------------------------------------ spin bookkeeping
    def note_load(self, line: int, data: np.ndarray) -> None:
        """A synchronising load at `line` returned `data`: fresh if it differs from last time."""
        sig = data.tobytes()
        if self.seen.get(line) == sig:
            self.iter_stale = True
            self.stale_line = line
        else:
            self.seen[line] = sig
            self.iter_fresh = True


def _add(entries: list[tuple[np.ndarray, np.ndarray]], mask: np.ndarray, clock: np.ndarray) -> None:
    """Append (mask, clock), merging into the last entry if it has the same threads (spin loops)."""
    if entries and np.array_equal(entries[-1][0], mask):
        entries[-1] = (entries[-1][0], np.maximum(entries[-1][1], clock))
    else:
        entries.append((mask.copy(), clock))


def group_by_clock(model: SyncModel, words: np.ndarray, tids: np.ndarray, n: int):
    """[(thread mask, clock)] for the threads whose access covered a word carrying a release clock."""
    if not model.clocks or len(words) == 0:
        return []
    if words.min() == words.max():            # every thread read the same word (a flag)
        clock = model.clocks.get(int(words[0]))
        if clock is None:
            return []
        mask = np.zeros(n, dtype=bool)
        mask[tids] = True
        return [(mask, clock)]
    uniq, inverse = np.unique(words, return_inverse=True)
    out = []
    for k, clock in enumerate(model.lookup(uniq)):
        if clock is not None:
            mask = np.zeros(n, dtype=bool)
            mask[tids[inverse == k]] = True
            out.append((mask, clock))
    return out


def check_scope(scope: str | None, fail) -> bool:
    """True if the scope reaches other CTAs (.gpu/.sys). A .cluster-scoped ld/st/fence of global
    memory is not simulated (the cluster's shared memory is: .shared::cluster accesses)."""
    if scope == "cluster":
        raise fail("scope .cluster on this access is not simulated: use .gpu (a stronger scope, same result "
                   "on one GPU), or .shared::cluster addresses for the cluster's shared memory")
    return scope in ("gpu", "sys")

