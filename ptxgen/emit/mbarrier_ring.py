"""The mbarrier ring of a TMA pipeline as one object, in the manner of the CuTe DSL's
`PipelineTmaAsync` over a `PipelineState` (docs/ptx_facts/mbarrier.md §9e, tma.md §9d,
warp_specialisation.md §9g).

A ring of S stages has one full barrier per stage (producer -> consumers: the stage's bytes have
landed) and, when a producer runs apart from the consumers (warp specialisation), one empty
barrier per stage (consumers -> producer: the stage may be overwritten). Each role walks the ring
with a `PipelineState` (stage index, the phase parity it waits for, the k-tiles it has passed in
the current tile) and four operations:

    producer_acquire(state)      wait empty[index] for parity `phase` (the consumers released it)
    producer_commit(index, tx)   arrive.expect_tx on full[index]; the copies that name the returned
                                 barrier complete the phase with their bytes (complete-tx)
    consumer_wait(state)         wait full[index] for parity `phase` (the bytes landed)
    consumer_release(index)      the release strategy's arrival on empty[index]

`advance(state)` steps the index, wrapping to 0 with the parity flipped. How a consumer releases a
stage is a strategy (`StageRelease`): one arrival on this CTA's barrier (`LocalRelease`), an
arrival on every multicast peer's (sm90/cluster.py `ClusterRelease`), or, on sm_100a, a
`tcgen05.commit` that arrives once the tensor-core reads are done (sm100/kernel.py
`Tcgen05Release`, with an empty barrier of one arrival; multicast to every CTA the stage came
from in sm100/cluster.py and cta_pair.py): a new strategy, the ring unchanged. The ring holds registers set once per kernel (the barrier bases) and emits PTX only
through the mbarrier wrappers (sm90/mbarrier_isa.py); every operation returns what it computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from ..ir import Addr, Builder, Imm, VReg, ops as ptx
from ..ir.ops import B32, U32
from . import mbarrier_isa as mb

#: Bytes per mbarrier (a .b64 object); barrier i of an array sits 8 * i bytes after barrier 0.
MBARRIER_BYTES = 8


class RingOps(Protocol):
    """What the ring needs of its lowering: the builder it emits into."""

    @property
    def b(self) -> Builder: ...


@dataclass(frozen=True)
class PipelineState:
    """One role's position in the ring: `index` (the stage), `phase` (the parity it waits for on
    that stage's barrier) and `count` (the k-tiles it has passed in the current tile, or None when
    the role counts elsewhere). The registers are loop-carried: `MbarrierRing.advance` rewrites
    them in place, so index and phase carry across tiles while a tile loop restarts `count`."""

    index: VReg
    phase: VReg
    count: VReg | None = None

    def counting(self, count: VReg) -> PipelineState:
        """The same position, with `count` as its k-tile counter."""
        return replace(self, count=count)


class StageRelease(Protocol):
    """How a consumer hands stage `index` back to the producer (guarded by `guard`)."""

    def release(self, ring: MbarrierRing, index: VReg, guard: VReg | None, comment: str) -> None: ...


@dataclass(frozen=True)
class LocalRelease:
    """One arrival on this CTA's empty[index] (release at CTA scope)."""

    def release(self, ring: MbarrierRing, index: VReg, guard: VReg | None, comment: str) -> None:
        mb.arrive(ring.ops.b, ring.empty_barrier(index), guard=guard, comment=comment)


