"""Fragment loads of one mma k-step: ldmatrix where it applies, scalar shared loads where not.

`ldmatrix` moves 8x8 matrices of 16-bit elements and `.trans` transposes 16-bit elements, so it
serves every K-contiguous tile and 16-bit MN-contiguous tiles. A tile whose M (A, stored col-major)
or N (B, stored row-major) dimension is contiguous and whose element is 32-bit (tf32) or 8-bit
(s8/u8) holds each fragment element at its own (k row, mn column); those are loaded one by one:

* tf32: each fragment register is one element: one `ld.shared.b32` (then `cvt.rna.tf32.f32`).
* s8/u8: each register packs 4 consecutive k, which sit in 4 different tile rows: four
  `ld.shared.u8` joined low byte first by three `prmt.b32`.

The addresses go through the same `smem_offset` as the copies that wrote the tile (swizzle, pad or
plain), as index expressions grouped onto shared base registers plus immediates.
"""
from __future__ import annotations

from collections.abc import Sequence

from dataclasses import dataclass

from ...schedule.geometry import OperandTile
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...ir import Builder
from .plans import FragmentPlan, a_fragment_plan, b_fragment_plan, warp_origin
from ...emit.index import SiteBases, share_bases
from ...ir import Addr, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, F32, TF32, U8
from .layouts import SCALAR_FRAGMENTS, FragmentTable
from ...emit.swizzle import smem_element_offset, Swizzle
from .isa import ldmatrix

#: prmt.b32 selectors: bytes {a.0, b.0} of two loaded bytes, then the low halves of two pairs.
PAIR_BYTES = Imm("0x0040")
JOIN_PAIRS = Imm("0x5410")


@dataclass(frozen=True)
class ElementLoad:
    """One scalar shared load: element `elem` of fragment register `reg` of mma block `block`
    (m16 block of A, n8 block of B) in k-step `k_step`, read at address site `site`."""

    k_step: int
    block: int
    reg: int
    elem: int
    site: int


@dataclass
class ScalarFragmentPlan:
    tile: OperandTile
    table: FragmentTable
    blocks: int  # mma blocks of this operand per warp tile
    loads: list[ElementLoad]
    addr: SiteBases


