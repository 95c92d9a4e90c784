"""wgmma.mma_async and its fence / commit_group / wait_group, sm_90a
(docs/ptx_facts/wgmma.md §9a–§9c).

A wgmma is executed by a warpgroup (4 consecutive warps, the first a multiple of 4, all 128 lanes):
in the lock-step simulator that is one operation, computed with one numpy matmul per warpgroup.
A comes from registers or a shared-memory descriptor, B from a descriptor (wgmma_layouts.py gives
every element's address). Numerics as mma.sync: the exact products summed in float64, rounded
once to f32 and then added to the f32 accumulator; an f16 accumulator is rounded once from the
exact sum; integers exactly (wrapping, or clamped with .satfinite).

With PTXGEN_SIM_FP8_ACCUM=hopper (read when the PTX is compiled), an e4m3/e5m2 wgmma into f32
models Hopper's *reported* fp8 accumulation precision instead (DeepSeek-V3 technical report,
arXiv 2412.19437, §3.3.2: about 14 bits kept when each k32 product group is added into the
accumulator; not measured here, docs/ptx_facts/wgmma.md §9b′): the group's exact sum plus D is cut
to 14 significant bits towards zero. Unset (or "exact"): the default above.

Ordering: the simulator computes a wgmma when it is issued and writes its accumulators then, but
the wgmma stays "in flight" until a wgmma.wait_group retires its group. What a program could
observe differently on hardware is reported instead (wgmma_hazards.py): touching its registers or
overwriting the shared bytes it reads while it is in flight, and registers it uses accessed since
the last wgmma.fence.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import numerics as nx
from . import wgmma_layouts as wl
from .async_proxy import check_async_read
from .errors import Fault
from .operands import Lit, Vec
from .ops_sm90_misc import require_sm90a
from .ops_warp import participating_warps, read_warp_regs, write_warp_regs
from .parse import Instr
from .state import CtaState
from .wgmma_hazards import InFlight, check_issue, register_pass, state_of, warpgroups_of

#: Opt-in model of Hopper's fp8 wgmma accumulation: "hopper" (FP8_ACCUM_BITS kept per k32 group), or
#: "exact" / unset (the group summed exactly, rounded once to f32 and added).
FP8_ACCUM_ENV = "PTXGEN_SIM_FP8_ACCUM"
FP8_ACCUM_MODELS = ("exact", "hopper")
#: Significant bits the reported model keeps when a k32 group is added into the accumulator.
FP8_ACCUM_BITS = 14
ESIZE = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
CLASS = {"f16": "16bit", "bf16": "16bit", "tf32": "tf32", "e4m3": "8bit", "e5m2": "8bit",
         "s8": "8bit", "u8": "8bit"}
K_OF = {"16bit": 16, "tf32": 8, "8bit": 32}
A_TABLES = {kind: wl.flat_index(wl.a_fragment(kind), K_OF[kind]) for kind in K_OF}


def decode_elements(raw: np.ndarray, typ: str) -> np.ndarray:
    """Little-endian element bytes (..., esize) uint8 -> float64 (int64 for s8/u8), exactly."""
    flat = np.ascontiguousarray(raw)
    if typ == "f16":
        return nx.f16_bits_to_f64(flat.view(np.uint16)[..., 0] if flat.ndim > 1 else flat.view(np.uint16))
    if typ == "bf16":
        return nx.bf16_bits_to_f64(flat.view(np.uint16)[..., 0] if flat.ndim > 1 else flat.view(np.uint16))
    if typ == "tf32":
        bits = flat.view(np.uint32)[..., 0] if flat.ndim > 1 else flat.view(np.uint32)
        return (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    byte = flat[..., 0] if flat.ndim > 1 else flat
    if typ == "e4m3":
        return byte.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    if typ == "e5m2":
        return byte.view(ml_dtypes.float8_e5m2).astype(np.float64)
    return byte.view(np.int8 if typ == "s8" else np.uint8).astype(np.int64)


def _types(ins: Instr, ctx):
    """(shape n, k, dtype, atype, btype, satfinite) with the ISA's legal combinations checked."""
    mods = list(ins.mods)
    satfinite = "satfinite" in mods
    if satfinite:
        mods.remove("satfinite")
    text = "wgmma." + ".".join(ins.mods)
    if len(mods) != 7 or mods[:3] != ["mma_async", "sync", "aligned"]:
        raise ctx.fail(f"{text} is not supported (wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype)")
    shape, dtype, atype, btype = mods[3:]
    cls = CLASS.get(atype)
    ok = cls is not None and CLASS.get(btype) == cls
    if cls == "16bit":
        ok = ok and atype == btype and dtype in (("f16", "f32") if atype == "f16" else ("f32",))
    elif cls == "tf32":
        ok = ok and dtype == "f32"
    elif cls == "8bit":
        ints = atype in ("s8", "u8")
        ok = ok and ints == (btype in ("s8", "u8")) and dtype in (("s32",) if ints else ("f16", "f32"))
    if not ok or (satfinite and dtype != "s32"):
        raise ctx.fail(f"{text}: .{dtype}.{atype}.{btype} is not a wgmma type combination the simulator "
                       "supports (f16/bf16 -> f16/f32 k16, tf32 -> f32 k8, e4m3/e5m2 -> f16/f32 k32, "
                       "s8/u8 -> s32 k32; .b1 is not simulated)")
    n = _shape_n(shape, K_OF[cls], ctx, text, integer=dtype == "s32")
    return n, K_OF[cls], dtype, atype, btype, satfinite


