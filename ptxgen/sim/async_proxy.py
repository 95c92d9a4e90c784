"""Per-CTA state of Hopper's async proxy: mbarriers, in-flight TMA / bulk copies, bulk groups and
the generic->async proxy fence (docs/ptx_facts/tma.md §9d, mbarrier.md §9e, §9f).

An mbarrier (docs/ptx_facts/mbarrier.md §9e) has a phase number, an expected arrival count, the
arrivals still pending in the current phase and a transaction count. The phase completes when no
arrivals are pending and the transaction count is zero; completion flips the phase and reloads the
pending count.

Copies that complete on an mbarrier (`mbarrier::complete_tx::bytes`) read global memory when they
are issued, but their bytes stay "in flight": the destination is marked pending in shared memory
(so any generic read of it is an `async-pending` hazard) until a wait on the barrier observes the
phase complete. Only then do the bytes land and the copies' complete-tx is applied, so data is
visible exactly when a waiting thread may rely on it (the wait's acquire). A wait whose phase can
never complete (arrivals still pending with every thread group of the CTA waiting, or a
transaction count the in-flight copies cannot pay off) spins; STALL_LIMIT polls of one barrier
that saw no change in between are reported as a deadlock naming the barrier.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .errors import Fault
from .memory import NOBODY

STALL_LIMIT = 1000         # polls of an unchanged, incomplete barrier before reporting deadlock
MAX_COUNT = (1 << 20) - 1  # mbarrier expected count and tx-count range (PTX ISA mbarrier)


@dataclass
class InFlight:
    """One async copy into shared memory waiting for its barrier's phase to complete."""
    idx: np.ndarray       # shared byte indices (already swizzled), in data order
    data: np.ndarray      # uint8 bytes to land
    nbytes: int           # what its complete-tx subtracts
    line: int
    into: object = None   # the SharedMemory it lands in, when not the barrier's CTA's (.cta_group::2)


@dataclass
class Barrier:
    addr: int
    expected: int
    pending: int
    tx: int = 0
    phase: int = 0                 # completed phases so far; the current phase's parity is phase & 1
    version: int = 0               # bumped on every change (stall detection)
    inflight: list[InFlight] = field(default_factory=list)
    arriving: set = field(default_factory=set)    # async_order (owner, id) pairs the current phase's arrivals carry
    carried: set = field(default_factory=set)     # ... and those every completed phase carried

    def describe(self) -> str:
        flying = sum(c.nbytes for c in self.inflight)
        return (f"mbarrier at shared {self.addr:#x} (phase {self.phase}, parity {self.phase & 1}: "
                f"{self.pending} of {self.expected} arrivals pending, tx-count {self.tx}, "
                f"{flying} bytes of copies in flight)")


@dataclass
class BulkRead:
    """Shared bytes a bulk store (async proxy) reads until a wait_group.read covers its group."""
    thread: int
    group: int
    idx: np.ndarray
    line: int = 0          # the store's PTX line


@dataclass
class HopperState:
    barriers: dict[int, Barrier] = field(default_factory=dict)
    bulk_reads: list[BulkRead] = field(default_factory=list)
    bulk_commits: dict[int, int] = field(default_factory=dict)     # thread -> committed bulk groups
    stalls: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # line -> (addr, version, count)
    fenced: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # smem writer state at the last proxy fence


def require(ctx, what: str, version: tuple[int, int], arch: int) -> None:
    """Reject `what` in a module whose .version or .target predates it (ptxas would;
    docs/ptx_facts/module.md §10)."""
    m = re.match(r"sm_(\d+)", ctx.target or "")
    have = tuple(int(x) for x in ctx.version.split(".")) if re.fullmatch(r"\d+\.\d+", ctx.version or "") else None
    if m is not None and int(m.group(1)) < arch:
        raise ctx.fail(f"{what} needs .target sm_{arch} or newer, the module says .target {ctx.target}")
    if have is not None and have < version:
        raise ctx.fail(f"{what} needs PTX ISA {version[0]}.{version[1]} or newer, the module says "
                       f".version {ctx.version}")


def hopper(cta) -> HopperState:
    if cta.hopper is None:
        cta.hopper = HopperState()
    return cta.hopper


def barrier_at(cta, addr: int, what: str) -> Barrier:
    bar = hopper(cta).barriers.get(addr)
    if bar is None:
        raise Fault("race", f"{what} uses shared address {addr:#x}, which holds no initialised mbarrier "
                    "(mbarrier.init it first, and bar.sync before other threads use it)")
    return bar


