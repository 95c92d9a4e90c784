"""Tile scheduling: which output tile and which k-tiles a CTA (or a Stream-K unit) works on.

The scheduler returns values; nothing here is stored on the lowering. A `Tile` is one output
tile's indices and first row/column; a `KRange` is the k-tiles a CTA runs over; a `ZSlot` is
what %ctaid.z stands for (batch index and split-K slice).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..ir import Imm, Sym, VReg, ops as ptx, Builder
from ..ir.ops import U32
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule

if TYPE_CHECKING:
    from .edges import StoreEdges


class TileOps(Protocol):
    """What the tile scheduler needs of a lowering (sm_80/wmma `GemmLowering`, sm_90a
    `Sm90Lowering` or its `Sm90Context`): the builder, the problem and schedule, scalar helpers."""

    @property
    def b(self) -> Builder: ...

    @property
    def g(self) -> Gemm: ...

    @property
    def s(self) -> Schedule: ...

    def dim(self, name: str) -> VReg: ...

    def ceil_div(self, x: VReg, d: int) -> VReg: ...


@dataclass(frozen=True)
class Tile:
    """One output tile: its m/n indices and its first row (bm0) and column (bn0)."""

    tm: VReg
    tn: VReg
    bm0: VReg
    bn0: VReg


@dataclass(frozen=True)
class KRange:
    """The k-tiles a CTA runs: `count` of them (at least one), starting `k_left` elements before
    the end of K (None: from k-tile 0, all of K). The global tile pointers already point at the
    first one."""

    count: VReg
    k_left: VReg | None = None
    #: The first k-tile's index (None: k-tile 0), for pipelines that address k-tiles by index
    #: (the sm_90a TMA copies' K coordinate) rather than by moved pointers.
    first: VReg | None = None


@dataclass(frozen=True)
class ZSlot:
    """%ctaid.z = batch * split_k + split: the raw slot, the batch index and the split (None
    where the launch has no such dimension)."""

    slot: VReg
    batch: VReg
    split: VReg | None


class TileScheduler:
    """Maps a CTA (from the launch grid) or a linear tile index (Stream-K) to its output tile,
    in the schedule's raster order (row, or grouped for L2 reuse)."""

    def __init__(self, lw: TileOps):
        self.lw, self.b, self.s = lw, lw.b, lw.s

    def z_slot(self) -> ZSlot | None:
        """ctaid.z = batch * split_k + split: which batch and which K slice (None: no z dimension)."""
        return z_slot(self.b, self.lw.g, self.s)

    def tile_count(self) -> VReg:
        """ceil(M / BM) * ceil(N / BN): the output tiles of one batch, which a persistent grid walks
        by index (`tile(index)` maps each index to its tile in the raster)."""
        lw = self.lw
        return ptx.mul(lw.b, U32, lw.ceil_div(lw.dim("M"), self.s.bm), lw.ceil_div(lw.dim("N"), self.s.bn),
                       comment="tiles: the output tiles this grid walks")

    def tile(self, pid: VReg | None = None) -> Tile:
        """The CTA's tile from the launch grid, or (Stream-K) from a linear tile index `pid` within the batch."""
        lw, b, s = self.lw, self.b, self.s
        if s.raster == "row" and pid is None:
            b.comment("raster row: ctaid.x -> n-tile, ctaid.y -> m-tile")
            tn, tm = ptx.mov(lw.b, U32, Sym("%ctaid.x")), ptx.mov(lw.b, U32, Sym("%ctaid.y"))
        elif s.raster == "row":
            b.comment("raster row: tile -> (tile / tiles_n, tile % tiles_n)")
            num_n = lw.ceil_div(lw.dim("N"), s.bn)
            tm = ptx.div(lw.b, U32, pid, num_n)
            tn = ptx.rem(lw.b, U32, pid, num_n)
        else:
            b.comment(f"raster grouped: groups of {s.group_m} m-tiles walk n together (L2 reuse)")
            if pid is None:
                pid = ptx.mov(lw.b, U32, Sym("%ctaid.x"))
            num_m, num_n = lw.ceil_div(lw.dim("M"), s.bm), lw.ceil_div(lw.dim("N"), s.bn)
            in_group = ptx.mul(lw.b, U32, num_n, Imm(str(s.group_m)))
            group = ptx.div(lw.b, U32, pid, in_group)
            first_m = ptx.mul(lw.b, U32, group, Imm(str(s.group_m)))
            left = ptx.sub(lw.b, U32, num_m, first_m)
            size_m = ptx.min_(lw.b, U32, left, Imm(str(s.group_m)))
            pos = ptx.rem(lw.b, U32, pid, in_group)
            tm = ptx.add(lw.b, U32, first_m, ptx.rem(lw.b, U32, pos, size_m))
            tn = ptx.div(lw.b, U32, pos, size_m)
        return self._tile(tm, tn)

    def group_tile(self, tm: VReg, tn: VReg | None = None) -> Tile:
        """A grouped GEMM's tile: m-tile `tm` within its group (`emit/groups.py` GroupSlot.tm; the
        rows are the group's, from A's and C's moved pointers) and n-tile `tn` (default ctaid.x)."""
        if tn is None:
            self.b.comment("grouped: ctaid.x -> n-tile; the m-tile within the group from the group walk")
            tn = ptx.mov(self.lw.b, U32, Sym("%ctaid.x"))
        return self._tile(tm, tn)

    def _tile(self, tm: VReg, tn: VReg) -> Tile:
        lw, s = self.lw, self.s
        bm0 = ptx.mul(lw.b, U32, tm, Imm(str(s.bm)), comment="bm0: first row of the CTA tile")
        bn0 = ptx.mul(lw.b, U32, tn, Imm(str(s.bn)), comment="bn0: first column of the CTA tile")
        return Tile(tm, tn, bm0, bn0)


@dataclass(frozen=True)
class TileOperands:
    """A tile's operand state: each operand's global pointer to its next k-tile (the copies
    advance these registers in place) and the tile's edge checks (the pipeline's own subclass
    of StoreEdges, which adds its load checks: sm80.load_edges.EdgeChecks)."""

    gptr: dict[str, VReg]
    edge: "StoreEdges"


def z_slot(b: Builder, g: Gemm, s: Schedule) -> ZSlot | None:
    """ctaid.z = batch * split_k + split: which batch and which K slice (None: no z dimension)."""
    if g.batch == 1 and s.split_k == 1:
        return None
    slot = ptx.mov(b, U32, Sym("%ctaid.z"))
    if s.split_k == 1:
        return ZSlot(slot, slot, None)
    b.comment(f"ctaid.z = batch * {s.split_k} + split")
    split = ptx.rem(b, U32, slot, Imm(str(s.split_k)))
    return ZSlot(slot, ptx.div(b, U32, slot, Imm(str(s.split_k))), split)
