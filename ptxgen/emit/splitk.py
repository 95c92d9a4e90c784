"""Split-K: several CTAs share one output tile, each summing a slice of the k-tiles.

Workspace mode (deterministic): every split stores its f32 partial tile to
workspace[z][Mpad][Npad] (z = batch * S + split; padded to whole tiles, so no bounds checks),
then thread 0 releases it with an acq_rel atomic increment of the tile's counter. The CTA that
sees S-1 is the last: it resets the counter for the next launch, sums the S partials in split
order (so the result does not depend on which CTA came last) and runs the epilogue once.

The protocol is the same for every pipeline; only moving fragments to and from a partial tile
differs, so SplitK asks the pipeline (`Pipeline.store_partial` / `add_partial`): by mma.sync's
known fragment layout, or wmma.store.d / wmma.load.c for wmma's opaque fragments.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import Addr, Imm, VReg
from ..ir import ops as ptx
from ..ir.ops import U32, S32, U64, S64, F32
from .memory import bar_sync
from .tiles import KRange, Tile, ZSlot

if TYPE_CHECKING:
    from ..targets.sm80.lowering import GemmLowering

#: Shared buffer (4 bytes) through which thread 0 tells the CTA whether it is the last split.
FLAG_BUFFER = "split_k_flag"


def continue_if_last_split(lw, counter: VReg, flag: VReg, t0: VReg, splits: int) -> None:
    """The split-K hand-off, after this CTA's partial is stored: thread t0 counts the CTA in on the
    tile's counter (acq_rel: our partial released, the earlier splits' acquired) and shares the
    count through the shared `flag`; every split but the last exits, and the last resets the
    counter for the next launch. Shared by the sm_80/wmma and sm_90a split-K."""
    b = lw.b
    bar_sync(b, comment="every partial of this CTA is written")
    b.emit("fence.acq_rel.gpu", guard=t0)
    old = ptx.atom(b, "add", U32, Addr(counter), 1, sem="acq_rel.gpu", guard=t0,
                   comment="release our partial; acquire the earlier splits'")
    ptx.store(b, "shared", U32, Addr(flag), old, guard=t0)
    bar_sync(b, comment="the arrival count is visible to the whole CTA")
    seen = ptx.load(lw.b, "shared", U32, Addr(flag))
    not_last = ptx.setp(lw.b, "ne", U32, seen, Imm(str(splits - 1)))
    b.emit("exit", guard=not_last, comment="not the last split: its partial waits in the workspace")
    ptx.store(b, "global", U32, Addr(counter), 0, guard=t0, comment="reset the counter for the next launch")


class SplitK:
    def __init__(self, lw: "GemmLowering"):
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s
        self.S = lw.s.split_k
        tiles_m, tiles_n = -(-self.g.m // self.s.bm), -(-self.g.n // self.s.bn)
        self.mpad, self.npad = tiles_m * self.s.bm, tiles_n * self.s.bn
        self.tiles = tiles_m * tiles_n
        self.io = lw.pipeline  # how fragments reach a partial tile
        self.within: VReg | None = None  # byte offset of this thread's first element in a slice

    def k_range(self, kt: VReg, split: VReg, gptr: dict[str, VReg]) -> KRange:
        """This split's k-tiles of all `kt`: [split * per, split * per + KT_local); the pointers
        `gptr` move to the first."""
        lw, b = self.lw, self.b
        b.comment(f"split-K: this CTA sums k-tiles [split * per, ...) of {self.S} splits")
        per = lw.ceil_div(kt, self.S)
        first = ptx.mul(lw.b, U32, split, per)
        count = ptx.min_(lw.b, U32, per, ptx.sub(lw.b, U32, kt, first))
        k_left = ptx.mad(lw.b, S32, first, Imm(str(-self.s.bk)), lw.dim("K"))
        lw.pipeline.skip_k_tiles(gptr, first, "this split's first k-tile")
        return KRange(count, k_left)

    def thread_base(self, z: VReg, tile: Tile) -> VReg:
        """Workspace address, in slice z, of this thread's (mma) or warp's (wmma) first element."""
        lw = self.lw
        if self.within is None:  # the same in every slice; 64-bit, since Mpad * Npad may pass 2^32
            col = ptx.add(lw.b, U32, tile.bn0, lw.ex.emit(self.io.partial_origin(self.npad)))
            elem = ptx.mad_wide(lw.b, U32, tile.bm0, Imm(str(self.npad)), ptx.cvt(lw.b, U64, U32, col))
            self.within = ptx.shl(lw.b, U64, elem, 2)
        slice_bytes = self.mpad * self.npad * 4
        skip = (lw.wide_mul(z, Imm(str(slice_bytes))) if slice_bytes < 2**32
                else ptx.mul(lw.b, U64, ptx.cvt(lw.b, U64, U32, z), Imm(str(slice_bytes))))
        return ptx.add(lw.b, S64, lw.ptr["workspace"], ptx.add(lw.b, S64, skip, self.within))

    def reduce(self, acc, tile: Tile, z: ZSlot) -> None:
        """Store the partial, synchronise with the other splits, and (last CTA) sum all of them."""
        lw, b = self.lw, self.b
        b.banner(f"Split-K: publish this split's partial tile; the last of {self.S} sums them in order")
        self.io.store_partial(acc, self.thread_base(z.slot, tile), self.npad)
        flag = ptx.add(lw.b, U32, lw.smem, Imm(str(lw.plan.offsets[FLAG_BUFFER])))
        t0 = ptx.setp(lw.b, "eq", U32, lw.tid, 0)
        index = ptx.mad(lw.b, U32, tile.tm, Imm(str(-(-self.g.n // self.s.bn))), tile.tn)
        index = ptx.mad(lw.b, U32, z.batch, Imm(str(self.tiles)), index)
        counter = ptx.add(lw.b, S64, lw.ptr["counters"], lw.wide_mul(index, Imm("4")))
        continue_if_last_split(lw, counter, flag, t0, self.S)
        b.comment("sum the partials in split order 0..S-1 (deterministic whichever CTA is last)")
        first_slot = ptx.mul(lw.b, U32, z.batch, Imm(str(self.S)))
        ptr = self.thread_base(first_slot, tile)
        for row in acc:
            for frag in row:
                for r in frag:
                    ptx.mov(b, F32, Imm("0f00000000"), into=r)
        s = ptx.mov(lw.b, U32, 0)
        loop = b.label("split_k_reduce")
        b.place(loop)
        self.io.add_partial(acc, ptr, self.npad)
        ptx.add(b, S64, ptr, Imm(str(self.mpad * self.npad * 4)), into=ptr, comment="next split's slice")
        ptx.add(b, U32, s, 1, into=s)
        again = ptx.setp(lw.b, "lt", U32, s, Imm(str(self.S)))
        ptx.bra(b, loop, guard=again)
