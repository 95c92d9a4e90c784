"""tcgen05.mma.ws: the weight-stationary MMA, cta_group::1 (docs/ptx_facts/tcgen05.md §12c2).

  tcgen05.mma.ws.cta_group::1.kind::K{.collector::bN::op} [d-tmem], a-desc|[a-tmem], b-desc, idesc,
                                                         enable-input-d {, zero-column-mask-desc};

PTX ISA §9.7.16.10.9.3: K one of f16, tf32, f8f6f4, i8 (no block scaling), M = 32, 64 or 128,
N = 64, 128 or 256 (Table 39); one thread issues the whole MMA, asynchronous like tcgen05.mma.

D placement (§9.7.16.10.5, layouts D, E and G are figures; the formulas are CuTe's tmem_frg_ws):
  M = 128: row m in lane m, column n                      (layout D, as without .ws)
  M = 64:  row m in lane m + 64 * (n // (N/2)), column n % (N/2)     (layout E, "2x2 datapath")
  M = 32:  row m in lane m + 32 * (n // (N/4)), column n % (N/4)     (layout G, "1x4 datapath")

B collector buffers b0..b3 (the ISA's table): ::fill reads B from shared memory into buffer N;
::use / ::lastuse "can" read B from buffer N and need a still-valid fill (lastuse then frees it);
::discard (the default, b0) frees it. Reuse being optional, the simulator reads B from shared
memory every time and reports (kind tmem) a ::use/::lastuse without a valid fill, and (kind race) one
whose shared B differs from what the buffer was filled with: the hardware may take either.

Not simulated, refused by name: A in tensor memory with M = 32 or 64 (where its rows sit is a
figure only), and zero-column-mask-desc (the ISA's Table 45 says Skip Span counts the columns that
use B and Use Span the zero columns, and its Example 2 shows the opposite runs).
"""
from __future__ import annotations

import functools
import re

import numpy as np

from . import tcgen05_desc as td
from . import tmem as tm
from . import tmem_order
from .errors import Fault
from .operands import Lit, Mem
from .parse import Instr
from .state import CtaState

COLLECTOR = re.compile(r"collector::b([0-3])::(fill|use|lastuse|discard)$")
WS_KINDS = ("f16", "tf32", "f8f6f4", "i8")


