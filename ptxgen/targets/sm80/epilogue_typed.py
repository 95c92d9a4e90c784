"""Typed staging: 16- and 8-bit outputs are staged in their own dtype, after the epilogue math.

The f32 staging tile of `epilogue.staged` holds 4 bytes per element whatever the output; for
f16/bf16 (s8/u8) outputs this one holds 2 (1), so a 128x128 f16 tile needs 34 KB instead of 68 KB
(CUTLASS's 128x128x32 3-stage kernel: 48 KB in all). The stored bytes are exactly C's:

  phase 0 (beta != 0 only)  C -> staging tile, in the drain's 16-byte coalesced chunks
  phase 1  every thread: its accumulator pairs (plus the staged C pair it owns, bias and scale),
           act(alpha*scale*acc + beta*C + bias) in f32, converted, written as one packed pair
  phase 2  the drain: 16-byte chunks along rows (consecutive threads, consecutive chunks), one
           ld.shared + one st.global each; a chunk that straddles N goes element by element.

Rows are an odd number of 16-byte units apart (`geometry.typed_pitch`), so the 8 rows of a warp's
pair writes hit distinct banks and the drain reads whole 16-byte units.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...emit.addressing import RowPointers
from ...emit.epilogue.math import CVT_PACK
from ...emit.epilogue.staged import StagedEpilogue
from .epilogue import fragment_pair, site_vectors
from .plans import store_plan
from ...emit.index import Tid, evaluate, share_bases
from ...ir import Addr, Imm, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import B8, B16, B32, PRED, S64, U8, U32, PtxType
from ...emit.memory import bar_sync
from ...emit.quantize import load_bytes, pack, quantize


#: Bytes per chunk access -> (vector suffix, type, register class, registers).
ACCESS = {16: (4, B32, "b32"), 8: (2, B32, "b32"), 4: (1, B32, "b32"), 2: (1, B16, "b16"), 1: (1, U8, "b16")}


@dataclass
class Chunk:
    """One drain chunk of this thread: where it sits in the staging tile and in C, and its guards."""

    smem: Addr
    gmem: Addr
    full: VReg | None  # the whole chunk is inside the matrix (None: always)
    parts: list[VReg] | None  # per element of a chunk straddling N: inside (None: no straddle)


class TypedStaging:
    """Emits the typed staged epilogue through a StagedEpilogue (its element math and vectors)."""

    def __init__(self, epi: StagedEpilogue):
        self.epi, self.lw, self.b, self.g, self.st = epi, epi.lw, epi.b, epi.g, epi.st
        self.ob = epi.ob
        self.beta = epi.e.beta != 0.0

    def emit(self, acc, base: VReg) -> None:
        b, st = self.b, self.st
        bar_sync(b, comment="every warp is done with the A/B stages the staging tile reuses")
        if self.beta:
            b.comment(f"phase 0: C -> staging tile ({st.rows} x {st.pitch} B rows, {self.g.out_dtype}), "
                      f"{st.chunk_elems * self.ob} B coalesced loads")
            self.copy(self.chunks(base), to_shared=True)
            bar_sync(b, comment="C is staged: each thread reads back the pairs it owns")
        self.epi.describe()
        self.write_outputs(acc, base)
        bar_sync(b, comment=f"the whole C tile is staged in {self.g.out_dtype}")
        b.comment(f"phase 2: {st.chunks_per_thread} x {st.chunk_elems * self.ob} B chunks per thread "
                  "-> C, copied as they are")
        self.copy(self.chunks(base), to_shared=False)

    # -- phase 1 --------------------------------------------------------------------------------
    def write_outputs(self, acc, base: VReg) -> None:
        lw, b, g, epi = self.lw, self.b, self.g, self.epi
        sp = store_plan(lw.s)
        b.comment(f"phase 1: accumulator pairs -> epilogue -> {g.out_dtype} pairs in the staging tile")
        row = ptx.add(lw.b, U32, lw.ex.reg(sp.row0), epi.tile.bm0)
        col = ptx.add(lw.b, U32, lw.ex.reg(sp.col0), epi.tile.bn0)
        bias = site_vectors(epi, sp, row, col, "bias")
        factor = site_vectors(epi, sp, row, col, "scale")
        sites = share_bases([(sp.row0 + dr) * self.st.pitch + (sp.col0 + dc) * self.ob for *_, dr, dc in sp.sites],
                            lw.s.threads)
        bases = [ptx.add(lw.b, U32, base, lw.ex.emit(e)) for e in sites.bases]
        packed_acc = g.acc_dtype == "f16" and epi.e.is_identity
        for (m, n, h, dr, dc), (bi, imm) in zip(sp.sites, sites.site):
            addr = Addr(bases[bi], imm)
            if packed_acc:  # f16x2 accumulators are already the output pair
                ptx.store(b, "shared", B32, addr, acc[m][n][h])
                continue
            vals = fragment_pair(epi, acc[m][n], h)
            olds = self.staged_pair(addr) if self.beta else [None, None]
            outs = [epi.apply(vals[j], olds[j], bias.get((dr, dc + j)), factor.get((dr, dc + j))) for j in range(2)]
            self.stage_pair(addr, outs)

    def staged_pair(self, addr: Addr) -> list[VReg]:
        """The two staged C values at `addr` (phase 0 put them there), as exact f32."""
        dt = self.g.out_dtype
        if self.epi.quantized:
            return load_bytes(self.b, dt, addr, 2, None, space="shared")
        w = self.b.reg("b32")
        ptx.load(self.b, "shared", B32, addr, into=w)
        return list(self.epi.unpack(w, dt))

    def stage_pair(self, addr: Addr, outs: list[VReg]) -> None:
        """Two adjacent f32 results, converted and packed, as one shared store."""
        dt, b = self.g.out_dtype, self.b
        if self.epi.quantized:
            (word,) = pack(b, [quantize(b, dt, v) for v in outs])
            ptx.store(b, "shared", B16, addr, word)
            return
        w = b.reg("b32")
        b.emit(CVT_PACK[dt], w, outs[1], outs[0], ndefs=1)  # odd column -> high half
        ptx.store(b, "shared", B32, addr, w)

    # -- phases 0 and 2 ---------------------------------------------------------------------------
    def chunks(self, base: VReg) -> list[Chunk]:
        """This thread's drain chunks: consecutive threads take consecutive chunks along rows."""
        lw, st, ob = self.lw, self.st, self.ob
        v, cpr, threads = st.chunk_elems, st.chunks_per_row, lw.s.threads
        rows = [(Tid() + it * threads) // cpr for it in range(st.chunks_per_thread)]
        cols = [(Tid() + it * threads) % cpr for it in range(st.chunks_per_thread)]
        reads = share_bases([r * st.pitch + c * (v * ob) for r, c in zip(rows, cols)], threads)
        read_base = [ptx.add(lw.b, U32, base, lw.ex.emit(e)) for e in reads.bases]
        grow = ptx.add(lw.b, U32, lw.ex.reg(rows[0]), self.epi.tile.bm0)
        gcol = ptx.add(lw.b, U32, lw.ex.reg(cols[0] * v), self.epi.tile.bn0)
        ldc_bytes = ptx.mul(lw.b, U32, lw.dim("ldc"), Imm(str(ob)))
        ptr0 = ptx.add(lw.b, S64, lw.ptr["C"],
                       ptx.add(lw.b, S64, lw.wide_mul(grow, ldc_bytes), lw.wide_mul(gcol, Imm(str(ob)))))
        row_ptr = RowPointers(self.b, ptr0, ldc_bytes)
        tid = np.arange(threads)
        r0v, c0v = evaluate(rows[0], tid), evaluate(cols[0], tid)
        edge = self.epi.edge
        straddle = edge.n_edge and self.g.n % v != 0
        out = []
        for it, (bi, imm) in enumerate(reads.site):
            dr = int((evaluate(rows[it], tid) - r0v)[0])
            dc = int((evaluate(cols[it], tid) - c0v)[0]) * v
            row_ok = (ptx.setp(lw.b, "lt", U32, ptx.add(lw.b, U32, grow, Imm(str(dr))), lw.dim("M"))
                      if edge.m_edge else None)
            full, parts = row_ok, None
            if edge.n_edge:
                col = ptx.add(lw.b, U32, gcol, Imm(str(dc)))
                inside = ptx.setp(lw.b, "le", U32, ptx.add(lw.b, U32, col, Imm(str(v))), lw.dim("N"))
                full = inside if row_ok is None else ptx.and_(lw.b, PRED, inside, row_ok)
                if straddle:
                    parts = []
                    for j in range(v):
                        ok = ptx.setp(lw.b, "lt", U32, ptx.add(lw.b, U32, col, Imm(str(j))), lw.dim("N"))
                        part = ptx.and_(lw.b, PRED, ok, ptx.not_(lw.b, PRED, inside))
                        parts.append(part if row_ok is None else ptx.and_(lw.b, PRED, part, row_ok))
            out.append(Chunk(Addr(read_base[bi], imm), Addr(row_ptr[dr], dc * ob), full, parts))
        return out

    def copy(self, chunks: list[Chunk], to_shared: bool) -> None:
        """C -> staging tile (phase 0) or staging tile -> C (phase 2), one access per chunk; the
        elements of a chunk straddling N one by one. Chunks outside C stage zeros."""
        width = self.st.chunk_elems * self.ob
        for c in chunks:
            self.move(c.smem, c.gmem, width, c.full, to_shared, element=False)
            for j, part in enumerate(c.parts or []):
                self.move(Addr(c.smem.base, c.smem.offset + j * self.ob),
                          Addr(c.gmem.base, c.gmem.offset + j * self.ob), self.ob, part, to_shared, element=True)

    def move(self, smem: Addr, gmem: Addr, width: int, guard: VReg | None, to_shared: bool, element: bool) -> None:
        """One access of `width` bytes each way. `guard` always guards the global side; a whole
        chunk's shared side is unguarded (phase 0 stages zeros where C is not read), a single
        element's is guarded (it must not overwrite the chunk's staged bytes)."""
        b = self.b
        count, ty, cls = ACCESS[width]
        regs = b.regs(cls, count)
        val: VReg | Vec = Vec(tuple(regs)) if count > 1 else regs[0]
        store_ty = B8 if width == 1 else ty
        shared_guard = guard if element else None
        if to_shared:
            if guard is not None:
                for r in regs:
                    ptx.mov(b, PtxType.named(cls), 0, into=r)
            ptx.load(b, "global", ty, gmem, into=val, width=count, guard=guard)
            ptx.store(b, "shared", store_ty, smem, val, width=count, guard=shared_guard)
        else:
            ptx.load(b, "shared", ty, smem, into=val, width=count, guard=shared_guard)
            ptx.store(b, "global", store_ty, gmem, val, width=count, guard=guard)


class TypedStagedEpilogue(StagedEpilogue):
    """The staged store path for 16- and 8-bit outputs: staged in their own dtype, after the math."""

    def emit(self, acc) -> None:
        TypedStaging(self).emit(acc, self.stage_base())
