"""wmma.load / wmma.mma / wmma.store, shape m16n16k16, f16 or bf16 inputs
(docs/ptx_facts/mma_sync.md §3).

PTX leaves the element-to-lane mapping of wmma fragments unspecified; only what wmma.store writes
(and uniform element-wise arithmetic on fragments) is observable. The simulator therefore uses its
own bijection (layouts.wmma_*): the m16n8k16 layouts for n = 0-7 and n = 8-15. f16 A and B
fragments have 8 registers per lane, i.e. every element twice: registers 4-7 repeat 0-3, load fills
both copies and mma reads the first. bf16 A and B have 4 registers, f32 C/D 8, f16 C/D 4. The
.row/.col qualifiers of wmma.mma describe how the fragments were loaded and do not change the math.

Memory: the matrix is stored row- or column-major, `stride` elements (default 16) between the starts
of consecutive rows (.row) or columns (.col); all lanes of a warp must pass the same address and
stride. Alignment (docs/ptx_facts/mma_sync.md §3, the PTX "Matrix Storage for WMMA" rule): every
row/column start must be 32-byte aligned, i.e. p % 32 == 0 and stride * element size % 32 == 0; a
stride below 16 (undefined in PTX) is also reported as "misaligned".

Bank model for shared wmma.load/store (documented nowhere; a model): the 16 stored lines (rows for
.row, columns for .col) are cut into 16-byte pieces, taken in (line, piece) order, 8 pieces per
phase (128 bytes, as for a quarter warp of 16-byte accesses), each phase costing the wavefronts of
docs/ptx_facts/shared_memory.md §7. A dense f16 tile costs 4 (f32: 8); a line pitch that is a
multiple of 128 bytes puts the 4 lines of a phase on the same banks (4-way).

Numerics as mma.sync (ops_warp): the f32 product is exact, rounded once, then C is added in f32;
an f16 result is rounded once from the exact sum.
"""
from __future__ import annotations

import numpy as np

from . import layouts
from . import numerics as nx
from .errors import Fault
from .cluster import own_offsets, window_base
from .memory import SHARED_GENERIC_BASE, bank_wavefronts
from .ops_mem import address_getter, global_write
from .ops_warp import decode_inputs, read_warp_regs, write_warp_regs, participating_warps
from .parse import Instr
from .state import CtaState

FM = layouts.fragment_map
MAP_A = FM(layouts.wmma_a(), 16, 16)
MAP_B = FM(layouts.wmma_b(), 16, 16)
MAP_C = {"f32": FM(layouts.wmma_c_f32(), 16, 16), "f16": FM(layouts.wmma_c_f16(), 16, 16)}
ESIZE = {"f16": 2, "bf16": 2, "f32": 4}
ELEM = {2: np.uint16, 4: np.uint32}


def _regs(matrix: str, typ: str) -> int:
    if matrix in ("a", "b"):
        return 8 if typ == "f16" else 4
    return 8 if typ == "f32" else 4


def _parse(ins: Instr, ctx):
    """(kind, matrix, layouts, space, types) with sync/aligned/shape checked, any qualifier order."""
    mods = list(ins.mods)
    kind = mods.pop(0) if mods else ""
    matrix = ""
    if kind in ("load", "store"):
        matrix = mods.pop(0) if mods else ""
        if matrix not in (("a", "b", "c") if kind == "load" else ("d",)):
            raise ctx.fail(f"wmma.{kind}.{matrix} is not valid")
    elif kind != "mma":
        raise ctx.fail(f"wmma.{kind} is not supported (load, mma, store)")
    for need in ("sync", "aligned", "m16n16k16"):
        if need not in mods:
            raise ctx.fail(f"wmma.{kind} needs .{need}" + (" (only m16n16k16 is simulated)"
                                                         if need == "m16n16k16" else ""))
        mods.remove(need)
    lays = [m for m in mods if m in ("row", "col")]
    spaces = [m for m in mods if m in ("global", "shared", "shared::cta")]
    types = [m for m in mods if m not in lays and m not in spaces]
    if len(spaces) > 1 or (kind == "mma" and spaces) or len(lays) != (2 if kind == "mma" else 1):
        raise ctx.fail(f"wmma.{'.'.join(ins.mods)}: bad layout or state-space qualifiers")
    if not types or mods[-len(types):] != types:
        raise ctx.fail(f"wmma.{'.'.join(ins.mods)}: the types must come last")
    space = spaces[0].split("::")[0] if spaces else "generic"
    return kind, matrix, lays, space, types


