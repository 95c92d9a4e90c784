"""Warp-collective instructions: ldmatrix and mma.sync, vectorised over all warps of the CTA.

Both are .sync.aligned: every lane of a participating warp must execute them, so a warp with only
some lanes active is a divergence hazard. Fragments move through the index tables of layouts.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import layouts
from . import numerics as nx
from .errors import Fault
from .cluster import own_offsets, window_base
from .memory import SHARED_GENERIC_BASE, bank_wavefronts
from .ops_mem import check_aligned, address_getter
from .parse import Instr
from .state import CtaState


def participating_warps(cta: CtaState, mask) -> np.ndarray | None:
    """Indices of warps that execute a warp-collective instruction; None means all of them."""
    if mask is None:
        return None
    per_warp = mask.reshape(cta.nwarps, 32)
    full = per_warp.all(axis=1)
    some = per_warp.any(axis=1)
    if (some & ~full).any():
        w = int(np.flatnonzero(some & ~full)[0])
        raise Fault("divergence", f"warp {w} executes a .sync.aligned warp instruction with only "
                    f"{int(per_warp[w].sum())} of 32 lanes")
    return np.flatnonzero(full)


def write_warp_regs(cta: CtaState, slot: int, warps, values: np.ndarray) -> None:
    """values: (participating warps, 32) uint32 for one register."""
    if warps is None:
        cta.R[slot] = np.ascontiguousarray(values).reshape(cta.n)
        return
    new = cta.R[slot].copy().reshape(cta.nwarps, 32)
    new[warps] = values
    cta.R[slot] = new.reshape(cta.n)


def read_warp_regs(cta: CtaState, getters, warps) -> np.ndarray:
    """(participating warps, 32, len(getters)) uint32."""
    R = cta.R
    stacked = np.empty((cta.n, len(getters)), dtype=np.uint32)
    for j, get in enumerate(getters):
        stacked[:, j] = get(R)          # broadcasts immediates
    stacked = stacked.reshape(cta.nwarps, 32, len(getters))
    return stacked if warps is None else stacked[warps]


def matrix_row_offsets(cta: CtaState, rows: np.ndarray, space: str, what: str) -> np.ndarray:
    """Shared-memory offsets of the 16-byte matrix rows that ldmatrix/stmatrix lanes supply:
    generic addresses must fall in the shared window, and every row is 16-byte aligned."""
    if space == "generic":
        base = SHARED_GENERIC_BASE + window_base(cta)
        inside = (rows >= base) & (rows < base + cta.smem.size)
        if not inside.all():
            raise Fault("out-of-bounds", f"{what} generic address outside the shared window")
        rows = rows - base
    else:
        rows = own_offsets(cta, rows, what)
    check_aligned(rows, 16, f"{what} row address")
    return rows


# ------------------------------------------------------------------ ldmatrix
LDMATRIX_FLAT = {trans: (t[..., 0] * 8 + t[..., 1]) for trans, t in
                 ((False, layouts.ldmatrix_source(False)), (True, layouts.ldmatrix_source(True)))}


def compile_ldmatrix(ins: Instr, ctx):
    mods = set(ins.mods)
    count = [m for m in ins.mods if m in ("x1", "x2", "x4")]
    space = [m for m in ins.mods if m in ("shared", "shared::cta")]
    allowed = {"sync", "aligned", "m8n8", "x1", "x2", "x4", "trans", "shared", "shared::cta", "b16"}
    if not {"sync", "aligned", "m8n8", "b16"} <= mods or len(count) != 1 or not mods <= allowed:
        raise ctx.fail(f"ldmatrix.{'.'.join(ins.mods)} is not supported "
                       "(ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared}.b16 only)")
    nmat = int(count[0][1])
    trans = "trans" in mods
    space_name = "shared" if space else "generic"
    if len(ins.operands) != 2:
        raise ctx.fail("ldmatrix takes {registers}, [address]")
    slots = [ctx.dst(r, "b32")[0] for r in ctx.vec(ins.operands[0], nmat, "ldmatrix destination")]
    get_addr = address_getter(ctx, ctx.mem(ins.operands[1]), space_name)
    flat = LDMATRIX_FLAT[trans]
    line = ctx.line
    nlanes = 8 * nmat

    def run(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        addr = np.broadcast_to(get_addr(cta.R), (cta.n,)).reshape(cta.nwarps, 32)
        if warps is not None:
            addr = addr[warps]
        warp_ids = np.arange(cta.nwarps) if warps is None else warps
        rows = matrix_row_offsets(cta, addr[:, :nlanes].reshape(-1), space_name, "ldmatrix")
        suppliers = (warp_ids[:, None] * 32 + np.arange(nlanes)).reshape(-1)
        data = cta.smem.read(suppliers, rows, 16, cta.epoch, "ldmatrix reads")
        cta.add_smem_stat(line, *bank_wavefronts(suppliers >> 5, suppliers & 31, rows, 16, 8))
        mats = data.view(np.uint16).reshape(len(warp_ids), nmat, 64)
        for j, slot in enumerate(slots):
            halves = np.ascontiguousarray(mats[:, j][:, flat])  # (warps, 32, 2)
            write_warp_regs(cta, slot, warps, halves.view(np.uint32).reshape(len(warp_ids), 32))
    return run


# ------------------------------------------------------------------ mma
@dataclass(frozen=True)
class MmaShape:
    m: int
    n: int
    k: int
    a: layouts.FragmentMap
    b: layouts.FragmentMap


def _shapes() -> dict[tuple[str, str], MmaShape]:
    fm = layouts.fragment_map
    return {
        ("m16n8k16", "16bit"): MmaShape(16, 8, 16, fm(layouts.a_m16n8k16_16bit(), 16, 16),
                                        fm(layouts.b_m16n8k16_16bit(), 16, 8)),
        ("m16n8k8", "16bit"): MmaShape(16, 8, 8, fm(layouts.a_m16n8k8_16bit(), 16, 8),
                                       fm(layouts.b_m16n8k8_16bit(), 8, 8)),
        ("m16n8k8", "tf32"): MmaShape(16, 8, 8, fm(layouts.a_m16n8k8_tf32(), 16, 8),
                                      fm(layouts.b_m16n8k8_tf32(), 8, 8)),
        ("m16n8k32", "8bit"): MmaShape(16, 8, 32, fm(layouts.a_m16n8k32_8bit(), 16, 32),
                                       fm(layouts.b_m16n8k32_8bit(), 32, 8)),
    }


SHAPES = _shapes()
C_F32 = layouts.fragment_map(layouts.c_m16n8_f32(), 16, 8)
C_F16 = layouts.fragment_map(layouts.c_m16n8_f16(), 16, 8)
_INPUT_CLASS = {"f16": "16bit", "bf16": "16bit", "tf32": "tf32", "s8": "8bit", "u8": "8bit"}


def decode_inputs(bits: np.ndarray, typ: str, per_reg: int) -> np.ndarray:
    """(w, 32, nregs) uint32 -> (w, 32*nregs*per_reg) float64 / int64 values, lane-major."""
    w = bits.shape[0]
    if typ in ("f16", "bf16"):
        halves = np.ascontiguousarray(bits).view(np.uint16).reshape(w, -1)
        return nx.f16_bits_to_f64(halves) if typ == "f16" else nx.bf16_bits_to_f64(halves)
    if typ == "tf32":
        masked = (bits & np.uint32(0xFFFFE000)).view(np.float32)
        return masked.astype(np.float64).reshape(w, -1)
    view = np.int8 if typ == "s8" else np.uint8
    return np.ascontiguousarray(bits).view(view).astype(np.int64).reshape(w, -1)


def compile_mma(ins: Instr, ctx):
    mods = [m for m in ins.mods if m != "satfinite"]
    satfinite = len(mods) != len(ins.mods)
    if len(mods) != 9 or mods[:2] != ["sync", "aligned"] or mods[3:5] != ["row", "col"]:
        raise ctx.fail(f"mma.{'.'.join(ins.mods)} is not supported (mma.sync.aligned.<shape>.row.col.<d>.<a>.<b>.<c>)")
    shape_name = mods[2]
    dtype, atype, btype, ctype = mods[5:9]
    cls = _INPUT_CLASS.get(atype)
    key = (shape_name, cls)
    ok = key in SHAPES and _INPUT_CLASS.get(btype) == cls
    if cls == "16bit":
        ok = ok and atype == btype and (dtype, ctype) in (("f32", "f32"), ("f16", "f16"))
        ok = ok and not (atype == "bf16" and dtype == "f16")
    elif cls == "tf32":
        ok = ok and btype == "tf32" and (dtype, ctype) == ("f32", "f32")
    elif cls == "8bit":
        ok = ok and (dtype, ctype) == ("s32", "s32")
    if not ok or (satfinite and cls != "8bit"):
        raise ctx.fail(f"mma.{'.'.join(ins.mods)} is not a supported shape/type combination")
    shape = SHAPES[key]
    cmap = C_F16 if dtype == "f16" else C_F32
    if len(ins.operands) != 4:
        raise ctx.fail("mma takes {d}, {a}, {b}, {c}")
    d_ops, a_ops, b_ops, c_ops = ins.operands
    d_slots = [ctx.dst(r, "b32")[0] for r in ctx.vec(d_ops, cmap.nregs, "mma D")]
    a_get = [ctx.src(r, "b32") for r in ctx.vec(a_ops, shape.a.nregs, "mma A")]
    b_get = [ctx.src(r, "b32") for r in ctx.vec(b_ops, shape.b.nregs, "mma B")]
    c_get = [ctx.src(r, "b32") for r in ctx.vec(c_ops, cmap.nregs, "mma C")]
    m, n, k = shape.m, shape.n, shape.k

    def run(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        if warps is not None and len(warps) == 0:
            return
        a_bits = read_warp_regs(cta, a_get, warps)
        b_bits = read_warp_regs(cta, b_get, warps)
        c_bits = read_warp_regs(cta, c_get, warps)
        w = a_bits.shape[0]
        a = decode_inputs(a_bits, atype, shape.a.per_reg)[:, shape.a.to_matrix].reshape(w, m, k)
        b = decode_inputs(b_bits, btype, shape.b.per_reg)[:, shape.b.to_matrix].reshape(w, k, n)
        if cls == "8bit":
            c = np.ascontiguousarray(c_bits).view(np.int32).astype(np.int64).reshape(w, -1)[:, cmap.to_matrix]
            total = np.einsum("wik,wkj->wij", a, b).reshape(w, -1) + c
            if satfinite:
                total = np.clip(total, -(1 << 31), (1 << 31) - 1)
            d_bits = total.astype(np.int32).view(np.uint32)
        elif dtype == "f32":
            c = np.ascontiguousarray(c_bits).view(np.float32).reshape(w, -1)[:, cmap.to_matrix]
            with np.errstate(invalid="ignore", over="ignore"):
                prod = np.matmul(a, b).reshape(w, -1).astype(np.float32)
                d_bits = nx.canonical_nan_f32(prod + c).view(np.uint32)
        else:
            c = nx.f16_bits_to_f64(np.ascontiguousarray(c_bits).view(np.uint16).reshape(w, -1))[:, cmap.to_matrix]
            with np.errstate(invalid="ignore", over="ignore"):
                d_bits = nx.f64_to_f16_bits(np.matmul(a, b).reshape(w, -1) + c)
        frag = np.ascontiguousarray(d_bits[:, cmap.to_fragment])
        regs = frag.view(np.uint32).reshape(w, 32, cmap.nregs).transpose(2, 0, 1).copy()
        for r, slot in enumerate(d_slots):
            write_warp_regs(cta, slot, warps, regs[r])
    return run


OPS = {"ldmatrix": compile_ldmatrix, "mma": compile_mma}