@dataclass(frozen=True)
class MbarrierRing:
    """S stages' full barriers at `full` (shared address of full[0]) and, with a separate
    producer, their empty barriers at `empty`, initialised to `empty_arrivals` arrivals per phase.
    `scope` is the scope of the producer's acquire ("cluster" when other CTAs release into it)."""

    ops: RingOps
    stages: int
    full: VReg
    empty: VReg | None = None
    empty_arrivals: int = 0
    scope: str = "cta"
    release_by: StageRelease = field(default_factory=LocalRelease)

    def __post_init__(self) -> None:
        if self.stages < 1:
            raise ValueError(f"an mbarrier ring needs at least one stage, got {self.stages}")
        if (self.empty is None) != (self.empty_arrivals == 0):
            raise ValueError("empty barriers and their arrival count come together (both or neither)")

    def with_release(self, release: StageRelease) -> MbarrierRing:
        """The same ring, its consumers releasing stages by `release`."""
        return replace(self, release_by=release)

    # -- addresses -------------------------------------------------------------------------------
    def stage_offset(self, index: VReg) -> VReg:
        """Bytes from barrier 0 to barrier `index` of either array."""
        return ptx.shl(self.ops.b, B32, index, Imm("3"))

    def full_barrier(self, index: VReg) -> Addr:
        return Addr(ptx.add(self.ops.b, U32, self.full, self.stage_offset(index)))

    def empty_barrier(self, index: VReg) -> Addr:
        if self.empty is None:
            raise ValueError("this ring has no empty barriers (its producer is a consumer thread): "
                             "build it with empty= and empty_arrivals= for a warp-specialised kernel")
        return Addr(ptx.add(self.ops.b, U32, self.empty, self.stage_offset(index)))

    # -- initialisation ------------------------------------------------------------------------
    def init(self, leader: VReg) -> None:
        """Thread `leader` initialises every barrier (full: one arrival, the producer's
        expect_tx; empty: `empty_arrivals`), then every thread runs fence.mbarrier_init (`publish`).
        The caller publishes them (bar.sync, or a cluster barrier) before any role uses them."""
        b = self.ops.b
        for st in range(self.stages):
            mb.init(b, Addr(self.full, MBARRIER_BYTES * st), 1, guard=leader)
        if self.empty is not None:
            for st in range(self.stages):
                mb.init(b, Addr(self.empty, MBARRIER_BYTES * st), self.empty_arrivals, guard=leader)
        self.publish()

    def publish(self) -> None:
        """fence.mbarrier_init.release.cluster after the inits, in every kernel family and after
        every re-init (docs/ptx_facts/mbarrier.md §9e, clusters.md): CUTLASS's PipelineTmaAsync
        issues it (`fence_barrier_init`) even for a 1x1 cluster, so the inits are ordered before the
        barrier that follows for the async proxy's complete-tx and any peer's arrivals, not only
        for this CTA's generic-proxy waits. Unguarded, as CUTLASS runs it in every thread."""
        mb.fence_mbarrier_init(self.ops.b, comment="the inits, released before the barrier that publishes them")

    def reinit(self, leader: VReg) -> None:
        """Thread `leader` puts every barrier back to phase 0 (mbarrier.inval, then init: a valid
        mbarrier may not be initialised again, mbarrier.md §9e), then the init fence (`publish`).
        Every wait on them must be past."""
        b = self.ops.b
        bases = [(self.full, 1)] + ([(self.empty, self.empty_arrivals)] if self.empty is not None else [])
        for base, arrivals in bases:
            for st in range(self.stages):
                bar = Addr(base, MBARRIER_BYTES * st)
                mb.inval(b, bar, guard=leader)
                mb.init(b, bar, arrivals, guard=leader)
        self.publish()

    # -- positions -----------------------------------------------------------------------------
    def start(self, phase: int, comments: tuple[str | None, str | None] = (None, None)) -> PipelineState:
        """A fresh position: stage 0, waiting for parity `phase` (a consumer waits for 0, the
        first phase; a producer for 1, the "previous" phase, complete on a fresh barrier, so its
        first S acquires pass)."""
        if phase not in (0, 1):
            raise ValueError("mbarrier phase parity is 0 or 1")
        index = ptx.mov(self.ops.b, U32, Imm("0"), comment=comments[0])
        parity = ptx.mov(self.ops.b, U32, Imm(str(phase)), comment=comments[1])
        return PipelineState(index, parity)

    def advance(self, state: PipelineState) -> None:
        """count + 1 (when counted), and index + 1 in place, wrapping to 0 with the parity flipped."""
        ops, b = self.ops, self.ops.b
        if state.count is not None:
            ptx.add(b, U32, state.count, Imm("1"), into=state.count)
        b.comment("next k-tile: stage + 1, wrapping to 0 with the parity flipped")
        ptx.add(b, U32, state.index, Imm("1"), into=state.index)
        wrap = ptx.setp(ops.b, "eq", U32, state.index, Imm(str(self.stages)))
        ptx.selp(b, U32, Imm("0"), state.index, wrap, into=state.index)
        ptx.xor(b, B32, state.phase, ptx.selp(ops.b, U32, Imm("1"), Imm("0"), wrap), into=state.phase)

    def previous(self, index: VReg) -> VReg:
        """The stage before `index` (S - 1 before stage 0)."""
        ops = self.ops
        first = ptx.setp(ops.b, "eq", U32, index, Imm("0"))
        return ptx.selp(ops.b, U32, Imm(str(self.stages - 1)), ptx.add(ops.b, U32, index, Imm("-1")), first,
                       comment="the previous k-tile's stage")

    # -- the producer ----------------------------------------------------------------------------
    def producer_acquire(self, state: PipelineState, comment: str | None = None) -> None:
        """Wait until the consumers have released stage `state.index` (empty barrier, parity `phase`)."""
        mb.wait_parity(self.ops.b, self.empty_barrier(state.index), state.phase, "wait_empty",
                       comment=comment, scope=self.scope)

    def producer_commit(self, index: VReg, tx_bytes: int, guard: VReg | None = None,
                        comment: str | None = None) -> Addr:
        """Arm full[index] for the stage's `tx_bytes` (the producer's one arrival); returns the
        barrier the stage's copies complete on."""
        bar = self.full_barrier(index)
        mb.arrive_expect_tx(self.ops.b, bar, tx_bytes, guard=guard, comment=comment)
        return bar

    # -- the consumers -------------------------------------------------------------------------
    def consumer_wait(self, state: PipelineState, comment: str | None = None) -> None:
        """Wait until stage `state.index`'s bytes have landed (full barrier, parity `phase`)."""
        mb.wait_parity(self.ops.b, self.full_barrier(state.index), state.phase, "wait_full", comment=comment)

    def consumer_release(self, index: VReg, guard: VReg | None, comment: str) -> None:
        """Hand stage `index` back to the producer (once the reads of it have retired)."""
        self.release_by.release(self, index, guard, comment)
