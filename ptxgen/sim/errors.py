"""Errors the simulator reports: a HazardError names the PTX line that broke a rule."""
from __future__ import annotations

HAZARD_KINDS = frozenset(
    {"race", "async-pending", "out-of-bounds", "misaligned", "divergence", "unsupported", "deadlock",
     "missing-fence", "tmem"}
)
"""The kinds of HazardError:

race           two threads (or two CTAs) touch the same bytes without synchronisation: shared memory
               with no bar.sync in between; global memory between CTAs with no release/acquire
               (happens-before) edge (sync.py), or ordinary stores by two CTAs to the same bytes.
               Also: an mbarrier arrived on more often than its phase expects, or used uninitialised;
               generic-proxy shared writes read by a TMA store with no fence.proxy.async between;
               a CTA's shared bytes touched by another CTA of its cluster with no barrier.cluster
               arrive (release) / wait (acquire) between (cluster.py).
async-pending  a cp.async destination is read or overwritten before a wait covered it; likewise a
               TMA/bulk destination before a wait saw its mbarrier phase complete, and a bulk
               store's shared source before cp.async.bulk.wait_group{.read} covered it; a register
               or shared byte that a wgmma still in flight uses is accessed before the
               wgmma.wait_group that retires it; likewise the tensor memory or shared operands
               of a tcgen05.mma before a wait saw its tcgen05.commit's mbarrier phase, and
               tensor memory a tcgen05.ld/st moves before tcgen05.wait::ld/::st (tmem.py).
out-of-bounds  an access outside the argument array its address was derived from (named, with the
               distance and its bounds), outside the shared window or a parameter, or a store
               into a read-only argument; a .shared::cluster address of a rank outside the cluster
               or of a CTA that has exited.
misaligned     an address (or a wmma stride) breaks the instruction's alignment rule.
divergence     a .sync.aligned warp instruction or aligned barrier reached by part of a warp (a wgmma
               by part of a warpgroup), a bra.uni that splits a warp, barrier participants that
               give different thread counts, or operands that must be uniform and are not.
unsupported    text the simulator does not implement (reported before anything runs).
missing-fence  a wgmma uses registers (A fragments, accumulators) accessed since the last
               wgmma.fence of its warpgroup, or it is the warpgroup's first wgmma without one.
tmem           tensor memory (sm_100a) misused: a CTA exits with columns still allocated, a dealloc
               of columns it does not hold, an alloc after relinquish_alloc_permit or with a column
               count that is not a power of two in 32..512, a tcgen05.ld/st by a warp outside its
               lane quarter, or an access to columns not allocated (tmem.py); a tcgen05.mma.ws
               .collector::bN::use/lastuse without a valid ::fill (tcgen05_ws.py).
deadlock       every unfinished CTA keeps spinning on loads that return the same values
               (scheduler.py); the line is the load the first such CTA keeps repeating. Also an
               mbarrier wait polled unchanged while its phase cannot complete (async_proxy.py), and
               a barrier.cluster.wait some thread of the cluster never arrives at. Also every thread
               group of a CTA waiting at named barriers that cannot complete (warps.py); the line is
               the first group's barrier.
"""


class HazardError(Exception):
    """A PTX program broke a rule the hardware relies on (or used something the simulator lacks).

    `kind` is one of HAZARD_KINDS, `line` the 1-based PTX line, `line_text` that line's text and
    `detail` the explanation without the quoted line.
    """

    def __init__(self, kind: str, line: int, detail: str, line_text: str = ""):
        if kind not in HAZARD_KINDS:
            raise ValueError(f"unknown hazard kind {kind!r}")
        self.kind, self.line, self.detail, self.line_text = kind, line, detail, line_text.strip()
        super().__init__(f"{kind} at PTX line {line}: {detail}\n    {line}| {self.line_text}")

    def __reduce__(self):
        """Pickle by the constructor's arguments, so a hazard raised in a worker process (a spread
        simulation) reaches the caller whole."""
        return type(self), (self.kind, self.line, self.detail, self.line_text)


class Fault(Exception):
    """Raised inside an executor, which does not know its line; the caller turns it into a HazardError."""

    def __init__(self, kind: str, detail: str):
        if kind not in HAZARD_KINDS:
            raise ValueError(f"unknown hazard kind {kind!r}")
        self.kind, self.detail = kind, detail
        super().__init__(f"{kind}: {detail}")
