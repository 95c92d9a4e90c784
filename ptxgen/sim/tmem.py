"""Tensor memory of one CTA (sm_100a): the cells, the column allocator and the bookkeeping of the
asynchronous tcgen05 operations that touch them (docs/ptx_facts/tcgen05.md §12b, §12j, §12l).

Geometry (PTX ISA §9.7.16.1): 128 lanes x 512 columns of 32-bit cells per CTA; an address holds the
lane in bits 31-16 and the column in bits 15-0. Warp w may tcgen05.ld/st lanes 32*(w%4)..+31 only
(§9.7.16.8.1).

Allocation (§9.7.16.7.1): whole columns (all 128 lanes), a power of two from 32 to 512, the base
aligned to the count (the allocator is a buddy system, as CUTLASS and Triton assume when they
add fixed offsets); an alloc that cannot be satisfied blocks until columns are freed. Every column
must be freed before the CTA exits; after relinquish_alloc_permit no alloc may follow.

Asynchrony (§9.7.16.6): the simulator computes an MMA when it is issued, but the MMA stays in
flight until a thread observes the completion of the mbarrier phase its tcgen05.commit arrives
on (a successful mbarrier wait: ops_tcgen05.wrap_mbarrier). While in flight, its D columns may
not be read or written by tcgen05.ld/st, freed, or its shared operands overwritten. A tcgen05.ld
or st stays pending in its warp until tcgen05.wait::ld / ::st; until then its cells may not be
overwritten (by an MMA or st) or freed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import tmem_order
from .errors import Fault
from .state import CtaState

LANES, COLUMNS = 128, 512
STALL_LIMIT = 1000        # polls of a blocked alloc that saw no dealloc before reporting deadlock


@dataclass
class Region:
    """TMEM cells: lanes [lane0, lane1) x columns [col0, col1); `mask` (bit l = lane l) narrows the
    lanes where they are not contiguous (an M = 64 accumulator uses 16 lanes of each quarter)."""
    lane0: int
    lane1: int
    col0: int
    col1: int
    mask: int = 0

    def __post_init__(self) -> None:
        if not self.mask:
            self.mask = ((1 << self.lane1) - 1) ^ ((1 << self.lane0) - 1)

    def overlaps(self, other: "Region") -> bool:
        return bool(self.mask & other.mask) and self.col0 < other.col1 and other.col0 < self.col1

    def describe(self) -> str:
        return f"lanes {self.lane0}..{self.lane1 - 1}, columns {self.col0}..{self.col1 - 1}"


@dataclass
class MmaRecord:
    """A tcgen05.mma issued and not yet observed complete."""
    thread: int
    d: Region
    reads: list                 # TMEM regions it reads: A, scale factors
    smem: np.ndarray            # shared byte indices its operands read
    line: int
    owner: object = None        # the CtaState whose TMEM and shared memory it uses
    what: str = "tcgen05.mma"   # or "tcgen05.cp"
    partners: list = field(default_factory=list)   # cta_group::2: the peer CTA's half
    issuer: object = None       # the CtaState whose thread issued it (None: owner)
    written: object = None      # cp/shift: its tmem_order.TmemWrite once completed
    committed: bool = False
    retired: bool = False


@dataclass
class Pending:
    """A tcgen05.ld or st of one warp waiting for tcgen05.wait::ld / ::st."""
    warp: int
    region: Region
    line: int


@dataclass
class TmemState:
    cells: np.ndarray = field(default_factory=lambda: np.zeros((LANES, COLUMNS), dtype=np.uint32))
    allocs: dict = field(default_factory=dict)       # first column -> column count
    relinquished: bool = False
    last_ncols: int = 0
    cta_group: int = 0                               # the kernel's one cta_group (0 until first use)
    mmas: list = field(default_factory=list)         # MmaRecord in flight
    loads: list = field(default_factory=list)        # Pending tcgen05.ld
    stores: list = field(default_factory=list)       # Pending tcgen05.st
    watch: dict = field(default_factory=dict)        # mbarrier addr -> [(Barrier, phase, [MmaRecord])]
    stall: int = 0
    collectors: dict = field(default_factory=dict)   # tcgen05.mma.ws B collector buffer -> B of its fill
    writes: object = None                 # tmem_order.TmemWrites: completed st/cp/shift writes
    unfenced: np.ndarray | None = None    # strict fences: per thread, line of an mbarrier wait not yet
    #                                       followed by tcgen05.fence::after_thread_sync (0: none)


def tmem_of(cta: CtaState) -> TmemState:
    if cta.tmem is None:
        cta.tmem = TmemState()
    return cta.tmem


def use_cta_group(st: TmemState, group: int, what: str) -> None:
    """All tcgen05 instructions of a kernel use one .cta_group (ptxas rejects a mix; §9.7.16.7)."""
    if st.cta_group and st.cta_group != group:
        raise Fault("unsupported", f"{what} uses .cta_group::{group} but the kernel already used "
                    f".cta_group::{st.cta_group}; all tcgen05 instructions of a kernel use the same one")
    st.cta_group = group


def split_address(addr: int) -> tuple[int, int]:
    """(lane, column) of a TMEM address."""
    return (addr >> 16) & 0xFFFF, addr & 0xFFFF


def check_allocated(st: TmemState, region: Region, what: str) -> None:
    """The region lies inside the TMEM array and inside allocated columns."""
    if region.lane1 > LANES or region.col1 > COLUMNS or region.lane0 < 0 or region.col0 < 0:
        raise Fault("tmem", f"{what} {region.describe()}: tensor memory has {LANES} lanes x {COLUMNS} columns")
    col = region.col0
    while col < region.col1:
        owner = next((s for s, n in st.allocs.items() if s <= col < s + n), None)
        if owner is None:
            raise Fault("tmem", f"{what} {region.describe()}: column {col} is not allocated "
                        "(tcgen05.alloc it first, and use the address alloc wrote to shared memory)")
        col = owner + st.allocs[owner]


# ------------------------------------------------------------------ allocation
def try_alloc(st: TmemState, ncols: int) -> int | None:
    """First column of a free, count-aligned block of `ncols` columns, or None if none is free."""
    for start in range(0, COLUMNS, ncols):
        if all(not (s < start + ncols and start < s + n) for s, n in st.allocs.items()):
            st.allocs[start] = ncols
            return start
    return None


def check_alloc_request(st: TmemState, ncols: int) -> None:
    if ncols < 32 or ncols > COLUMNS or ncols & (ncols - 1):
        raise Fault("tmem", f"tcgen05.alloc of {ncols} columns: the count must be a power of two from 32 to "
                    f"{COLUMNS}")
    if st.relinquished:
        raise Fault("tmem", "tcgen05.alloc after tcgen05.relinquish_alloc_permit: once a CTA relinquished its "
                    "permit it may not allocate again (allocate everything before relinquishing)")
    if st.last_ncols and ncols > st.last_ncols:
        raise Fault("tmem", f"tcgen05.alloc of {ncols} columns after one of {st.last_ncols}: the ISA forbids the "
                    "column count to increase between two allocations of a CTA")


def dealloc(st: TmemState, col: int, ncols: int, lane: int) -> None:
    if lane != 0 or st.allocs.get(col) != ncols:
        held = ", ".join(f"columns {s}..{s + n - 1}" for s, n in sorted(st.allocs.items())) or "nothing"
        raise Fault("tmem", f"tcgen05.dealloc of {ncols} columns at lane {lane}, column {col}: that is not an "
                    f"allocation of this CTA (it holds {held}); pass the address and count of an alloc")
    region = Region(0, LANES, col, col + ncols)
    for rec in st.mmas:
        if rec.d.overlaps(region) or any(r.overlaps(region) for r in rec.reads):
            raise Fault("async-pending", f"tcgen05.dealloc of columns {col}..{col + ncols - 1} while the "
                        f"{rec.what} at line {rec.line} using them is still in flight; wait on the mbarrier "
                        "its tcgen05.commit arrives on first")
    for kind, pend in (("ld", st.loads), ("st", st.stores)):
        for p in pend:
            if p.region.overlaps(region):
                raise Fault("async-pending", f"tcgen05.dealloc of columns {col}..{col + ncols - 1} while warp "
                            f"{p.warp}'s tcgen05.{kind} at line {p.line} is not waited for; execute "
                            f"tcgen05.wait::{kind} (and a barrier) first")
    del st.allocs[col]
    if st.writes is not None:
        st.writes.drop_columns(col, col + ncols)
    st.stall = 0              # a blocked alloc may now succeed


def check_exit(cta: CtaState) -> None:
    """Called when every thread of the CTA has exited: all columns must have been freed."""
    st = cta.tmem
    if st is not None and st.allocs:
        held = ", ".join(f"{n} columns at column {s}" for s, n in sorted(st.allocs.items()))
        raise Fault("tmem", f"the CTA exits with tensor memory still allocated ({held}); every "
                    "tcgen05.alloc needs a tcgen05.dealloc before the kernel ends")


# ------------------------------------------------------------------ async bookkeeping
def check_not_mma_target(st: TmemState, region: Region, what: str, by_mma: bool = False,
                         pipelined: tuple = ()) -> None:
    """No MMA, cp or shift in flight writes the region. `by_mma`: the reader is a tcgen05.mma, which
    may follow a tcgen05.cp or tcgen05.shift without a wait; `pipelined`: other record kinds the
    accessing instruction may follow without a wait (PTX ISA §9.7.16.6.2 "Pipelined tcgen05
    Instructions": cp -> mma, shift -> mma, mma -> shift, shift -> cp.4x256b)."""
    exempt = set(pipelined) | ({"tcgen05.cp", "tcgen05.shift"} if by_mma else set())
    for rec in st.mmas:
        if rec.d.overlaps(region) and rec.what not in exempt:
            target = ("the accumulator of the tcgen05.mma" if rec.what == "tcgen05.mma"
                      else f"the destination of the {rec.what}")
            raise Fault("async-pending", f"{what} {region.describe()}, {target} at line "
                        f"{rec.line} that is still in flight; wait on the mbarrier its tcgen05.commit arrives on "
                        "(and tcgen05.fence::after_thread_sync) first")


def check_not_mma_source(st: TmemState, region: Region, what: str) -> None:
    """A write of TMEM that an MMA in flight reads (A or scale factors): a write-after-read hazard."""
    for rec in st.mmas:
        if any(r.overlaps(region) for r in rec.reads):
            raise Fault("async-pending", f"{what} {region.describe()}, which the {rec.what} at line {rec.line} "
                        "still in flight reads; wait on the mbarrier its tcgen05.commit arrives on first")


def check_not_pending(pend: list, region: Region, what: str, kind: str, warp: int | None = None) -> None:
    for p in pend:
        if p.region.overlaps(region) and (warp is None or p.warp != warp):
            raise Fault("async-pending", f"{what} {region.describe()} while warp {p.warp}'s tcgen05.{kind} at line "
                        f"{p.line} of those cells is not waited for; tcgen05.wait::{kind} (then "
                        "tcgen05.fence::before_thread_sync and a barrier) first")


def byte_counts(idx: np.ndarray, size: int) -> np.ndarray:
    """How often each shared byte occurs in idx (int16 per byte): np.add.at is ten times slower."""
    return np.bincount(idx, minlength=size).astype(np.int16)


def retire(rec: MmaRecord) -> None:
    if rec.retired:
        return
    rec.retired = True
    cta = rec.owner
    if len(rec.smem) and cta.smem is not None and cta.smem.async_reads is not None:
        cta.smem.async_reads -= byte_counts(rec.smem, cta.smem.size)
    cta.tmem.mmas = [r for r in cta.tmem.mmas if r is not rec]


def pair_peer(cta: CtaState, what: str) -> CtaState:
    """The other CTA of this CTA's pair (cluster ranks differing in bit 0; PTX ISA §9.7.16.5.1),
    which must be running."""
    member = cta.cluster
    size = member.cluster.size if member is not None else 1
    if size < 2 or size % 2:
        raise Fault("unsupported", f"{what} with .cta_group::2 needs a CTA pair: launch clusters of an even "
                    f"number of CTAs (this cluster has {size})")
    peer = member.cluster.members[member.rank ^ 1]
    if peer is None or peer.done or peer.smem is None or not peer.active.any():
        raise Fault("race", f"{what} with .cta_group::2: the peer CTA (cluster rank {member.rank ^ 1}) is not "
                    "running; it must not have exited (end both CTAs with barrier.cluster arrive + wait)")
    return peer


def pair_of(cta: CtaState, what: str) -> list:
    """Both CTAs of this CTA's pair, even rank first (cta_group::2 operations touch both)."""
    return sorted([cta, pair_peer(cta, what)], key=lambda c: c.cluster.rank)


def link(issuer: CtaState, records: list) -> None:
    """The records one thread of `issuer` made (one per CTA of a pair): the issuer's own record
    lists the others as partners (its commit covers them), each knows its issuer."""
    mine = next(r for r in records if r.owner is issuer)
    mine.partners = [r for r in records if r is not mine]
    for r in records:
        r.issuer = issuer


def observed(cta: CtaState, addr: int, bar, tids: np.ndarray) -> None:
    """Threads `tids` of `cta` saw the mbarrier at `addr` complete a phase: retire the MMAs whose
    commit arrived in a phase that has now completed (in whichever CTA issued them); a completed
    cp/shift becomes a tensor-memory write ordered before these threads, and before every later
    waiter on the barrier (tmem_order.py)."""
    st = cta.tmem
    if st is None:
        return
    entries = st.watch.get(addr)
    if not entries:
        return
    keep = []
    for barrier, phase, records in entries:
        if barrier is bar and bar.phase > phase:
            for rec in records:
                retire(rec)
                if rec.what != "tcgen05.mma":
                    tmem_order.completed(rec, cta, tids)
                    if rec.written is not None:
                        bar.carried.add((rec.owner.tmem.writes, rec.written.rid))
        else:
            keep.append((barrier, phase, records))
    st.watch[addr] = keep