def ws_d_cells(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column) offsets of D[row][col], each (m, n), for tcgen05.mma.ws (layouts D, E, G)."""
    rows, cols = np.arange(m)[:, None], np.arange(n)[None, :]
    split = 128 // m                     # the N slices spread over the lane blocks
    width = n // split
    return np.broadcast_to(rows + m * (cols // width), (m, n)), np.broadcast_to(cols % width, (m, n))


@functools.lru_cache(maxsize=64)
def _idesc(value: int, kind: str) -> td.InstrDescriptor:
    return td.decode_instr_descriptor(value, kind, 1, ws=True)


def compile_ws(ins: Instr, ctx, mods: list):
    from .ops_tcgen05 import cta_group_of, tmem_getter
    from .tcgen05_mma import _operand_getter
    group = cta_group_of(mods, ctx, "tcgen05.mma.ws")
    if group != 1:
        raise ctx.fail("tcgen05.mma.ws exists for .cta_group::1 only (PTX ISA Table 39: cta_group::2 is invalid)")
    kinds = [m for m in mods if m.startswith("kind::")]
    collectors = [COLLECTOR.match(m) for m in mods if m.startswith("collector::")]
    if len(kinds) != 1 or kinds[0][6:] not in WS_KINDS or None in collectors or len(collectors) > 1 \
            or len(mods) != 1 + len(collectors):
        raise ctx.fail(f"tcgen05.mma.{'.'.join(ins.mods[1:])}: write tcgen05.mma.ws.cta_group::1.kind::<f16|tf32|"
                       "f8f6f4|i8>{.collector::b<0-3>::<fill|use|lastuse|discard>} (.sp is not simulated)")
    kind = kinds[0][6:]
    buffer, op = (int(collectors[0].group(1)), collectors[0].group(2)) if collectors else (0, "discard")
    ops = list(ins.operands)
    if len(ops) == 6:
        raise ctx.fail("tcgen05.mma.ws with zero-column-mask-desc is not simulated: the ISA's Table 45 field "
                       "definitions (Skip Span = columns using B - 1, Use Span = zero columns - 1) and its "
                       "Example 2 (Skip Span 2, Use Span 3 giving 4 B columns then 3 zero columns) disagree")
    if len(ops) != 5:
        raise ctx.fail("tcgen05.mma.ws takes [d-tmem], a-desc|[a-tmem], b-desc, idesc, enable-input-d")
    a_tmem = isinstance(ops[1], Mem)
    getters = [tmem_getter(ctx, ctx.mem(ops[0])),
               tmem_getter(ctx, ops[1]) if a_tmem else _operand_getter(ctx, ops[1], "b64", "a-desc"),
               _operand_getter(ctx, ops[2], "b64", "b-desc"), _operand_getter(ctx, ops[3], "b32", "idesc")]
    enable = ops[4]
    getters.append((lambda R: np.array([bool(enable.value)])) if isinstance(enable, Lit)
                   else ctx.src(enable, "pred"))
    line = ctx.line

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, 1, "tcgen05.mma.ws")
        tids = cta.threads(mask)
        values = [np.broadcast_to(g(cta.R), (cta.n,))[tids] for g in getters]
        for j, tid in enumerate(tids.tolist()):
            _issue(cta, st, kind, int(tid), *(int(v[j]) for v in values[:4]), bool(values[4][j]), a_tmem,
                   buffer, op, line)
    return run


def _issue(cta: CtaState, st: tm.TmemState, kind: str, tid: int, d_addr: int, a_val: int, b_val: int,
           idesc_val: int, accumulate: bool, a_tmem: bool, buffer: int, op: str, line: int) -> None:
    from .tcgen05_mma import _accumulate, _read_a_tmem, _read_smem
    idesc = _idesc(idesc_val & 0xFFFFFFFF, kind)
    m, n, k = idesc.m, idesc.n, idesc.k
    reader = np.array([tid], dtype=np.int64)
    reads, smem_idx = [], []
    if a_tmem:
        if m != 128:
            raise Fault("unsupported", f"tcgen05.mma.ws with M = {m} and A in tensor memory is not simulated: "
                        "where the A rows sit is given only by the ISA's layout figures (M = 128 is)")
        a, region = _read_a_tmem(st, a_val, m, k, idesc.atype, 0)
        reads.append(region)
        tmem_order.check_mma_reads(cta, cta, tid, reads, "issues a tcgen05.mma.ws reading")
    else:
        a, idx_a = _read_smem(cta, a_val, m, k, idesc.atype, idesc.a_mn_major, reader, "A")
        smem_idx.append(idx_a)
    bt, idx_b = _read_smem(cta, b_val, n, k, idesc.btype, idesc.b_mn_major, reader, "B")
    smem_idx.append(idx_b)
    _collector(st, buffer, op, bt, line)
    if idesc.negate_a:
        a = -a
    if idesc.negate_b:
        bt = -bt
    lane0, col0 = tm.split_address(d_addr)
    if lane0:
        raise Fault("tmem", f"tcgen05.mma.ws D at lane {lane0}: the .ws layouts use lanes from 0")
    lanes, cols = ws_d_cells(m, n)
    cols = col0 + cols
    region = tm.Region(0, 128 if m < 128 else m, col0, int(cols.max()) + 1)
    tm.check_allocated(st, region, "tcgen05.mma.ws D")
    tm.check_not_pending(st.loads, region, "tcgen05.mma.ws writes D", "ld")
    tm.check_not_pending(st.stores, region, "tcgen05.mma.ws D", "st")
    for rec in st.mmas:          # only a chained MMA into the same D may follow without a wait
        if rec.what == "tcgen05.mma" and rec.d.overlaps(region) and rec.d != region:
            raise Fault("async-pending", f"tcgen05.mma.ws D {region.describe()} overlaps the D of the tcgen05.mma "
                        f"at line {rec.line}, still in flight, with another shape")
    st.cells[lanes, cols] = _accumulate(a, bt, st.cells[lanes, cols], accumulate, idesc, 0)
    idx = np.concatenate(smem_idx)
    st.mmas.append(tm.MmaRecord(tid, region, reads, idx, line, owner=cta))
    smem = cta.smem
    if smem.async_reads is None:
        smem.async_reads = np.zeros(smem.size, dtype=np.int16)
    smem.async_reads += tm.byte_counts(idx, smem.size)


def _collector(st: tm.TmemState, buffer: int, op: str, bt: np.ndarray, line: int) -> None:
    """The B collector buffers of this CTA's tensor core: buffer -> B values of its last fill."""
    held = st.collectors
    if op == "fill":
        held[buffer] = bt.copy()
        return
    if op in ("use", "lastuse"):
        if buffer not in held:
            raise Fault("tmem", f"tcgen05.mma.ws .collector::b{buffer}::{op} without a valid "
                        f"::fill of buffer b{buffer} (a ::lastuse or ::discard freed it, or none filled it)")
        if held[buffer].shape != bt.shape or held[buffer].tobytes() != bt.tobytes():
            raise Fault("race", f"tcgen05.mma.ws .collector::b{buffer}::{op}: B in shared memory differs from "
                        f"what buffer b{buffer} was filled with; the MMA may read either (the ISA: B \"can be "
                        "read from the collector buffer\"), so the result is undefined")
    if op in ("lastuse", "discard"):
        held.pop(buffer, None)
