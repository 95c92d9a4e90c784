"""mbarrier, proxy fences, setmaxnreg, stmatrix and cluster helpers through the Builder
(docs/ptx_facts/mbarrier.md, warp_specialisation.md and clusters.md; PTX ISA "mbarrier", "membar/fence",
"setmaxnreg", "stmatrix", "mapa", "barrier.cluster").

Every function emits one instruction on the builder it is given (no hidden state) and checks the
operand ranges the ISA states, so a bad value fails in Python with the rule.
"""
from __future__ import annotations

from ..ir import Builder
from ..ir import Addr, Imm, Instr, RegPair, Sym, Vec, VReg

#: mbarrier.init count range: 1 .. 2**20 - 1.
MAX_ARRIVALS = (1 << 20) - 1
#: tx-count range for expect_tx: 0 .. 2**20 - 1.
MAX_TX = (1 << 20) - 1
SINK = Sym("_")


def init(b: Builder, bar: Addr, count: int | VReg, guard: VReg | None = None,
         comment: str | None = None) -> Instr:
    """Initialise the 8-byte-aligned .b64 mbarrier at `bar` to `count` expected arrivals, phase 0.
    Other threads may use it only after a bar.sync (or, across a cluster, fence.mbarrier_init)."""
    if isinstance(count, int) and not 1 <= count <= MAX_ARRIVALS:
        raise ValueError(f"mbarrier.init count {count} must be 1..{MAX_ARRIVALS}")
    return b.emit("mbarrier.init.shared::cta.b64", bar, count, guard=guard, comment=comment)


def inval(b: Builder, bar: Addr, guard: VReg | None = None, comment: str | None = None) -> Instr:
    """Invalidate the mbarrier at `bar`: required before a valid mbarrier is initialised again
    (docs/ptx_facts/mbarrier.md §9e), e.g. to put a ring back to phase 0."""
    return b.emit("mbarrier.inval.shared::cta.b64", bar, guard=guard, comment=comment)


def arrive(b: Builder, bar: Addr, count: int | None = None, guard: VReg | None = None,
           comment: str | None = None) -> Instr:
    """One arrival (or `count`) on a CTA-local mbarrier, release semantics at CTA scope."""
    ops = (SINK, bar) + ((Imm(str(count)),) if count is not None else ())
    return b.emit("mbarrier.arrive.shared::cta.b64", *ops, guard=guard, comment=comment)


def arrive_remote(b: Builder, bar: Addr, guard: VReg | None = None, comment: str | None = None) -> Instr:
    """One arrival on an mbarrier of another CTA of the cluster (`bar` holds a mapa'd
    shared::cluster address), with the instruction's default semantics, as CUTLASS's
    `ClusterBarrier::arrive(cta_id, pred)` issues it (docs/ptx_facts/clusters.md §9f): the
    `.release.cluster` form halved a cluster kernel's speed on an H200 (bench/results/
    2026-11-26-cluster-probe-0a8998b)."""
    return b.emit("mbarrier.arrive.shared::cluster.b64", SINK, bar, guard=guard, comment=comment)


def arrive_expect_tx(b: Builder, bar: Addr, tx_bytes: int | VReg, guard: VReg | None = None,
                     comment: str | None = None) -> Instr:
    """tx-count += tx_bytes, then one arrival: the producer's half of a TMA stage (the copies'
    complete-tx later subtracts the bytes they wrote)."""
    if isinstance(tx_bytes, int) and not 0 <= tx_bytes <= MAX_TX:
        raise ValueError(f"expect_tx of {tx_bytes} bytes is outside 0..{MAX_TX}: split the stage")
    return b.emit("mbarrier.arrive.expect_tx.shared::cta.b64", SINK, bar, tx_bytes, guard=guard,
                  comment=comment)


#: try_wait's suspendTimeHint (PTX ISA 7.8, "mbarrier.test_wait/try_wait": a u32 time limit in
#: nanoseconds the thread may stay suspended waiting for the phase before try_wait returns false):
#: the 10 ms (0x989680) CUTLASS's ClusterBarrier::wait passes. Without it the wait's time-out is
#: the system-dependent default; the retry loop stays cold either way (bench/sass.py: the same
#: SASS per k-tile with and without it under ptxas 13.0 and 13.5).
SUSPEND_TIME_HINT_NS = 10_000_000


def try_wait_parity(b: Builder, bar: Addr, parity: int | VReg, comment: str | None = None,
                    scope: str = "cta", suspend_hint_ns: int | None = SUSPEND_TIME_HINT_NS) -> VReg:
    """A predicate that is true once the phase of parity `parity` (0 even, 1 odd) has completed;
    it may time out false, so callers loop (see wait_parity). Acquire at CTA scope by default, also
    where other CTAs' arrivals complete the phase, as CUTLASS's ClusterBarrier::wait does;
    scope="cluster" gives the ISA's `.acquire.cluster` form (PTX 8.0), which no kernel of ptxgen's
    uses: it halved a cluster kernel's speed on an H200 (docs/ptx_facts/clusters.md §9f).
    `suspend_hint_ns` is the suspend-time hint operand (None: none)."""
    if isinstance(parity, int) and parity not in (0, 1):
        raise ValueError("mbarrier phase parity is 0 or 1")
    if scope not in ("cta", "cluster"):
        raise ValueError(f"mbarrier.try_wait scope {scope!r}: use 'cta' or 'cluster'")
    if suspend_hint_ns is not None and not 0 < suspend_hint_ns <= 0xFFFFFFFF:
        raise ValueError(f"suspendTimeHint {suspend_hint_ns} ns is not a positive u32; pass None for no hint")
    p = b.reg("pred")
    sem = ".acquire.cluster" if scope == "cluster" else ""
    hint = () if suspend_hint_ns is None else (suspend_hint_ns,)
    b.emit(f"mbarrier.try_wait.parity{sem}.shared::cta.b64", p, bar, parity, *hint, ndefs=1, comment=comment)
    return p


