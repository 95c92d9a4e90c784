"""Split-K on sm_90a (schedule.split_k > 1, decomposition 'tiles', workspace mode).

The protocol is emit/splitk.py's, on the wgmma accumulator layout: %ctaid.z = batch * S + split
(tiles.TileScheduler.z_slot); split s runs k-tiles [s * per, s * per + count) of KT
(per = ceil(KT / S); the verifier gives every split at least one), handed to the main loop as a
k-range (`KRange(count, first=first)`, run by `TmaWgmmaLoop.emit`): the TMA copies' K coordinate is
(first + kt) * BK, and TMA zero-fills past K. Every split then stores its f32 partial tile to
workspace[batch * S + split][Mpad][Npad] (padded to whole tiles: no bounds checks), thread 0
releases it with an acq_rel atomic increment of the tile's counter, and the CTA that sees S-1 is
the last: it resets the counter for the next launch, sums the S partials in split order (so the
result does not depend on which CTA came last) and runs the epilogue once (alpha, beta * C,
bias, ... applied once). The workspace and counters are the sm_80 kernels' (`Kernel.
workspace_elements`, `counter_count`, passed as the last two .u64 parameters).

Atomic split-K (partials added into C) is not built on sm_90a; Stream-K is (sm90/streamk.py, on
WgmmaPartials below).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Param, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import B64, F32, S64, U32, U64
from ...schedule.schedule import Schedule
from ...emit.index import Expr, Tid
from ...emit.memory import ld_param
from ...emit.splitk import continue_if_last_split
from ...emit.tiles import Tile, ZSlot
from .wgmma_layouts import accumulator_coord

if TYPE_CHECKING:
    from .context import Sm90Context

#: Appended last: f32 partial tiles and one u32 arrival counter per (batch, output tile).
SPLIT_K_PARAMS = (Param(".u64", "workspace"), Param(".u64", "counters"))
#: Shared bytes after the ring's barriers through which thread 0 tells the CTA whether it is the
#: last split (8, keeping the end 8-byte aligned). The verifier's budget (hopper.SmemBudget) counts
#: two barriers per stage plus extras, more than the ring's one per stage plus these bytes.
FLAG_BYTES = 8


def split_k_params(s: Schedule) -> list[Param]:
    """Workspace split-K's and Stream-K's scratch parameters (sm90/streamk.py uses them too)."""
    return list(SPLIT_K_PARAMS) if s.split_k > 1 or s.stream_k else []


def flag_bytes(s: Schedule) -> int:
    return FLAG_BYTES if s.split_k > 1 else 0


class WgmmaPartials:
    """Moves wgmma accumulators to and from an f32 partial tile in global memory (rows of
    `row_elems` elements): split-K's padded slices and Stream-K's per-CTA tiles. Element i of m64
    block m sits at row 64m + 16w + g + 8*((i>>1)&1), column 8*(i>>2) + 2t + (i&1)
    (wgmma_layouts.accumulator_coord), so adjacent column pairs move as v2.f32 at immediate
    offsets from the thread's first element."""

    def __init__(self, ctx: "Sm90Context"):
        self.ctx, self.b = ctx, ctx.b

    def thread_row(self) -> Expr:
        """Row of the thread's first element within the CTA tile (its warpgroup's rows first)."""
        row = accumulator_coord(0)[0]
        if self.ctx.plan.consumers > 1:
            row = row + (Tid() >> 7) * self.ctx.plan.rows_per_consumer
        return row

    def thread_col(self) -> Expr:
        return accumulator_coord(0)[1]

    def partial_origin(self, row_elems: int) -> Expr:
        """Elements from a partial tile's origin to the thread's first element."""
        return self.thread_row() * row_elems + self.thread_col()

    def pairs(self, acc: list[tuple[VReg, ...]], row_elems: int):
        """(fragment, element i, byte offset from the thread's first element) of each column pair."""
        for m, frag in enumerate(acc):
            for i in range(0, len(frag), 2):
                row, col = 64 * m + 8 * ((i >> 1) & 1), 8 * (i >> 2)
                yield frag, i, (row * row_elems + col) * 4

    def store_partial(self, acc: list[tuple[VReg, ...]], base: VReg, row_elems: int) -> None:
        for frag, i, off in self.pairs(acc, row_elems):
            ptx.store(self.b, "global", F32, Addr(base, off), Vec(frag[i:i + 2]), width=2)

    def add_partial(self, acc: list[tuple[VReg, ...]], base: VReg, row_elems: int) -> None:
        for frag, i, off in self.pairs(acc, row_elems):
            part = self.b.regs("f32", 2)
            ptx.load(self.b, "global", F32, Addr(base, off), into=Vec(part), width=2)
            for j in range(2):
                ptx.add(self.b, F32, frag[i + j], part[j], into=frag[i + j])


