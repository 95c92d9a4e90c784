"""The sm_100a TMA-store epilogue: tcgen05.ld -> the shared epilogue math -> a swizzled shared
staging box per epilogue warp -> cp.async.bulk.tensor store, clipped by TMA at M and N
(docs/ptx_facts/tcgen05.md §12f, tma.md §9d, mbarrier.md §9f).

Each epilogue warp owns its TMEM lane quarter, so its rows of the tile (32, or 16 with M = 64,
whose layout F puts rows 16w..16w+15 in lanes 0..15 of quarter w, §12b) are one TMA box of
`EpilogueTile` (the sm_90a staging unit: one swizzle width of columns, 128 B at most) per chunk
of BN, and each warp's lane 0 stores its own box; the four warps meet at one named barrier per
chunk (the simulator's rule for barriers: see STAGING_BARRIER). Chunk j of a tile goes through
the warp's buffer j % 2:

    lane 0: cp.async.bulk.wait_group.read <= 1 (0 when a tile has an odd number of chunks): the
            store that last read this buffer, two chunks ago (or in the previous tile), is done
            reading it; bar.sync 2, 128: every thread writes after its warp's wait
    [beta] wait C-load[k]: C's box j, loaded by TMA into the warp's C buffer k (zero-filled past
            M and N; lane 0 loads boxes 0 and 1 at the tile's start, box j + 2 after chunk j)
    per at most 32 columns: tcgen05.ld of my row; tcgen05.wait::ld; [the tile's last] lane 0
            arrives on acc_empty (the MMA warp may reuse the accumulator buffer); [beta] ld.shared.v4
            of C's values at my row's pieces; the math (epilogue/math.py: alpha, scale, beta * C,
            bias, the activation); st.shared.v4 of the row's 16-byte pieces at their swizzled offsets
    fence.proxy.async.shared::cta: the generic writes before the async proxy reads them
    bar.sync 2, 128; lane 0: the TMA store of its warp's box (+ the batch coordinate), commit_group

After the CTA's last tile lane 0 waits for every store to have read shared memory (wait_group.read
0) before the teardown barrier, so the CTA's shared memory outlives the stores reading it.

Staging row r of a box sits at r * pitch; its 16-byte piece q at (q * 16) XOR the box swizzle's
key of r * pitch (tma.md "Swizzle modes"), so with the 128-byte swizzle the same piece of 8
consecutive rows falls in 8 distinct 16-byte bank groups.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...emit import mbarrier_isa as mb
from ...emit.epilogue.math import CVT_PACK, EpilogueMath
from ...emit.memory import bar_sync
from ...ir import Addr, Imm, Vec, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, F32, PRED, S32, U32
from ...schedule.problem import Gemm
from ..sm90 import tma_isa as tma
from ..sm90.plan import EpilogueTile
from . import tcgen05_isa as tc
from .plan import EPILOGUE_WARPS, LD_COLUMNS, MBARRIER_BYTES, STAGING_BUFFERS, TEARDOWN_BARRIER
from .epilogue import wait_accumulator
from .tile_scheduler import TileWalk

if TYPE_CHECKING:
    from .kernel import Sm100Lowering

#: The named barrier of the epilogue warps' staging (0 is the CTA's, 1 the teardown's): one id for
#: all four warps, since the simulator wants a barrier id uniform over threads running together
#: and credits no ordering to bar.warp.sync in a CTA of several warps.
STAGING_BARRIER = 2


def c_map_box(g: Gemm, tile: EpilogueTile) -> tuple[int, ...]:
    """C's TMA box in numpy order: (rows, cols), with a leading 1 for a batched GEMM's 3-D map."""
    return ((1,) if g.batch > 1 else ()) + (tile.rows, tile.cols)


def ld_pieces(cols: int) -> list[tuple[int, int]]:
    """(first column, count) of the tcgen05.ld.32x32b covering `cols` columns: powers of two of at
    most LD_COLUMNS (.x1 .. .x128 take powers of two)."""
    out, at = [], 0
    while at < cols:
        n = min(LD_COLUMNS, 1 << ((cols - at).bit_length() - 1))
        out.append((at, n))
        at += n
    return out


class TmemTmaEpilogue(EpilogueMath):
    """The epilogue warps' walk over the CTA's tiles with TMA stores (`emit`)."""

    lw: "Sm100Lowering"

    def __init__(self, lw: "Sm100Lowering"):
        super().__init__(lw)
        tile = lw.plan.epilogue_tile
        assert tile is not None, "the plan chose direct stores"
        self.tile = tile

    def emit(self) -> None:
        lw, b, g, tile = self.lw, self.b, self.g, self.tile
        bm, bn, _ = lw.plan.mma
        bm //= lw.plan.cta_group   # this CTA's rows (a pair's MMA leaves BM/2 in each CTA's TMEM)
        rows = tile.rows
        b.banner(f"Epilogue warps 0..{EPILOGUE_WARPS - 1}: per tile wait acc_full, per {tile.cols}-column chunk "
                 f"tcgen05.ld, the math, {g.out_dtype} into a {tile.swizzle or 'un'}{'B-' if tile.swizzle else ''}"
                 f"swizzled {rows}x{tile.cols} staging box per warp, TMA store (clipped at M and N)")
        self.describe()
        lane_ok = ptx.setp(b, "lt", U32, lw.lane, Imm(str(rows)),
                           comment="M = 64: lanes 16..31 of a quarter hold no row") if bm == 64 else None
        lane_field = ptx.shl(b, B32, lw.warp, Imm("21"), comment="TMEM lane 32w in bits 31..16")
        leader = ptx.setp(b, "eq", U32, lw.lane, Imm("0"))
        warp_rows = ptx.mul(b, U32, lw.warp, Imm(str(rows)), comment="the warp's first row of the tile")
        buffers = ptx.add(b, U32, ptx.add(b, U32, lw.smem, Imm(str(lw.plan.staging))),
                          ptx.mul(b, U32, lw.warp, Imm(str(STAGING_BUFFERS * tile.buffer_bytes))),
                          comment="this warp's staging buffers")
        pieces = self.staging_addresses(buffers)
        tmap_c = lw.tmaps["C"]
        loads = CLoads(self, leader) if lw.plan.c_loads else None
        i = ptx.mov(b, U32, Imm("0"), comment="tiles this CTA has done: picks the accumulator buffer")
        walk = TileWalk(lw, "epilogue")
        wt = walk.begin()
        row0 = ptx.add(b, U32, wt.tile.bm0, warp_rows, comment="the warp's first row: the boxes' row coordinate")
        if loads is not None:
            b.comment("lane 0 loads C's first boxes while the tile's MMAs run")
            for j in range(min(STAGING_BUFFERS, tile.chunks)):
                loads.issue(j, wt.tile.bn0, row0, wt.batch)
        buf, use = lw.buffer(i)
        taddr = wait_accumulator(lw, buf, use, lane_field, bn)
        row = ptx.add(b, U32, row0, lw.lane)
        row_ok = ptx.setp(b, "lt", U32, row, lw.dim("M"))
        if lane_ok is not None:
            row_ok = ptx.and_(b, PRED, row_ok, lane_ok)
        row_vec = {name: self.vector_values(name, row, [0], [row_ok])[0]
                   for name in ("bias", "scale") if getattr(self.e, name) == "row"}
        for j in range(tile.chunks):
            c0 = j * tile.cols
            col0 = ptx.add(b, U32, wt.tile.bn0, Imm(str(c0))) if c0 else wt.tile.bn0
            self.claim_buffer(j, leader)
            if loads is not None:
                loads.wait(j)
            pieces_ld = ld_pieces(tile.cols)
            for p, (at, n) in enumerate(pieces_ld):
                regs = b.regs("b32" if g.accumulator == "s32" else "f32", n)   # s32: kind::i8
                tc.load_32x32b(b, regs, Addr(taddr, c0 + at), comment=f"columns {c0 + at}..{c0 + at + n - 1} of my row")
                tc.wait_ld(b)
                if j == tile.chunks - 1 and p == len(pieces_ld) - 1:
                    tc.fence_before_thread_sync(b)
                    lw.release_accumulator(buf, leader, "this warp has read the buffer: the MMA warp may reuse it")
                first = ptx.add(b, U32, col0, Imm(str(at))) if at else col0
                old = loads.read(pieces, j, at, n, lane_ok) if loads is not None else None
                outs = self.chunk_values(list(regs), first, old, row_vec)
                self.write(outs, pieces, j, at, lane_ok)
            mb.fence_proxy_async(b, comment="the staged box, written by the generic proxy, before TMA reads it")
            bar_sync(b, barrier=STAGING_BARRIER, threads=32 * EPILOGUE_WARPS,
                     comment="every thread's pieces before the lane-0 stores")
            coords = (col0, row0) + ((wt.batch,) if wt.batch is not None else ())
            tma.store(b, tmap_c, coords, Addr(buffers, (j % 2) * tile.buffer_bytes), guard=leader,
                      comment=f"box {rows}x{tile.cols} of C, clipped at M and N")
            tma.bulk_commit_group(b, guard=leader, comment=f"chunk {j}'s store")
            if loads is not None and j + STAGING_BUFFERS < tile.chunks:
                loads.issue(j + STAGING_BUFFERS, wt.tile.bn0, row0, wt.batch)
        ptx.add(b, U32, i, Imm("1"), into=i)
        walk.end()
        tma.bulk_wait_group(b, 0, read_only=True, guard=leader,
                            comment="the last stores have read shared memory before the CTA may exit")
        tc.fence_before_thread_sync(b)
        bar_sync(b, barrier=TEARDOWN_BARRIER, threads=32 * (EPILOGUE_WARPS + 1),
                 comment="every accumulator read: TMEM may be freed")
        lw.sync_before_exit()
        b.emit("ret")

    def staging_addresses(self, buffers: VReg) -> list[Addr]:
        """This thread's 16-byte pieces of its staging row in buffer 0 (buffer 1 is an immediate
        offset): row lane at lane * pitch, piece q XORed with the box swizzle's key of the row."""
        lw, b, tile = self.lw, self.b, self.tile
        rowterm = ptx.mul(b, U32, lw.lane, Imm(str(tile.pitch)), comment=f"my row x {tile.pitch} B")
        rowbase = ptx.add(b, U32, buffers, rowterm)
        swz = tile.swizzle_mode
        if not swz.bits:
            return [Addr(rowbase, 16 * q) for q in range(tile.pitch // 16)]
        key = ptx.and_(b, B32, ptx.shr(b, U32, rowterm, Imm(str(swz.shift))), Imm(str(swz.zzz_mask)),
                       comment=f"{swz.name} swizzle: the row's key bits onto the 16-byte piece bits")
        return [Addr(ptx.add(b, U32, rowbase, ptx.xor(b, B32, key, Imm(str(16 * q))) if q else key))
                for q in range(tile.pitch // 16)]

    def chunk_values(self, regs: list[VReg], col0: VReg, old: list[VReg] | None,
                     row_vec: dict[str, VReg]) -> list[VReg]:
        """The epilogue math of columns col0 + j of this thread's row (f32 results), with C's values
        `old` (beta != 0). Column vectors are read only where the column is inside N."""
        lw, b, e = self.lw, self.b, self.e
        n = len(regs)
        oks: list[VReg | None] = [None] * n
        if e.bias == "col" or e.scale == "col":
            room = ptx.sub(b, U32, lw.dim("N"), col0, comment="columns left from the piece's first (negative: none)")
            oks = [ptx.setp(b, "gt", S32, room, Imm(str(j))) for j in range(n)]
        col_vec = {name: self.vector_values(name, col0, list(range(n)), oks)
                   for name in ("bias", "scale") if getattr(e, name) == "col"}
        old = old if old is not None else [None] * n
        if self.int_to_float:   # s32 accumulators (kind::i8) into the f32 epilogue math
            regs = [ptx.cvt(b, F32, S32, v, rounding="rn") for v in regs]
        outs = []
        for j, v in enumerate(regs):
            vec = {name: (row_vec[name] if name in row_vec else col_vec[name][j])
                   for name in ("bias", "scale") if name in row_vec or name in col_vec}
            outs.append(self.apply(v, old[j], vec.get("bias"), vec.get("scale")))
        return outs

    def claim_buffer(self, j: int, leader: VReg) -> None:
        """Before chunk j's first write to buffer j % 2: lane 0 waits until the store that last read
        it is done reading, then the epilogue warps meet, so every thread writes after that wait."""
        k = j % 2
        # the most recent store group used the other buffer, except at a tile's first chunk when
        # the tile has an odd number of chunks (the previous tile's last chunk used this buffer too)
        pending = 1 if self.tile.chunks % 2 == 0 or j > 0 else 0
        tma.bulk_wait_group(self.b, pending, read_only=True, guard=leader,
                            comment=f"the store that last read buffer {k} is done reading it")
        bar_sync(self.b, barrier=STAGING_BARRIER, threads=32 * EPILOGUE_WARPS,
                 comment="every thread writes the buffers after the lane-0 waits")

    def write(self, outs: list[VReg], pieces: list[Addr], j: int, at: int, lane_ok: VReg | None) -> None:
        """Columns at.. of chunk j of this thread's row, cast, into buffer j % 2 (16-byte pieces)."""
        b, tile, ob = self.b, self.tile, self.ob
        words: list[VReg] = list(outs)
        if ob == 2:
            words = []
            for p in range(0, len(outs), 2):
                r = b.reg("b32")
                b.emit(CVT_PACK[self.g.out_dtype], r, outs[p + 1], outs[p], ndefs=1)   # odd column high
                words.append(r)
        first = at * ob // 16
        for q in range(len(words) // 4):
            piece = pieces[first + q]
            ptx.store(b, "shared", B32 if ob == 2 else F32,
                      Addr(piece.base, piece.offset + (j % 2) * tile.buffer_bytes), Vec(tuple(words[4 * q:4 * q + 4])),
                      width=4, guard=lane_ok, comment=f"columns +{at + 16 * q // ob}.. of my row" if q == 0 else None)


class CLoads:
    """C's boxes (beta != 0) loaded by TMA into the warp's two C buffers, which mirror its staging
    buffers (the same swizzled positions, so a thread reads its row's values where it writes its
    results), each on a C-load mbarrier (one arrival: lane 0's expect_tx) whose parity carries
    across tiles. Lane 0 loads chunks 0 and 1 at a tile's start and chunk j + 2 after chunk j's
    barrier (every thread has read C buffer j % 2 and fenced those reads before it)."""

    def __init__(self, ep: TmemTmaEpilogue, leader: VReg):
        lw, b, tile = ep.lw, ep.b, ep.tile
        self.ep, self.b, self.tile, self.leader = ep, b, tile, leader
        self.bars = ptx.add(b, U32, ptx.add(b, U32, lw.smem, Imm(str(lw.plan.c_barriers))),
                            ptx.shl(b, B32, lw.warp, Imm(str((STAGING_BUFFERS * MBARRIER_BYTES).bit_length() - 1))),
                            comment="this warp's C-load barriers")
        self.buffers = ptx.add(b, U32, ptx.add(b, U32, lw.smem, Imm(str(lw.plan.c_buffers))),
                               ptx.mul(b, U32, lw.warp, Imm(str(STAGING_BUFFERS * tile.buffer_bytes))),
                               comment="this warp's C buffers")
        self.delta = lw.plan.c_buffers - lw.plan.staging
        self.phase = [ptx.mov(b, U32, Imm("0"), comment=f"C buffer {k}: phase parity, carried across tiles")
                      for k in range(STAGING_BUFFERS)]

    def issue(self, j: int, bn0: VReg, row0: VReg, batch: VReg | None) -> None:
        """Lane 0 arms C buffer j % 2's barrier and loads chunk j's box of C into it (TMA fills
        the parts past M and N with zeros, which count towards the bytes)."""
        b, tile, k = self.b, self.tile, j % STAGING_BUFFERS
        bar = Addr(self.bars, MBARRIER_BYTES * k)
        nbytes = tile.rows * tile.pitch
        col = ptx.add(b, U32, bn0, Imm(str(j * tile.cols))) if j else bn0
        mb.arrive_expect_tx(b, bar, nbytes, guard=self.leader, comment=f"C box {j}: {nbytes} B")
        tma.load(b, Addr(self.buffers, k * tile.buffer_bytes), self.ep.lw.tmaps["C"],
                 (col, row0) + ((batch,) if batch is not None else ()), bar, guard=self.leader,
                 comment=f"C columns +{j * tile.cols}, box {tile.rows}x{tile.cols}")

    def wait(self, j: int) -> None:
        k = j % STAGING_BUFFERS
        mb.wait_parity(self.b, Addr(self.bars, MBARRIER_BYTES * k), self.phase[k], "wait_c",
                       comment=f"C box {j} landed")
        ptx.xor(self.b, B32, self.phase[k], Imm("1"), into=self.phase[k])

    def read(self, pieces: list[Addr], j: int, at: int, n: int, lane_ok: VReg | None) -> list[VReg]:
        """C's values at columns at..at+n-1 of chunk j of this thread's row, as f32 (0 for the
        lanes that hold no row)."""
        b, ob = self.b, self.ep.ob
        out: list[VReg] = []
        first = at * ob // 16
        for q in range(n * ob // 16):
            piece = pieces[first + q]
            where = Addr(piece.base, piece.offset + self.delta + (j % STAGING_BUFFERS) * self.tile.buffer_bytes)
            words = b.regs("b32" if ob == 2 else "f32", 4)
            if lane_ok is not None:   # M = 64: lanes 16..31 read nothing (their results are not stored)
                for w in words:
                    b.emit("mov.b32", w, Imm("0"), ndefs=1)
            ptx.load(b, "shared", B32 if ob == 2 else F32, where, into=Vec(words), width=4, guard=lane_ok,
                     comment="C's values (beta)" if q == 0 else None)
            if ob == 2:
                for w in words:
                    out.extend(self.ep.unpack(w, self.ep.g.out_dtype))
            else:
                out.extend(words)
        return out


def init_c_barriers(lw: "Sm100Lowering", leader: VReg) -> None:
    """Thread 0 initialises the epilogue warps' C-load barriers (one arrival each), in the setup
    before the CTA barrier; nothing without C loads."""
    if not lw.plan.c_loads:
        return
    n = EPILOGUE_WARPS * STAGING_BUFFERS
    lw.b.comment(f"thread 0: the {n} C-load barriers of the TMA-store epilogue (1 arrival + the box's bytes)")
    for k in range(n):
        mb.init(lw.b, Addr(lw.smem, lw.plan.c_barriers + MBARRIER_BYTES * k), 1, guard=leader)
