"""Thread block clusters (sm_90): launch shape, special registers, the cluster barrier and
distributed shared memory (DSMEM) address resolution.

A cluster is a group of CTAs that are co-scheduled and may read, write and arrive on each other's
shared memory. `sim.launch(..., cluster=(x, y, z))` (or the entry's `.reqnctapercluster`) groups the
grid into clusters; the scheduler starts the CTAs of a cluster together (scheduler.run_interleaved's
`group`). Without either, every CTA is its own 1x1x1 cluster (the PTX ISA's implicit cluster).

Addresses. Offset o of cluster CTA rank r's shared window has the address `r * CLUSTER_STRIDE + o`
(rank in bit 24 up) as a `.shared::cluster` address (`mapa`'s result) and, in CTA r, as a
`.shared::cta` address (a shared symbol's value), so the executing CTA's window lies inside the
cluster window as the ISA requires; sm_100 code clears bit 24 to reach the even CTA of a pair
(CUTLASS `Sm100MmaPeerBitMask`, Gluon; docs/ptx_facts/tcgen05.md §12m). A `.shared::cta` access
must stay in its own window (`own_offsets`); the generic form adds memory.SHARED_GENERIC_BASE;
SharedMemory and descriptors index by o alone.

Ordering between CTAs (CrossTags): every shared byte of a cluster launch remembers the cluster rank
of its last writer and readers and how many barrier.cluster arrivals that thread had made. A thread
of another CTA may access the byte only if the writer (reader) arrived with release semantics after
the access and this thread's barrier.cluster.wait (always an acquire) completed that phase, i.e. if
some releasing phase p satisfies arrivals_at_access <= p < waits_completed. `.relaxed` arrivals do
not order memory unless the CTA executed a `fence.acq_rel`/`fence.sc`/`fence.mbarrier_init` of
cluster scope or wider since its previous arrival. A bar.sync does not order other CTAs' accesses.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import async_order
from .errors import Fault
from .memory import CLUSTER_STRIDE, SHARED_GENERIC_BASE  # noqa: F401 (CLUSTER_STRIDE re-exported)
from .parse import Instr
from .program import mark

PORTABLE_CLUSTER = 8            # the portable maximum cluster size (CUDA programming guide)
NON_PORTABLE_CLUSTER = 16       # H100's maximum with cudaFuncAttributeNonPortableClusterSizeAllowed
STALL_LIMIT = 1000              # polls of an unchanged, incomplete cluster barrier before deadlock
NEVER = np.int64(1) << 40       # "no releasing phase" in Cluster.next_release
NO_RANK, MANY_RANKS = -1, -2


# ------------------------------------------------------------------ launch shape
def cluster_shape(perf: dict, grid: tuple[int, int, int], cluster, non_portable: bool
                  ) -> tuple[tuple[int, int, int], bool]:
    """(cluster dims, explicit) for a launch: `cluster` from launch(), checked against the entry's
    .reqnctapercluster / .explicitcluster / .maxclusterrank and the grid (PTX ISA, performance-
    tuning directives; the CUDA launch checks)."""
    req = perf.get("reqnctapercluster")
    req = tuple(req) + (1,) * (3 - len(req)) if req else None
    if req is not None and "maxclusterrank" in perf:
        raise ValueError(".reqnctapercluster and .maxclusterrank cannot both be given on one entry; "
                         "keep one of them")
    if cluster is None:
        if req is None and "explicitcluster" in perf:
            raise ValueError("the entry is declared .explicitcluster, so it must be launched with cluster "
                             "dimensions: pass sim.launch(..., cluster=(x, y, z)) or add .reqnctapercluster")
        dims, explicit = (req or (1, 1, 1)), req is not None
    else:
        if isinstance(cluster, (int, np.integer)):
            cluster = (int(cluster),)
        dims = tuple(int(v) for v in cluster)
        if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
            raise ValueError(f"cluster must be 1 to 3 positive integers, got {cluster!r}")
        dims = dims + (1,) * (3 - len(dims))
        if req is not None and dims != req:
            raise ValueError(f"the entry requires .reqnctapercluster {req[0]}, {req[1]}, {req[2]}, but the "
                             f"launch asks for cluster={dims}; launch with cluster={req} (or omit cluster=)")
        explicit = True
    size = dims[0] * dims[1] * dims[2]
    limit = NON_PORTABLE_CLUSTER if non_portable else PORTABLE_CLUSTER
    if size > limit:
        hint = ("; 16 is the most any GPU allows" if non_portable else
                "; up to 16 needs the non-portable opt-in: sim.launch(..., non_portable_cluster=True) "
                "(cudaFuncAttributeNonPortableClusterSizeAllowed on a GPU)")
        raise ValueError(f"cluster {dims} has {size} CTAs; the limit is {limit}{hint}")
    if "maxclusterrank" in perf and size > perf["maxclusterrank"][0]:
        raise ValueError(f"cluster {dims} has {size} CTAs but the entry declares .maxclusterrank "
                         f"{perf['maxclusterrank'][0]}; launch a smaller cluster")
    bad = [axis for axis, g, c in zip("xyz", grid, dims) if g % c]
    if bad:
        raise ValueError(f"grid {tuple(grid)} is not divisible by cluster {dims} along {', '.join(bad)}; "
                         "every grid dimension must be a multiple of the cluster dimension")
    return dims, explicit


def cluster_order(names: list[tuple[int, int, int]], grid, dims) -> list[tuple[int, int, int]]:
    """The CTAs to run, grouped cluster by cluster (rank order inside), each listed CTA's whole
    cluster included: a cluster is launched, and runs, as a unit."""
    if dims == (1, 1, 1):
        return names
    seen, out = set(), []
    ncl = [g // c for g, c in zip(grid, dims)]
    for xyz in names:
        cid = tuple(v // c for v, c in zip(xyz, dims))
        key = cid[0] + ncl[0] * (cid[1] + ncl[1] * cid[2])
        if key in seen:
            continue
        seen.add(key)
        out.extend((cid[0] * dims[0] + x, cid[1] * dims[1] + y, cid[2] * dims[2] + z)
                   for z in range(dims[2]) for y in range(dims[1]) for x in range(dims[0]))
    return out


def special_registers(xyz, grid, dims, explicit: bool, n: int) -> dict[str, np.ndarray]:
    """%cluster_ctaid, %cluster_nctaid, %clusterid, %nclusterid, %cluster_ctarank,
    %cluster_nctarank and %is_explicit_cluster of one CTA."""
    out = {}
    for i, axis in enumerate("xyz"):
        out[f"%cluster_ctaid.{axis}"] = np.full(n, xyz[i] % dims[i])
        out[f"%cluster_nctaid.{axis}"] = np.full(n, dims[i])
        out[f"%clusterid.{axis}"] = np.full(n, xyz[i] // dims[i])
        out[f"%nclusterid.{axis}"] = np.full(n, grid[i] // dims[i])
    out["%cluster_ctarank"] = np.full(n, rank_of(xyz, dims))
    out["%cluster_nctarank"] = np.full(n, dims[0] * dims[1] * dims[2])
    out["%is_explicit_cluster"] = np.full(n, explicit)
    return out


def rank_of(xyz, dims) -> int:
    x, y, z = (v % d for v, d in zip(xyz, dims))
    return x + dims[0] * (y + dims[1] * z)


# ------------------------------------------------------------------ cluster state
@dataclass
class Cluster:
    """The CTAs of one cluster (by rank) and the history of its barrier.cluster phases."""
    dims: tuple[int, int, int]
    members: list = field(default_factory=list)          # CtaState per rank (None until started)
    released: list[bool] = field(default_factory=list)   # per phase: every arrival was a release
    _next: np.ndarray | None = None

    @property
    def size(self) -> int:
        return self.dims[0] * self.dims[1] * self.dims[2]

    def note_arrival(self, phases: np.ndarray, release: bool) -> None:
        top = int(phases.max()) + 1
        while len(self.released) < top:
            self.released.append(True)
        if not release:
            for p in np.unique(phases).tolist():
                self.released[p] = False
        self._next = None

    def ordered(self, arrivals: np.ndarray, waits: np.ndarray) -> np.ndarray:
        """Per access: a releasing phase p with arrivals <= p < waits exists (see module doc)."""
        if self._next is None:
            nxt = np.full(len(self.released) + 1, NEVER, dtype=np.int64)
            for p in range(len(self.released) - 1, -1, -1):
                nxt[p] = p if self.released[p] else nxt[p + 1]
            self._next = nxt
        nxt = self._next
        return nxt[np.minimum(arrivals, len(nxt) - 1)] < waits


@dataclass
class ClusterMember:
    """One CTA's place in its cluster and its threads' barrier.cluster counts."""
    cluster: Cluster
    rank: int
    arrives: np.ndarray            # int64 per thread: barrier.cluster.arrive executed
    waits: np.ndarray              # int64 per thread: barrier.cluster.wait completed
    fenced: bool = False           # a cluster-scope release fence since the last arrive
    stall: tuple = ()              # (signature, polls) of the last incomplete wait


def join(cluster: Cluster, rank: int, cta) -> ClusterMember:
    member = ClusterMember(cluster, rank, np.zeros(cta.n, dtype=np.int64), np.zeros(cta.n, dtype=np.int64))
    cta.cluster = member
    cluster.members[rank] = cta
    if cluster.size > 1:
        cta.smem.cross = CrossTags(cta.smem.size, member)
    return member


class CrossTags:
    """Per shared byte of one CTA: the cluster rank and barrier.cluster arrival count of its last
    writer and reader (MANY_RANKS: readers of several CTAs, with the smallest count)."""

    def __init__(self, size: int, owner: ClusterMember):
        self.owner = owner
        self.w_rank = np.full(size, NO_RANK, dtype=np.int8)
        self.w_arr = np.zeros(size, dtype=np.int64)
        self.r_rank = np.full(size, NO_RANK, dtype=np.int8)
        self.r_arr = np.zeros(size, dtype=np.int64)
        self.x_rank: np.ndarray | None = None    # last atomic accessor's rank, allocated on the first
        self.x_arr: np.ndarray | None = None

    def local(self, idx: np.ndarray, tid: np.ndarray, write: bool, what: str) -> None:
        self.access(idx, tid, self.owner, write, what)

    def access(self, idx: np.ndarray, tid: np.ndarray, who: ClusterMember, write: bool, what: str) -> None:
        """Check and record an access of bytes `idx` by threads `tid` (one per byte) of CTA `who`."""
        cluster, rank = who.cluster, who.rank
        waits = who.waits[tid]
        wr = self.w_rank[idx]
        other = (wr != NO_RANK) & (wr != rank)
        if other.any():
            self._check(idx, other, wr, self.w_arr[idx], waits, cluster, who, "wrote", what)
        if self.x_rank is not None:
            xr = self.x_rank[idx]
            other = (xr != NO_RANK) & (xr != rank)
            if other.any():
                self._check(idx, other, xr, self.x_arr[idx], waits, cluster, who, "accessed atomically", what)
        rr = self.r_rank[idx]
        if write:
            other = (rr != NO_RANK) & (rr != rank)
            if other.any():
                self._check(idx, other, rr, self.r_arr[idx], waits, cluster, who, "read", what)
            self.w_rank[idx] = rank
            self.w_arr[idx] = who.arrives[tid]
            return
        arr = who.arrives[tid]
        old = self.r_arr[idx]
        mine = (rr == NO_RANK) | (rr == rank) | cluster.ordered(old, waits)
        self.r_rank[idx] = np.where(mine, rank, MANY_RANKS)
        self.r_arr[idx] = np.where(mine, arr, np.minimum(old, arr))

    def atomic(self, idx: np.ndarray, tid: np.ndarray, who: ClusterMember, what: str) -> None:
        """Check and record an atom/red of CTA `who`: atomics of several CTAs never race with each
        other, but race with plain loads and stores of other CTAs not ordered by barrier.cluster."""
        cluster, rank = who.cluster, who.rank
        waits = who.waits[tid]
        for ranks, arrs, how in ((self.w_rank, self.w_arr, "wrote"), (self.r_rank, self.r_arr, "read")):
            rk = ranks[idx]
            other = (rk != NO_RANK) & (rk != rank)
            if other.any():
                self._check(idx, other, rk, arrs[idx], waits, cluster, who, how, what)
        if self.x_rank is None:
            self.x_rank = np.full(len(self.w_rank), NO_RANK, dtype=np.int8)
            self.x_arr = np.zeros(len(self.w_rank), dtype=np.int64)
        xr, old, arr = self.x_rank[idx], self.x_arr[idx], who.arrives[tid]
        mine = (xr == NO_RANK) | (xr == rank) | cluster.ordered(old, waits)
        self.x_rank[idx] = np.where(mine, rank, MANY_RANKS)
        self.x_arr[idx] = np.where(mine, arr, np.minimum(old, arr))

    def _check(self, idx, other, ranks, arrivals, waits, cluster, who, how: str, what: str) -> None:
        bad = other & ~cluster.ordered(arrivals, waits)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            by = "CTAs of several ranks" if ranks[k] == MANY_RANKS else f"cluster CTA rank {int(ranks[k])}"
            raise Fault("race", f"CTA rank {who.rank} {what} shared byte {int(idx[k]):#x} of cluster CTA rank "
                        f"{self.owner.rank}, which {by} {how} with no barrier.cluster.arrive (release) / "
                        "barrier.cluster.wait (acquire) pair in between; put barrier.cluster.arrive + "
                        "barrier.cluster.wait between the two accesses")


# ------------------------------------------------------------------ DSMEM addresses
def window_base(cta) -> int:
    """Where the executing CTA's window starts in the .shared::cluster window (module doc)."""
    return 0 if cta.cluster is None else cta.cluster.rank * CLUSTER_STRIDE


