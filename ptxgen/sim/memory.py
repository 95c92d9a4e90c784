"""Global and shared memory with the checks a real GPU would not make for you.

Global memory is the caller's numpy arrays (read and written through uint8 views), each placed in
the middle of its own 1 TiB region of fake addresses. Everything else is unmapped, so an access
that strays from its array by less than half a region (any offset a kernel computes from 32-bit
indices) can never land in another argument's array: it is reported against the argument whose
region it falls in, i.e. the one its pointer was derived from, with the distance and the bounds.
Per-byte writer tags (CTA, strength, epoch) let sync.py decide whether two CTAs touching the same
bytes were ordered by a release/acquire pair.

Shared memory is one uint8 array per CTA plus per-byte race state: the last writer thread and the
barrier epoch of that write, the last reader thread (or MANY) and its epoch, and a count of
cp.async copies still pending on the byte. Atomics (atom/red) keep their own last-accessor thread
(or MANY) and epoch, allocated on the first one: atomics of several threads on one byte never race
with each other, but race with a plain load or store of another thread in the same barrier epoch.
"""
from __future__ import annotations

import numpy as np

from .errors import Fault

GLOBAL_BASE = 0x7F00_0000_0000
GLOBAL_REGION = 1 << 40      # fake address space per argument array; the array sits at its middle
SHARED_GENERIC_BASE = 0x7E00_0000_0000  # where cvta.shared puts the shared window
CLUSTER_STRIDE = 1 << 24        # cluster rank r's shared window starts at r * CLUSTER_STRIDE (cluster.py)
PARAM_BASE = 0x7D00_0000_0000  # address of the kernel parameters (mov of a .param symbol, cvta.param)
NOBODY = -1
MANY = -2