def scalar_fragment_plan(s: Schedule, tile: OperandTile) -> ScalarFragmentPlan:
    """Per-thread address of every fragment element of an MN-contiguous tile (rows are k)."""
    is_a = tile.name == "A"
    table = SCALAR_FRAGMENTS[(tile.elem_bytes, tile.name)]
    width = 16 if is_a else 8  # m16 / n8 mma block
    mn0 = warp_origin(s)[0 if is_a else 1]
    blocks = s.warp_tile[0 if is_a else 1] // width
    k_per_step = 32 // tile.elem_bytes  # one mma k-step = 32 bytes of K
    sites, loads = [], []
    for ks in range(s.bk // k_per_step):
        for blk in range(blocks):
            for reg in range(table.regs):
                for elem in range(table.elems):
                    mn, k = table.coord(reg, elem)
                    col_byte = (mn0 + width * blk + mn) * tile.elem_bytes
                    sites.append(smem_element_offset(k_per_step * ks + k, col_byte, tile.pitch, tile.swizzle_pattern))
                    loads.append(ElementLoad(ks, blk, reg, elem, len(sites) - 1))
    return ScalarFragmentPlan(tile, table, blocks, loads, share_bases(sites, s.threads))


class FragmentLoader:
    """Emits the A and B fragment registers of one k-step, each operand by its own plan."""

    def __init__(self, b: Builder, g: Gemm, s: Schedule, tile_a: OperandTile, tile_b: OperandTile):
        self.b, self.g = b, g
        self.mi, self.ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8
        self.plans: dict[str, FragmentPlan | ScalarFragmentPlan] = {
            "A": scalar_fragment_plan(s, tile_a) if tile_a.scalar_fragments else a_fragment_plan(s, tile_a),
            "B": scalar_fragment_plan(s, tile_b) if tile_b.scalar_fragments else b_fragment_plan(g, s, tile_b)}

    def load(self, ks: int, addr: dict[str, Sequence[tuple[VReg, int]]],
             into: tuple[list, list] | None = None) -> tuple[list, list]:
        """(A registers per m16 block, B registers per n8 block) of k-step `ks`; `addr[name]` holds
        each address base of the operand's plan as (register, extra immediate).

        With `into` (an earlier result) the loads write those registers again instead of fresh ones:
        the main loop carries the next k-tile's first fragments around its back edge that way.
        """
        a_frag: list = [None] * self.mi
        b_frag: list = [None] * self.ni
        for i, (name, frag) in enumerate((("A", a_frag), ("B", b_frag))):
            plan, dst = self.plans[name], None if into is None else into[i]
            if isinstance(plan, ScalarFragmentPlan):
                self.scalar(name, plan, ks, addr[name], frag, dst)
            else:
                self.matrices(name, plan, ks, addr[name], frag, dst)
        return a_frag, b_frag

    def _addr(self, sites: SiteBases, site: int, bases: Sequence[tuple[VReg, int]]) -> Addr:
        base_i, imm = sites.site[site]
        reg, extra = bases[base_i]
        return Addr(reg, imm + extra)

    def _round_tf32(self, regs: tuple[VReg, ...] | list[VReg]) -> None:
        # round f32 inputs to tf32 (ties away), docs/ptx_facts/mma_sync.md §2a
        if self.g.dtype == "tf32":
            for r in regs:
                ptx.cvt(self.b, TF32, F32, r, rounding="rna", into=r)

    def matrices(self, name: str, plan: FragmentPlan, ks: int, bases: Sequence[tuple[VReg, int]], frag: list,
                 dst: list | None) -> None:
        loads = [ld for ld in plan.loads if ld.k_step == ks]
        self.b.comment(f"k-step {ks}: {name} fragments by ldmatrix ({len(loads)} x{loads[0].count})")
        for ld in loads:
            into = None
            if dst is not None:  # A: one m16 block per x4; B: one n8 block per x2, two per x4
                into = dst[ld.index] if name == "A" else tuple(dst[ld.index]) + (
                    tuple(dst[ld.index + 1]) if ld.count == 4 else ())
            regs = ldmatrix(self.b, ld.count, self._addr(plan.addr, ld.site, bases), ld.trans, into=into)
            self._round_tf32(regs)
            if name == "A":
                frag[ld.index] = regs
            else:
                frag[ld.index] = regs[0:2]
                if ld.count == 4:
                    frag[ld.index + 1] = regs[2:4]

    def scalar(self, name: str, plan: ScalarFragmentPlan, ks: int, bases: Sequence[tuple[VReg, int]],
               frag: list, dst: list | None) -> None:
        t = plan.table
        dim, block = ("M", "m16") if name == "A" else ("N", "n8")
        how = "ld.shared.b32" if t.elems == 1 else "4 x ld.shared.u8 + 3 x prmt.b32"
        self.b.comment(f"k-step {ks}: {name} fragments of {plan.blocks} {block} blocks by scalar loads, {how} per "
                       f"register ({name} tile is {dim}-contiguous {self.g.dtype}: .trans moves only 16-bit elements)")
        at = {(ld.block, ld.reg, ld.elem): ld.site for ld in plan.loads if ld.k_step == ks}
        for blk in range(plan.blocks):
            regs = []
            for reg in range(t.regs):
                sites = [at[blk, reg, e] for e in range(t.elems)]
                into = None if dst is None else dst[blk][reg]
                if t.elems == 1:
                    r = self.b.reg("b32") if into is None else into
                    ptx.load(self.b, "shared", B32, self._addr(plan.addr, sites[0], bases), into=r)
                else:
                    r = self.pack_bytes([self._addr(plan.addr, site, bases) for site in sites], into)
                regs.append(r)
            self._round_tf32(regs)
            frag[blk] = tuple(regs)

    def pack_bytes(self, addrs: list[Addr], into: VReg | None = None) -> VReg:
        """One .b32 of 4 bytes read from `addrs`, the first in the least significant byte."""
        x = self.b.regs("b32", 4)
        for r, a in zip(x, addrs):
            ptx.load(self.b, "shared", U8, a, into=r)
        lo, hi = self.b.regs("b32", 2)
        out = self.b.reg("b32") if into is None else into
        ptx.prmt(self.b, B32, x[0], x[1], PAIR_BYTES, into=lo)
        ptx.prmt(self.b, B32, x[2], x[3], PAIR_BYTES, into=hi)
        ptx.prmt(self.b, B32, lo, hi, JOIN_PAIRS, into=out, comment="k, k+1, k+2, k+3 low to high")
        return out


__all__ = ["ElementLoad", "FragmentLoader", "ScalarFragmentPlan", "scalar_fragment_plan"]
