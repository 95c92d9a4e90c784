"""The mbarrier ring (ptxgen/emit/mbarrier_ring.py) on its own: the PTX each operation emits, its
refusals, the release-strategy seam, and on the simulator a producer and a consumer passing
items through the ring (and the deadlock a wrong starting parity causes)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from ptxgen import sim
from ptxgen.emit.mbarrier_ring import LocalRelease, MbarrierRing, PipelineState
from ptxgen.emit.scalar_ops import ScalarOps
from ptxgen.ir import Addr, Builder, Imm, Instr, Param, Sym, VReg, render
from ptxgen.regalloc.allocate import allocate
from ptxgen.schedule.targets import target

RING_SYMBOL = "ring"


class Ops(ScalarOps):
    """The scalar helpers over one builder: all the ring needs of a lowering."""

    def __init__(self, b: Builder):
        self.b, self.dims = b, {}


def fresh(stages: int = 3, empty: bool = True, arrivals: int = 1) -> tuple[Ops, MbarrierRing]:
    b = Builder("k", [Param(".u64", "pOut")])
    b.function.shared.append((RING_SYMBOL, 8, 24 * stages))  # full, empty barriers, then one 8-byte slot each
    ops = Ops(b)
    full = ops.u32("mov.u32", Sym(RING_SYMBOL))
    empty_base = ops.u32("add.u32", full, Imm(str(8 * stages))) if empty else None
    return ops, MbarrierRing(ops, stages, full, empty_base, arrivals if empty else 0)


def ops_of(b: Builder) -> list[str]:
    return [i.op for i in b.body if isinstance(i, Instr)]


# -- what each operation emits ----------------------------------------------------------------------
def test_advance_counts_then_wraps_the_index_and_flips_the_phase():
    ops, ring = fresh(stages=4)
    count = ops.u32("mov.u32", Imm("0"))
    state = ring.start(0).counting(count)
    start = len(ops.b.body)
    ring.advance(state)
    emitted = [i for i in ops.b.body[start:] if isinstance(i, Instr)]
    assert [i.op for i in emitted] == ["add.u32", "add.u32", "setp.eq.u32", "selp.u32", "selp.u32", "xor.b32"]
    assert emitted[0].operands[0] == count and emitted[1].operands[0] == state.index
    assert emitted[2].operands[2] == Imm("4"), "wraps at the stage count"
    assert emitted[-1].operands[0] == state.phase


def test_an_uncounted_state_advances_only_the_position():
    ops, ring = fresh()
    state = ring.start(1)
    assert state.count is None
    start = len(ops.b.body)
    ring.advance(state)
    assert ops_of(ops.b)[len(ops_of(ops.b)) - 5:] == ["add.u32", "setp.eq.u32", "selp.u32", "selp.u32", "xor.b32"]
    assert sum(isinstance(i, Instr) for i in ops.b.body[start:]) == 5


def test_producer_commit_arms_the_full_barrier_it_returns():
    ops, ring = fresh()
    index = ops.u32("mov.u32", Imm("2"))
    bar = ring.producer_commit(index, 4096)
    expect = [i for i in ops.b.body if isinstance(i, Instr) and i.op.startswith("mbarrier.arrive.expect_tx")]
    assert len(expect) == 1 and expect[0].operands[1] == bar and expect[0].operands[2] == Imm("4096")
    address = next(i for i in ops.b.body if isinstance(i, Instr) and i.operands and i.operands[0] == bar.base)
    assert address.op == "add.u32" and address.operands[1] == ring.full


def test_local_release_arrives_on_the_empty_barrier_and_acquire_waits_on_it():
    ops, ring = fresh()
    state = ring.start(1)
    guard = ops.pred("setp.eq.u32", state.index, Imm("0"))
    ring.consumer_release(state.index, guard, "release")
    arrive = [i for i in ops.b.body if isinstance(i, Instr) and i.op == "mbarrier.arrive.shared::cta.b64"]
    assert len(arrive) == 1 and arrive[0].guard == guard
    ring.producer_acquire(state)
    waits = [i for i in ops.b.body if isinstance(i, Instr) and i.op.startswith("mbarrier.try_wait.parity")]
    assert len(waits) == 1 and waits[0].operands[2] == state.phase
    assert ".acquire.cluster" not in waits[0].op


def test_a_cluster_scoped_ring_acquires_at_cluster_scope():
    ops, ring = fresh()
    remote = MbarrierRing(ops, ring.stages, ring.full, ring.empty, 2, scope="cluster")
    remote.producer_acquire(remote.start(1))
    assert any(op.startswith("mbarrier.try_wait.parity.acquire.cluster") for op in ops_of(ops.b))


@dataclass(frozen=True)
class RecordingRelease:
    """A release strategy standing in for another target's (e.g. sm_100a's tcgen05.commit)."""

    calls: list = field(default_factory=list)

    def release(self, ring: MbarrierRing, index: VReg, guard: VReg | None, comment: str) -> None:
        self.calls.append((index, guard, comment))
        ring.ops.b.emit("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
                        ring.empty_barrier(index), guard=guard, comment=comment)


def test_a_release_strategy_replaces_the_arrival_without_touching_the_ring():
    ops, ring = fresh()
    strategy = RecordingRelease()
    other = ring.with_release(strategy)
    assert isinstance(ring.release_by, LocalRelease) and other.release_by is strategy
    state = other.start(0)
    other.consumer_release(state.index, None, "the MMA reading it completed")
    assert strategy.calls == [(state.index, None, "the MMA reading it completed")]
    assert "mbarrier.arrive.shared::cta.b64" not in ops_of(ops.b)
    assert any(op.startswith("tcgen05.commit") for op in ops_of(ops.b))


def test_init_and_reinit_cover_full_and_empty_barriers():
    ops, ring = fresh(stages=2, arrivals=8)
    leader = ops.pred("setp.eq.u32", ops.u32("mov.u32", Sym("%tid.x")), Imm("0"))
    ring.init(leader)
    inits = [i for i in ops.b.body if isinstance(i, Instr) and i.op.startswith("mbarrier.init")]
    assert [(i.operands[0], i.operands[1]) for i in inits] == [
        (Addr(ring.full, 0), Imm("1")), (Addr(ring.full, 8), Imm("1")), (Addr(ring.empty, 0), Imm("8")),
        (Addr(ring.empty, 8), Imm("8"))]
    assert all(i.guard == leader for i in inits)
    start = len(ops.b.body)
    ring.reinit(leader)
    again = [i.op.split(".")[1] for i in ops.b.body[start:] if isinstance(i, Instr)]
    assert again == ["inval", "init"] * 4 + ["mbarrier_init"], \
        "a valid mbarrier is invalidated before it is initialised again, then the init fence"
    fences = [i for i in ops.b.body if isinstance(i, Instr) and i.op == "fence.mbarrier_init.release.cluster"]
    assert len(fences) == 2 and all(f.guard is None for f in fences), "init and reinit each end with the fence"


def test_refusals_name_the_problem():
    ops, ring = fresh(empty=False)
    with pytest.raises(ValueError, match="no empty barriers.*empty_arrivals"):
        ring.empty_barrier(ring.start(0).index)
    with pytest.raises(ValueError, match="at least one stage"):
        MbarrierRing(ops, 0, ring.full)
    with pytest.raises(ValueError, match="both or neither"):
        MbarrierRing(ops, 2, ring.full, ring.full)
    with pytest.raises(ValueError, match="parity is 0 or 1"):
        ring.start(2)


def test_counting_returns_a_new_state():
    ops, ring = fresh()
    state = ring.start(0)
    count = ops.u32("mov.u32", Imm("0"))
    counted = state.counting(count)
    assert state.count is None and counted == PipelineState(state.index, state.phase, count)


# -- on the simulator ---------------------------------------------------------------------------
def run(ops: Ops, nout: int, block: int) -> np.ndarray:
    ops.b.emit("ret")
    alloc = allocate(ops.b.body)
    ptx = render(ops.b.function, target("sm_90a"), [], alloc.declarations(), alloc.name)
    out = np.full(nout, 0xDEAD, dtype=np.uint32)
    sim.launch(ptx, "k", block=(block,), args=[out])
    return out


def store(ops: Ops, out: VReg, slot: VReg, value: VReg) -> None:
    addr = ops.u64("add.s64", out, ops.wide_mul(slot, Imm("4")))
    ops.b.emit("st.global.u32", Addr(addr), value)


def out_pointer(ops: Ops) -> VReg:
    raw = ops.u64("ld.param.u64", Addr(Sym("pOut")))
    return ops.u64("cvta.to.global.u64", raw)


@pytest.mark.parametrize("stages", [1, 3])
def test_the_states_walk_matches_index_and_phase_arithmetic(stages):
    """After n advances a state is at stage n % S with parity (n / S) & 1 (mbarrier.md §9e)."""
    n = 2 * stages + 3
    ops, ring = fresh(stages=stages)
    out = out_pointer(ops)
    count = ops.u32("mov.u32", Imm("0"))
    state = ring.start(0).counting(count)
    top = ops.b.label("walk")
    ops.b.place(top)
    slot = ops.u32("shl.b32", count, Imm("1"))
    store(ops, out, slot, state.index)
    store(ops, out, ops.u32("add.u32", slot, Imm("1")), state.phase)
    ring.advance(state)
    ops.b.emit("bra", Sym(top), guard=ops.pred("setp.lt.u32", count, Imm(str(n))))
    got = run(ops, 2 * n, 1).reshape(n, 2)
    assert got.tolist() == [[i % stages, (i // stages) & 1] for i in range(n)]


ITEMS = 7
PRODUCER_THREAD = 32


def producer_consumer(ops: Ops, ring: MbarrierRing, producer_phase: int = 1) -> None:
    """Thread 32 produces ITEMS values (10 i + 1) into a stage slot each, thread 0 consumes them
    in order into out[i]; the others exit. The ring hands the slots back and forth."""
    b = ops.b
    out = out_pointer(ops)
    tid = ops.u32("mov.u32", Sym("%tid.x"))
    ring.init(ops.pred("setp.eq.u32", tid, Imm("0")))
    b.emit("bar.sync", Imm("0"))
    slots = ops.u32("add.u32", ring.full, Imm(str(16 * ring.stages)))
    consumer, done = b.label("consumer"), b.label("done")
    b.emit("bra", Sym(consumer), guard=ops.pred("setp.eq.u32", tid, Imm("0")))
    b.emit("bra", Sym(done), guard=ops.pred("setp.ne.u32", tid, Imm(str(PRODUCER_THREAD))))
    count = ops.u32("mov.u32", Imm("0"))
    state = ring.start(producer_phase).counting(count)
    top = b.label("produce")
    b.place(top)
    ring.producer_acquire(state)
    value = ops.u32("mad.lo.u32", count, Imm("10"), Imm("1"))
    b.emit("st.shared.u32", Addr(ops.u32("add.u32", slots, ring.stage_offset(state.index))), value)
    ring.producer_commit(state.index, 0)
    ring.advance(state)
    b.emit("bra", Sym(top), guard=ops.pred("setp.lt.u32", count, Imm(str(ITEMS))))
    b.emit("bra", Sym(done))
    b.place(consumer)
    count_c = ops.u32("mov.u32", Imm("0"))
    state_c = ring.start(0).counting(count_c)
    top_c = b.label("consume")
    b.place(top_c)
    ring.consumer_wait(state_c)
    got = ops.u32("ld.shared.u32", Addr(ops.u32("add.u32", slots, ring.stage_offset(state_c.index))))
    store(ops, out, count_c, got)
    ring.consumer_release(state_c.index, None, "the slot is read")
    ring.advance(state_c)
    b.emit("bra", Sym(top_c), guard=ops.pred("setp.lt.u32", count_c, Imm(str(ITEMS))))
    b.place(done)


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_items_pass_through_the_ring_in_order(stages):
    ops, ring = fresh(stages=stages)
    producer_consumer(ops, ring)
    assert run(ops, ITEMS, 64).tolist() == [10 * i + 1 for i in range(ITEMS)]


def test_a_producer_starting_on_parity_0_deadlocks():
    """Planted bug: the producer waits for the first phase of a fresh empty barrier, which only a
    consumer's release completes, while the consumer waits for the producer's first item."""
    ops, ring = fresh(stages=2)
    producer_consumer(ops, ring, producer_phase=0)
    with pytest.raises(sim.HazardError) as e:
        run(ops, ITEMS, 64)
    assert e.value.kind == "deadlock", e.value