def check_barrier_address(cta, addrs: np.ndarray, what: str) -> None:
    bad = addrs % 8 != 0
    if bad.any():
        raise Fault("misaligned", f"{what}: mbarrier address {int(addrs[bad][0]):#x} is not 8-byte aligned")
    cta.smem.check_bounds(addrs, 8, what)


def arrive(bar: Barrier, count: int, what: str) -> None:
    """Arrive `count` times; more arrivals than the phase still expects is a hazard."""
    if count > bar.pending:
        raise Fault("race", f"{what}: {count} arrival(s) on {bar.describe()}: more arrivals than the phase "
                    "expects (the barrier's count is too small, or a thread arrives twice per phase)")
    bar.pending -= count
    bar.version += 1
    try_complete(bar, land=None)


def add_tx(bar: Barrier, nbytes: int, what: str) -> None:
    """expect-tx (positive) or complete-tx (negative) on the transaction count."""
    tx = bar.tx + nbytes
    if not -MAX_COUNT <= tx <= MAX_COUNT:
        raise Fault("out-of-bounds", f"{what}: tx-count {tx} of {bar.describe()} leaves the range "
                    f"+-{MAX_COUNT} the PTX ISA allows")
    bar.tx = tx
    bar.version += 1
    try_complete(bar, land=None)


def try_complete(bar: Barrier, land) -> bool:
    """Complete the current phase if nothing is pending. With copies in flight the phase completes
    only when `land` (the smem) is given, i.e. when a waiting thread observes it; then the copies
    land first, paying off their tx bytes."""
    if bar.pending:
        return False
    if bar.inflight:
        if land is None or bar.tx != sum(c.nbytes for c in bar.inflight):
            return False
        for chunk in bar.inflight:
            mem = land if chunk.into is None else chunk.into
            mem.pending[chunk.idx] -= 1
            mem.data[chunk.idx] = chunk.data
            mem.w_thread[chunk.idx] = NOBODY   # async-proxy write, made visible by the wait's acquire
        bar.tx = 0
        bar.inflight = []
    if bar.tx:
        return False
    if bar.arriving:
        bar.carried |= bar.arriving
        bar.arriving = set()
    bar.phase += 1
    bar.pending = bar.expected
    bar.version += 1
    return True


def note_stall(cta, line: int, bar: Barrier, done: bool) -> None:
    """Count polls of an incomplete barrier that saw no change since the previous poll."""
    stalls = hopper(cta).stalls
    if done:
        stalls.pop(line, None)
        return
    prev = stalls.get(line)
    count = prev[2] + 1 if prev is not None and prev[:2] == (bar.addr, bar.version) else 0
    stalls[line] = (bar.addr, bar.version, count)
    if count >= STALL_LIMIT:
        alone = cta.cluster is None or cta.cluster.cluster.size == 1
        why = ("the transaction count is not paid off by the copies in flight" if not bar.pending
               else "every thread of the CTA is waiting (here, at another wait or at a barrier), so no "
               "arrival can come" if alone
               else "no thread of this CTA or of another CTA of its cluster arrived meanwhile")
        raise Fault("deadlock", f"wait on {bar.describe()} can never complete: {why} "
                    f"({STALL_LIMIT} polls saw no change)")
    cta.sync.note_load(line, np.array([bar.addr, bar.version], dtype=np.int64))


def generic_written_since_fence(cta, idx: np.ndarray) -> np.ndarray:
    """Bool per shared byte: written through the generic proxy after the last fence.proxy.async."""
    smem = cta.smem
    writer = smem.w_thread[idx]
    written = writer != NOBODY
    fenced = hopper(cta).fenced
    if fenced is None:
        return written
    w, e, d = fenced
    return written & ((writer != w[idx]) | (smem.w_epoch[idx] != e[idx]) | (smem.data[idx] != d[idx]))


def proxy_fence(cta) -> None:
    smem = cta.smem
    hopper(cta).fenced = (smem.w_thread.copy(), smem.w_epoch.copy(), smem.data.copy())


def check_async_read(cta, idx: np.ndarray, what: str) -> None:
    """An async-proxy read (TMA store source, wgmma operand) of bytes the generic proxy wrote needs
    a fence.proxy.async in between (docs/ptx_facts/mbarrier.md §9f)."""
    bad = generic_written_since_fence(cta, idx)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise Fault("race", f"{what} shared byte {int(idx[k]):#x}, written by thread "
                    f"{int(cta.smem.w_thread[idx[k]])} through the generic proxy (st.shared/stmatrix) "
                    "with no fence.proxy.async in between; add `fence.proxy.async.shared::cta;` "
                    "after the writes (and a barrier among the writers) before the async read")