INTEGER_N = (8, 16, 24) + tuple(range(32, 257, 16))   # PTX ISA 9.7.15.2 matrix shapes, s8/u8 rows


def _shape_n(shape: str, k: int, ctx, text: str, integer: bool) -> int:
    """N of m64nNkK: a multiple of 8 up to 256, and for s8/u8 only 8, 16, 24 and multiples of 16
    (the ISA's shape table; ptxas rejects e.g. m64n40k32.s32)."""
    prefix, tail = "m64n", f"k{k}"
    body = shape[len(prefix):-len(tail)] if shape.startswith(prefix) and shape.endswith(tail) else ""
    if not body.isdigit() or not 8 <= int(body) <= 256 or int(body) % 8:
        raise ctx.fail(f"{text}: shape .{shape} is not m64nNk{k} with N = 8, 16, ..., 256")
    if integer and int(body) not in INTEGER_N:
        raise ctx.fail(f"{text}: shape .{shape} is not an integer wgmma shape; for s8/u8 N is 8, 16, 24 "
                       "or a multiple of 16 up to 256")
    return int(body)


def _imm(op, allowed: tuple, what: str, ctx) -> int:
    if not isinstance(op, Lit) or op.kind != "int" or op.value not in allowed:
        raise ctx.fail(f"{what} must be an immediate in {allowed}")
    return int(op.value)