class GlobalMemory:
    """The argument arrays of one launch as device buffers.

    With several CTAs (`track`), every written byte is tagged with its writer (CTA slot * 2 + 1 if
    the store was strong) and the writer's epoch; sync.CtaSync decides whether a later access by
    another CTA is ordered after it. A launch of one CTA needs no tags.
    """

    def __init__(self, buffers: list[tuple[str, np.ndarray]], track: bool = True):
        self.names = [name for name, _ in buffers]
        self.views: list[np.ndarray] = []
        self.track = track
        bases, ends = [], []
        for i, (name, arr) in enumerate(buffers):
            view = byte_view(arr, name)
            if view.size > GLOBAL_REGION // 4:
                raise ValueError(f"argument {name!r} has {view.size} bytes; the simulator maps at most "
                                 f"{GLOBAL_REGION // 4} bytes per array")
            self.views.append(view)
            bases.append(GLOBAL_BASE + i * GLOBAL_REGION + GLOBAL_REGION // 2)
            ends.append(bases[-1] + view.size)
        self.bases = np.array(bases, dtype=np.int64)
        self.ends = np.array(ends, dtype=np.int64)
        self.writers: list[PagedTags | None] = [None] * len(buffers)
        self.epochs: list[PagedTags | None] = [None] * len(buffers)

    def base_of(self, index: int) -> int:
        return int(self.bases[index])

    # -- locating
    def locate(self, addrs: np.ndarray, lengths: np.ndarray | int, what: str) -> np.ndarray:
        """Index of the array holding each [addr, addr+length); out-of-bounds Fault otherwise."""
        if len(self.bases) == 0:
            bad = np.zeros(len(addrs), dtype=bool) | True
            idx = np.zeros(len(addrs), dtype=np.int64)
        else:
            idx = np.searchsorted(self.bases, addrs, side="right") - 1
            safe = np.maximum(idx, 0)
            bad = (idx < 0) | (addrs + lengths > self.ends[safe])
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            length = int(lengths if np.ndim(lengths) == 0 else lengths[k])
            raise Fault("out-of-bounds", f"{what} of {length} bytes at global address "
                        f"{int(addrs[k]):#x} {self.describe(int(addrs[k]), length)}")
        return idx

    def describe(self, addr: int, length: int) -> str:
        """Where an out-of-bounds access lies, against the argument whose region holds it (the
        argument its address was derived from: arrays are a region apart, see the module doc)."""
        if len(self.bases) == 0:
            return "is outside global memory: the launch has no array arguments"
        i = min(max((addr - GLOBAL_BASE) // GLOBAL_REGION, 0), len(self.bases) - 1)
        b, e = int(self.bases[i]), int(self.ends[i])
        span = f"argument {self.names[i]!r}, which spans [{b:#x}, {e:#x}) ({e - b} bytes)"
        if abs(addr - b) >= GLOBAL_REGION // 2:
            return f"is not derived from any argument's pointer (a wild or null pointer); the nearest is {span}"
        if addr < b:
            where = f"lies {b - addr} bytes before the start of"
        elif addr < e:
            where = f"straddles the end ({addr + length - e} bytes past it) of"
        else:
            where = f"lies {addr - e} bytes past the end of"
        return (f"is out of bounds: it {where} {span}. On a GPU this access would reach another "
                f"allocation (another argument's data) or fault")

    def _groups(self, addrs: np.ndarray, width: int, what: str):
        """(array, row selection or None, byte index (rows, width)) per array the accesses touch."""
        idx = self.locate(addrs, width, what)
        offs = np.arange(width)
        first = int(idx[0]) if len(idx) else 0
        if len(idx) and (idx == first).all():
            yield first, None, (addrs - self.bases[first])[:, None] + offs
            return
        for a in np.unique(idx).tolist():
            sel = idx == a
            yield a, sel, (addrs[sel] - self.bases[a])[:, None] + offs

    def _check_others(self, a: int, byte_idx: np.ndarray, tids, acc, strong: bool, what: str) -> None:
        writers = self.writers[a]
        if writers is None:
            return
        w = writers.get(byte_idx)
        other = (w != NOBODY) & ((w >> 1) != acc.slot)
        if strong and other.any():
            other &= (w & 1) == 0       # two strong accesses never race (morally strong)
        if other.any():
            rows = np.broadcast_to(np.arange(byte_idx.shape[0])[:, None], byte_idx.shape)[other]
            acc.check(w[other], self.epochs[a].get(byte_idx[other]),
                      None if tids is None else tids[rows], strong, what)

    # -- access
    def read(self, addrs: np.ndarray, width: int, acc, what: str, tids: np.ndarray | None = None,
             strong: bool = False) -> np.ndarray:
        """(k, width) bytes from k addresses; bytes another CTA wrote must be ordered before (sync.py)."""
        out = np.empty((len(addrs), width), dtype=np.uint8)
        for a, sel, byte_idx in self._groups(addrs, width, what):
            if sel is None:
                out = self.views[a][byte_idx]
            else:
                out[sel] = self.views[a][byte_idx]
            if self.track:
                self._check_others(a, byte_idx, tids if sel is None or tids is None else tids[sel],
                                   acc, strong, what)
        return out

    def write(self, addrs: np.ndarray, data: np.ndarray, acc, what: str, tids: np.ndarray | None = None,
              strong: bool = False, atomic: bool = False) -> None:
        """Store (k, width) bytes. Two threads of one instruction writing the same bytes is a race
        unless the stores are strong (the later thread wins); so is overwriting another CTA's bytes
        without ordering (sync.py)."""
        width = data.shape[1]
        for a, sel, byte_idx in self._groups(addrs, width, what):
            flat = byte_idx.reshape(-1)
            if not (atomic or strong) and len(np.unique(flat)) != len(flat):
                raise Fault("race", f"two threads of CTA {acc.model.name(acc.slot)} {what} the same "
                            "global bytes in one instruction")
            view = self.views[a]
            if not view.flags.writeable:
                raise Fault("out-of-bounds", f"{what} into read-only argument {self.names[a]!r}")
            sub_tids = tids if sel is None or tids is None else tids[sel]
            if self.track:
                self._check_others(a, byte_idx, sub_tids, acc, strong, what)
                if self.writers[a] is None:
                    self.writers[a], self.epochs[a] = PagedTags(), PagedTags()
                self.writers[a].set(flat, acc.slot * 2 + int(strong))
                self.epochs[a].set(flat, acc.epoch)
                if acc.logging and sub_tids is not None:
                    acc.log.append((a, flat, np.repeat(sub_tids, width)))
            view[flat] = (data if sel is None else data[sel]).reshape(-1)

    def restamp(self, a: int, idx: np.ndarray, slot: int, epoch: int) -> None:
        """Move bytes still carrying `slot`'s write to `epoch` (a release did not cover them)."""
        mine = (self.writers[a].get(idx) >> 1) == slot
        if mine.any():
            self.epochs[a].set(idx[mine], epoch)


class PagedTags:
    """An int32 tag per byte of a possibly huge array, stored in 64 KiB pages made on first write.

    Output matrices can be hundreds of MiB while a simulation writes only a few CTA tiles.
    """
    PAGE_BITS = 16

    def __init__(self):
        self.pages: dict[int, np.ndarray] = {}

    MASK = (1 << PAGE_BITS) - 1

    def _one_page(self, idx: np.ndarray) -> int | None:
        """The page number if every index lies in one page (the common case), else None."""
        if idx.size == 0:
            return None
        lo, hi = int(idx.min()) >> self.PAGE_BITS, int(idx.max()) >> self.PAGE_BITS
        return lo if lo == hi else None

    def get(self, idx: np.ndarray) -> np.ndarray:
        page = self._one_page(idx)
        if page is not None:
            tags = self.pages.get(page)
            return np.full(idx.shape, NOBODY, dtype=np.int32) if tags is None else tags[idx & self.MASK]
        page_of = idx >> self.PAGE_BITS
        out = np.full(idx.shape, NOBODY, dtype=np.int32)
        for page in np.unique(page_of):
            tags = self.pages.get(int(page))
            if tags is not None:
                sel = page_of == page
                out[sel] = tags[idx[sel] & ((1 << self.PAGE_BITS) - 1)]
        return out

    def set(self, idx: np.ndarray, value: int) -> None:
        page = self._one_page(idx)
        if page is not None:
            tags = self.pages.get(page)
            if tags is None:
                tags = self.pages[page] = np.full(1 << self.PAGE_BITS, NOBODY, dtype=np.int32)
            tags[idx & self.MASK] = value
            return
        page_of = idx >> self.PAGE_BITS
        for page in np.unique(page_of):
            tags = self.pages.get(int(page))
            if tags is None:
                tags = self.pages[int(page)] = np.full(1 << self.PAGE_BITS, NOBODY, dtype=np.int32)
            tags[idx[page_of == page] & ((1 << self.PAGE_BITS) - 1)] = value


def byte_view(arr: np.ndarray, name: str) -> np.ndarray:
    """A 1-D uint8 view sharing memory with a C- or F-contiguous array (rejects anything else)."""
    if arr.flags.c_contiguous:
        flat = arr.reshape(-1)
    elif arr.flags.f_contiguous:
        flat = arr.T.reshape(-1)
    else:
        raise ValueError(f"argument {name!r} is not contiguous; pass np.ascontiguousarray(...) "
                         "(a device buffer must be one dense block of memory)")
    return flat.view(np.uint8)   # reshape of a contiguous array is always a view


class SharedMemory:
    """One CTA's shared window with race and cp.async-pending tracking per byte."""

    def __init__(self, size: int, scratch: np.ndarray | None = None):
        self.size = size
        self.data = np.full(size, 0xFF, dtype=np.uint8)   # poison: NaN for f16/f32
        self.w_thread = np.full(size, NOBODY, dtype=np.int32)
        self.w_epoch = np.full(size, -1, dtype=np.int32)
        self.r_thread = np.full(size, NOBODY, dtype=np.int32)
        self.r_epoch = np.full(size, -1, dtype=np.int32)
        self.pending = np.zeros(size, dtype=np.int16)
        self.async_reads: np.ndarray | None = None   # per byte: wgmmas in flight reading it
        self.retired = None   # async_order.RetiredReads: async-proxy reads ended by a wait, made on the first
        self.cross = None     # cluster.CrossTags in a launch with clusters of 2+ CTAs (DSMEM ordering)
        self.x_thread: np.ndarray | None = None   # per byte: last atomic accessor (or MANY)
        self.x_epoch: np.ndarray | None = None    # and the barrier epoch of that atomic
        # duplicate detection, no meaning between calls, so CTAs alive at once may share it
        self.scratch = np.zeros(size, dtype=np.int32) if scratch is None else scratch

    def reset(self) -> None:
        self.data.fill(0xFF)
        self.w_thread.fill(NOBODY)
        self.w_epoch.fill(-1)
        self.r_thread.fill(NOBODY)
        self.r_epoch.fill(-1)
        self.pending.fill(0)
        self.async_reads = None
        self.retired = None
        self.cross = None
        self.x_thread = self.x_epoch = None

    def check_bounds(self, addrs: np.ndarray, width: int, what: str) -> None:
        bad = (addrs < 0) | (addrs + width > self.size)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise Fault("out-of-bounds", f"{what} of {width} bytes at shared address {int(addrs[k]):#x} "
                        f"is outside the {self.size}-byte shared window")

    def byte_index(self, addrs: np.ndarray, width: int) -> np.ndarray:
        return (addrs[:, None] + np.arange(width)).reshape(-1)

    def check_not_pending(self, idx: np.ndarray, threads: np.ndarray, width: int, what: str) -> None:
        pend = self.pending[idx]
        if pend.any():
            k = int(np.flatnonzero(pend)[0])
            raise Fault("async-pending", f"thread {int(threads[k // width])} {what} shared byte "
                        f"{int(idx[k]):#x} while a cp.async into it has not been waited for")

    def read(self, threads: np.ndarray, addrs: np.ndarray, width: int, epoch: int, what: str) -> np.ndarray:
        """(k, width) bytes; checks pending copies and writes by other threads since the last barrier."""
        self.check_bounds(addrs, width, what)
        idx = self.byte_index(addrs, width)
        tid = np.repeat(threads, width)
        self.check_not_pending(idx, threads, width, what)
        if self.retired is not None:
            self.retired.check_read(idx, tid, what)
        wt = self.w_thread[idx]
        conflict = (self.w_epoch[idx] == epoch) & (wt != tid) & (wt != NOBODY)
        if conflict.any():
            k = int(np.flatnonzero(conflict)[0])
            raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x} written by "
                        f"thread {int(wt[k])} with no bar.sync in between")
        self._check_atomics(idx, tid, epoch, what)
        self._note_readers(idx, tid, epoch)
        if self.cross is not None:
            self.cross.local(idx, tid, False, what)
        return self.data[idx].reshape(len(addrs), width)

    def _note_readers(self, idx: np.ndarray, tid: np.ndarray, epoch: int) -> None:
        prev_t = self.r_thread[idx]
        other_before = (self.r_epoch[idx] == epoch) & (prev_t != tid) & (prev_t != NOBODY)
        self.r_thread[idx] = tid
        self.r_epoch[idx] = epoch
        several_now = self.r_thread[idx] != tid   # another thread of this access won the store
        many = other_before | several_now
        if many.any():
            self.r_thread[idx[many]] = MANY

    def _check_atomics(self, idx: np.ndarray, tid: np.ndarray, epoch: int, what: str) -> None:
        """A plain access races with an atomic of another thread in the same barrier epoch."""
        if self.x_thread is None:
            return
        xt = self.x_thread[idx]
        bad = (self.x_epoch[idx] == epoch) & (xt != tid) & (xt != NOBODY)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            who = "several threads" if xt[k] == MANY else f"thread {int(xt[k])}"
            raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x} that {who} accessed "
                        "with atom/red with no bar.sync in between (a plain access racing with an atomic); "
                        "make both accesses atomic or put a bar.sync between them")

    def atomic(self, threads: np.ndarray, addrs: np.ndarray, width: int, epoch: int, what: str) -> np.ndarray:
        """Race-check and record an atom/red of `width` bytes per thread; the byte index (k*width,).
        Atomics never race with each other; plain loads and stores of other threads since the last
        barrier race with them (check_write), as do bytes a cp.async or wgmma still owns."""
        self.check_bounds(addrs, width, what)
        idx = self.byte_index(addrs, width)
        tid = np.repeat(threads, width)
        self.check_not_pending(idx, threads, width, what)
        self.check_write(idx, tid, epoch, what, atomic=True)
        if self.x_thread is None:
            self.x_thread = np.full(self.size, NOBODY, dtype=np.int32)
            self.x_epoch = np.full(self.size, -1, dtype=np.int32)
        prev = self.x_thread[idx]
        other_before = (self.x_epoch[idx] == epoch) & (prev != tid) & (prev != NOBODY)
        self.x_thread[idx] = tid
        self.x_epoch[idx] = epoch
        many = other_before | (self.x_thread[idx] != tid)
        if many.any():
            self.x_thread[idx[many]] = MANY
        if self.cross is not None:
            self.cross.atomic(idx, tid, self.cross.owner, what)
        return idx

    def check_write(self, idx: np.ndarray, tid: np.ndarray, epoch: int, what: str, atomic: bool = False) -> None:
        """Race check of a write without recording it (cp.async at issue time)."""
        if self.async_reads is not None and self.async_reads[idx].any():
            k = int(np.flatnonzero(self.async_reads[idx])[0])
            raise Fault("async-pending", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x} that a "
                        "wgmma still in flight reads; retire it with wgmma.wait_group first (a tcgen05.mma: wait "
                        "on the mbarrier its tcgen05.commit arrives on)")
        if self.retired is not None:
            self.retired.check_write(idx, tid, what)
        wt = self.w_thread[idx]
        rt = self.r_thread[idx]
        by_writer = (self.w_epoch[idx] == epoch) & (wt != tid) & (wt != NOBODY)
        by_reader = (self.r_epoch[idx] == epoch) & (rt != tid) & (rt != NOBODY)
        if by_writer.any():
            k = int(np.flatnonzero(by_writer)[0])
            raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x} also written by "
                        f"thread {int(wt[k])} with no bar.sync in between")
        if by_reader.any():
            k = int(np.flatnonzero(by_reader)[0])
            who = "several threads" if rt[k] == MANY else f"thread {int(rt[k])}"
            raise Fault("race", f"thread {int(tid[k])} {what} shared byte {int(idx[k]):#x} read by "
                        f"{who} with no bar.sync in between")
        if not atomic:
            self._check_atomics(idx, tid, epoch, what)

    def write(self, threads: np.ndarray, addrs: np.ndarray, data: np.ndarray, epoch: int, what: str,
              check_pending: bool = True) -> None:
        """Store (k, width) bytes and record the writers."""
        width = data.shape[1]
        self.check_bounds(addrs, width, what)
        idx = self.byte_index(addrs, width)
        tid = np.repeat(threads, width)
        if check_pending:
            self.check_not_pending(idx, threads, width, what)
        self.record_write(idx, tid, epoch, what, data.reshape(-1))
        self.data[idx] = data.reshape(-1)

    def record_write(self, idx: np.ndarray, tid: np.ndarray, epoch: int, what: str,
                     values: np.ndarray | None = None) -> None:
        """Record the writers; several threads storing one byte in the same instruction is a race
        unless they all store the same value (`values`), as Triton's all-threads constant stores do."""
        self.check_write(idx, tid, epoch, what)
        if self.cross is not None:
            self.cross.local(idx, tid, True, what)
        self.w_thread[idx] = tid
        self.w_epoch[idx] = epoch
        dup = self.w_thread[idx] != tid
        if dup.any() and values is not None:
            order = np.argsort(idx, kind="stable")
            same_byte = idx[order][1:] == idx[order][:-1]
            if (values[order][1:][same_byte] == values[order][:-1][same_byte]).all():
                return
        if dup.any():
            k = int(np.flatnonzero(dup)[0])
            raise Fault("race", f"threads {int(tid[k])} and {int(self.w_thread[idx[k]])} {what} shared byte "
                        f"{int(idx[k]):#x} in the same instruction")


def bank_wavefronts(warps: np.ndarray, lanes: np.ndarray, addrs: np.ndarray, width: int,
                    lanes_per_phase: int) -> tuple[int, int]:
    """(wavefronts, ideal) of one instruction's shared access, summed over warps
    (docs/ptx_facts/shared_memory.md §7).

    A phase is a group of `lanes_per_phase` lanes; its cost is the largest number of distinct
    32-bit words any one bank must deliver. Ideal is the number of phases with an active lane.
    """
    if len(addrs) == 0:
        return 0, 0
    words_per_lane = max(1, width // 4)
    phases_per_warp = 32 // lanes_per_phase
    group = warps * phases_per_warp + lanes // lanes_per_phase
    words = ((addrs >> 2)[:, None] + np.arange(words_per_lane)).reshape(-1)
    keys = np.sort((np.repeat(group, words_per_lane).astype(np.int64) << 32) | words.astype(np.int64))
    distinct = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    ngroups = (int(warps.max()) + 1) * phases_per_warp
    per_bank = np.bincount((distinct >> 32) * 32 + (distinct & 31), minlength=ngroups * 32).reshape(ngroups, 32)
    return int(per_bank.max(axis=1).sum()), int(np.count_nonzero(per_bank.any(axis=1)))
