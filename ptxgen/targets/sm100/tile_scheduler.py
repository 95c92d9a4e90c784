"""The output tiles an sm_100a CTA walks: a static persistent stride, or cluster launch control
(docs/ptx_facts/sm100_formats.md §4; tcgen05.md §12j for the barriers).

Every role of the warp-specialised CTA (the TMA thread, the MMA warp, the four epilogue warps)
walks the same tiles with its own loop (`TileWalk`), so no role waits for another to pick a tile.

`tile_scheduler="static"`: a grid of min(tiles, SMs) CTAs, CTA x walks tiles x, x + %nctaid.x, ...

`tile_scheduler="clc"`: a grid of one CTA per tile. A running CTA takes its next tile by
cancelling a CTA that has not launched yet (`clusterlaunchcontrol.try_cancel`) and computing the
cancelled CTA's tile: the first tile is %ctaid.x, the next the cancelled CTA's
`get_first_ctaid::x`, until a cancel fails (every CTA launched or taken). The TMA thread issues
the cancel for the next tile when it starts a tile, into response slot i % 2 (i: the CTA's tile
count) on clc_full[i % 2] (complete_tx of 16 bytes); every role, after its tile, waits there,
reads the response and arrives on clc_empty[i % 2] (one arrival per reading thread: the TMA
thread, the MMA warp's and the epilogue warps' lanes, each after its own read, so no warp-level
sync is needed), which the TMA thread waits for before it reuses the slot, two tiles later.

Clusters (cluster.py, cta_pair.py; static walk only): cluster c walks its cluster tiles (or pair
tiles) c, c + %nclusterid.x, ..., each CTA taking its own part of the cluster's tile; the verifier
refuses "clc" with a cluster (a cancel there must be multicast to every CTA of the cluster).

Batched GEMMs: the walk covers batch x tiles of one matrix, the batch outermost (index i is batch
i / per_batch, tile i % per_batch in the raster, as on sm_90a: targets/sm90/persistent.py); the
batch is the TMA copies' third coordinate, and the roles storing C move its pointer to the batch's
matrix (base + batch * batch_stride_c elements).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...emit import mbarrier_isa as mb
from ...emit.memory import ld_param
from ...emit.tiles import Tile, TileScheduler
from ...ir import Addr, Imm, Sym, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, B64, S32, U32, U64
from ..sm90.batch import BATCH_PARAM
from .plan import CLC_SLOTS, EPILOGUE_WARPS, MBARRIER_BYTES

if TYPE_CHECKING:
    from .kernel import Sm100Lowering

RESPONSE_BYTES = 16
#: Arrivals on clc_empty: every thread that reads the responses (the TMA thread, the MMA warp,
#: the epilogue warps), each after its own read.
CLC_READERS = 1 + 32 * (1 + EPILOGUE_WARPS)


@dataclass(frozen=True)
class ClcBarriers:
    """Addresses of the response slots and of clc_full[2], clc_empty[2] (after the TMEM slot)."""

    responses: VReg
    full: VReg
    empty: VReg


def clc_barriers(lw: "Sm100Lowering") -> ClcBarriers:
    b, base = lw.b, lw.plan.clc_slots
    resp = ptx.add(b, U32, lw.smem, Imm(str(base)), comment="cluster launch control responses (16 B each)")
    full = ptx.add(b, U32, lw.smem, Imm(str(base + RESPONSE_BYTES * CLC_SLOTS)), comment="clc_full barriers")
    empty = ptx.add(b, U32, full, Imm(str(MBARRIER_BYTES * CLC_SLOTS)), comment="clc_empty barriers")
    return ClcBarriers(resp, full, empty)


def init_clc_barriers(lw: "Sm100Lowering", leader: VReg) -> ClcBarriers | None:
    """Thread 0 initialises clc_full (1 arrival: the TMA thread's expect_tx) and clc_empty (one per
    reader), in the setup before the CTA barrier; None without cluster launch control."""
    if not lw.plan.clc:
        return None
    bars = clc_barriers(lw)
    lw.b.comment(f"thread 0: clc_full[0..1] (1 arrival + 16 B of response), clc_empty[0..1] ({CLC_READERS} "
                 "arrivals: every role has read the response)")
    for slot in range(CLC_SLOTS):
        mb.init(lw.b, Addr(bars.full, MBARRIER_BYTES * slot), 1, guard=leader)
        mb.init(lw.b, Addr(bars.empty, MBARRIER_BYTES * slot), CLC_READERS, guard=leader)
    return bars


@dataclass(frozen=True)
class WalkTile:
    """One tile of the walk: its indices, its batch (the TMA copies' third coordinate; None for one
    matrix) and C's matrix (moved to the batch for a role that stores C, else the base). A grouped
    tile (grouped.py) also has B's third coordinate (its group, where a contiguous A has none) and
    the row its group ends at, which bounds the stores instead of M."""

    tile: Tile
    batch: VReg | None
    c: VReg
    b_batch: VReg | None = None
    rows_end: VReg | None = None

    @property
    def b_coord(self) -> VReg | None:
        """B's third TMA coordinate: its group's, else the batch's."""
        return self.b_batch if self.b_batch is not None else self.batch


