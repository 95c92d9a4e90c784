"""tcgen05.mma, cta_group::1 and ::2, kinds f16 / tf32 / f8f6f4 / i8 and the block-scaled mxf8f6f4 /
mxf4 / mxf4nvf4 (tcgen05_scaled.py); .ws is tcgen05_ws.py (docs/ptx_facts/tcgen05.md §12c–§12f, §12h,
§12i, §12l).

  tcgen05.mma.cta_group::1.kind::K [d-tmem], a-desc|[a-tmem], b-desc, idesc,
                                   {disable-output-lane,} enable-input-d {, scale-input-d};

One thread issues a whole MMA (PTX ISA §9.7.16.5 Table 46): every executing thread issues its own.
D = A x B (+ D if enable-input-d), M x N, with K = 256 bits of each row (§9.7.16.2.1). A (M x K) comes
from shared memory through an sm100 descriptor or from TMEM; B (stored N x K, K-major unless the
instruction descriptor transposes it) from shared memory. D lives in TMEM: M = 128 in lanes 0-127,
M = 64 in lanes 0-15 of each quarter (tcgen05_layouts.d_lanes), element n of a row in column n
(f16 D in the low 16 bits of its column, §9.7.16.10.4.1).

Numerics (the ISA's tcgen05 text states none; the simulator's model as for wgmma, ops_wgmma): the
exact products are summed in float64, rounded once to f32 (or f16) and added to the accumulator;
integers exactly, wrapping, or clamped to s32 when the saturate bit is set. tf32 operands drop the
low 13 mantissa bits.

The MMA is computed at issue and its D written then; it stays in flight (tmem.MmaRecord) until a
thread observes the mbarrier phase of a tcgen05.commit covering it. Its shared operand bytes are
counted in smem.async_reads meanwhile, so a TMA or st.shared overwriting them is reported.
"""
from __future__ import annotations

import dataclasses
import functools

import ml_dtypes
import numpy as np

from . import numerics as nx
from . import tcgen05_desc as td
from . import tcgen05_layouts as tl
from . import tcgen05_scaled as ts
from . import tmem as tm
from . import tmem_order
from .async_proxy import check_async_read
from .errors import Fault
from .operands import Lit, Mem, Name, Vec
from .ops_wgmma import decode_elements
from .parse import Instr
from .state import CtaState
from .tcgen05_subbyte import PADDED, decode_padded

ESIZE = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "e2m3": 1, "e3m2": 1, "e2m1": 1,
         "s8": 1, "u8": 1}


def _decode_fp8_container(kind: str):
    """fp6 in shared memory is decoded by tcgen05_subbyte (the .b6x16_p32 form); an fp6 A in
    tensor memory sits in 8-bit containers (what tcgen05.cp's .b8x16.b6x16_p32 decompression writes),
    and where the 6 bits sit in each container no production code here pins down: refused."""
    def decode(raw: np.ndarray) -> np.ndarray:
        raise Fault("unsupported", f"tcgen05.mma with an {kind} A in tensor memory is not simulated: where each "
                    "6-bit value sits in its 8-bit container there is given only by the ISA's figures (no "
                    "CUTLASS, Triton or Gluon code writes it); fp6 A and B from shared memory are simulated")
    return decode


