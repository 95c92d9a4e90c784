"""The sm_90a main loop without warp specialisation: a ring of S TMA stages with one full mbarrier
each, wgmma from shared-memory descriptors, one wgmma group kept in flight.

Iteration kt (stage kt % S, full-barrier parity (kt / S) & 1, both kept as loop-carried counters):
    wait full[stage]            the stage's TMA bytes have landed (mbarrier.md §9e, phase parity)
    wgmma.fence; wgmmas; commit this k-tile's group (wgmma.md §9b)
    wait_group W                W = 1 (S >= 2): the group of k-tile kt-1 has retired, kt's still runs
    bar.sync                    every warp's wgmma reading stage (kt-W) % S has retired ...
    thread 0: expect_tx + TMA   ... so k-tile kt-W+S may overwrite it (tma.md §9d)
TMA writes and wgmma reads are both async-proxy accesses, so no proxy fence sits between them.
Out-of-bounds parts of a box are zero-filled by TMA and their bytes count towards expect_tx.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Sym, VReg
from ...schedule.hopper import HopperPlan
from . import descriptors as dsc
from . import mbarrier_isa as mb
from . import tma_isa as tma
from . import wgmma_isa as wi
from .operand_types import wgmma_shape

if TYPE_CHECKING:
    from .pipeline import Sm90Lowering


@dataclass(frozen=True)
class RingLayout:
    """Byte offsets (from the 1024-aligned shared base) of the stage ring and its barriers."""

    a_tile: dsc.CanonicalTile
    b_tile: dsc.CanonicalTile
    a_bytes: int          # one stage of A, a multiple of 1024 (swizzle pattern alignment)
    b_bytes: int
    stages: int
    #: Warp-specialised rings add an empty barrier per stage (consumers -> producer) after the full ones.
    empty_barriers: bool = False

    @property
    def stage_bytes(self) -> int:
        return self.a_bytes + self.b_bytes

    @property
    def barriers(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def empty(self) -> int:
        """Offset of empty[0] from the full barriers (empty[st] is 8 * st further)."""
        return 8 * self.stages

    @property
    def nbytes(self) -> int:
        return self.barriers + 8 * self.stages * (2 if self.empty_barriers else 1)


def ring_layout(plan: HopperPlan, bm: int, bn: int, bk: int, esize: int, stages: int) -> RingLayout:
    """Each operand's stage tile in wgmma's canonical layout for its major (K-major: A row-major,
    B column-major; MN-major otherwise, read with wgmma's transpose bit)."""
    assert plan.a_box is not None and plan.b_box is not None
    swz = plan.swizzle_mode
    major = {True: "K", False: "MN"}
    return RingLayout(dsc.CanonicalTile(bm, bk, esize, major[plan.a_box.k_major], swz),
                      dsc.CanonicalTile(bn, bk, esize, major[plan.b_box.k_major], swz),
                      plan.smem.a_stage, plan.smem.b_stage, stages, plan.warp_specialized)


class TmaWgmmaLoop:
    """Emits the ring's initialisation, prologue and k-loop for one CTA tile."""

    def __init__(self, lw: "Sm90Lowering"):
        self.lw, self.b, self.plan = lw, lw.b, lw.plan
        self.ring = lw.ring
        g = lw.g
        self.shape = wgmma_shape(g, lw.s.bn)  # per dtype: operand_types.py
        self.in_flight = 1 if lw.s.stages >= 2 else 0

    # -- addresses -------------------------------------------------------------------------
    def stage_base(self, stage: VReg) -> VReg:
        lw = self.lw
        off = lw.u32("mul.lo.u32", stage, Imm(str(self.ring.stage_bytes)))
        return lw.u32("add.u32", lw.smem, off)

    def barrier(self, stage: VReg, empty: bool = False) -> VReg:
        """full[stage] (or empty[stage]: the consumers' release of it, warp-specialised rings only)."""
        lw = self.lw
        off = lw.u32("shl.b32", stage, Imm("3"))
        return lw.u32("add.u32", lw.bars if not empty else lw.empty_bars, off)

    # -- the producer's half: one stage's copies ----------------------------------------------
    def issue_stage(self, stage: VReg, kt: VReg, guard: VReg | None,
                    origin: tuple[VReg, VReg] | None = None, kt_begin: VReg | None = None) -> None:
        """Thread `guard` arms full[stage] for the stage's bytes and issues the TMA boxes of k-tile
        kt_begin + kt (kt counts from the k-range's start; None: from k-tile 0) of the tile whose
        first row and column are `origin` (default: the CTA's one tile)."""
        lw, b, plan = self.lw, self.b, self.plan
        m0, n0 = origin if origin is not None else (lw.tile_m0, lw.tile_n0)
        bar = Addr(self.barrier(stage))
        mb.arrive_expect_tx(b, bar, plan.stage_tx_bytes, guard=guard,
                            comment=f"expect {plan.stage_tx_bytes} B (A and B boxes, OOB fill included)")
        base = self.stage_base(stage)
        k0 = lw.u32("mul.lo.u32", kt if kt_begin is None else lw.u32("add.u32", kt, kt_begin), Imm(str(lw.s.bk)))
        for name, box, origin, offset in (("A", plan.a_box, m0, 0),
                                          ("B", plan.b_box, n0, self.ring.a_bytes)):
            assert box is not None
            # box j covers the j-th swizzle-wide block of the contiguous extent (K for a K-major
            # operand, M or N for an MN-major one), which the canonical layout puts j*outer*W bytes on
            for j in range(box.count):
                dst = lw.u32("add.u32", base, Imm(str(offset + j * box.outer * plan.swizzle)))
                if box.k_major:
                    inner, outer = (lw.u32("add.u32", k0, Imm(str(j * box.inner))) if j else k0), origin
                else:
                    inner, outer = (lw.u32("add.u32", origin, Imm(str(j * box.inner))) if j else origin), k0
                tma.load(b, Addr(dst), lw.tmaps[name], (inner, outer, *lw.tma_batch), bar, guard=guard,
                         comment=f"{name} box {box.outer}x{box.inner} ({'K' if box.k_major else 'MN'}-major), block {j}")

    # -- the loop ----------------------------------------------------------------------------
    def init_barriers(self) -> None:
        lw, b = self.lw, self.b
        b.comment(f"thread 0 initialises the {self.ring.stages} full barriers (one arrival: its expect_tx)")
        for st in range(self.ring.stages):
            mb.init(b, Addr(lw.bars, 8 * st), 1, guard=lw.leader)
        b.emit("bar.sync", Imm("0"), comment="the barriers are initialised before anyone uses them")
        for t in lw.tmaps.values():
            tma.prefetch_tensormap(b, Addr(t), comment="tensor map into the descriptor cache")

    def emit(self, acc: list[tuple[VReg, ...]], kt_count: VReg, kt_begin: VReg | None = None) -> None:
        """The loop over k-tiles kt_begin .. kt_begin + kt_count - 1 (None: from k-tile 0)."""
        lw, b, s, ring = self.lw, self.b, self.lw.s, self.ring
        b.banner(f"Prologue: thread 0 fills the {s.stages} stages (k-tiles 0..{s.stages - 1} that exist)")
        for st in range(s.stages):
            kt = lw.u32("mov.u32", Imm(str(st)))
            exists = lw.pred("setp.lt.u32", kt, kt_count)
            go = lw.pred("and.pred", exists, lw.leader)
            self.issue_stage(kt, kt, go, kt_begin=kt_begin)
        desc_a, desc_b = self.descriptors()
        kt, stage, phase = (lw.u32("mov.u32", Imm("0")) for _ in range(3))
        b.banner(f"Main loop: wait full[stage], {self.plan.wgmmas_per_k_tile} wgmma per k-tile, "
                 f"{self.in_flight} group in flight, refill the retired stage")
        top = b.label("main_loop")
        b.place(top)
        mb.wait_parity(b, Addr(self.barrier(stage)), phase, "wait_full", comment="the stage's bytes landed")
        self.compute_stage(acc, *self.stage_descriptors((desc_a, desc_b), stage))
        wi.wait_group(b, self.in_flight, comment=f"k-tile kt-{self.in_flight}'s wgmma group has retired"
                      if self.in_flight else "this k-tile's wgmma group has retired")
        b.emit("bar.sync", Imm("0"), comment="in every warp: its stage may be overwritten")
        self.refill(kt, kt_count, stage, kt_begin)
        b.emit("add.u32", kt, kt, Imm("1"), ndefs=1)
        self.advance(stage, phase)
        more = lw.pred("setp.lt.u32", kt, kt_count)
        b.emit("bra", Sym(top), guard=more)
        wi.wait_group(b, 0, comment="all wgmma retired: the accumulators may be read")

    def descriptors(self) -> tuple[VReg, VReg]:
        """The wgmma descriptors of stage 0 for this thread's warpgroup (its rows of A)."""
        lw, b, ring = self.lw, self.b, self.ring
        b.comment("descriptors of stage 0; stage i's are i * stage bytes / 16 further (start field, no carry)")
        desc_a = dsc.emit_descriptor(b, lw.smem, ring.a_tile)
        if lw.plan.consumers > 1:
            rows = lw.plan.rows_per_consumer
            step = ring.a_tile.descriptor(0, rows, 0).start // 16   # linear in the row block for both majors
            units = lw.u32("mul.lo.u32", lw.warpgroup, Imm(str(step)), comment=f"warpgroup's {rows} rows of A")
            desc_a = lw.u64("add.s64", desc_a, lw.u64("cvt.u64.u32", units))
        desc_b = dsc.emit_descriptor(b, lw.u32("add.u32", lw.smem, Imm(str(ring.a_bytes))), ring.b_tile)
        return desc_a, desc_b

    def stage_descriptors(self, desc: tuple[VReg, VReg], stage: VReg) -> tuple[VReg, VReg]:
        """Stage `stage`'s descriptors: stage 0's plus stage * stage bytes / 16 (the start field)."""
        lw = self.lw
        step = lw.u64("cvt.u64.u32", lw.u32("mul.lo.u32", stage, Imm(str(self.ring.stage_bytes // 16))))
        return lw.u64("add.s64", desc[0], step), lw.u64("add.s64", desc[1], step)

    def advance(self, stage: VReg, phase: VReg) -> None:
        """stage + 1 in place, wrapping to 0 with the parity `phase` flipped (mbarrier.md §9e)."""
        lw, b = self.lw, self.b
        b.comment("next k-tile: stage + 1, wrapping to 0 with the parity flipped")
        b.emit("add.u32", stage, stage, Imm("1"), ndefs=1)
        wrap = lw.pred("setp.eq.u32", stage, Imm(str(self.ring.stages)))
        b.emit("selp.u32", stage, Imm("0"), stage, wrap, ndefs=1)
        b.emit("xor.b32", phase, phase, lw.u32("selp.u32", Imm("1"), Imm("0"), wrap), ndefs=1)

    def compute_stage(self, acc: list[tuple[VReg, ...]], desc_a: VReg, desc_b: VReg) -> None:
        b, s, ring = self.b, self.lw.s, self.ring
        wi.fence(b, comment="accumulator registers are ordered before this k-tile's wgmma")
        for kk in range(0, s.bk, self.shape.k):
            db = dsc.advance_descriptor(b, desc_b, ring.b_tile.descriptor(0, 0, kk).start, comment=f"B k+{kk}")
            for m, d in enumerate(acc):
                da = dsc.advance_descriptor(b, desc_a, ring.a_tile.descriptor(0, 64 * m, kk).start,
                                            comment=f"A rows +{64 * m}, k+{kk}")
                wi.wgmma(b, self.shape, d, da, db, scale_d=1, trans_a=int(ring.a_tile.major == "MN"),
                         trans_b=int(ring.b_tile.major == "MN"))
        wi.commit_group(b, comment="this k-tile's wgmma group")

    def refill(self, kt: VReg, kt_count: VReg, stage: VReg, kt_begin: VReg | None = None) -> None:
        """Thread 0 reloads the stage whose wgmma just retired (kt - W's) with k-tile kt - W + S, if
        it exists; the other threads branch past the copies."""
        lw, b, s = self.lw, self.b, self.lw.s
        nxt = lw.u32("add.u32", kt, Imm(str(s.stages - self.in_flight)))
        exists = lw.pred("setp.lt.u32", nxt, kt_count)
        go = lw.pred("and.pred", exists, lw.leader)
        retired = stage
        if self.in_flight:
            started = lw.pred("setp.ge.u32", kt, Imm(str(self.in_flight)))
            go = lw.pred("and.pred", go, started)
            first = lw.pred("setp.eq.u32", stage, Imm("0"))
            retired = lw.u32("selp.u32", Imm(str(s.stages - 1)), lw.u32("add.u32", stage, Imm("-1")), first,
                             comment="the previous k-tile's stage")
        skip = b.label("refill_done")
        b.emit("bra", Sym(skip), guard=go, negate=True)
        self.issue_stage(retired, nxt, None, kt_begin=kt_begin)
        b.place(skip)
