"""The warp-specialised kernel's C loader: with beta != 0 one elected lane of the producer
warpgroup's warp 1 loads C's boxes by TMA into the TMA epilogue's C buffers ahead of the
consumers' epilogue, as CUTLASS's sm90 TMA warp-specialised epilogue has its producer warp load
C on its own pipeline (docs/ptx_facts/tma.md §9d, mbarrier.md §9e).

Per tile of the CTA's walk (the same walk as the main-loop producer's and the consumers'), per
chunk j of EpilogueTile columns and per consumer warpgroup w, through buffer k = j % 2:

    wait C-free[w][k] (parity, starts 1: a fresh barrier's "previous phase" is complete)
    arrive.expect_tx C-load[w][k] with the box's bytes; TMA load of C's box (rows of w, chunk j)

The consumers wait C-load[w][k] before reading the box (epilogue_tma.py) and, after the named
barrier that follows every thread's reads, the warpgroup leader arrives on C-free[w][k]. Each
buffer is used the same number of times per tile by both sides, so one parity per buffer (all
warpgroups alike) carries across tiles. A thread of its own, apart from the main-loop producer,
so the C loads wait on the consumers' epilogue without holding back the next tile's A and B.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, U32
from ...emit import mbarrier_isa as mb
from . import tma_isa as tma
from .persistent import TileWalk
from .plan import MBARRIER_BYTES

if TYPE_CHECKING:
    from .context import Sm90Context
    from .epilogue_tma import TmaStores


def emit_c_loader(ctx: "Sm90Context", stores: "TmaStores") -> None:
    """The C loader's walk over the CTA's tiles; it returns (exits) after the last tile."""
    b, lay, tile = ctx.b, stores.layout, stores.tile
    assert stores.producer_loads_c, "the producer loads C only with beta != 0 and warp specialisation"
    consumers = lay.consumers
    b.comment(f"C loader: per tile, {tile.chunks} boxes of {tile.rows}x{tile.cols} for each of "
              f"{consumers} consumer warpgroup(s) into C buffer j % 2, each after the consumers freed it")
    full = ptx.add(b, U32, ctx.smem, Imm(str(lay.barriers)), comment="C-load barriers")
    free = ptx.add(b, U32, ctx.smem, Imm(str(lay.free_barriers)), comment="C-free barriers")
    dst = ptx.add(b, U32, ctx.smem, Imm(str(lay.load)), comment="the C buffers")
    parity: list[VReg] = [ptx.mov(b, U32, Imm("1"), comment=f"C-free parity of buffer {k} (starts 1)")
                          for k in range(min(2, tile.chunks))]
    walk = TileWalk(ctx, "c_loader")
    ops, step = walk.begin()
    nbytes = tile.rows * tile.pitch
    rows = [ops.tile.bm0] + [ptx.add(b, U32, ops.tile.bm0, Imm(str(w * tile.rows)),
                                     comment=f"warpgroup {w}'s first row") for w in range(1, consumers)]
    for j in range(tile.chunks):
        k = j % 2
        col = ops.tile.bn0 if j == 0 else ptx.add(b, U32, ops.tile.bn0, Imm(str(j * tile.cols)))
        for w, row in enumerate(rows):
            slot = MBARRIER_BYTES * (2 * w + k)
            mb.wait_parity(b, Addr(free, slot), parity[k], "wait_c_free",
                           comment=f"consumer warpgroup {w} has read C buffer {k}")
            mb.arrive_expect_tx(b, Addr(full, slot), nbytes, comment=f"C box {j} of warpgroup {w}: {nbytes} B")
            tma.load(b, Addr(dst, w * lay.per_consumer + k * tile.buffer_bytes), ctx.tmaps["C"], (col, row),
                     Addr(full, slot), comment=f"C columns +{j * tile.cols}, rows +{w * tile.rows}")
        ptx.xor(b, B32, parity[k], Imm("1"), into=parity[k])
    walk.end(step)
