"""Epilogue staged through shared memory, so global traffic is 16-byte and coalesced.

16- and 8-bit outputs of mma.sync kernels are staged in their own dtype after the epilogue math
(`epilogue.typed`); f32 and s32 outputs and the wmma path stage f32 as follows.
Phase 1: every thread writes its f32 accumulators, straight from the mma fragment layout, into a
BM x BN f32 staging tile. Rows are padded by 32 bytes, so the 8-byte fragment writes of a
half-warp (4 rows x 32 bytes) land in distinct banks. The tile reuses the A/B stage buffers'
bytes: the shared-memory planner sees their lifetimes are disjoint. (wmma: wmma.store.d writes
the opaque fragments; with f16 accumulation the tile holds f16, widened exactly in phase 2.)
Phase 2: threads walk the tile in 16-byte output chunks along rows (consecutive threads,
consecutive chunks), apply alpha/scale/beta/bias/activation (reading C and the vectors coalesced
too), convert, and store one vector per chunk: 4 f32, 8 packed 16-bit or 16 packed 8-bit values.
A chunk that straddles N falls back to predicated scalar stores.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...schedule.geometry import staging_layout
from .math import CVT_PACK, TileEpilogueMath
from ..addressing import RowPointers
from ..index import Tid, evaluate, share_bases
from ...ir import Addr, Imm, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import B16, B32, F32, PRED, U32
from ..memory import bar_sync
from ..swizzle import stage_offset
from ..quantize import load_bytes, quantize, store_bytes

if TYPE_CHECKING:
    from ...targets.sm80.lowering import GemmLowering
    from ..edges import StoreEdges
    from ..tiles import Tile

STAGE_BUFFER = "C_stage"


class StagedEpilogue(TileEpilogueMath):
    """The f32 staging store path: the pipeline writes its fragments to the staging tile
    (`Pipeline.stage_fragments`), then every thread drains 16-byte chunks through the math."""

    def __init__(self, lw: "GemmLowering", tile: "Tile", edge: "StoreEdges"):
        super().__init__(lw, tile, edge)
        st = staging_layout(lw.g, lw.s)
        assert st is not None, "a staged epilogue needs a staging layout"
        self.st = st

    def stage_base(self) -> VReg:
        """Shared address of the staging tile."""
        lw = self.lw
        return ptx.add(lw.b, U32, lw.smem, Imm(str(lw.plan.offsets[STAGE_BUFFER])))

    def emit(self, acc) -> None:
        b = self.b
        base = self.stage_base()
        bar_sync(b, comment="every warp is done with the A/B stages the staging tile reuses")
        self.write_fragments(acc, base)
        bar_sync(b, comment="the whole C tile is staged")
        self.describe()
        self.store_chunks(base)

    def write_fragments(self, acc, base: VReg) -> None:
        lw, b = self.lw, self.b
        b.comment(f"phase 1: accumulators -> staging tile ({self.st.rows} x {self.st.pitch} B rows)")
        lw.pipeline.stage_fragments(acc, base, self)  # mma.sync: by fragment layout; wmma: wmma.store.d

    def store_chunks(self, base: VReg) -> None:
        lw, b, g, st = self.lw, self.b, self.g, self.st
        v, cpr, ob = st.chunk_elems, st.chunks_per_row, self.ob
        threads = lw.s.threads
        b.comment(f"phase 2: {st.chunks_per_thread} x {v}-element chunks per thread -> C ({v * ob} B stores)")
        rows, cols = [], []
        for it in range(st.chunks_per_thread):
            c = Tid() + it * threads
            rows.append(c // cpr)
            cols.append(c % cpr)
        halves = list(range(0, v, 16 // st.elem_bytes))  # 16-byte reads per chunk, each at its own site
        reads = share_bases([stage_offset(r, c * v + q, st) for r, c in zip(rows, cols) for q in halves], threads)
        read_base = [ptx.add(lw.b, U32, base, lw.ex.emit(e)) for e in reads.bases]
        row0, col0 = lw.ex.reg(rows[0]), lw.ex.reg(cols[0] * v)
        grow = ptx.add(lw.b, U32, row0, self.tile.bm0)
        gcol = ptx.add(lw.b, U32, col0, self.tile.bn0)
        ptr0 = lw.element_pointer(lw.ptr["C"], "ldc", grow, gcol, ob)  # 64-bit: ldc * ob may pass 2^32
        tid = np.arange(threads)
        r0v, c0v = evaluate(rows[0], tid), evaluate(cols[0], tid)
        row_ptr = RowPointers(b, ptr0, lw.dim("ldc"), ob)
        edge = self.edge
        straddle = edge.n_edge and g.n % v != 0
        kinds = (g.epi.bias, g.epi.scale)  # the row/column vectors the epilogue reads
        by_column: dict[int, dict[str, list[VReg]]] = {}  # column-vector values, shared by chunks in a column
        for it in range(st.chunks_per_thread):
            dr = int((evaluate(rows[it], tid) - r0v)[0])
            dc = int((evaluate(cols[it], tid) - c0v)[0]) * v
            sites = reads.site[it * len(halves):(it + 1) * len(halves)]
            vals = self.read_stage([Addr(read_base[bi], imm) for bi, imm in sites], v)
            row_ok = (ptx.setp(lw.b, "lt", U32, ptx.add(lw.b, U32, grow, Imm(str(dr))), lw.dim("M"))
                      if edge.m_edge else None)
            col = ptx.add(lw.b, U32, gcol, Imm(str(dc))) if (edge.n_edge or "col" in kinds) else None
            addr = Addr(row_ptr[dr], dc * ob)
            full, inside = row_ok, None
            if edge.n_edge:
                inside = ptx.setp(lw.b, "le", U32, ptx.add(lw.b, U32, col, Imm(str(v))), lw.dim("N"))
                full = inside if row_ok is None else ptx.and_(lw.b, PRED, inside, row_ok)
            if dc not in by_column:
                by_column[dc] = self.vectors("col", col, v, inside)
            by_row = self.vectors("row", ptx.add(lw.b, U32, grow,
                                                 Imm(str(dr))) if "row" in kinds else None, v, row_ok)
            self.finish_chunk(addr, vals, full, {**by_column[dc], **by_row})
            if straddle:  # the chunk that crosses N: element by element
                for j in range(v):
                    col_j = ptx.add(lw.b, U32, col, Imm(str(j)))
                    ok = ptx.setp(lw.b, "lt", U32, col_j, lw.dim("N"))
                    part = ptx.and_(lw.b, PRED, ok, ptx.not_(lw.b, PRED, inside))
                    if row_ok is not None:
                        part = ptx.and_(lw.b, PRED, part, row_ok)
                    vecs = {**self.vectors("col", col_j, 1, part), **{k: x[:1] for k, x in by_row.items()}}
                    self.finish_chunk(Addr(addr.base, addr.offset + j * ob), [vals[j]], part, vecs)

    def read_stage(self, addrs: list[Addr], v: int) -> list[VReg]:
        """The chunk's v values as f32, one shared load per 16-byte piece (each at its own address)."""
        if self.st.elem_bytes == 2:
            return self.read_stage_f16(addrs[0], v)
        vals: list[VReg] = []
        for q, addr in zip(range(0, v, 4), addrs):
            regs = self.b.regs("f32", min(4, v - q))
            ptx.load(self.b, "shared", F32, addr, into=Vec(regs) if len(regs) > 1 else regs[0], width=len(regs))
            vals.extend(regs)
        return vals

    def read_stage_f16(self, addr: Addr, v: int) -> list[VReg]:
        """v <= 8 staged f16 values (at most 16 bytes: one load), widened exactly to f32."""
        if v == 1:
            h = self.b.reg("b16")
            ptx.load(self.b, "shared", B16, addr, into=h)
            return [self.to_f32(h, "f16")]
        words = self.b.regs("b32", v // 2)
        ptx.load(self.b, "shared", B32, addr, into=Vec(words) if len(words) > 1 else words[0], width=len(words))
        return [x for w in words for x in self.unpack(w, "f16")]  # low half = lower column

    def finish_chunk(self, addr: Addr, vals: list[VReg], guard: VReg | None, vecs: dict[str, list[VReg]]) -> None:
        """Epilogue math on `len(vals)` adjacent elements, then one store of them. `vecs` holds each
        vector's ("bias", "scale") value per element, for the vectors the epilogue has."""
        e, n = self.e, len(vals)
        olds = self.load_run(addr, n, guard) if e.beta != 0.0 else [None] * n
        bias, factor = (vecs.get(name, [None] * n) for name in ("bias", "scale"))
        self.store_run(addr, [self.apply(v, olds[j], bias[j], factor[j]) for j, v in enumerate(vals)], guard)

    def vectors(self, kind: str, index: VReg | None, n: int, guard: VReg | None) -> dict[str, list[VReg]]:
        """Values, for n adjacent elements of one row, of the epilogue's vectors of this kind: n
        adjacent loads for "col" vectors from `index` (the first column), one load for "row"
        vectors (`index` the row). `guard` is off only where no element is stored."""
        out: dict[str, list[VReg]] = {}
        for name in ("bias", "scale"):
            if getattr(self.e, name) == kind:
                offsets = list(range(n)) if kind == "col" else [0]
                vals = self.vector_values(name, index, offsets, [guard] * len(offsets))
                out[name] = vals if kind == "col" else vals * n
        return out

    def load_run(self, addr: Addr, n: int, guard: VReg | None) -> list[VReg]:
        if self.quantized:  # 1..16 bytes: one load of whole words
            return load_bytes(self.b, self.g.out_dtype, addr, n, guard)
        if n <= 2:
            return self.load_old(addr, n, guard)
        out: list[VReg] = []
        for q in range(0, n, 2):
            out += self.load_old(Addr(addr.base, addr.offset + q * self.ob), 2, guard)
        return out

    def store_run(self, addr: Addr, vals: list[VReg], guard: VReg | None) -> None:
        """Store n adjacent f32 values as one vector of the output dtype (or red.add per element)."""
        dt, b = self.g.out_dtype, self.b
        if self.atomic or len(vals) == 1:
            for j, v in enumerate(vals):
                self.store(Addr(addr.base, addr.offset + j * self.ob), [v], guard)
            return
        if self.quantized:
            store_bytes(b, addr, [quantize(b, dt, v) for v in vals], guard)
            return
        if dt in ("f32", "s32"):
            words = vals
        else:
            words = []
            for q in range(0, len(vals), 2):
                w = b.reg("b32")
                b.emit(CVT_PACK[dt], w, vals[q + 1], vals[q], ndefs=1)  # odd column -> high half
                words.append(w)
        bits = F32 if dt == "f32" else B32  # s32 and packed 16-bit pairs store as bits
        ptx.store(b, "global", bits, addr, Vec(tuple(words)) if len(words) > 1 else words[0], width=len(words),
                  guard=guard)