class TileWalk:
    """The loop over a CTA's output tiles around one role's body: `begin` (at the top of each
    tile) returns the tile, `end` goes to the next one. `cancels`: this role issues the try_cancel
    (the TMA thread)."""

    def __init__(self, lw: "Sm100Lowering", role: str, moves_c: bool = False, cancels: bool = False):
        self.lw, self.b, self.role = lw, lw.b, role
        self.moves_c, self.cancels = moves_c, cancels
        self.clc = lw.clc if lw.plan.clc else None

    def begin(self) -> WalkTile:
        lw, b, g = self.lw, self.b, self.lw.g
        sched, cluster = TileScheduler(lw), lw.cluster
        if cluster is None:
            per_batch = sched.tile_count()
        else:   # the cluster's (or pair's) tiles: cluster c walks c, c + %nclusterid.x, ...
            first, per_batch = cluster.walk_start(self.role)
        count = per_batch
        if g.batch > 1:
            count = ptx.mul(b, U32, per_batch, Imm(str(g.batch)),
                            comment=f"x {g.batch} batches: the walk covers every matrix, batch outermost")
            if self.moves_c:
                stride_c = ld_param(b, "b64", ".u64", BATCH_PARAM.name)
        how = "then the cancelled CTAs' tiles (cluster launch control)" if self.clc else "then += %nctaid.x"
        if cluster is None:
            self.index = ptx.mov(b, U32, Sym("%ctaid.x"), comment=f"{self.role}: first tile, {how}")
        else:
            self.index = first
        self.count = count
        if self.clc is not None:
            self.taken = ptx.mov(b, U32, Imm("0"), comment=f"{self.role}: tiles taken so far (the response slot)")
        self.top, self.done = b.label(f"{self.role}_tile_loop"), b.label(f"{self.role}_tiles_done")
        b.emit("bra", Sym(self.done), guard=ptx.setp(b, "ge", U32, self.index, count))
        b.place(self.top)
        if self.clc is not None and self.cancels:
            self.issue_cancel()
        pid, batch, c = self.index, None, lw.ptr["C"]
        if g.batch > 1:
            b.comment(f"{self.role}: tile index -> (batch, tile of the batch)")
            batch = ptx.div(b, U32, self.index, per_batch)
            pid = ptx.mad(b, S32, batch, ptx.neg(b, S32, per_batch), self.index)
            if self.moves_c:
                step = ptx.mul(b, U64, ptx.cvt(b, U64, U32, batch), stride_c)
                c = ptx.mad(b, U64, step, Imm(str(g.out_bytes)), lw.ptr["C"])
        return WalkTile(sched.tile(pid) if cluster is None else cluster.tile(pid), batch, c)

    def slot(self) -> tuple[VReg, VReg]:
        """(response slot, the parity of its use) of this role's current tile."""
        b = self.b
        return (ptx.and_(b, B32, self.taken, Imm("1")),
                ptx.and_(b, B32, ptx.shr(b, U32, self.taken, Imm("1")), Imm("1")))

    def issue_cancel(self) -> None:
        """The TMA thread asks for the next tile while this one runs: once every role has read the
        slot's previous response, cancel a not-yet-launched CTA into it."""
        b, clc = self.b, self.clc
        assert clc is not None
        slot, use = self.slot()
        off = ptx.shl(b, B32, slot, Imm("3"))
        mb.wait_parity(b, Addr(ptx.add(b, U32, clc.empty, off)), ptx.xor(b, B32, use, Imm("1")), "wait_clc_empty",
                       comment="every role has read this slot's previous response (a fresh one passes)")
        mb.fence_proxy_async(b, comment="those generic reads before the async-proxy response write")
        full = ptx.add(b, U32, clc.full, off)
        mb.arrive_expect_tx(b, Addr(full), RESPONSE_BYTES, comment="the response: 16 bytes of complete_tx")
        resp = ptx.add(b, U32, clc.responses, ptx.shl(b, B32, slot, Imm("4")))
        b.emit("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128",
               Addr(resp), Addr(full), comment="cancel a CTA not launched yet: its tile is this CTA's next")

    def end(self) -> None:
        """Static: += %nctaid.x (+= %nclusterid.x with a cluster). CLC: the response of this tile's cancel names the next tile, or
        none (every CTA launched or taken): the walk ends."""
        b = self.b
        if self.clc is None:
            step = "%nctaid.x" if self.lw.cluster is None else "%nclusterid.x"
            b.comment(f"{self.role}: next tile of this {'CTA' if self.lw.cluster is None else 'cluster'} (+= {step})")
            ptx.add(b, U32, self.index, ptx.mov(b, U32, Sym(step)), into=self.index)
            b.emit("bra", Sym(self.top), guard=ptx.setp(b, "lt", U32, self.index, self.count))
            b.place(self.done)
            return
        clc = self.clc
        slot, use = self.slot()
        off = ptx.shl(b, B32, slot, Imm("3"))
        mb.wait_parity(b, Addr(ptx.add(b, U32, clc.full, off)), use, "wait_clc_full",
                       comment="the cancel's response landed")
        resp = ptx.add(b, U32, clc.responses, ptx.shl(b, B32, slot, Imm("4")))
        words = Vec(b.regs("b64", 2))
        ptx.load(b, "shared", B64, Addr(resp), into=words, width=2, comment="the 16-byte response")
        response = b.reg("b128")
        b.emit("mov.b128", response, words, ndefs=1)
        taken = b.reg("pred")
        b.emit("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128", taken, response, ndefs=1,
               comment="a CTA was cancelled: its tile is next")
        b.emit("clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128", self.index, response, ndefs=1,
               comment="the cancelled CTA's %ctaid.x: the next tile index")
        mb.arrive(b, Addr(ptx.add(b, U32, clc.empty, off)),
                  comment="this thread has read the slot: the TMA thread may reuse it once all have")
        ptx.add(b, U32, self.taken, Imm("1"), into=self.taken)
        b.emit("bra", Sym(self.top), guard=taken)
        b.place(self.done)