def compile_wgmma(ins: Instr, ctx):
    require_sm90a(ctx, "wgmma")
    head = ins.mods[0] if ins.mods else ""
    if head in ("fence", "commit_group", "wait_group"):
        return _compile_sync(ins, ctx, head)
    if head != "mma_async":
        raise ctx.fail(f"wgmma.{'.'.join(ins.mods)} is not supported (mma_async, fence, commit_group, wait_group)")
    n, k, dtype, atype, btype, satfinite = _types(ins, ctx)
    cls = CLASS[atype]
    ops = list(ins.operands)
    a_regs = len(ops) > 1 and isinstance(ops[1], Vec)
    sixteen = cls == "16bit"
    ints = dtype == "s32"
    # operands after d, a, b-desc: scale-d, [imm-scale-a, imm-scale-b], [imm-trans-a], [imm-trans-b]
    want = 4 + (0 if ints else 2) + (int(sixteen and not a_regs) + int(sixteen))
    if len(ops) != want:
        raise ctx.fail(f"wgmma.mma_async with these types takes {want} operands "
                       "(d, a-desc|{a}, b-desc, scale-d" + ("" if ints else ", imm-scale-a, imm-scale-b")
                       + (", imm-trans-a" if sixteen and not a_regs else "")
                       + (", imm-trans-b" if sixteen else "") + f"), got {len(ops)}")
    nd = n // 2 if dtype in ("f32", "s32") else n // 4
    d_slots = [ctx.dst(r, "b32")[0] for r in ctx.vec(ops[0], nd, "wgmma D")]
    a_slots: list[int] = []
    if a_regs:
        a_slots = [ctx.reg(r, "wgmma A")[0] for r in ctx.vec(ops[1], 4, "wgmma A")]
        a_get = [ctx.src(r, "b32") for r in ops[1].items]
    else:
        a_desc = ctx.src(ops[1], "b64")
    b_desc = ctx.src(ops[2], "b64")
    scale_d = ops[3]
    if isinstance(scale_d, Lit):
        fixed = _imm(scale_d, (0, 1), "scale-d", ctx)
        get_scale = lambda R: np.array([fixed], dtype=bool)   # noqa: E731
    else:
        get_scale = ctx.src(scale_d, "pred")
    neg_a = neg_b = False
    if not ints:
        neg_a = _imm(ops[4], (1, -1), "imm-scale-a", ctx) == -1
        neg_b = _imm(ops[5], (1, -1), "imm-scale-b", ctx) == -1
    trans_a = _imm(ops[6], (0, 1), "imm-trans-a", ctx) == 1 if sixteen and not a_regs else False
    trans_b = _imm(ops[-1], (0, 1), "imm-trans-b", ctx) == 1 if sixteen else False
    names = {slot: getattr(op, "name", "?") for slot, op in zip(d_slots, ops[0].items)}
    if a_regs:
        names.update({slot: getattr(op, "name", "?") for slot, op in zip(a_slots, ops[1].items)})
    register_pass(ctx, set(d_slots) | set(a_slots))
    d_table = wl.flat_index(wl.d_fragment(n), n)
    line, shape = ctx.line, f"m64n{n}k{k}.{dtype}.{atype}.{btype}"
    esize_a, esize_b = ESIZE[atype], ESIZE[btype]
    reduced = dtype == "f32" and cls == "8bit" and not ints and fp8_accum_model(ctx) == "hopper"

    def run(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        groups = warpgroups_of(cta, warps, "wgmma.mma_async")
        if len(groups) == 0:
            return
        st = state_of(cta)
        check_issue(st, groups, tuple(d_slots), tuple(a_slots), shape, names)
        scale = _uniform(get_scale(cta.R), cta, groups, "scale-d")
        bdesc = _uniform(b_desc(cta.R), cta, groups, "b-desc")
        adesc = None if a_regs else _uniform(a_desc(cta.R), cta, groups, "a-desc")
        a_bits = read_warp_regs(cta, a_get, warps).reshape(len(groups), 128, 4) if a_regs else None
        d_bits = read_warp_regs(cta, [lambda R, s=s: R[s] for s in d_slots], warps).reshape(len(groups), 128, nd)
        out = []
        for gi, wg in enumerate(groups):
            reader = np.array([wg * 128], dtype=np.int64)
            if a_regs:
                vals = decode_elements(np.ascontiguousarray(a_bits[gi]).view(np.uint8).reshape(-1, esize_a), atype)
                a = np.empty(64 * k, dtype=vals.dtype)
                a[A_TABLES[cls]] = vals
                a = a.reshape(64, k)
                a_idx = np.zeros(0, dtype=np.int64)
            else:
                a, a_idx = _read_tile(cta, int(adesc[gi]), 64, k, esize_a, atype, trans_a, reader, "A")
            bt, b_idx = _read_tile(cta, int(bdesc[gi]), n, k, esize_b, btype, trans_b, reader, "B")
            if neg_a:
                a = -a
            if neg_b:
                bt = -bt
            d = (_accumulate_fp8_hopper(a, bt.T, d_bits[gi], bool(scale[gi]), d_table) if reduced else
                 _accumulate(a, bt.T, d_bits[gi], bool(scale[gi]), dtype, d_table, satfinite))
            out.append(d)
            st.inflight.append(InFlight(wg, int(st.commits[wg]), frozenset(d_slots), frozenset(a_slots),
                                        shape, np.concatenate([a_idx, b_idx]), line, names))
            _mark_reads(cta, st.inflight[-1].smem)
        regs = np.stack(out).reshape(len(groups) * 4, 32, nd)
        for j, slot in enumerate(d_slots):
            write_warp_regs(cta, slot, warps, regs[:, :, j])
    return run


def _uniform(values: np.ndarray, cta: CtaState, groups: np.ndarray, what: str) -> np.ndarray:
    """One value per warpgroup; the ISA requires the operand to be the same in all 128 threads."""
    full = np.broadcast_to(values, (cta.n,))[: (cta.nwarps // 4) * 128].reshape(-1, 128)[groups]
    bad = (full != full[:, :1]).any(axis=1)
    if bad.any():
        raise Fault("divergence", f"wgmma {what} differs between the threads of warpgroup "
                    f"{int(groups[np.flatnonzero(bad)[0]])}; it must be warpgroup-uniform")
    return full[:, 0]


def _read_tile(cta: CtaState, desc_value: int, mn: int, k: int, esize: int, typ: str, mn_major: bool,
               reader: np.ndarray, which: str):
    """(mn x k values, byte indices read) of a descriptor operand."""
    desc = wl.decode_descriptor(desc_value)
    if desc.base_offset:
        raise Fault("unsupported", f"wgmma {which} descriptor has base offset {desc.base_offset}; the simulator "
                    "models base offset 0 only (align swizzled tiles to the pattern: 1024 B for 128B)")
    addrs = wl.operand_addresses(desc, mn, k, esize, mn_major).reshape(-1)
    raw = cta.smem.read(np.repeat(reader, addrs.size), addrs, esize, cta.epoch, f"wgmma reads {which} from")
    idx = cta.smem.byte_index(addrs, esize)
    check_async_read(cta, idx, f"wgmma (async proxy) operand {which} reads")
    return decode_elements(raw, typ).reshape(mn, k), idx


def _mark_reads(cta: CtaState, idx: np.ndarray) -> None:
    smem = cta.smem
    if smem.async_reads is None:
        smem.async_reads = np.zeros(smem.size, dtype=np.int16)
    np.add.at(smem.async_reads, idx, 1)


def _accumulate(a, b, d_bits, scale_d: bool, dtype: str, d_table, satfinite: bool) -> np.ndarray:
    """New accumulator registers (128, nd) uint32 of one warpgroup."""
    if dtype == "s32":
        c = d_bits.view(np.int32).astype(np.int64).reshape(-1)
        total = (a @ b).reshape(-1)[d_table] + (c if scale_d else 0)
        if satfinite:
            total = np.clip(total, -(1 << 31), (1 << 31) - 1)
        return total.astype(np.int32).view(np.uint32).reshape(128, -1)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = (a @ b).reshape(-1)[d_table]
        if dtype == "f32":
            prod = exact.astype(np.float32)
            c = np.ascontiguousarray(d_bits).view(np.float32).reshape(-1)
            res = nx.canonical_nan_f32(prod + c if scale_d else prod)
            return np.ascontiguousarray(res).view(np.uint32).reshape(128, -1)
        c = nx.f16_bits_to_f64(np.ascontiguousarray(d_bits).view(np.uint16).reshape(-1))
        res = nx.f64_to_f16_bits(exact + c if scale_d else exact)
        return np.ascontiguousarray(res).view(np.uint32).reshape(128, -1)


def fp8_accum_model(ctx) -> str:
    """The fp8 accumulation model PTXGEN_SIM_FP8_ACCUM names ("exact" when unset)."""
    import os

    model = os.environ.get(FP8_ACCUM_ENV, "").strip().lower() or "exact"
    if model not in FP8_ACCUM_MODELS:
        raise ctx.fail(f"{FP8_ACCUM_ENV}={model!r} is not an fp8 accumulation model: use one of "
                       f"{', '.join(FP8_ACCUM_MODELS)} (or leave it unset for exact)")
    return model


def truncate_significand(x: np.ndarray, bits: int) -> np.ndarray:
    """float64 values cut towards zero to `bits` significant bits (inf and NaN unchanged)."""
    with np.errstate(invalid="ignore"):
        m, e = np.frexp(x)                          # x = m * 2^e, 0.5 <= |m| < 1
        return np.where(np.isfinite(x), np.ldexp(np.trunc(m * 2.0 ** bits) / 2.0 ** bits, e), x)


def _accumulate_fp8_hopper(a, b, d_bits, scale_d: bool, d_table) -> np.ndarray:
    """An fp8 wgmma into f32 under the reported Hopper model: D + the k32 group's exact sum, kept to
    FP8_ACCUM_BITS significant bits (towards zero), then stored as f32 (exactly: 14 < 24 bits)."""
    with np.errstate(invalid="ignore", over="ignore"):
        exact = (a @ b).reshape(-1)[d_table]
        c = np.ascontiguousarray(d_bits).view(np.float32).reshape(-1).astype(np.float64)
        total = truncate_significand(exact + c if scale_d else exact, FP8_ACCUM_BITS).astype(np.float32)
        return np.ascontiguousarray(nx.canonical_nan_f32(total)).view(np.uint32).reshape(128, -1)


def _compile_sync(ins: Instr, ctx, head: str):
    if tuple(ins.mods[1:]) != ("sync", "aligned"):
        raise ctx.fail(f"wgmma.{'.'.join(ins.mods)}: write wgmma.{head}.sync.aligned")
    from .wgmma_hazards import commit, fence, wait
    if head == "wait_group":
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Lit) or ins.operands[0].kind != "int" \
                or ins.operands[0].value < 0:
            raise ctx.fail("wgmma.wait_group takes one immediate N >= 0")
        keep, line = int(ins.operands[0].value), ctx.line
        return lambda cta, mask: wait(cta, mask, keep, line)
    if ins.operands:
        raise ctx.fail(f"wgmma.{head} takes no operands")
    return fence if head == "fence" else commit


OPS = {"wgmma": compile_wgmma}
