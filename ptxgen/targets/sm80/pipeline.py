"""The sm80 pipeline: cp.async stage tiles, ldmatrix (or scalar) fragment loads and mma.sync.

Accumulators are mma.sync fragments, whose layout is known (layouts.mma_c_coord): a thread holds
column pairs (2t, 2t+1) of rows g and g+8 of each m16n8 tile, so each pair moves to a partial
tile or the staging tile as one .v2.f32 access at a per-thread address.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...schedule.geometry import mma_k_steps, staging_layout
from ...schedule.problem import MMA_SHAPE
from ...emit.epilogue.staged import StagedEpilogue
from .copies import CpAsyncCopies, CpAsyncOperands
from .epilogue import DirectEpilogue, fragment_pair
from .epilogue_typed import TypedStagedEpilogue
from .fragments import FragmentLoader
from .mainloop import MainLoop, StageBases
from .plans import store_plan
from ...emit.index import Expr, share_bases
from ...ir import Addr, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import U32, F32
from ...emit.pipeline import Accumulators
from ...emit.swizzle import stage_offset
from .isa import mma

if TYPE_CHECKING:
    from .lowering import GemmLowering
    from ...emit.edges import StoreEdges
    from ...emit.epilogue.math import TileEpilogueMath
    from ...emit.tiles import KRange, Tile, TileOperands


class Sm80Pipeline(CpAsyncOperands):
    """mma.sync over fragments loaded from cp.async stage tiles (implements `Pipeline`)."""

    def __init__(self, lw: "GemmLowering"):
        self.lw, self.b, self.g, self.s = lw, lw.b, lw.g, lw.s
        self.fragments = FragmentLoader(self.b, lw.g, lw.s, lw.tile_a, lw.tile_b)
        self.mi, self.ni = lw.s.warp_tile[0] // 16, lw.s.warp_tile[1] // 8
        self.sp = store_plan(lw.s)
        # Fragment sources in stage 0: registers emitted by `setup` (after the tile's operands, so
        # not here), filled in once as `dims` is, like WmmaPipeline.bases and CpAsyncCopies.dst_bases.
        self.frag_bases: dict[str, list[VReg]] = {}
        self.copies = CpAsyncCopies(lw)

    def setup(self) -> None:
        lw = self.lw
        self.copies.setup()
        self.frag_bases.update({n: lw.shared_bases(n, self.fragments.plans[n].addr.bases) for n in ("A", "B")})

    def accumulators(self) -> Accumulators:
        g = self.g
        cls, per_tile = ("f32", 4) if g.accumulator == "f32" else ("b32", 2 if g.acc_dtype == "f16" else 4)
        return [[self.b.regs(cls, per_tile) for _ in range(self.ni)] for _ in range(self.mi)]

    def mainloop(self, acc: Accumulators, ops: "TileOperands", k: "KRange") -> None:
        MainLoop(self.lw, ops, k, self).emit(acc)

    # -- one k-tile --------------------------------------------------------------------------------
    @property
    def k_steps(self) -> int:
        return mma_k_steps(self.g, self.s)

    def fragment_addresses(self, rd_off: dict[str, VReg | int]) -> dict[str, StageBases]:
        """Each operand's fragment address bases, moved to the stage at byte offset `rd_off`."""
        return {name: StageBases(self.lw, self.frag_bases[name], rd_off[name]) for name in ("A", "B")}

    def mma_step(self, ks: int, frags: tuple[list, list], acc: Accumulators) -> None:
        """The warp tile's mma.sync of one k-step."""
        a_frag, b_frag = frags
        self.b.comment(f"k-step {ks}: {self.mi * self.ni} x mma.sync {MMA_SHAPE[self.g.dtype]}")
        for m in range(self.mi):
            # serpentine over n so consecutive mma reuse the B fragment just used
            order = range(self.ni) if m % 2 == 0 else range(self.ni - 1, -1, -1)
            for n in order:
                mma(self.b, MMA_SHAPE[self.g.dtype], self.g.dtype, self.g.accumulator, acc[m][n], a_frag[m],
                    b_frag[n])

    def compute_tile(self, rd_off: dict[str, VReg | int], acc: Accumulators) -> None:
        """Fragment loads + mma.sync over one k-tile read from the stage at `rd_off`."""
        addr = self.fragment_addresses(rd_off)
        if self.s.frag_double_buffer:
            frags = self.fragments.load(0, addr)
            for ks in range(self.k_steps):
                # prefetch step ks+1 under step ks's mma
                nxt = self.fragments.load(ks + 1, addr) if ks + 1 < self.k_steps else None
                self.mma_step(ks, frags, acc)
                frags = nxt
        else:
            for ks in range(self.k_steps):
                self.mma_step(ks, self.fragments.load(ks, addr), acc)

    # -- epilogue and partial tiles -----------------------------------------------------------
    def epilogue(self, tile: "Tile", ops: "TileOperands") -> "TileEpilogueMath":
        """Direct stores from the fragments, or staged through shared memory (in f32, or in the
        output dtype for 16- and 8-bit outputs), as `geometry.staging_layout` decides; guarded by
        the tile's edge checks."""
        st = staging_layout(self.g, self.s)
        cls = DirectEpilogue if st is None else TypedStagedEpilogue if st.typed else StagedEpilogue
        return cls(self.lw, tile, ops.edge)

    def stage_fragments(self, acc: Accumulators, base: VReg, epi: "StagedEpilogue") -> None:
        lw, sp = self.lw, self.sp
        sites = share_bases([stage_offset(sp.row0 + dr, sp.col0 + dc, epi.st) for *_, dr, dc in sp.sites],
                            lw.s.threads)
        bases = [ptx.add(lw.b, U32, base, lw.ex.emit(e)) for e in sites.bases]
        for (m, n, h, _, _), (bi, imm) in zip(sp.sites, sites.site):
            lo, hi = fragment_pair(epi, acc[m][n], h)
            ptx.store(self.b, "shared", F32, Addr(bases[bi], imm), Vec((lo, hi)), width=2)

    def partial_origin(self, row_elems: int) -> Expr:
        return self.sp.row0 * row_elems + self.sp.col0

    def store_partial(self, acc: Accumulators, base: VReg, row_elems: int) -> None:
        for m, n, h, dr, dc in self.sp.sites:
            ptx.store(self.b, "global", F32, Addr(base, (dr * row_elems + dc) * 4), Vec(acc[m][n][2 * h:2 * h + 2]),
                      width=2)

    def add_partial(self, acc: Accumulators, base: VReg, row_elems: int) -> None:
        for m, n, h, dr, dc in self.sp.sites:
            part = self.b.regs("f32", 2)
            ptx.load(self.b, "global", F32, Addr(base, (dr * row_elems + dc) * 4), width=2, into=Vec(part))
            for j in range(2):
                r = acc[m][n][2 * h + j]
                ptx.add(self.b, F32, r, part[j], into=r)
