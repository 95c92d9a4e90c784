"""The wmma instruction path: wmma.load / wmma.mma / wmma.store m16n16k16 instead of mma.sync.

wmma fragments are opaque (docs/ptx_facts/mma_sync.md §3): the element-to-lane mapping is
unspecified, so the lowering never looks inside one. Operands load straight from the plain or padded
stage tiles (every row 32-byte aligned) with a stride, and results leave only through wmma.store.d
into the shared staging tile, which the staged epilogue then drains with 16-byte stores.

Split-K partial tiles go to the global workspace with wmma.store.d and come back with
wmma.load.c, both row-major with the same stride: a load.c of what a store.d wrote gives each
element the same register slot, so adding fragments register by register sums element-wise
whatever the (unspecified) mapping is.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ....ir import Addr, VReg, ops as ptx
from ....ir.ops import U32, F32
from ....emit.epilogue.staged import StagedEpilogue
from ..copies import CpAsyncCopies, CpAsyncOperands
from ..mainloop import MainLoop
from ..plans import warp_origin
from ....emit.index import Expr, share_bases
from ....emit.pipeline import Accumulators
from . import isa
from .isa import ACC_BYTES, ACC_REGS

if TYPE_CHECKING:
    from ..lowering import GemmLowering
    from ....emit.edges import StoreEdges
    from ....emit.tiles import KRange, Tile, TileOperands



class WmmaPipeline(CpAsyncOperands):
    """wmma.load / wmma.mma over cp.async stage tiles, opaque accumulators (implements `Pipeline`)."""

    def __init__(self, lw: "GemmLowering"):
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s
        tm, tn = lw.s.warp_tile
        self.mi, self.ni = tm // 16, tn // 16
        # A stored K x M is wmma "col"; B stored N x K (k contiguous) is wmma "col" too.
        self.layout = {"A": "col" if lw.tile_a.k_along_rows else "row",
                       "B": "row" if lw.tile_b.k_along_rows else "col"}
        self.copies = CpAsyncCopies(lw)
        self.bases: dict[str, list[VReg]] = {}  # fragment blocks' base addresses in stage 0, from setup
        self.site: dict[str, list[tuple[int, int]]] = {}  # per fragment block: (base index, immediate)
        self.acc = lw.g.accumulator  # "f32", or "f16" (f16 inputs only; the verifier checks)
        self.sites: dict[str, list[Expr]] = {"A": [], "B": []}
        wm0, wn0 = self.origin = warp_origin(lw.s)
        for ks in range(lw.s.bk // 16):
            for m in range(self.mi):
                self.sites["A"].append(self._offset(lw.tile_a, wm0 + 16 * m, 16 * ks))
            for n in range(self.ni):
                self.sites["B"].append(self._offset(lw.tile_b, wn0 + 16 * n, 16 * ks))

    @staticmethod
    def _offset(tile, mn: Expr, k: int) -> Expr:
        """Byte offset of the 16x16 block at (m or n, k) of a stage tile: warp-uniform."""
        row, col = (k, mn) if tile.k_along_rows else (mn, k)
        return row * tile.pitch + col * tile.elem_bytes

    def mainloop(self, acc: Accumulators, ops: "TileOperands", k: "KRange") -> None:
        MainLoop(self.lw, ops, k, self).emit(acc)

    def setup(self) -> None:
        """Absolute shared addresses of the fragment blocks in stage 0 (bases + immediates)."""
        lw = self.lw
        self.copies.setup()
        for name in ("A", "B"):
            sb = share_bases(self.sites[name], lw.s.threads)
            self.bases[name] = lw.shared_bases(name, sb.bases)
            self.site[name] = sb.site

    def accumulators(self) -> list[list[tuple[VReg, ...]]]:
        cls = "f32" if self.acc == "f32" else "b32"
        return [[self.b.regs(cls, ACC_REGS[self.acc]) for _ in range(self.ni)] for _ in range(self.mi)]

    def load(self, name: str, index: int, rd: list[tuple[VReg, int]]) -> tuple[VReg, ...]:
        tile = self.lw.tile_a if name == "A" else self.lw.tile_b
        base_i, imm = self.site[name][index]
        reg, extra = rd[base_i]
        return isa.load_ab(self.b, name, self.layout[name], self.g.dtype, Addr(reg, imm + extra),
                           tile.pitch // tile.elem_bytes)

    def compute_tile(self, rd_off: dict[str, VReg | int], acc) -> None:
        lw, b = self.lw, self.b
        rd: dict[str, list[tuple[VReg, int]]] = {}
        for name in ("A", "B"):
            off = rd_off[name]
            rd[name] = ([(r, off) for r in self.bases[name]] if isinstance(off, int)
                        else [(ptx.add(lw.b, U32, r, off), 0) for r in self.bases[name]])
        op = isa.mma_opcode(self.layout["A"], self.layout["B"], self.g.dtype, self.acc)
        steps = self.s.bk // 16

        def load(ks: int):
            b.comment(f"k-step {ks}: wmma.load A ({self.mi}) and B ({self.ni}) fragments")
            return ([self.load("A", ks * self.mi + m, rd["A"]) for m in range(self.mi)],
                    [self.load("B", ks * self.ni + n, rd["B"]) for n in range(self.ni)])

        def compute(ks: int, frags) -> None:
            b.comment(f"k-step {ks}: {self.mi * self.ni} x wmma.mma m16n16k16")
            a_frag, b_frag = frags
            for m in range(self.mi):
                for n in range(self.ni):
                    isa.mma(b, op, acc[m][n], a_frag[m], b_frag[n])

        if self.s.frag_double_buffer:
            frags = load(0)
            for ks in range(steps):
                nxt = load(ks + 1) if ks + 1 < steps else None
                compute(ks, frags)
                frags = nxt
        else:
            for ks in range(steps):
                compute(ks, load(ks))

    def epilogue(self, tile: "Tile", ops: "TileOperands") -> StagedEpilogue:
        """wmma fragments are opaque: they leave only through wmma.store.d into the staging tile."""
        return StagedEpilogue(self.lw, tile, ops.edge)

    def stage_fragments(self, acc: Accumulators, stage: VReg, epi: "StagedEpilogue") -> None:
        """wmma.store.d every accumulator fragment into the staging tile (f32, or f16 for f16 acc)."""
        pitch = epi.st.pitch
        eb = ACC_BYTES[self.acc]
        wm0, wn0 = self.origin
        warp = ptx.add(self.lw.b, U32, stage, self.lw.ex.emit(wm0 * pitch + wn0 * eb))
        for m, n, imm in self._blocks(pitch, eb):
            isa.store_d(self.b, "shared", self.acc, Addr(warp, imm), acc[m][n], pitch // eb)

    def _blocks(self, pitch: int, eb: int) -> list[tuple[int, int, int]]:
        """(m, n, byte offset from the warp tile's origin) of each 16x16 accumulator block."""
        return [(m, n, 16 * m * pitch + 16 * n * eb) for m in range(self.mi) for n in range(self.ni)]

    # -- split-K / Stream-K partial tiles ----------------------------------------------------------
    def partial_origin(self, row_elems: int) -> Expr:
        """Element offset of this warp's tile in a row-major partial tile `row_elems` wide."""
        wm0, wn0 = self.origin
        return wm0 * row_elems + wn0

    def store_partial(self, acc, base: VReg, row_elems: int) -> None:
        """wmma.store.d the f32 fragments to the workspace slice at `base` (this warp's origin)."""
        for m, n, imm in self._blocks(row_elems * 4, 4):
            isa.store_d(self.b, "global", "f32", Addr(base, imm), acc[m][n], row_elems)

    def add_partial(self, acc, base: VReg, row_elems: int) -> None:
        """acc += the partial at `base`: wmma.load.c with store_partial's layout, then add.f32
        register by register (the same element sits in the same slot on both sides)."""
        for m, n, imm in self._blocks(row_elems * 4, 4):
            part = isa.load_c(self.b, "global", "f32", Addr(base, imm), row_elems)
            for r, p in zip(acc[m][n], part):
                ptx.add(self.b, F32, r, p, into=r)