class Sm90SplitK:
    """The k-range of a split, and the partial-tile reduction after the main loop."""

    def __init__(self, ctx: "Sm90Context"):
        self.ctx, self.b, self.g, self.s = ctx, ctx.b, ctx.g, ctx.s
        self.S = ctx.s.split_k
        self.tiles_m, self.tiles_n = -(-self.g.m // self.s.bm), -(-self.g.n // self.s.bn)
        self.mpad, self.npad = self.tiles_m * self.s.bm, self.tiles_n * self.s.bn
        self.io = WgmmaPartials(ctx)

    def k_range(self, kt: VReg, split: VReg) -> tuple[VReg, VReg]:
        """(first k-tile, k-tile count) of this split: [split * per, + min(per, KT - split * per))."""
        lw = self.ctx
        self.b.comment(f"split-K: this CTA runs k-tiles [split * per, ...) of {self.S} splits, per = ceil(KT / {self.S})")
        per = lw.ceil_div(kt, self.S)
        first = ptx.mul(lw.b, U32, split, per, comment="this split's first k-tile")
        count = ptx.min_(lw.b, U32, per, ptx.sub(lw.b, U32, kt, first), comment="its k-tile count (>= 1: verifier)")
        return first, count

    # -- partial tiles in the workspace --------------------------------------------------------
    def thread_base(self, slot: VReg, within: VReg, workspace: VReg) -> VReg:
        """workspace + slot * slice bytes + within (this thread's first element in a slice)."""
        lw = self.ctx
        slice_bytes = self.mpad * self.npad * 4
        skip = (lw.wide_mul(slot, Imm(str(slice_bytes))) if slice_bytes < 2**32
                else ptx.mul(lw.b, U64, ptx.cvt(lw.b, U64, U32, slot), Imm(str(slice_bytes))))
        return ptx.add(lw.b, S64, workspace, ptx.add(lw.b, S64, skip, within))

    def within(self, tile: Tile) -> VReg:
        """Byte offset of this thread's first accumulator element in a Mpad x Npad f32 slice (the
        tile's origin plus WgmmaPartials.partial_origin); 64-bit, since Mpad * Npad may pass 2^32."""
        lw = self.ctx
        row = ptx.add(lw.b, U32, tile.bm0, lw.ex.emit(self.io.thread_row()))
        col = ptx.add(lw.b, U32, tile.bn0, lw.ex.emit(self.io.thread_col()))
        elem = ptx.mad_wide(lw.b, U32, row, Imm(str(self.npad)), ptx.cvt(lw.b, U64, U32, col))
        return ptx.shl(lw.b, B64, elem, Imm("2"))

    # -- the reduction --------------------------------------------------------------------------
    def reduce(self, acc: list[tuple[VReg, ...]], tile: Tile, z: ZSlot) -> None:
        """Store `tile`'s partial, synchronise with the other splits, and (last CTA) sum all of them."""
        lw, b, s = self.ctx, self.b, self.s
        b.banner(f"Split-K: publish this split's partial tile; the last of {self.S} sums them in order")
        workspace, counters = (ptx.to_global(lw.b, U64, ld_param(b, "b64", ".u64", p.name))
                               for p in SPLIT_K_PARAMS)
        within = self.within(tile)
        self.io.store_partial(acc, self.thread_base(z.slot, within, workspace), self.npad)
        tm = ptx.div(lw.b, U32, tile.bm0, Imm(str(s.bm)))
        tn = ptx.div(lw.b, U32, tile.bn0, Imm(str(s.bn)))
        index = ptx.mad(lw.b, U32, tm, Imm(str(self.tiles_n)), tn)
        index = ptx.mad(lw.b, U32, z.batch, Imm(str(self.tiles_m * self.tiles_n)), index,
                       comment="the tile's counter: batch * tiles + tm * tiles_n + tn")
        counter = ptx.add(lw.b, S64, counters, lw.wide_mul(index, Imm("4")))
        flag = ptx.add(lw.b, U32, lw.smem, Imm(str(lw.layout.nbytes)), comment="the last-split flag, after the barriers")
        t0 = lw.leader
        continue_if_last_split(lw, counter, flag, t0, self.S)
        b.comment("sum the partials in split order 0..S-1 (deterministic whichever CTA is last)")
        first_slot = ptx.mul(lw.b, U32, z.batch, Imm(str(self.S)))
        ptr = self.thread_base(first_slot, within, workspace)
        for frag in acc:
            for r in frag:
                ptx.mov(b, F32, Imm("0f00000000"), into=r)
        split = ptx.mov(lw.b, U32, Imm("0"))
        loop = b.label("split_k_reduce")
        b.place(loop)
        self.io.add_partial(acc, ptr, self.npad)
        ptx.add(b, S64, ptr, Imm(str(self.mpad * self.npad * 4)), into=ptr, comment="next split's slice")
        ptx.add(b, U32, split, Imm("1"), into=split)
        again = ptx.setp(lw.b, "lt", U32, split, Imm(str(self.S)))
        ptx.bra(b, loop, guard=again)
