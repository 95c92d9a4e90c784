"""The sm_100a epilogue warps: each tile's accumulator from tensor memory through the shared
epilogue math (emit/epilogue/math.py: alpha, beta * C, bias, scale, activation, the cast) to C
with direct st.global, guarded by M and N (docs/ptx_facts/tcgen05.md §12f, §12j).

Warp w (0..3) reads TMEM lanes 32w..32w+31 (§12b). With M = 128 lane m holds row m; with M = 64
(layout F) row m sits in lane 32 * (m >> 4) + (m & 15), so lanes 16..31 of each quarter hold no
row. Thread t of warp w therefore owns one row of the tile and reads it LD_COLUMNS columns at a
time with tcgen05.ld.32x32b; after the tile's last read (and tcgen05.wait::ld) lane 0 of each warp
arrives on acc_empty, so the MMA warp may start the next-but-one tile in this buffer while the
warp still computes and stores.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...emit import mbarrier_isa as mb
from ...emit.epilogue.math import EpilogueMath
from ...emit.memory import bar_sync
from ...ir import Addr, Imm, VReg
from ...ir import ops as ptx
from ...ir.ops import B32, B64, F32, PRED, S32, S64, U32, U64
from . import tcgen05_isa as tc
from .plan import EPILOGUE_WARPS, LD_COLUMNS, TEARDOWN_BARRIER
from .grouped import tile_walk

if TYPE_CHECKING:
    from .kernel import Sm100Lowering


def wait_accumulator(lw: "Sm100Lowering", buf: VReg, use: VReg, lane_field: VReg, bn: int) -> VReg:
    """Wait until accumulator buffer `buf`'s MMAs completed (its acc_full commit, phase `use`) and
    return this warp's TMEM address of it: lane 32w (`lane_field`), the buffer's first column."""
    b = lw.b
    mb.wait_parity(b, Addr(ptx.add(b, U32, lw.acc_full, ptx.shl(b, B32, buf, Imm("3")))), use, "wait_acc_full",
                   comment="the tile's MMAs completed")
    tc.fence_after_thread_sync(b)
    return ptx.add(b, U32, ptx.add(b, U32, lw.tmem, lane_field), ptx.mul(b, U32, buf, Imm(str(bn))),
                   comment="lane 32w, the buffer's first column")


class TmemEpilogue(EpilogueMath):
    """The epilogue warps' walk over the CTA's tiles (`emit`)."""

    lw: "Sm100Lowering"

    def __init__(self, lw: "Sm100Lowering"):
        super().__init__(lw)

    def emit(self) -> None:
        lw, b, g = self.lw, self.b, self.g
        bm, bn, _ = lw.plan.mma
        bm //= lw.plan.cta_group   # this CTA's rows (a pair's MMA leaves BM/2 in each CTA's TMEM)
        b.banner(f"Epilogue warps 0..{EPILOGUE_WARPS - 1}: per tile wait acc_full, tcgen05.ld {LD_COLUMNS} columns "
                 f"at a time, release the buffer after the last read, {g.out_dtype} stores guarded by M and N")
        self.describe()
        rows_per_warp = 32 if bm == 128 else 16
        row_in_tile = ptx.add(b, U32, ptx.mul(b, U32, lw.warp, Imm(str(rows_per_warp))), lw.lane,
                              comment="this thread's row of the tile (its TMEM lane)")
        lane_ok = ptx.setp(b, "lt", U32, lw.lane, Imm(str(rows_per_warp)),
                           comment="M = 64: lanes 16..31 of a quarter hold no row") if bm == 64 else None
        lane_field = ptx.shl(b, B32, lw.warp, Imm("21"), comment="TMEM lane 32w in bits 31..16")
        releaser = ptx.setp(b, "eq", U32, lw.lane, Imm("0"))
        i = ptx.mov(b, U32, Imm("0"), comment="tiles this CTA has done: picks the accumulator buffer")
        walk = tile_walk(lw, "epilogue", moves_c=True)
        wt = walk.begin()
        tile = wt.tile
        buf, use = lw.buffer(i)
        taddr = wait_accumulator(lw, buf, use, lane_field, bn)
        row = ptx.add(b, U32, tile.bm0, row_in_tile)
        # a grouped tile's rows end at its group's end (grouped.py), not at M
        row_ok = ptx.setp(b, "lt", U32, row, lw.dim("M") if wt.rows_end is None else wt.rows_end)
        if lane_ok is not None:
            row_ok = ptx.and_(b, PRED, row_ok, lane_ok)
        row_vec = {name: self.vector_values(name, row, [0], [row_ok])[0]
                   for name in ("bias", "scale") if getattr(self.e, name) == "row"}
        row_off = ptx.mul_wide(b, U32, row, lw.dim("ldc"))
        chunk = next(c for c in (LD_COLUMNS, 16, 8) if bn % c == 0)
        for c0 in range(0, bn, chunk):
            regs = b.regs("b32" if g.accumulator == "s32" else "f32", chunk)  # s32: kind::i8
            tc.load_32x32b(b, regs, Addr(taddr, c0), comment=f"columns {c0}..{c0 + chunk - 1} of my row")
            tc.wait_ld(b)
            if c0 + chunk == bn:
                tc.fence_before_thread_sync(b)
                lw.release_accumulator(buf, releaser, "this warp has read the buffer: the MMA warp may reuse it")
            self.store_chunk(regs, tile.bn0, c0, row_ok, row_off, row_vec, wt.c)
        ptx.add(b, U32, i, Imm("1"), into=i)
        walk.end()
        tc.fence_before_thread_sync(b)
        bar_sync(b, barrier=TEARDOWN_BARRIER, threads=32 * (EPILOGUE_WARPS + 1), comment="every accumulator read: TMEM may be freed")
        lw.sync_before_exit()
        b.emit("ret")

    def store_chunk(self, regs: tuple[VReg, ...], bn0: VReg, c0: int, row_ok: VReg, row_off: VReg,
                    row_vec: dict[str, VReg], c: VReg) -> None:
        """Columns bn0 + c0 + j of this thread's row: the epilogue math, then one store per element
        or per adjacent pair (N even and C's rows keep a pair aligned, as sm_90a's epilogue does)."""
        lw, b, g, eb = self.lw, self.b, self.g, self.ob
        col0 = ptx.add(b, U32, bn0, Imm(str(c0)))
        room = ptx.sub(b, U32, lw.dim("N"), col0, comment="columns left from col0 (negative: none)")
        n = len(regs)
        pair = g.n % 2 == 0 and g.out_alignment() >= 2 * eb
        step = 2 if pair else 1
        oks = {j: ptx.and_(b, PRED, row_ok, ptx.setp(b, "gt", S32, room, Imm(str(j)))) for j in range(0, n, step)}
        col_vec = {name: self.vector_values(name, col0, list(range(n)),
                                            [oks[j - j % step] for j in range(n)])
                   for name in ("bias", "scale") if getattr(self.e, name) == "col"}
        off = ptx.add(b, U64, row_off, ptx.cvt(b, U64, U32, col0))
        if eb > 1:
            off = ptx.shl(b, B64, off, Imm(str(eb.bit_length() - 1)))
        ptr = ptx.add(b, S64, c, off)
        for j in range(0, n, step):
            ok = oks[j]
            addr = Addr(ptr, j * eb)
            group = list(regs[j:j + step])
            if self.int_to_float:  # s32 accumulators into the f32 epilogue (exact s32 stores keep the bits)
                group = [ptx.cvt(b, F32, S32, v, rounding="rn") for v in group]
            old = self.load_old(addr, len(group), ok) if self.e.beta else [None] * len(group)
            outs = []
            for t, (v, prev) in enumerate(zip(group, old)):
                vec = {name: (row_vec[name] if name in row_vec else col_vec[name][j + t])
                       for name in ("bias", "scale") if name in row_vec or name in col_vec}
                outs.append(self.apply(v, prev, vec.get("bias"), vec.get("scale")))
            self.store(addr, outs, ok)
