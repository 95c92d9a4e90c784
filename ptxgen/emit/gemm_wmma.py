"""The wmma instruction path: wmma.load / wmma.mma / wmma.store m16n16k16 instead of mma.sync.

wmma fragments are opaque (ptx_facts.md §3): the element-to-lane mapping is unspecified, so the
lowering never looks inside one. Operands load straight from the plain or padded stage tiles
(every row 32-byte aligned) with a stride, and results leave only through wmma.store.d into the
shared staging tile, which the staged epilogue then drains with 16-byte stores.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .gemm_plan import WARP
from .index import Expr, share_bases
from .ir import Addr, Imm, Vec, VReg

if TYPE_CHECKING:
    from .gemm import GemmLowering

#: Registers per lane of an A or B fragment, by input dtype (f16 holds each element twice).
FRAGMENT_REGS = {"f16": 8, "bf16": 4}
ACC_REGS = 8  # f32 accumulator fragment of a 16x16 tile


class WmmaMath:
    def __init__(self, lw: "GemmLowering"):
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s
        tm, tn = lw.s.warp_tile
        self.mi, self.ni = tm // 16, tn // 16
        # A stored K x M is wmma "col"; B stored N x K (k contiguous) is wmma "col" too.
        self.layout = {"A": "col" if lw.tile_a.k_along_rows else "row",
                       "B": "row" if lw.tile_b.k_along_rows else "col"}
        self.sites: dict[str, list[Expr]] = {"A": [], "B": []}
        wn = lw.s.warps[1]
        wm0, wn0 = (WARP // wn) * tm, (WARP % wn) * tn
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

    def setup(self) -> None:
        """Absolute shared addresses of the fragment blocks in stage 0 (bases + immediates)."""
        lw = self.lw
        self.bases, self.site = {}, {}
        for name in ("A", "B"):
            sb = share_bases(self.sites[name], lw.s.threads)
            self.bases[name] = lw.shared_bases(name, sb.bases)
            self.site[name] = sb.site

    def accumulators(self) -> list[list[tuple[VReg, ...]]]:
        return [[self.b.regs("f32", ACC_REGS) for _ in range(self.ni)] for _ in range(self.mi)]

    def load(self, name: str, index: int, rd: list[tuple[VReg, int]]) -> tuple[VReg, ...]:
        tile = self.lw.tile_a if name == "A" else self.lw.tile_b
        dt = self.g.dtype
        regs = self.b.regs("b32", FRAGMENT_REGS[dt])
        base_i, imm = self.site[name][index]
        reg, extra = rd[base_i]
        op = f"wmma.load.{name.lower()}.sync.aligned.{self.layout[name]}.m16n16k16.shared.{dt}"
        self.b.emit(op, Vec(regs), Addr(reg, imm + extra), Imm(str(tile.pitch // tile.elem_bytes)), ndefs=1)
        return regs

    def compute_tile(self, rd_off: dict[str, VReg | int], acc) -> None:
        lw, b = self.lw, self.b
        rd: dict[str, list[tuple[VReg, int]]] = {}
        for name in ("A", "B"):
            off = rd_off[name]
            rd[name] = ([(r, off) for r in self.bases[name]] if isinstance(off, int)
                        else [(lw.u32("add.u32", r, off), 0) for r in self.bases[name]])
        dt = self.g.dtype
        types = "f32.f32" if dt == "f16" else "f32.bf16.bf16.f32"
        op = f"wmma.mma.sync.aligned.{self.layout['A']}.{self.layout['B']}.m16n16k16.{types}"
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
                    b.emit(op, Vec(acc[m][n]), Vec(a_frag[m]), Vec(b_frag[n]), Vec(acc[m][n]), ndefs=1)

        if self.s.frag_double_buffer:
            frags = load(0)
            for ks in range(steps):
                nxt = load(ks + 1) if ks + 1 < steps else None
                compute(ks, frags)
                frags = nxt
        else:
            for ks in range(steps):
                compute(ks, load(ks))

    def store(self, acc, stage: VReg, pitch: int) -> None:
        """wmma.store.d every accumulator fragment into the f32 staging tile."""
        lw = self.lw
        tm, tn = self.s.warp_tile
        wn = self.s.warps[1]
        wm0, wn0 = (WARP // wn) * tm, (WARP % wn) * tn
        sites = share_bases([(wm0 + 16 * m) * pitch + (wn0 + 16 * n) * 4
                             for m in range(self.mi) for n in range(self.ni)], self.s.threads)
        bases = [lw.u32("add.u32", stage, lw.ex.emit(e)) for e in sites.bases]
        for i, (bi, imm) in enumerate(sites.site):
            m, n = divmod(i, self.ni)
            self.b.emit("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32", Addr(bases[bi], imm),
                        Vec(acc[m][n]), Imm(str(pitch // 4)))