def own_offsets(cta, addrs: np.ndarray, what: str) -> np.ndarray:
    """Offsets in the executing CTA's window of `.shared::cta` addresses; an address in another
    rank's window is refused (the ISA: a .shared::cta access reaches the executing CTA's memory only)."""
    base = window_base(cta)
    if base == 0:
        return addrs               # rank 0 (or no cluster): SharedMemory.check_bounds catches strays
    addrs = np.asarray(addrs, dtype=np.int64)
    rel = addrs - base
    bad = (rel < 0) | (rel >= CLUSTER_STRIDE)
    if bad.any():
        a = int(addrs[np.flatnonzero(bad)[0]])
        raise Fault("out-of-bounds", f"{what}: shared address {a:#x} lies in cluster CTA rank {a // CLUSTER_STRIDE}'s "
                    f"window, not in this CTA's (rank {cta.cluster.rank}, from {base:#x}); a .shared::cta access "
                    "reaches only its own CTA: use .shared::cluster (docs/ptx_facts/tcgen05.md §12m)")
    return rel


def foreign(cta, addrs: np.ndarray) -> np.ndarray:
    """Per .shared::cluster address: it names another CTA's window than the executing one's."""
    return (np.asarray(addrs, dtype=np.int64) // CLUSTER_STRIDE) != (0 if cta.cluster is None else cta.cluster.rank)


def targets(cta, addrs: np.ndarray, width: int, what: str):
    """[(target CTA, selection or None, offsets in its window)] for .shared::cluster addresses."""
    member = cta.cluster
    size = member.cluster.size if member is not None else 1
    addrs = np.asarray(addrs, dtype=np.int64)
    ranks = addrs // CLUSTER_STRIDE
    offs = addrs % CLUSTER_STRIDE
    bad = (addrs < 0) | (ranks >= size)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        if addrs[k] < 0:
            raise Fault("out-of-bounds", f"{what} at negative shared address {int(addrs[k])}")
        raise Fault("out-of-bounds", f"{what} .shared::cluster address {int(addrs[k]):#x} names CTA rank "
                    f"{int(ranks[k])}, outside this cluster of {size} CTA(s) (mapa's rank must be below "
                    "%cluster_nctarank)")
    own = member.rank if member is not None else 0
    first = int(ranks[0]) if len(ranks) else own
    groups = [(first, None)] if (ranks == first).all() else [
        (r, ranks == r) for r in np.unique(ranks).tolist()]
    out = []
    for r, sel in groups:
        peer = cta if r == own else member.cluster.members[r]
        if peer.done or peer.smem is None:
            raise Fault("out-of-bounds", f"{what} shared memory of cluster CTA rank {r}, which has exited: its "
                        "shared memory no longer exists (end the kernel with barrier.cluster.arrive + "
                        "barrier.cluster.wait so that no CTA exits while others still access its shared memory)")
        o = offs if sel is None else offs[sel]
        peer.smem.check_bounds(o, width, f"{what} (cluster CTA rank {r})")
        out.append((peer, sel, o))
    return out


def remote_read(cta, peer, tids: np.ndarray, offs: np.ndarray, width: int, what: str) -> np.ndarray:
    smem = peer.smem
    idx = smem.byte_index(offs, width)
    tid = np.repeat(tids, width)
    smem.check_not_pending(idx, tids, width, what)
    smem.cross.access(idx, tid, cta.cluster, False, what)
    return smem.data[idx].reshape(len(offs), width)


def remote_write(cta, peer, tids: np.ndarray, offs: np.ndarray, data: np.ndarray, what: str) -> None:
    smem = peer.smem
    width = data.shape[1]
    idx = smem.byte_index(offs, width)
    if len(np.unique(idx)) != len(idx):
        raise Fault("race", f"two threads of one {what} write the same shared bytes of cluster CTA rank "
                    f"{peer.cluster.rank}")
    smem.check_not_pending(idx, tids, width, what)
    smem.cross.access(idx, np.repeat(tids, width), cta.cluster, True, what)
    smem.data[idx] = data.reshape(-1)


def remote_atomic(cta, peer, tids: np.ndarray, offs: np.ndarray, width: int, what: str) -> np.ndarray:
    """Race-check and record an atom/red of `cta` on a peer's shared bytes; their index (k*width,).
    Atomics of several threads or CTAs on one byte are serialised, never a race (CrossTags.atomic)."""
    smem = peer.smem
    idx = smem.byte_index(offs, width)
    smem.check_not_pending(idx, tids, width, what)
    smem.cross.atomic(idx, np.repeat(tids, width), cta.cluster, what)
    return idx


# ------------------------------------------------------------------ instructions
def compile_mapa(ins: Instr, ctx):
    """mapa{.shared::cluster}.u32|u64 d, a, rank: the address of `a` in CTA `rank`'s window."""
    mods = tuple(ins.mods)
    if mods not in (("shared::cluster", "u32"), ("shared::cluster", "u64"), ("u32",), ("u64",)):
        raise ctx.fail(f"mapa.{'.'.join(mods)} is not supported (mapa{{.shared::cluster}}.u32|.u64 d, a, rank)")
    if len(ins.operands) != 3:
        raise ctx.fail("mapa takes d, a, rank")
    from .async_proxy import require
    require(ctx, "mapa", (7, 8), 90)
    generic = len(mods) == 1
    typ = mods[-1]
    from .ops_mem import address_getter
    from .operands import Mem, Name
    src = ins.operands[1]
    if isinstance(src, Name) and src.name in ctx.symbols:   # mapa d, smem_var, rank
        get_a = address_getter(ctx, Mem(src, 0), "generic" if generic else "shared")
    else:
        get_a = ctx.src(src, typ)
    get_rank = ctx.src(ins.operands[2], "u32")
    slot, _ = ctx.dst(ins.operands[0], typ)
    from .state import store

    def run(cta, mask):
        a = np.broadcast_to(get_a(cta.R).astype(np.int64), (cta.n,))
        rank = np.broadcast_to(get_rank(cta.R).astype(np.int64), (cta.n,))
        size = cta.cluster.cluster.size
        live = np.ones(cta.n, dtype=bool) if mask is None else mask
        live = live & cta.active
        bad = live & (rank >= size)
        if bad.any():
            raise Fault("out-of-bounds", f"mapa: rank {int(rank[bad][0])} is outside this cluster of {size} "
                        "CTA(s) (%cluster_nctarank)")
        off = a - SHARED_GENERIC_BASE if generic else a
        off = np.where(off >= 0, off % CLUSTER_STRIDE, off)
        wild = live & ((off < 0) | (off >= cta.smem.size))
        if wild.any():
            k = int(np.flatnonzero(wild)[0])
            raise Fault("out-of-bounds", f"mapa: address {int(a[k]):#x} is not inside the "
                        f"{'generic ' if generic else ''}shared window ({cta.smem.size} bytes)")
        out = rank * CLUSTER_STRIDE + off + (SHARED_GENERIC_BASE if generic else 0)
        store(cta, slot, out.astype(np.uint64 if typ == "u64" else np.uint32), mask)
    return run


def compile_getctarank(ins: Instr, ctx):
    """getctarank{.shared::cluster}.u32|u64 d, a: the cluster rank of the CTA whose shared window
    holds `a` (the executing CTA's for a .shared::cta address)."""
    mods = tuple(ins.mods)
    if mods not in (("shared::cluster", "u32"), ("shared::cluster", "u64"), ("u32",), ("u64",)):
        raise ctx.fail(f"getctarank.{'.'.join(mods)} is not supported (getctarank{{.shared::cluster}}.u32|.u64 d, a)")
    if len(ins.operands) != 2:
        raise ctx.fail("getctarank takes d, a")
    from .async_proxy import require
    require(ctx, "getctarank", (7, 8), 90)
    generic = len(mods) == 1
    get_a = ctx.src(ins.operands[1], mods[-1])
    slot, _ = ctx.dst(ins.operands[0], "u32")
    from .state import store

    def run(cta, mask):
        a = np.broadcast_to(get_a(cta.R).astype(np.int64), (cta.n,))
        off = a - SHARED_GENERIC_BASE if generic else a
        live = (np.ones(cta.n, dtype=bool) if mask is None else mask) & cta.active
        rank = off // CLUSTER_STRIDE
        wild = live & ((off < 0) | (off % CLUSTER_STRIDE >= cta.smem.size) | (rank >= cta.cluster.cluster.size))
        if wild.any():
            raise Fault("out-of-bounds", f"getctarank: address {int(a[wild][0]):#x} is in no shared window of "
                        "this cluster")
        store(cta, slot, rank.astype(np.uint32), mask)
    return run


def compile_barrier_cluster(ins: Instr, ctx, index: int):
    """barrier.cluster.arrive{.release|.relaxed}{.aligned} / barrier.cluster.wait{.acquire}{.aligned}."""
    mods = list(ins.mods[1:])
    aligned = "aligned" in mods
    mods = [m for m in mods if m != "aligned"]
    if mods not in (["arrive"], ["arrive", "release"], ["arrive", "relaxed"], ["wait"], ["wait", "acquire"]):
        raise ctx.fail(f"barrier.{'.'.join(ins.mods)} is not supported (barrier.cluster.arrive{{.release|"
                       ".relaxed}{.aligned}, barrier.cluster.wait{.acquire}{.aligned})")
    if ins.operands:
        raise ctx.fail("barrier.cluster takes no operands")
    from .async_proxy import require
    require(ctx, f"barrier.{'.'.join(ins.mods)}", (8, 0) if len(mods) == 2 else (7, 8), 90)
    line = ctx.line
    if mods[0] == "arrive":
        return _arrive(mods[-1] != "relaxed", aligned)
    return mark(_wait(aligned, index, line), yields=True)   # clusters of 2+ CTAs always interleave (machine.py)


def _check_aligned(cta, mask, what: str) -> None:
    if mask is None:
        return
    lanes = mask.reshape(-1, 32)
    live = cta.active.reshape(-1, 32)
    partial = lanes.any(axis=1) & (lanes != live).any(axis=1)
    if partial.any():
        raise Fault("divergence", f"{what}.aligned executed by only some active lanes of warp "
                    f"{int(np.flatnonzero(partial)[0])}; all threads of a warp must execute it together")


def _arrive(release: bool, aligned: bool):
    def run(cta, mask):
        if aligned:
            _check_aligned(cta, mask, "barrier.cluster.arrive")
        m = cta.cluster
        tids = cta.threads(mask)
        twice = m.arrives[tids] != m.waits[tids]
        if twice.any():
            raise Fault("race", f"barrier.cluster.arrive: thread {int(tids[twice][0])} arrives again before its "
                        "barrier.cluster.wait for the previous arrival (each arrive must be followed by a wait)")
        m.cluster.note_arrival(m.arrives[tids], release or m.fenced)
        m.fenced = False
        m.arrives[tids] += 1
    return run


def _wait(aligned: bool, index: int, line: int):
    def run(cta, mask):
        if aligned:
            _check_aligned(cta, mask, "barrier.cluster.wait")
        m = cta.cluster
        tids = cta.threads(mask)
        lost = m.arrives[tids] != m.waits[tids] + 1
        if lost.any():
            raise Fault("race", f"barrier.cluster.wait: thread {int(tids[lost][0])} waits without a "
                        "barrier.cluster.arrive for this phase (arrive first, then wait)")
        need = int(m.waits[tids].max())
        late = [(r, peer) for r, peer in enumerate(m.cluster.members)
                if peer is None or (peer.cluster.arrives[peer.active] <= need).any()]
        if not late:
            m.waits[tids] += 1
            m.stall = ()
            if not (cta.active & (m.waits != m.waits[tids[0]])).any():
                cta.epoch += 1             # every thread of the CTA passed: a CTA barrier too
                cta.sync.barrier()
                async_order.order_all(cta, cluster=True)
            return None
        sig = np.array([int(p.cluster.arrives.sum()) for p in m.cluster.members]
                       + [int(p.n_active) for p in m.cluster.members], dtype=np.int64)
        polls = m.stall[1] + 1 if m.stall and np.array_equal(m.stall[0], sig) else 0
        m.stall = (sig, polls)
        if polls >= STALL_LIMIT:
            r, peer = late[0]
            t = int(np.flatnonzero(peer.active & (peer.cluster.arrives <= need))[0])
            raise Fault("deadlock", f"barrier.cluster.wait (phase {need}) can never complete: thread {t} of "
                        f"cluster CTA rank {r} {peer.cta_xyz} has not arrived ({STALL_LIMIT} polls saw no "
                        "change); every non-exited thread of every CTA in the cluster must arrive")
        cta.sync.note_load(line, sig)
        cta.polled = True                  # a waiting thread group lets the others run (warps.py)
        return index                       # not complete: spin here (a switch point)
    return run


def note_fence(cta) -> None:
    """A release fence of cluster scope or wider makes the CTA's next relaxed arrive a release."""
    if cta.cluster is not None:
        cta.cluster.fenced = True


def compile_barrier(ins: Instr, ctx):
    from . import ops_ctrl
    if ins.mods and ins.mods[0] == "cluster":
        return compile_barrier_cluster(ins, ctx, ctx.index)
    return ops_ctrl.OPS["barrier"](ins, ctx)


OPS = {"mapa": compile_mapa, "getctarank": compile_getctarank, "barrier": compile_barrier}