#: element format -> bytes (..., esize) uint8 -> float64 / int64; other formats plug in here
FORMATS = {name: (lambda raw, name=name: decode_elements(raw, name))
           for name in ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")}
FORMATS.update({name: _decode_fp8_container(name) for name in ("e2m3", "e3m2")})
assert ml_dtypes is not None


@functools.lru_cache(maxsize=256)
def _idesc(value: int, kind: str, vec: int, group: int) -> td.InstrDescriptor:
    if vec:
        return td.decode_scaled_instr_descriptor(value, kind, vec, group)
    return td.decode_instr_descriptor(value, kind, group)


def _operand_getter(ctx, op, typ: str, what: str):
    if isinstance(op, (Name, Lit)):
        return ctx.src(op, typ)
    raise ctx.fail(f"tcgen05.mma {what} must be a register or immediate")


def compile_mma(ins: Instr, ctx, mods: list):
    from .ops_tcgen05 import cta_group_of, tmem_getter
    if mods and mods[0] == "ws":
        from .tcgen05_ws import compile_ws
        return compile_ws(ins, ctx, mods[1:])
    group = cta_group_of(mods, ctx, "tcgen05.mma")
    kinds = [m for m in mods if m.startswith("kind::")]
    kind = kinds[0][len("kind::"):] if len(kinds) == 1 else ""
    vec = ts.scale_vector(kind, mods, ctx) if kind in td.SCALED_AB_TYPES else 0
    rest = [m for m in mods if not m.startswith("kind::") and not m.startswith("collector::a::")]
    if len(kinds) != 1 or rest:
        raise ctx.fail(f"tcgen05.mma.{'.'.join(ins.mods[1:])}: write tcgen05.mma.cta_group::1.kind::<kind>"
                       "{.block_scale{.blockN}} (.sp is not simulated)")
    if kind not in td.K_OF_KIND and not vec:
        raise ctx.fail(f"tcgen05.mma .kind::{kind} is not simulated (f16, tf32, f8f6f4, i8, mxf8f6f4, mxf4, "
                       "mxf4nvf4)")
    ops = list(ins.operands)
    if len(ops) < 5 or (vec and len(ops) != 7):
        raise ctx.fail("tcgen05.mma takes [d-tmem], a-desc|[a-tmem], b-desc, idesc, " +
                       ("[scale-A-tmem], [scale-B-tmem], enable-input-d" if vec else
                        "{disable-output-lane,} enable-input-d {, scale-input-d}"))
    get_d = tmem_getter(ctx, ctx.mem(ops[0]))
    a_tmem = isinstance(ops[1], Mem)
    get_a = tmem_getter(ctx, ops[1]) if a_tmem else _operand_getter(ctx, ops[1], "b64", "a-desc")
    get_b = _operand_getter(ctx, ops[2], "b64", "b-desc")
    get_idesc = _operand_getter(ctx, ops[3], "b32", "idesc")
    tail = ops[4:]
    scale_getters = []
    if vec:
        scale_getters = [tmem_getter(ctx, ctx.mem(tail[0])), tmem_getter(ctx, ctx.mem(tail[1]))]
        tail = tail[2:]
        if a_tmem and kind != "mxf8f6f4":
            raise ctx.fail(f"tcgen05.mma .kind::{kind} with A in tensor memory is not simulated (the packing "
                           "of e2m1 pairs in TMEM is not pinned down)")
    disable = None
    if tail and isinstance(tail[0], Vec):
        disable = [ctx.src(r, "b32") for r in ctx.vec(tail[0], 4 * group, f"disable-output-lane (cta_group::{group})")]
        if group == 2:
            raise ctx.fail("tcgen05.mma.cta_group::2 with disable-output-lane is not simulated yet")
        tail = tail[1:]
    if len(tail) not in (1, 2):
        raise ctx.fail("tcgen05.mma: after idesc come {disable-output-lane,} enable-input-d {, scale-input-d}")
    enable = tail[0]
    if isinstance(enable, Lit):
        fixed = bool(enable.value)
        get_enable = lambda R: np.array([fixed])   # noqa: E731
    else:
        get_enable = ctx.src(enable, "pred")
    scale_shift = 0
    if len(tail) == 2:
        if not isinstance(tail[1], Lit) or tail[1].kind != "int" or not 0 <= tail[1].value <= 15:
            raise ctx.fail("scale-input-d must be an immediate 0..15")
        if kind not in ("f16", "tf32"):
            raise ctx.fail(f"scale-input-d exists only for .kind::f16 and .kind::tf32, not .kind::{kind}")
        scale_shift = int(tail[1].value)
    line = ctx.line
    getters = [get_d, get_a, get_b, get_idesc, get_enable] + scale_getters

    def run(cta: CtaState, mask):
        st = tm.tmem_of(cta)
        tm.use_cta_group(st, group, "tcgen05.mma")
        tids = cta.threads(mask)
        R = cta.R
        values = [np.broadcast_to(g(R), (cta.n,))[tids] for g in getters]
        lane_masks = [np.broadcast_to(g(R), (cta.n,))[tids] for g in disable] if disable else None
        for j, tid in enumerate(tids.tolist()):
            off = None if lane_masks is None else [int(m[j]) for m in lane_masks]
            scales = (int(values[5][j]), int(values[6][j]), vec) if vec else None
            args = (kind, int(tid), int(values[0][j]), int(values[1][j]), int(values[2][j]),
                    int(values[3][j]), bool(values[4][j]), a_tmem, scale_shift, off, scales, line)
            if group == 2:
                _issue_pair(cta, *args)
            else:
                _issue(cta, st, *args)
    return run


def _issue_pair(cta: CtaState, kind: str, tid: int, d_addr: int, a_val: int, b_val: int, idesc_val: int,
                accumulate: bool, a_tmem: bool, scale_shift: int, disabled, scales, line: int) -> None:
    """cta_group::2 (PTX ISA §9.7.16.5.1, docs/ptx_facts/tcgen05.md §12i): CTA v of the pair
    (v = cluster rank & 1) holds A rows v*M/2..(v+1)*M/2-1 and B columns v*N/2..(v+1)*N/2-1 at the
    same shared offsets the issuer's descriptors name, and D rows v*M/2.. in its own TMEM at d-tmem:
    M = 256 as layout D (row m in lane m); M = 128 as layout B (row m < 64: columns n < N/2 in lane m,
    column n; columns n >= N/2 in lane 64 + m, column n - N/2), computed as one 128 x N/2 product of
    [[A, 0], [0, A]] with [B_low | B_high] (the zero products change no float64 sum).
    M = 256 only: A may come from each CTA's own TMEM at a-tmem (its 128 rows in lanes 0-127, as
    CuTe's 2x1SM TS atoms hold it), and block scaling reads each CTA's SFA (its 128 rows) and SFB
    (all N rows) from its own TMEM (§12i; CuTe's 2-CTA block-scaled GEMMs load them that way)."""
    peer = tm.pair_peer(cta, "tcgen05.mma")
    vec = scales[2] if scales else 0
    idesc = _idesc(idesc_val & 0xFFFFFFFF, kind, vec, 2)
    if idesc.m == 128 and (a_tmem or vec):
        raise Fault("unsupported", "tcgen05.mma.cta_group::2 with M = 128 and " +
                    ("A in tensor memory" if a_tmem else "block scaling") + " is not simulated: where each CTA's "
                    "64 rows of A / of the scale factors sit in its tensor memory (layout B) is given only by the "
                    "ISA's figures; M = 256 is simulated")
    half_n, k = idesc.n // 2, idesc.k
    pair = sorted([cta, peer], key=lambda c: c.cluster.rank)
    reader = np.array([tid], dtype=np.int64)
    halves, idx = [], []
    for c in pair:
        bt, i_b = _read_smem(c, b_val, half_n, k, idesc.btype, idesc.b_mn_major, reader,
                             f"B (CTA rank {c.cluster.rank})", vec > 1)
        halves.append(bt)
        idx.append(i_b)
    b_full = np.concatenate(halves)
    if idesc.negate_b:
        b_full = -b_full
    records = []
    for c, i_b in zip(pair, idx):
        st = tm.tmem_of(c)
        tm.use_cta_group(st, 2, "tcgen05.mma")
        reads, bt = [], b_full
        if a_tmem:
            a, a_region = _read_a_tmem(st, a_val, 128, k, idesc.atype, 0)
            reads.append(a_region)
            i_a = np.zeros(0, dtype=np.int64)
        else:
            a, i_a = _read_smem(c, a_val, idesc.m // 2, k, idesc.atype, idesc.a_mn_major, reader,
                                f"A (CTA rank {c.cluster.rank})", vec > 1)
        if vec:
            sfa, region_a = ts.read_scales(st, scales[0], 128, vec, idesc.sfa_id, idesc.scale_type,
                                           f"A (CTA rank {c.cluster.rank})")
            sfb, region_b = ts.read_scales(st, scales[1], idesc.n, vec, idesc.sfb_id, idesc.scale_type,
                                           f"B (CTA rank {c.cluster.rank})")
            a, bt = ts.apply(a, sfa), ts.apply(b_full, sfb)
            reads += [region_a, region_b]
        tmem_order.check_mma_reads(c, cta, tid, reads, "issues a tcgen05.mma.cta_group::2 reading")
        if idesc.negate_a:
            a = -a
        if idesc.m == 256:
            one, a_eff, b_eff = dataclasses.replace(idesc, m=128), a, bt
        else:
            zero = np.zeros_like(a)
            a_eff = np.block([[a, zero], [zero, a]])
            b_eff = np.concatenate([bt[:half_n], bt[half_n:]], axis=1)
            one = dataclasses.replace(idesc, m=128, n=half_n, k=2 * k)
        records.append(_write_d(c, st, one, tid, d_addr, a_eff, b_eff, accumulate, scale_shift, None, reads,
                                np.concatenate([i_a, i_b]), line))
    tm.link(cta, records)


def _issue(cta: CtaState, st: tm.TmemState, kind: str, tid: int, d_addr: int, a_val: int, b_val: int,
           idesc_val: int, accumulate: bool, a_tmem: bool, scale_shift: int, disabled, scales, line: int) -> None:
    vec = scales[2] if scales else 0
    idesc = _idesc(idesc_val & 0xFFFFFFFF, kind, vec, 1)
    m, n, k = idesc.m, idesc.n, idesc.k
    d_lane = tm.split_address(d_addr)[0]
    reader = np.array([tid], dtype=np.int64)
    reads = []
    if a_tmem:
        a, a_region = _read_a_tmem(st, a_val, m, k, idesc.atype, d_lane)
        reads.append(a_region)
        smem_idx = [np.zeros(0, dtype=np.int64)]
    else:
        a, idx_a = _read_smem(cta, a_val, m, k, idesc.atype, idesc.a_mn_major, reader, "A", vec > 1)
        smem_idx = [idx_a]
    bt, idx_b = _read_smem(cta, b_val, n, k, idesc.btype, idesc.b_mn_major, reader, "B", vec > 1)
    smem_idx.append(idx_b)
    if vec:
        sfa, region_a = ts.read_scales(st, scales[0], m, vec, idesc.sfa_id, idesc.scale_type, "A")
        sfb, region_b = ts.read_scales(st, scales[1], n, vec, idesc.sfb_id, idesc.scale_type, "B")
        a, bt = ts.apply(a, sfa), ts.apply(bt, sfb)
        reads += [region_a, region_b]
    tmem_order.check_mma_reads(cta, cta, tid, reads, "issues a tcgen05.mma reading")
    if idesc.negate_a:
        a = -a
    if idesc.negate_b:
        bt = -bt
    _write_d(cta, st, idesc, tid, d_addr, a, bt, accumulate, scale_shift, disabled, reads,
             np.concatenate(smem_idx), line)


def _write_d(cta: CtaState, st: tm.TmemState, idesc: td.InstrDescriptor, tid: int, d_addr: int, a: np.ndarray,
             bt: np.ndarray, accumulate: bool, scale_shift: int, disabled, reads: list, idx: np.ndarray,
             line: int) -> tm.MmaRecord:
    """Compute D = A x B (+ D) into TMEM and record the MMA as in flight."""
    m, n = idesc.m, idesc.n
    d_lane, d_col = tm.split_address(d_addr)
    if d_lane not in ((0,) if m == 128 else (0, 16)):
        raise Fault("tmem", f"tcgen05.mma D at lane {d_lane}: M = {m} needs D at lane 0"
                    + (" or 16" if m == 64 else ""))
    rows = d_lane + tl.d_lanes(m)
    d_region = tm.Region(int(rows.min()), int(rows.max()) + 1, d_col, d_col + n, _lane_mask(rows))
    tm.check_allocated(st, d_region, "tcgen05.mma D")
    tm.check_not_pending(st.loads, d_region, "tcgen05.mma writes D", "ld")
    tm.check_not_pending(st.stores, d_region, "tcgen05.mma D", "st")
    for rec in st.mmas:          # only a chained MMA into the same D may follow without a wait
        if rec.what == "tcgen05.mma" and rec.d.overlaps(d_region) and rec.d != d_region:
            raise Fault("async-pending", f"tcgen05.mma D {d_region.describe()} overlaps the D of the tcgen05.mma at "
                        f"line {rec.line}, still in flight, with another shape")
    old = st.cells[rows, d_col:d_col + n]
    new = _accumulate(a, bt, old, accumulate, idesc, scale_shift)
    if disabled is not None:
        off = np.array([(disabled[r >> 5] >> (r & 31)) & 1 for r in rows.tolist()], dtype=bool)
        new[off] = old[off]
    st.cells[rows, d_col:d_col + n] = new
    rec = tm.MmaRecord(tid, d_region, reads, idx, line, owner=cta)
    st.mmas.append(rec)
    if len(idx):
        smem = cta.smem
        if smem.async_reads is None:
            smem.async_reads = np.zeros(smem.size, dtype=np.int16)
        smem.async_reads += tm.byte_counts(idx, smem.size)
    return rec


def _lane_mask(rows: np.ndarray) -> int:
    """Bit l set for each TMEM lane l the rows use (cached: a few distinct (lane, M) per kernel)."""
    return _mask_of(tuple(int(r) for r in rows[[0, -1]]), len(rows))


@functools.lru_cache(maxsize=64)
def _mask_of(ends: tuple, m: int) -> int:
    rows = ends[0] - int(tl.d_lanes(m)[0]) + tl.d_lanes(m)
    return sum(1 << int(r) for r in rows)


def _read_smem(cta: CtaState, desc_value: int, mn: int, k: int, typ: str, mn_major: bool,
               reader: np.ndarray, which: str, packed_fp4: bool = False):
    """(mn x k values, byte indices read) of a descriptor operand; packed_fp4: two e2m1 per byte
    (kind::mxf4*), so a row holds k / 2 bytes."""
    desc = td.decode_smem_descriptor(desc_value, which)
    esize = ESIZE[typ]
    width = k // 2 if packed_fp4 else k
    addrs = td.operand_addresses(desc, mn, width, esize, mn_major, which).reshape(-1)
    raw = cta.smem.read(np.repeat(reader, addrs.size), addrs, esize, cta.epoch,
                        f"tcgen05.mma reads {which} from")
    idx = cta.smem.byte_index(addrs, esize)
    check_async_read(cta, idx, f"tcgen05.mma (async proxy) operand {which} reads")
    if packed_fp4:
        return ts.decode_fp4_packed(raw, mn), idx
    if typ in PADDED:          # e2m1 / fp6 in the .b4x16_p64 / .b6x16_p32 forms
        return decode_padded(cta, addrs, reader, typ, which).reshape(mn, k), idx
    return FORMATS[typ](raw).reshape(mn, k), idx


def _read_a_tmem(st: tm.TmemState, addr: int, m: int, k: int, typ: str, d_lane: int):
    """A (M x K) from TMEM: row m in the lane D's row m uses, 4/esize elements per 32-bit column,
    the lower k in the lower bits (UNVERIFIED sub-word order; docs/ptx_facts/tcgen05.md §12c)."""
    lane, col = tm.split_address(addr)
    esize = ESIZE[typ]
    ncols = k * esize // 4
    rows = lane + tl.d_lanes(m)
    region = tm.Region(int(rows.min()), int(rows.max()) + 1, col, col + ncols, _lane_mask(rows))
    tm.check_allocated(st, region, "tcgen05.mma A")
    tm.check_not_mma_target(st, region, "tcgen05.mma reads A from", by_mma=True)
    tm.check_not_pending(st.stores, region, "tcgen05.mma reads A from", "st")
    raw = np.ascontiguousarray(st.cells[rows, col:col + ncols]).view(np.uint8).reshape(m * k, esize)
    return FORMATS[typ](raw).reshape(m, k), region


def _accumulate(a: np.ndarray, bt: np.ndarray, old: np.ndarray, accumulate: bool,
                idesc: td.InstrDescriptor, scale_shift: int) -> np.ndarray:
    """New D cells (M x N uint32)."""
    if idesc.dtype == "s32":
        total = np.einsum("mk,nk->mn", a, bt)
        if accumulate:
            total = total + old.view(np.int32).astype(np.int64)
        if idesc.saturate:
            total = np.clip(total, -(1 << 31), (1 << 31) - 1)
        return total.astype(np.int32).view(np.uint32)
    with np.errstate(invalid="ignore", over="ignore"):
        # einsum's own loop, not BLAS: on a loaded machine a threaded BLAS call on these small
        # matrices can take 50 ms instead of 1 ms (both sum the exact products in float64)
        exact = np.einsum("mk,nk->mn", a, bt)
        if idesc.dtype == "f32":
            res = exact.astype(np.float32)
            if accumulate:
                c = np.ascontiguousarray(old).view(np.float32)
                res = res + (c * np.float32(2.0 ** -scale_shift) if scale_shift else c)
            return np.ascontiguousarray(nx.canonical_nan_f32(res)).view(np.uint32)
        if accumulate:
            exact = exact + nx.f16_bits_to_f64((old & 0xFFFF).astype(np.uint16)) * 2.0 ** -scale_shift
        return nx.f64_to_f16_bits(exact).astype(np.uint32)