def wait_parity(b: Builder, bar: Addr, parity: int | VReg, role: str, comment: str | None = None,
                scope: str = "cta") -> None:
    """Spin until the phase of `parity` completes: `L: try_wait.parity p; @!p bra L;` with a label
    named by its role (e.g. "wait_full")."""
    label = b.label(role)
    b.place(label)
    p = try_wait_parity(b, bar, parity, comment, scope)
    b.emit("bra", Sym(label), guard=p, negate=True)


def fence_proxy_async(b: Builder, space: str = "shared::cta", comment: str | None = None) -> Instr:
    """Order generic-proxy accesses (st.shared, stmatrix, ld.shared) with async-proxy ones (TMA,
    wgmma operand reads) in both directions, for `space` ("shared::cta", "shared::cluster", "global"
    or "" for all state spaces)."""
    if space not in ("shared::cta", "shared::cluster", "global", ""):
        raise ValueError(f"fence.proxy.async state space {space!r}: use shared::cta, shared::cluster or global")
    return b.emit("fence.proxy.async" + (f".{space}" if space else ""), comment=comment)


def fence_mbarrier_init(b: Builder, comment: str | None = None) -> Instr:
    """Make mbarrier.init visible to the other CTAs of the cluster (follow with a cluster barrier)."""
    return b.emit("fence.mbarrier_init.release.cluster", comment=comment)


def setmaxnreg(b: Builder, count: int, increase: bool, comment: str | None = None) -> Instr:
    """Move this warpgroup's per-thread register cap to `count` (24..256, a multiple of 8). All warps
    of the warpgroup execute the same one; the kernel needs a register cap (.maxnreg/--maxrregcount
    or launch bounds) or ptxas may ignore it (warning C7508)."""
    if not 24 <= count <= 256 or count % 8:
        raise ValueError(f"setmaxnreg count {count} must be in 24..256 and a multiple of 8")
    return b.emit(f"setmaxnreg.{'inc' if increase else 'dec'}.sync.aligned.u32", Imm(str(count)), comment=comment)


def stmatrix(b: Builder, addr: Addr, regs: tuple[VReg, ...], trans: bool = False,
             comment: str | None = None) -> Instr:
    """stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: the inverse of ldmatrix (lane 8j+r
    gives the row-r address of matrix j; register j holds matrix j in the mma C/A pattern)."""
    if len(regs) not in (1, 2, 4):
        raise ValueError(f"stmatrix stores 1, 2 or 4 matrices, got {len(regs)} registers")
    op = f"stmatrix.sync.aligned.m8n8.x{len(regs)}{'.trans' if trans else ''}.shared.b16"
    return b.emit(op, addr, Vec(regs), comment=comment)


def mapa(b: Builder, addr: VReg, cta_rank: VReg | int, comment: str | None = None) -> VReg:
    """The shared::cluster address of the same shared variable in CTA `cta_rank` of the cluster."""
    d = b.reg("b32")
    b.emit("mapa.shared::cluster.u32", d, addr, cta_rank, ndefs=1, comment=comment)
    return d


def cluster_arrive(b: Builder, relaxed: bool = False, comment: str | None = None, aligned: bool = True) -> Instr:
    """Arrive on the cluster barrier (release by default; .relaxed drops the memory ordering);
    `aligned=False` where not every thread of the warp runs it."""
    return b.emit("barrier.cluster.arrive" + (".relaxed" if relaxed else "") + (".aligned" if aligned else ""),
                  comment=comment)


def cluster_wait(b: Builder, comment: str | None = None, aligned: bool = True) -> Instr:
    """Wait for every non-exited thread of the cluster to have arrived (acquire)."""
    return b.emit("barrier.cluster.wait" + (".aligned" if aligned else ""), comment=comment)


def cluster_ctarank(b: Builder) -> VReg:
    """%cluster_ctarank: this CTA's rank in its cluster (0 without clusters)."""
    d = b.reg("b32")
    b.emit("mov.u32", d, Sym("%cluster_ctarank"), ndefs=1)
    return d


def elect_sync(b: Builder, membermask: int = 0xFFFFFFFF, lane: bool = False,
               comment: str | None = None) -> tuple[VReg, VReg | None]:
    """`elect.sync d|p, membermask;` (warp_specialisation.md §9h): p is true in exactly one (the
    same every time) thread of the mask, d gets the leader's lane id, or is discarded (`_`) unless
    `lane`. Returns (p, d or None). Every thread of the mask must execute it."""
    if not 0 < membermask <= 0xFFFFFFFF:
        raise ValueError(f"elect.sync membermask {membermask:#x} must be a nonzero 32-bit lane mask")
    pred = b.reg("pred")
    leader = b.reg("b32") if lane else None
    b.emit("elect.sync", RegPair(leader, pred), Imm(f"{membermask:#010x}"), ndefs=1, comment=comment)
    return pred, leader