def compile_wmma(ins: Instr, ctx):
    kind, matrix, lays, space, types = _parse(ins, ctx)
    if kind == "mma":
        return _compile_mma(ins, ctx, lays, types)
    allowed = {"a": ("f16", "bf16"), "b": ("f16", "bf16"), "c": ("f16", "f32"), "d": ("f16", "f32")}
    if len(types) != 1 or types[0] not in allowed[matrix]:
        raise ctx.fail(f"wmma.{kind}.{matrix} type must be one of {', '.join(allowed[matrix])}")
    typ = types[0]
    nregs = _regs(matrix, typ)
    ops = ins.operands
    if len(ops) not in (2, 3):
        raise ctx.fail(f"wmma.{kind} takes {'{regs}, [p]' if kind == 'load' else '[p], {regs}'}{{, stride}}")
    regs_op, mem_op = (ops[0], ops[1]) if kind == "load" else (ops[1], ops[0])
    items = ctx.vec(regs_op, nregs, f"wmma.{kind} fragment")
    get_addr = address_getter(ctx, ctx.mem(mem_op), space)
    get_stride = ctx.src(ops[2], "u32") if len(ops) == 3 else (lambda R: np.array([16], dtype=np.uint32))
    esize = ESIZE[typ]
    fmap = MAP_A if matrix == "a" else (MAP_B if matrix == "b" else MAP_C[typ])
    col = lays[0] == "col"
    line = ctx.line
    what = f"wmma.{kind}.{matrix}"
    if kind == "load":
        slots = [ctx.dst(r, "b32")[0] for r in items]

        def run_load(cta: CtaState, mask):
            warps = participating_warps(cta, mask)
            ids, lines_at, where = _line_addresses(cta, warps, get_addr, get_stride, esize, space, what)
            data = _access(cta, ids, lines_at, where, 16 * esize, None, line, what + " reads")
            mat = data.view(ELEM[esize]).reshape(len(ids), 16, 16)
            mat = mat.transpose(0, 2, 1) if col else mat
            frag = np.ascontiguousarray(mat.reshape(len(ids), 256)[:, fmap.to_fragment])
            regs = frag.reshape(len(ids), 32, fmap.nregs * fmap.per_reg).view(np.uint32) if esize == 2 else \
                frag.reshape(len(ids), 32, fmap.nregs)
            for r, slot in enumerate(slots):
                write_warp_regs(cta, slot, warps, np.ascontiguousarray(regs[:, :, r % fmap.nregs]))
        return run_load
    getters = [ctx.src(r, "b32") for r in items]

    def run_store(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        ids, lines_at, where = _line_addresses(cta, warps, get_addr, get_stride, esize, space, what)
        bits = read_warp_regs(cta, getters, warps)                   # (w, 32, nregs) uint32
        flat = np.ascontiguousarray(bits).view(ELEM[esize]).reshape(len(ids), -1)
        mat = flat[:, fmap.to_matrix].reshape(len(ids), 16, 16)
        mat = mat.transpose(0, 2, 1) if col else mat
        data = np.ascontiguousarray(mat).view(np.uint8).reshape(len(ids) * 16, 16 * esize)
        _access(cta, ids, lines_at, where, 16 * esize, data, line, what + " writes")
    return run_store


def _line_addresses(cta: CtaState, warps, get_addr, get_stride, esize: int, space: str, what: str):
    """(warp ids, (w, 16) line start addresses, per-warp True if in shared memory)."""
    ids = np.arange(cta.nwarps) if warps is None else warps
    p = np.broadcast_to(get_addr(cta.R), (cta.n,)).reshape(cta.nwarps, 32)[ids]
    stride = np.broadcast_to(get_stride(cta.R), (cta.n,)).reshape(cta.nwarps, 32)[ids].astype(np.int64)
    for name, v in (("addresses", p), ("strides", stride)):
        differs = (v != v[:, :1]).any(axis=1)
        if differs.any():
            w = int(ids[np.flatnonzero(differs)[0]])
            raise Fault("divergence", f"lanes of warp {w} pass different {name} to {what}; "
                        "PTX requires the same value in every lane")
    p, stride = p[:, 0], stride[:, 0]
    if (stride < 16).any():
        raise Fault("misaligned", f"{what} stride {int(stride[stride < 16][0])} is below the default 16 "
                    "(undefined in PTX)")
    bad = (p % 32 != 0) | ((stride * esize) % 32 != 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise Fault("misaligned", f"{what} at {int(p[k]):#x} with stride {int(stride[k])} ({esize}-byte "
                    "elements): every row/column start must be 32-byte aligned")
    if space == "shared":
        in_shared = np.ones(len(ids), dtype=bool)
        p = own_offsets(cta, p, what)
    elif space == "global":
        in_shared = np.zeros(len(ids), dtype=bool)
    else:
        base = SHARED_GENERIC_BASE + window_base(cta)
        in_shared = (p >= base) & (p < base + cta.smem.size)
        p = np.where(in_shared, p - base, p)
    lines_at = p[:, None] + np.arange(16) * stride[:, None] * esize
    return ids, lines_at, in_shared


def _access(cta: CtaState, ids, lines_at, in_shared, width: int, data, line: int, what: str):
    """Read (data None) or write the 16 lines of every warp; line i is accessed by lane i."""
    tids = (ids[:, None] * 32 + np.arange(16)).reshape(-1)
    addrs = lines_at.reshape(-1)
    sh = np.repeat(in_shared, 16)
    out = np.empty((len(addrs), width), dtype=np.uint8) if data is None else None
    if sh.any():
        t, a = tids[sh], addrs[sh]
        if data is None:
            out[sh] = cta.smem.read(t, a, width, cta.epoch, what)
        else:
            cta.smem.write(t, a, data[sh], cta.epoch, what)
        pieces = width // 16
        k = np.arange(16 * pieces)
        piece_addr = (lines_at[in_shared][:, :, None] + 16 * np.arange(pieces)).reshape(-1)
        warp_idx = np.repeat(np.arange(int(in_shared.sum())), 16 * pieces)
        vwarp = warp_idx * (16 * pieces // 32) + np.tile(k // 32, int(in_shared.sum()))
        cta.add_smem_stat(line, *bank_wavefronts(vwarp, np.tile(k % 32, int(in_shared.sum())),
                                                 piece_addr, 16, 8))
    if (~sh).any():
        t, a = tids[~sh], addrs[~sh]
        if data is None:
            out[~sh] = cta.gmem.read(a, width, cta.sync, what, t)
        else:
            global_write(cta, t, a, data[~sh], what)
    return out


def _compile_mma(ins: Instr, ctx, lays, types):
    if types in (["f32", "f32"], ["f32", "f16"], ["f16", "f32"], ["f16", "f16"]):
        dtype, ctype, atype = types[0], types[1], "f16"
    elif types == ["f32", "bf16", "bf16", "f32"]:
        dtype, ctype, atype = "f32", "f32", "bf16"
    else:
        raise ctx.fail(f"wmma.mma types .{'.'.join(types)} are not supported (f16: .dtype.ctype with "
                       "each f16 or f32; bf16: .f32.bf16.bf16.f32)")
    if len(ins.operands) != 4:
        raise ctx.fail("wmma.mma takes {d}, {a}, {b}, {c}")
    d_op, a_op, b_op, c_op = ins.operands
    nab = _regs("a", atype)
    dmap, cmap = MAP_C[dtype], MAP_C[ctype]
    d_slots = [ctx.dst(r, "b32")[0] for r in ctx.vec(d_op, _regs("d", dtype), "wmma.mma D")]
    a_get = [ctx.src(r, "b32") for r in ctx.vec(a_op, nab, "wmma.mma A")][:4]   # first copy
    b_get = [ctx.src(r, "b32") for r in ctx.vec(b_op, nab, "wmma.mma B")][:4]
    c_get = [ctx.src(r, "b32") for r in ctx.vec(c_op, _regs("c", ctype), "wmma.mma C")]

    def run(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        if warps is not None and len(warps) == 0:
            return
        a_bits = read_warp_regs(cta, a_get, warps)
        w = a_bits.shape[0]
        a = decode_inputs(a_bits, atype, 2)[:, MAP_A.to_matrix].reshape(w, 16, 16)
        b = decode_inputs(read_warp_regs(cta, b_get, warps), atype, 2)[:, MAP_B.to_matrix].reshape(w, 16, 16)
        c_bits = np.ascontiguousarray(read_warp_regs(cta, c_get, warps))
        if ctype == "f32":
            c = c_bits.view(np.float32).reshape(w, -1)[:, cmap.to_matrix].astype(np.float64)
        else:
            c = nx.f16_bits_to_f64(c_bits.view(np.uint16).reshape(w, -1))[:, cmap.to_matrix]
        with np.errstate(invalid="ignore", over="ignore"):
            prod = np.matmul(a, b).reshape(w, -1)
            if dtype == "f32":
                out = nx.canonical_nan_f32(prod.astype(np.float32) + c.astype(np.float32)).view(np.uint32)
            else:
                out = nx.f64_to_f16_bits(prod + c)
        frag = np.ascontiguousarray(out[:, dmap.to_fragment])
        regs = frag.view(np.uint32).reshape(w, 32, dmap.nregs)
        for r, slot in enumerate(d_slots):
            write_warp_regs(cta, slot, warps, np.ascontiguousarray(regs[:, :, r]))
    return run


OPS = {"wmma": compile_wmma}
