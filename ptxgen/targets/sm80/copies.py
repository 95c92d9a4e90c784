"""cp.async copies of the A and B k-tiles into the multi-buffered stage tiles (sm_80 and later).

Each thread copies `copies_per_thread` units of each operand's k-tile (`plans.copy_plan`): a
16-, 8- or 4-byte cp.async, or a synchronous 1- or 2-byte copy for operands aligned below 4 bytes.
Edge tiles zero-fill through cp.async's src-size or ignore-src (`load_edges.EdgeChecks`). Both
cp.async pipelines (mma.sync and wmma) copy this way.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...emit.addressing import RowPointers
from ...ir import Addr, Imm, Operand, VReg
from ...ir import ops as ptx
from ...ir.ops import PRED, B16, U8, U32, U64, S64
from ...emit.tiles import Tile, TileOperands
from .isa import cp_async
from .load_edges import EdgeChecks
from .plans import CopyPlan, copy_plan

if TYPE_CHECKING:
    from ...regalloc.smem import SmemBuffer
    from ...schedule.problem import Gemm
    from ...schedule.schedule import Schedule
    from .lowering import GemmLowering


class CpAsyncCopies:
    """The copy plans of A and B and the registers they need: shared destinations in stage 0
    (`setup`), loop-invariant row steps and per-k-tile advances (`prepare_loop`), and per tile
    the global pointers and edge checks (`operands`)."""

    def __init__(self, lw: "GemmLowering"):
        self.lw, self.b = lw, lw.b
        self.plans: dict[str, CopyPlan] = {"A": copy_plan(lw.tile_a), "B": copy_plan(lw.tile_b)}
        self.dst_bases: dict[str, list[VReg]] = {}  # copy destinations in stage 0
        self.steps: dict[str, dict[int, VReg]] = {}  # loop-invariant byte steps between copy rows
        self.advance: dict[str, VReg | Imm] = {}  # bytes a global tile pointer moves per k-tile

    def setup(self) -> None:
        """Tile-independent shared addresses: each copy's destination in stage 0."""
        self.dst_bases = {n: self.lw.shared_bases(n, self.plans[n].dst.bases) for n in ("A", "B")}

    def prepare_loop(self) -> None:
        """Loop-invariant values of the copies: row steps and the per-k-tile pointer advance."""
        self.steps = self.row_steps()
        self.advance = self.k_advance()

    def operands(self, tile: Tile) -> TileOperands:
        """Per-tile state: global pointers to k-tile 0 of the CTA tile, and the edge bounds."""
        gptr = {n: self.global_tile_pointer(n, tile) for n in ("A", "B")}
        edge = EdgeChecks(self.lw, tile, self.plans)
        edge.prepare()
        return TileOperands(gptr, edge)

    def global_tile_pointer(self, name: str, out_tile: Tile) -> VReg:
        """Pointer to this thread's first chunk of k-tile 0 of operand `name`."""
        cp: CopyPlan = self.plans[name]
        tile = cp.tile
        eb = tile.elem_bytes
        self.b.comment(f"{name}: thread's first {tile.copy_bytes}-byte copy of k-tile 0 in global memory")
        row = self.lw.ex.reg(cp.row0)
        col = self.lw.ex.reg(cp.col0 * (tile.copy_bytes // eb))
        origin = out_tile.bm0 if name == "A" else out_tile.bn0  # the CTA's first row of A / column of B
        if tile.k_along_rows:  # tile rows run along K: the CTA origin is a column offset
            col = ptx.add(self.lw.b, U32, col, origin)
        else:
            row = ptx.add(self.lw.b, U32, row, origin)
        return self.lw.element_pointer(self.lw.ptr[name], "lda" if name == "A" else "ldb", row, col, eb)

    def k_advance(self) -> dict[str, VReg | Imm]:
        """Bytes a global tile pointer moves per k-tile."""
        out: dict[str, VReg | Imm] = {}
        for name in ("A", "B"):
            tile = self.plans[name].tile
            if tile.k_along_rows:
                ld = self.lw.dim("lda" if name == "A" else "ldb")
                out[name] = self.lw.wide_mul(ld, Imm(str(self.lw.s.bk * tile.elem_bytes)))
            else:
                out[name] = Imm(str(self.lw.s.bk * tile.elem_bytes))
        return out

    def skip_k_tiles(self, gptr: dict[str, VReg], first: VReg, what: str) -> None:
        """Move both global tile pointers forward by `first` k-tiles (split-K, Stream-K units)."""
        for name in ("A", "B"):
            adv = self.advance[name]
            skip = (self.lw.wide_mul(first, adv) if isinstance(adv, Imm)
                    else ptx.mul(self.lw.b, U64, ptx.cvt(self.lw.b, U64, U32, first), adv))
            ptx.add(self.b, S64, gptr[name], skip, into=gptr[name], comment=f"{name} -> {what}")

    def row_steps(self) -> dict[str, dict[int, VReg]]:
        """Loop-invariant 64-bit byte steps between consecutive copy rows (usually just one)."""
        out: dict[str, dict[int, VReg]] = {}
        for name in ("A", "B"):
            cp = self.plans[name]
            ld = self.lw.dim("lda" if name == "A" else "ldb")
            rows = sorted(set(cp.rows))
            deltas = sorted({b - a for a, b in zip(rows, rows[1:])})
            out[name] = {d: self.lw.wide_mul(ld, Imm(str(d * cp.tile.elem_bytes))) for d in deltas}
        return out

    def issue_tile(self, ops: TileOperands, name: str, stage_off: VReg | int, guard: VReg | None, what: str,
                   k_rem: VReg | None) -> None:
        """Copy one k-tile of `name` into the stage at byte offset `stage_off`, then advance.

        `k_rem` (K left from this k-tile's start) is given only when K ends inside a k-tile.
        """
        cp = self.plans[name]
        cb = cp.tile.copy_bytes
        kind = "cp.async" if cb >= 4 else "ld.global + st.shared"
        self.b.comment(f"{what}: {kind} {name} ({cp.tile.copies_per_thread} x {cb} B per thread)")
        if isinstance(stage_off, int):
            dst = [(base, stage_off) for base in self.dst_bases[name]]
        else:
            dst = [(ptx.add(self.lw.b, U32, base, stage_off), 0) for base in self.dst_bases[name]]
        sizes = ops.edge.src_sizes(name, k_rem)
        row_ptr = RowPointers(self.b, ops.gptr[name], steps=self.steps[name])  # steps: loop-invariant
        for it in range(cp.tile.copies_per_thread):
            r = cp.rows[it]
            base_i, imm = cp.dst.site[it]
            reg, extra = dst[base_i]
            dst_addr, src_addr = Addr(reg, imm + extra), Addr(row_ptr[r], cp.cols[it] * cb)
            if cb >= 4:
                cp_async(self.b, dst_addr, src_addr, cb, src_size=sizes[it], guard=guard)
            else:
                self.copy_narrow(dst_addr, src_addr, cb, cp.tile.elem_bytes, sizes[it], guard)
        ptx.add(self.b, S64, ops.gptr[name], self.advance[name], into=ops.gptr[name],
                comment=f"{name} pointer -> next k-tile")

    def copy_narrow(self, dst: Addr, src: Addr, cb: int, eb: int, size: Operand | None,
                    guard: VReg | None) -> None:
        """A synchronous 1- or 2-byte copy (no cp.async is that narrow), zero outside the matrix.

        `size` is cp.async's src-size: the unit's bytes inside the matrix. A 2-byte unit of 8-bit
        elements may straddle the edge (size 1): then only its first byte is loaded (`ld.u8`
        zero-extends, and the first element is the low byte), so no byte past the edge is read.
        """
        h = self.b.reg("b16")
        ty = B16 if cb == 2 else U8
        if size is not None or guard is not None:
            ptx.mov(self.b, B16, 0, into=h)
        if size is None:
            ptx.load(self.b, "global", ty, src, into=h, guard=guard)
        else:
            full = ptx.setp(self.lw.b, "eq", U32, size, Imm(str(cb)))
            ptx.load(self.b, "global", ty, src, into=h, guard=self.both(full, guard))
            if cb == 2 and eb == 1:  # the straddling unit: its first byte only
                first = ptx.setp(self.lw.b, "eq", U32, size, 1)
                ptx.load(self.b, "global", U8, src, into=h, guard=self.both(first, guard))
        ptx.store(self.b, "shared", ty, dst, h, guard=guard)

    def both(self, p: VReg, q: VReg | None) -> VReg:
        return p if q is None else ptx.and_(self.lw.b, PRED, p, q)


class CpAsyncOperands:
    """The Pipeline methods of a cp.async-fed pipeline (sm80 mma.sync and wmma): its shared buffers
    are the main-loop stages, and operand tiles, loop preparation and k-tile skipping are its
    `self.copies` (a CpAsyncCopies)."""

    copies: CpAsyncCopies

    @classmethod
    def shared_buffers(cls, g: "Gemm", s: "Schedule") -> "list[SmemBuffer]":
        from ...emit.pipeline import mainloop_buffers

        return mainloop_buffers(g, s)

    def prepare_loop(self) -> None:
        self.copies.prepare_loop()

    def operands(self, tile: "Tile") -> "TileOperands":
        return self.copies.operands(tile)

    def skip_k_tiles(self, gptr: dict[str, VReg], first: VReg, what: str) -> None:
        self.copies.skip_k_tiles(gptr, first, what)
