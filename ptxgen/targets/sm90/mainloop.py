"""The sm_90a main loop without warp specialisation: a ring of S TMA stages with one full mbarrier
each, wgmma from shared-memory descriptors, one wgmma group kept in flight.

Iteration kt (stage kt % S, full-barrier parity (kt / S) & 1: the ring's PipelineState,
mbarrier_ring.py):
    wait full[stage]            the stage's TMA bytes have landed (mbarrier.md §9e, phase parity)
    wgmma.fence; wgmmas; commit this k-tile's group (wgmma.md §9b)
    wait_group W                W = 1 (S >= 2): the group of k-tile kt-1 has retired, kt's still runs
    bar.sync                    every warp's wgmma reading stage (kt-W) % S has retired ...
    thread 0: expect_tx + TMA   ... so k-tile kt-W+S may overwrite it (tma.md §9d)
    (fp8 promotion, promotion.py: W = 0, then acc += the k-tile's temporary after the refill)
TMA writes and wgmma reads are both async-proxy accesses, so no proxy fence sits between them.
Out-of-bounds parts of a box are zero-filled by TMA and their bytes count towards expect_tx.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import PRED, S64, U32, U64
from ...emit.memory import bar_sync
from .plan import HopperPlan
from ...emit.tiles import KRange
from . import descriptors as dsc
from . import tma_isa as tma
from . import wgmma_isa as wi
from .operand_types import wgmma_shape
from .promotion import Promotion

if TYPE_CHECKING:
    from .context import Sm90Context, TmaOperands


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
    """The pieces of a TMA + wgmma main loop over the kernel's mbarrier ring (`ctx.ring`): the
    producer's copies of a stage, the descriptors, one k-tile's wgmma; `emit` is the whole loop
    over a k-range of one CTA tile without warp specialisation (warp_specialized.py runs the
    same pieces in two roles)."""

    def __init__(self, ctx: "Sm90Context"):
        self.ctx, self.b, self.plan = ctx, ctx.b, ctx.plan
        self.layout = ctx.layout
        self.ring = ctx.ring
        self.shape = wgmma_shape(ctx.g, ctx.s.bn)  # per dtype: operand_types.py
        #: fp8 promotion (promotion.py): the wgmma accumulates into its temporary, which must retire
        #: before it is added, so no group stays in flight across k-tiles
        self.promotion = Promotion(ctx, ctx.plan.promotion_k) if ctx.plan.promotion_k is not None else None
        self.in_flight = 1 if ctx.s.stages >= 2 and self.promotion is None else 0
        #: the k-tile's last promotion chunk (promoted at its end): BK / interval - 1
        self.last_chunk = -(-ctx.s.bk // ctx.plan.promotion_k) - 1 if ctx.plan.promotion_k else 0

    # -- addresses -------------------------------------------------------------------------
    def stage_base(self, stage: VReg) -> VReg:
        ctx = self.ctx
        off = ptx.mul(ctx.b, U32, stage, Imm(str(self.layout.stage_bytes)))
        return ptx.add(ctx.b, U32, ctx.smem, off)

    # -- the producer's half: one stage's copies ----------------------------------------------
    def issue_stage(self, stage: VReg, kt: VReg, guard: VReg | None, ops: "TmaOperands",
                    kt_begin: VReg | None = None) -> None:
        """Thread `guard` arms full[stage] for the stage's bytes and issues the TMA boxes of k-tile
        kt_begin + kt (kt counts from the k-range's start; None: from k-tile 0) of `ops`'s tile."""
        ctx, b, plan = self.ctx, self.b, self.plan
        m0, n0 = ops.tile.bm0, ops.tile.bn0
        bar = self.ring.producer_commit(stage, plan.stage_tx_bytes, guard,
                                        comment=f"expect {plan.stage_tx_bytes} B (A and B boxes, OOB fill included)")
        base = self.stage_base(stage)
        k0 = ptx.mul(ctx.b, U32, kt if kt_begin is None else ptx.add(ctx.b, U32, kt, kt_begin), Imm(str(ctx.s.bk)))
        for name, box, origin, offset in (("A", plan.a_box, m0, 0),
                                          ("B", plan.b_box, n0, self.layout.a_bytes)):
            assert box is not None
            # box j covers the j-th swizzle-wide block of the contiguous extent (K for a K-major
            # operand, M or N for an MN-major one), which the canonical layout puts j*outer*W bytes on
            for j in range(box.count):
                dst = ptx.add(ctx.b, U32, base, Imm(str(offset + j * box.outer * plan.swizzle)))
                if box.k_major:
                    inner, outer = (ptx.add(ctx.b, U32, k0, Imm(str(j * box.inner))) if j else k0), origin
                else:
                    inner, outer = (ptx.add(ctx.b, U32, origin, Imm(str(j * box.inner))) if j else origin), k0
                outer_coords = ops.b_coordinate if name == "B" else ops.batch
                tma.load(b, Addr(dst), ctx.tmaps[name], (inner, outer, *outer_coords), bar, guard=guard,
                         comment=f"{name} box {box.outer}x{box.inner} ({'K' if box.k_major else 'MN'}-major), block {j}")

    # -- the loop ----------------------------------------------------------------------------
    def init_barriers(self) -> None:
        ctx, b = self.ctx, self.b
        b.comment(f"thread 0 initialises the {self.ring.stages} full barriers (one arrival: its expect_tx)")
        self.ring.init(ctx.leader)
        bar_sync(b, comment="the barriers are initialised before anyone uses them")
        for t in ctx.tmaps.values():
            tma.prefetch_tensormap(b, Addr(t), comment="tensor map into the descriptor cache")

    def emit(self, acc: list[tuple[VReg, ...]], ops: "TmaOperands", k: KRange) -> None:
        """The loop over k-tiles k.first .. k.first + k.count - 1 (k.first None: from k-tile 0)."""
        ctx, b, s, ring = self.ctx, self.b, self.ctx.s, self.ring
        kt_count, kt_begin = k.count, k.first
        b.banner(f"Prologue: thread 0 fills the {s.stages} stages (k-tiles 0..{s.stages - 1} that exist)")
        for st in range(s.stages):
            kt = ptx.mov(ctx.b, U32, Imm(str(st)))
            exists = ptx.setp(ctx.b, "lt", U32, kt, kt_count)
            go = ptx.and_(ctx.b, PRED, exists, ctx.leader)
            self.issue_stage(kt, kt, go, ops, kt_begin=kt_begin)
        desc_a, desc_b = self.descriptors(ops.warpgroup)
        count = ptx.mov(ctx.b, U32, Imm("0"))
        state = ring.start(0).counting(count)
        b.banner(f"Main loop: wait full[stage], {self.plan.wgmmas_per_k_tile} wgmma per k-tile, "
                 f"{self.in_flight} group in flight, refill the retired stage")
        if self.promotion is not None:
            self.promotion.begin_tile(ops)
        top = b.label("main_loop")
        b.place(top)
        if self.promotion is not None:
            self.promotion.begin_k_tile(count)
        ring.consumer_wait(state, comment="the stage's bytes landed")
        self.compute_stage(acc, *self.stage_descriptors((desc_a, desc_b), state.index))
        wi.wait_group(b, self.in_flight, comment=f"k-tile kt-{self.in_flight}'s wgmma group has retired"
                      if self.in_flight else "this k-tile's wgmma group has retired")
        # This per-k-tile bar.sync is needed: the ring here has full barriers only,
        # so nothing else orders every warp's wgmma reads of stage (kt-W) % S before thread 0's TMA
        # refill of it. Each warp's wait_group covers only the wgmmas it committed itself
        # (wgmma.md §9b: commit_group batches the executing thread's wgmmas), and the other warps,
        # and the other consumer warpgroup, are not thread 0's. Dropping it needs CUTLASS's
        # consumer_release instead: an empty mbarrier per stage that every warp arrives at after its
        # wait_group and thread 0 waits on before refilling, i.e. the warp-specialised ring
        # (warp_specialized.py). tests/targets/sm90/test_sm90_wgmma_kernel.py plants its removal.
        bar_sync(b, comment="in every warp: its stage may be overwritten")
        self.refill(count, kt_count, state.index, ops, kt_begin)
        if self.promotion is not None:
            self.promotion.promote(acc, "end of the k-tile, after its wait_group 0", self.last_chunk)
        ring.advance(state)
        more = ptx.setp(ctx.b, "lt", U32, count, kt_count)
        b.emit("bra", Sym(top), guard=more)
        wi.wait_group(b, 0, comment="all wgmma retired: the accumulators may be read")

    def descriptors(self, warpgroup: VReg) -> tuple[dsc.DescriptorWords, dsc.DescriptorWords]:
        """The wgmma descriptor words of stage 0 for the threads of consumer warpgroup `warpgroup`
        (its rows of A), computed once before the loop (32-bit arithmetic only: DescriptorWords)."""
        ctx, b, layout = self.ctx, self.b, self.layout
        b.comment("descriptors of stage 0; stage i's are i * stage bytes / 16 further (start field, low word)")
        desc_a = dsc.emit_descriptor_words(b, ctx.smem, layout.a_tile)
        if ctx.plan.consumers > 1:
            rows = ctx.plan.rows_per_consumer
            step = layout.a_tile.descriptor(0, rows, 0).start // 16   # linear in the row block for both majors
            units = ptx.mul(ctx.b, U32, warpgroup, Imm(str(step)), comment=f"warpgroup's {rows} rows of A")
            desc_a = dsc.offset_words(b, desc_a, units)
        desc_b = dsc.emit_descriptor_words(b, ptx.add(ctx.b, U32, ctx.smem, Imm(str(layout.a_bytes))), layout.b_tile)
        return desc_a, desc_b

    def stage_descriptors(self, desc: tuple[dsc.DescriptorWords, dsc.DescriptorWords],
                          stage: VReg) -> tuple[dsc.DescriptorWords, dsc.DescriptorWords]:
        """Stage `stage`'s descriptor words: stage 0's plus stage * stage bytes / 16 (low word)."""
        step = ptx.mul(self.ctx.b, U32, stage, Imm(str(self.layout.stage_bytes // 16)))
        return dsc.offset_words(self.b, desc[0], step), dsc.offset_words(self.b, desc[1], step)

    def compute_stage(self, acc: list[tuple[VReg, ...]], desc_a: dsc.DescriptorWords,
                      desc_b: dsc.DescriptorWords) -> None:
        b, s, layout, promo = self.b, self.ctx.s, self.layout, self.promotion
        target = acc if promo is None else promo.temporaries(acc)
        wi.fence(b, comment="accumulator registers are ordered before this k-tile's wgmma")
        # The shape every current assembler turns into a lean loop (docs/ptx_facts/wgmma.md §9c,
        # measured with bench/sass.py --ptxas): B's low word gets a 32-bit add per k-step and is joined at the
        # wgmma (an add.s64 there makes ptxas 13.5 split it into UIADD3 + UIADD3.X and move both
        # halves); A is joined once per stage and stepped with add.s64 (ptxas 13.0 folds that into
        # one UIADD3.64 and 13.5 into UIADD3 + UIADD3.X, where a join per step costs 13.0 the
        # NOP-padded UMOV pairs). 128x128x64 / 128x256x64, two consumers, SASS per k-tile: 13.0 and
        # 13.5 and nvJitLink 40 or fewer (was 34/37, 51/51, 57/57).
        ja = dsc.join_words(b, desc_a)
        for kk in range(0, s.bk, self.shape.k):
            if promo is not None and kk and promo.starts_chunk(kk):  # BK > 128: promote within the k-tile
                wi.commit_group(b, comment=f"the wgmma group of k+{kk - promo.interval}..{kk - 1}")
                wi.wait_group(b, 0, comment="it has retired: its temporary may be read")
                promo.promote(acc, f"within the k-tile, before k+{kk}", kk // promo.interval - 1)
                wi.fence(b, comment="the temporary's reads are ordered before the next chunk's wgmma")
            db = dsc.join_words(b, dsc.offset_words(b, desc_b, layout.b_tile.descriptor(0, 0, kk).start // 16,
                                                    comment=f"B k+{kk}"))
            first = promo is not None and promo.starts_chunk(kk)  # D = A*B starts the temporary
            for m, d in enumerate(target):
                da = dsc.advance_descriptor(b, ja, layout.a_tile.descriptor(0, 64 * m, kk).start,
                                            comment=f"A rows +{64 * m}, k+{kk}")
                wi.wgmma(b, self.shape, d, da, db, scale_d=0 if first else 1, trans_a=int(layout.a_tile.major == "MN"),
                         trans_b=int(layout.b_tile.major == "MN"))
        wi.commit_group(b, comment="this k-tile's wgmma group")

    def refill(self, kt: VReg, kt_count: VReg, stage: VReg, ops: "TmaOperands", kt_begin: VReg | None = None) -> None:
        """Thread 0 reloads the stage whose wgmma just retired (kt - W's) with k-tile kt - W + S, if
        it exists; the other threads branch past the copies."""
        ctx, b, s = self.ctx, self.b, self.ctx.s
        nxt = ptx.add(ctx.b, U32, kt, Imm(str(s.stages - self.in_flight)))
        exists = ptx.setp(ctx.b, "lt", U32, nxt, kt_count)
        go = ptx.and_(ctx.b, PRED, exists, ctx.leader)
        retired = stage
        if self.in_flight:
            started = ptx.setp(ctx.b, "ge", U32, kt, Imm(str(self.in_flight)))
            go = ptx.and_(ctx.b, PRED, go, started)
            retired = self.ring.previous(stage)
        skip = b.label("refill_done")
        b.emit("bra", Sym(skip), guard=go, negate=True)
        self.issue_stage(retired, nxt, None, ops, kt_begin=kt_begin)
        b.place(skip)
