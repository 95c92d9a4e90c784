"""tcgen05.shift: shift 32 lanes of tensor memory down by one lane, asynchronously
(docs/ptx_facts/tcgen05.md §12g2).

  tcgen05.shift.cta_group::N.down [taddr];      (PTX ISA §9.7.16.9.3; the ISA's own example
  tcgen05.shift.down.cta_group::N [taddr];       writes .down first, so both orders are taken)

The ISA: "initiates the shifting of 32-byte elements downwards across all the rows, except the
last, by one row"; the lane of taddr must be a multiple of 32; its data-movement shape is the
implicit .31x256b (§9.7.16.2.3). So with taddr = (L0, C0): the 256 bits (8 columns C0..C0+7) of
lanes L0..L0+30 move to lanes L0+1..L0+31. The ISA does not say what lane L0 holds afterwards; the
simulator leaves it unchanged. With .cta_group::2 the shift happens in both CTAs of the pair at
the same address ("the Tensor Memory of both the current and the peer CTAs").

Issued by one thread; asynchronous like tcgen05.cp (completed by tcgen05.commit). Pipelined, so
no wait is needed between them (§9.7.16.6.2): mma -> shift, shift -> mma, shift -> cp.4x256b; a
tcgen05.ld/st of the shifted cells, or a dealloc, must wait for the commit first.
"""
from __future__ import annotations

import numpy as np

from . import tmem as tm
from .errors import Fault
from .parse import Instr
from .state import CtaState

ROWS, COLS = 32, 8          # 32 lanes touched (31 moved), 256 bits = 8 columns


def compile_shift(ins: Instr, ctx, mods: list):
    from .ops_tcgen05 import cta_group_of, tmem_getter
    group = cta_group_of(mods, ctx, "tcgen05.shift")
    if mods != ["down"] or len(ins.operands) != 1:
        raise ctx.fail("write tcgen05.shift.cta_group::1.down [taddr]; (the only direction is .down)")
    get_addr = tmem_getter(ctx, ctx.mem(ins.operands[0]))
    line = ctx.line

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        addrs = np.broadcast_to(get_addr(cta.R), (cta.n,))[tids]
        for tid, addr in zip(tids.tolist(), addrs.tolist()):
            ctas = tm.pair_of(cta, "tcgen05.shift") if group == 2 else [cta]
            records = []
            for c in ctas:
                st = tm.tmem_of(c)
                tm.use_cta_group(st, group, "tcgen05.shift")
                records.append(_shift(c, st, int(tid), int(addr), line))
            tm.link(cta, records)
    return run


def _shift(cta: CtaState, st: tm.TmemState, tid: int, addr: int, line: int) -> tm.MmaRecord:
    lane0, col0 = tm.split_address(addr)
    if lane0 % 32:
        raise Fault("tmem", f"tcgen05.shift at lane {lane0}: the lane of taddr must be a multiple of 32 "
                    "(PTX ISA §9.7.16.9.3)")
    region = tm.Region(lane0, lane0 + ROWS, col0, col0 + COLS)
    what = "tcgen05.shift"
    tm.check_allocated(st, region, f"{what} moves")
    tm.check_not_mma_target(st, region, f"{what} moves", pipelined=("tcgen05.mma",))
    tm.check_not_pending(st.loads, region, f"{what} moves", "ld")
    tm.check_not_pending(st.stores, region, f"{what} moves", "st")
    block = st.cells[lane0:lane0 + ROWS - 1, col0:col0 + COLS].copy()
    st.cells[lane0 + 1:lane0 + ROWS, col0:col0 + COLS] = block
    rec = tm.MmaRecord(tid, region, [region], np.zeros(0, dtype=np.int64), line, owner=cta, what=what)
    st.mmas.append(rec)
    return rec
