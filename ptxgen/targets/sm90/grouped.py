"""Grouped GEMMs (schedule/grouping.py) in the warp-specialised persistent sm_90a kernel: the
walk over the groups' tiles, read from `offs` / `masked_m` on the device.

The tiles. The m-tiles are numbered over the groups, group 0's ceil(rows_0 / BM) first, then
group 1's, ...; linear tile i is m-tile i / tiles_n, n-tile i % tiles_n (row raster). Each role
(the producer's thread, every consumer warp) first sums the groups' m-tiles (one pass over the G
counts, clamped as emit/groups.py clamps them: a decreasing offs entry is an empty group, ends and
counts are clamped to M), so the walk's length comes from the device and sizes can change
between launches of the same (CUDA-graph capturable) grid. CTA x then walks x, x + %nctaid.x, ...
as the dense kernel does (persistent.py). A CTA's m-tiles only grow along its walk, so its group
search resumes where the last tile's stopped: (group, its first row, its first m-tile) are
carried from tile to tile, and the whole walk reads each count once more per CTA.

The operands. B is one 3-D tensor map (G, ...) with the group as its outer coordinate (either
layout, as a batched B). Masked: A is 3-D (G, max_m, K) too, its rows counted within the slot,
and C moves to the group's matrix (+ group * batch_stride_c). Contiguous: A and C are plain
(M_total, ...) matrices and a tile's first row is its group's first row + its m-tile * BM.

Rows of another group. TMA clips a box at the tensor's edge, not at a group's (out-of-bounds
elements are zero-filled: docs/ptx_facts/tma.md §9d): a contiguous tile that straddles its group's
end loads the NEXT group's rows of A (zero-filled only past M_total), and a masked tile loads the
slot's rows past masked_m[g]. Those rows are multiplied by this group's B into accumulator rows
of their own (D = A·B row by row: row r of D reads only row r of A, wgmma.md §9b), and
the tile's store is predicated on row < the group's end (`TmaOperands.rows_end`, the direct
epilogue's row guard), so they never reach C: the next group's rows are written only by the CTA
that owns that group's tile, with its own B. The TMA-store epilogue, which would clip at M_total
(or max_m), is not used for grouped kernels (plan.epilogue_path; the verifier refuses it). A
block-scaled tile clamps its sa rows to the group's last row (the stray rows' scales are real
values, and their results are dropped); sa and sb move to the group (+ group * their group
strides; a contiguous sa is indexed by the absolute row).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import Addr, Imm, Param, Sym, VReg
from ...ir import ops as ptx
from ...ir.ops import S32, U32, U64
from ...emit.groups import COUNTS_PARAM
from ...emit.memory import ld_param, load_param
from ...emit.tiles import Tile
from .batch import BATCH_PARAM
from .block_scales import GROUP_STRIDE_PARAMS
from .context import TmaOperands
from .persistent import WalkStep

if TYPE_CHECKING:
    from ...schedule.problem import Gemm
    from .context import Sm90Context


def grouped_params(g: "Gemm") -> list[Param]:
    """What a grouped kernel adds after ldc: batch_stride_c (.u64, masked: elements between the
    groups' C matrices)."""
    return [BATCH_PARAM] if g.grouping == "masked" else []


def grouped_scale_params(g: "Gemm") -> list[Param]:
    """After the block scales' four strides: the groups' strides of sa and sb (.u32 elements)."""
    return [Param(".u32", n) for n in GROUP_STRIDE_PARAMS] if g.grouped and g.block_scale is not None else []


def counts_params(g: "Gemm") -> list[Param]:
    """The last parameter: the device array of the groups' sizes (offs or masked_m)."""
    return [Param(".u64", COUNTS_PARAM[g.grouping])] if g.grouped else []


class GroupedTileWalk:
    """`persistent.TileWalk`'s interface (begin / end around one role's body) over the groups'
    tiles; `begin` returns each tile's operands with its group's coordinates and row bound."""

    def __init__(self, ctx: "Sm90Context", role: str, moves_c: bool = False):
        self.ctx, self.b, self.role, self.moves_c = ctx, ctx.b, role, moves_c
        self.g, self.s = ctx.g, ctx.s
        self.masked = ctx.g.grouping == "masked"

    def _end(self, counts: VReg, group: VReg, start: VReg) -> VReg:
        """The group's clamped end row: contiguous min(max(offs[g], start), M_total); masked
        min(max(masked_m[g], 0), max_m) (its start is 0)."""
        b = self.b
        addr = ptx.mad_wide(b, U32, group, Imm("4"), counts)
        raw = ptx.load(b, "global", U32, Addr(addr), comment=f"{COUNTS_PARAM[self.g.grouping]}[group]")
        low = ptx.max_(b, S32, raw, Imm("0") if self.masked else start,
                       comment="a negative count is empty" if self.masked else "a decreasing offs entry is empty")
        return ptx.min_(b, U32, low, self.ctx.dim("M"), comment="no group reaches past M")

    def _tiles(self, rows: VReg) -> VReg:
        return self.ctx.ceil_div(rows, self.s.bm)

    def begin(self) -> tuple[TmaOperands, WalkStep]:
        tile, here, end, c, step = self.walk()
        ops = TmaOperands(tile, (here,) if self.masked else (), c, self.ctx.warpgroup,
                          b_batch=(here,), rows_end=end, group=here)
        return ops, step

    def walk(self) -> tuple[Tile, VReg, VReg, VReg, WalkStep]:
        """The walk's head up to one tile: (the tile, its group, the group's end row, C's matrix
        for this role, the loop's step). Shared with the sm_100a kernel (targets/sm100/grouped.py),
        which reads `ctx.b/g/s/dim/ceil_div/ptr` of its own lowering."""
        ctx, b, g, s, role = self.ctx, self.b, self.g, self.s, self.role
        counts = ptx.to_global(b, U64, load_param(b, U64, COUNTS_PARAM[g.grouping]))
        b.comment(f"{role}: m-tiles of the {g.groups} groups ({g.grouping}), summed over "
                  f"{COUNTS_PARAM[g.grouping]}[0..{g.groups}) on the device")
        total = ptx.mov(b, U32, Imm("0"), comment="m-tiles of every group")
        scan = ptx.mov(b, U32, Imm("0"), comment="group")
        prev = ptx.mov(b, U32, Imm("0"), comment="the group's first row")
        summing = b.label(f"{role}_group_sum")
        b.place(summing)
        end = self._end(counts, scan, prev)
        rows = end if self.masked else ptx.sub(b, U32, end, prev)
        ptx.add(b, U32, total, self._tiles(rows), into=total)
        if not self.masked:
            ptx.mov(b, U32, end, into=prev)
        ptx.add(b, U32, scan, Imm("1"), into=scan)
        b.emit("bra", Sym(summing), guard=ptx.setp(b, "lt", U32, scan, Imm(str(g.groups))))
        num_n = ctx.ceil_div(ctx.dim("N"), s.bn)
        count = ptx.mul(b, U32, total, num_n, comment="tiles: the groups' m-tiles x n-tiles")
        group = ptx.mov(b, U32, Imm("0"), comment="the current group, carried from tile to tile")
        start = ptx.mov(b, U32, Imm("0"), comment="its first row (contiguous: offs[group - 1])")
        first = ptx.mov(b, U32, Imm("0"), comment="its first m-tile")
        if self.masked and self.moves_c:
            base_c, stride_c = ctx.ptr["C"], ld_param(b, "b64", ".u64", BATCH_PARAM.name)
        index = ptx.mov(b, U32, Sym("%ctaid.x"), comment=f"{role}: first tile, then += %nctaid.x")
        top, done = b.label(f"{role}_tile_loop"), b.label(f"{role}_tiles_done")
        b.emit("bra", Sym(done), guard=ptx.setp(b, "ge", U32, index, count))
        b.place(top)
        b.comment(f"{role}: tile -> (m-tile over the groups, n-tile); find the m-tile's group from the last one")
        tm = ptx.div(b, U32, index, num_n)
        tn = ptx.sub(b, U32, index, ptx.mul(b, U32, tm, num_n))
        seek, found = b.label(f"{role}_group_seek"), b.label(f"{role}_group_found")
        b.place(seek)
        b.emit("bra", Sym(done), guard=ptx.setp(b, "ge", U32, group, Imm(str(g.groups))),
               comment="past the last group (not reached: the tile count is the groups')")
        end = self._end(counts, group, start)
        rows = end if self.masked else ptx.sub(b, U32, end, start)
        following = ptx.add(b, U32, first, self._tiles(rows), comment="the next group's first m-tile")
        b.emit("bra", Sym(found), guard=ptx.setp(b, "lt", U32, tm, following), comment="the m-tile is in this group")
        ptx.mov(b, U32, following, into=first)
        if not self.masked:
            ptx.mov(b, U32, end, into=start)
        ptx.add(b, U32, group, Imm("1"), into=group)
        b.emit("bra", Sym(seek))
        b.place(found)
        local = ptx.mul(b, U32, ptx.sub(b, U32, tm, first), Imm(str(s.bm)), comment="rows into the group")
        bm0 = local if self.masked else ptx.add(b, U32, start, local, comment="contiguous: A's and C's row")
        bn0 = ptx.mul(b, U32, tn, Imm(str(s.bn)))
        here = ptx.mov(b, U32, group, comment="this tile's group")
        c = ctx.ptr["C"]
        if self.masked and self.moves_c:
            step = ptx.mul(b, U64, ptx.cvt(b, U64, U32, here), stride_c)
            c = ptx.mad(b, U64, step, Imm(str(g.out_bytes)), base_c, comment="C of the group's slot")
        return Tile(tm, tn, bm0, bn0), here, end, c, WalkStep(index, count, top, done)

    def end(self, step: WalkStep | None) -> None:
        """The next tile of this CTA (+= %nctaid.x), back to `begin`'s top."""
        assert step is not None
        b = self.b
        b.comment(f"{self.role}: next tile of this CTA (+= %nctaid.x)")
        ptx.add(b, U32, step.index, ptx.mov(b, U32, Sym("%nctaid.x")), into=step.index)
        b.emit("bra", Sym(step.top), guard=ptx.setp(b, "lt", U32, step.index, step.count))
        b.place(step.done)


def tile_walk(ctx: "Sm90Context", role: str, moves_c: bool = False):
    """The walk of one role of the warp-specialised persistent kernel: over the groups' tiles for
    a grouped GEMM, else over the dense (batch x) tile grid (persistent.TileWalk)."""
    from .persistent import TileWalk

    return GroupedTileWalk(ctx, role, moves_c) if ctx.g.grouped else TileWalk(ctx, role, moves_c)


def describe_group_walk(g: "Gemm") -> str:
    """How the grouped kernel finds its tiles, for the PTX header and `ptxgen info`."""
    what = ("offs (cumulative row ends), A and C rows from the group's first row" if g.grouping == "contiguous"
            else "masked_m (valid rows per slot), A's and C's slot from the group")
    return (f"every role sums the {g.groups} groups' m-tiles from {what} on the device, then walks tiles x, "
            "x + %nctaid.x, ... of the groups' m-tiles x n-tiles, resuming its group search tile to tile; "
            "B through its 3-D tensor map at the group's coordinate; stores guarded by the group's end row "
            "(a tile straddling the next group computes its rows but never stores them)")


def grouped_params_text(g: "Gemm") -> str:
    """The grouped parameters, for the header's params line ('' for other kernels)."""
    if not g.grouped:
        return ""
    return ((f"; batch_stride_c (.u64) after ldc" if g.grouping == "masked" else "")
            + ("; sa_group_stride, sb_group_stride (.u32)" if g.block_scale is not None else "")
            + f"; {COUNTS_PARAM[g.grouping]} (.u64, int32[{g.groups}]) last")


def priced_problem(g: "Gemm") -> "Gemm":
    """The dense problem the cost model prices a grouped one as (choose.predict_hopper): G equal
    groups as a batch of G matrices (contiguous: M_total / G rows each; masked: every slot full),
    so each group rounds up to whole tiles as the walk does and a tall BM over small groups shows
    as edge waste. The block scales' few loads and registers per tile are left out of it."""
    import dataclasses

    rows = g.m if g.grouping == "masked" else max(1, -(-g.m // g.groups))
    return dataclasses.replace(g, m=rows, batch=g.groups, groups=1, grouping=None, block_scale=None)
