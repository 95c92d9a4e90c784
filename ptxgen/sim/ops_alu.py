"""Integer and logic instructions, setp/selp, mov and cvta.

Arithmetic is done in the numpy dtype of the instruction type, whose fixed width gives PTX's
two's-complement wraparound for free. Type lists follow the PTX ISA so that text ptxas would
reject is rejected here too.
"""
from __future__ import annotations

import numpy as np

from . import ops_float, ops_math
from .memory import PARAM_BASE, SHARED_GENERIC_BASE
from .operands import Name, PredPair, Vec
from .parse import Instr
from .ptxtypes import SIGNED, STORAGE_DTYPE, TYPE_BITS, UNSIGNED, BITS, VIEW_DTYPE, storage_dtype
from .state import store

ARITH_INT = {t for t in SIGNED | UNSIGNED if TYPE_BITS[t] >= 16}
LOGIC_TYPES = {"pred", "b16", "b32", "b64"}
FLOAT_TYPES = {"f32", "f64", "f16", "f16x2", "bf16", "bf16x2"}


def _type_and_mods(ins: Instr, ctx, allowed_mods: set[str], allowed_types: set[str]):
    if not ins.mods:
        raise ctx.fail(f"{ins.opcode} needs a type")
    typ, mods = ins.mods[-1], ins.mods[:-1]
    if typ not in allowed_types:
        raise ctx.fail(f"{ins.opcode}.{typ}: type .{typ} is not valid for {ins.opcode} "
                       f"(valid: {', '.join(sorted(allowed_types))})")
    bad = [m for m in mods if m not in allowed_mods]
    if bad:
        raise ctx.fail(f"{ins.opcode}: modifier .{bad[0]} is not supported")
    return typ, set(mods)


def _operands(ins: Instr, ctx, count: int):
    if len(ins.operands) != count:
        raise ctx.fail(f"{ins.opcode} takes {count} operands, got {len(ins.operands)}")
    return ins.operands


def _simple(ins, ctx, typ, func, nsrc: int):
    """Executor for d = func(a[, b[, c]]) with every operand of type `typ`."""
    ops = _operands(ins, ctx, nsrc + 1)
    slot, _ = ctx.dst(ops[0], typ)
    storage = storage_dtype(typ)
    getters = [ctx.src(o, typ) for o in ops[1:]]
    if nsrc == 1:
        ga, = getters
        return lambda cta, mask: store(cta, slot, func(ga(cta.R)).view(storage), mask)
    if nsrc == 2:
        ga, gb = getters
        return lambda cta, mask: store(cta, slot, func(ga(cta.R), gb(cta.R)).view(storage), mask)
    ga, gb, gc = getters
    return lambda cta, mask: store(cta, slot, func(ga(cta.R), gb(cta.R), gc(cta.R)).view(storage), mask)


# ------------------------------------------------------------------ helpers for wide products
def mulhi_u64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit product of two uint64 arrays (32-bit limb schoolbook)."""
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a_lo, a_hi = a & m32, a >> s32
    b_lo, b_hi = b & m32, b >> s32
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> s32) + (hi_lo & m32) + lo_hi
    return hi_hi + (hi_lo >> s32) + (cross >> s32)


def mulhi_s64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    hi = mulhi_u64(ua, ub)
    hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return hi.view(np.int64)


_WIDER = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}


def _mul_parts(mode: str, typ: str):
    """Function computing the .lo/.hi/.wide product in the result's view dtype."""
    bits = TYPE_BITS[typ]
    if mode == "lo":
        return lambda a, b: a * b
    if mode == "wide":
        if typ not in _WIDER:
            raise ValueError
        wide = VIEW_DTYPE[_WIDER[typ]]
        return lambda a, b: a.astype(wide) * b.astype(wide)
    if bits == 64:
        return mulhi_s64 if typ in SIGNED else mulhi_u64
    wide = VIEW_DTYPE[_WIDER[typ]]
    view = VIEW_DTYPE[typ]
    shift = bits
    return lambda a, b: ((a.astype(wide) * b.astype(wide)) >> shift).astype(view)


# ------------------------------------------------------------------ compilers
def compile_add_sub(ins: Instr, ctx):
    typ = ins.mods[-1] if ins.mods else ""
    if typ in FLOAT_TYPES:
        return ops_float.compile_float(ins, ctx)
    typ, _ = _type_and_mods(ins, ctx, set(), ARITH_INT)
    func = (lambda a, b: a + b) if ins.opcode == "add" else (lambda a, b: a - b)
    return _simple(ins, ctx, typ, func, 2)


def _int_multiply(ins: Instr, ctx, nops: int):
    """Shared decoding of integer mul/mad: (product function, operands, source type, result type)."""
    typ, mods = _type_and_mods(ins, ctx, {"lo", "hi", "wide"}, ARITH_INT)
    if len(mods) != 1:
        raise ctx.fail(f"integer {ins.opcode} needs exactly one of .lo/.hi/.wide")
    mode = mods.pop()
    if mode == "wide" and typ not in _WIDER:
        raise ctx.fail(f"{ins.opcode}.wide is not defined for .{typ}")
    ops = _operands(ins, ctx, nops)
    return _mul_parts(mode, typ), ops, typ, (_WIDER[typ] if mode == "wide" else typ)


def compile_mul(ins: Instr, ctx):
    if (ins.mods[-1] if ins.mods else "") in FLOAT_TYPES:
        return ops_float.compile_float(ins, ctx)
    func, ops, typ, dtyp = _int_multiply(ins, ctx, 3)
    slot, _ = ctx.dst(ops[0], dtyp)
    storage = storage_dtype(dtyp)
    ga, gb = ctx.src(ops[1], typ), ctx.src(ops[2], typ)
    return lambda cta, mask: store(cta, slot, func(ga(cta.R), gb(cta.R)).view(storage), mask)


def compile_mad(ins: Instr, ctx):
    if (ins.mods[-1] if ins.mods else "") in FLOAT_TYPES:
        return ops_float.compile_float(ins, ctx)
    func, ops, typ, dtyp = _int_multiply(ins, ctx, 4)
    slot, _ = ctx.dst(ops[0], dtyp)
    storage = storage_dtype(dtyp)
    ga, gb, gc = ctx.src(ops[1], typ), ctx.src(ops[2], typ), ctx.src(ops[3], dtyp)
    return lambda cta, mask: store(cta, slot, (func(ga(cta.R), gb(cta.R)) + gc(cta.R)).view(storage), mask)


def _divide(typ: str, want_remainder: bool):
    """Integer div/rem truncating toward zero (C semantics). PTX leaves x/0 unspecified; this returns
    all ones for the quotient and the dividend for the remainder, as current GPUs do."""
    bits = TYPE_BITS[typ]
    udt = STORAGE_DTYPE[bits]
    view = VIEW_DTYPE[typ]

    def run(a, b):
        a, b = np.broadcast_arrays(a, b)
        ua, ub = a.view(udt), b.view(udt)
        if typ in SIGNED:
            neg_a, neg_b = a < 0, b < 0
            ua = np.where(neg_a, udt(0) - ua, ua)
            ub = np.where(neg_b, udt(0) - ub, ub)
        zero = ub == 0
        q = ua // np.where(zero, udt(1), ub)
        if typ in SIGNED:
            q = np.where(neg_a ^ neg_b, udt(0) - q, q)
        q = np.where(zero, udt(~udt(0)), q)
        if not want_remainder:
            return q.view(view)
        r = a.view(udt) - q * b.view(udt)
        return np.where(zero, a.view(udt), r).view(view)
    return run


def compile_div_rem(ins: Instr, ctx):
    typ = ins.mods[-1] if ins.mods else ""
    if ins.opcode == "div" and typ in ("f32", "f64"):
        return ops_math.compile_div(ins, ctx)
    if typ in FLOAT_TYPES:
        raise ctx.fail(f"{ins.opcode}.{typ} is not supported")
    typ, _ = _type_and_mods(ins, ctx, set(), ARITH_INT)
    return _simple(ins, ctx, typ, _divide(typ, ins.opcode == "rem"), 2)


def compile_shift(ins: Instr, ctx):
    allowed = {"b16", "b32", "b64"} if ins.opcode == "shl" else {"b16", "b32", "b64"} | ARITH_INT
    typ, _ = _type_and_mods(ins, ctx, set(), allowed)
    bits = TYPE_BITS[typ]
    ops = _operands(ins, ctx, 3)
    slot, _ = ctx.dst(ops[0], typ)
    storage = storage_dtype(typ)
    view = VIEW_DTYPE[typ]
    ga, gb = ctx.src(ops[1], typ), ctx.src(ops[2], "u32")
    limit = np.uint32(bits - 1)
    if ins.opcode == "shl":
        def run(cta, mask):
            a, b = ga(cta.R), gb(cta.R)
            out = np.where(b > limit, view(0), a << np.minimum(b, limit).astype(view))
            store(cta, slot, out.astype(view).view(storage), mask)
    elif typ in SIGNED:
        def run(cta, mask):
            a, b = ga(cta.R), gb(cta.R)
            store(cta, slot, (a >> np.minimum(b, limit).astype(view)).astype(view).view(storage), mask)
    else:
        def run(cta, mask):
            a, b = ga(cta.R), gb(cta.R)
            out = np.where(b > limit, view(0), a >> np.minimum(b, limit).astype(view))
            store(cta, slot, out.astype(view).view(storage), mask)
    return run


def compile_logic(ins: Instr, ctx):
    typ, _ = _type_and_mods(ins, ctx, set(), LOGIC_TYPES)
    if ins.opcode == "not":
        return _simple(ins, ctx, typ, lambda a: ~a, 1)
    func = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.opcode]
    return _simple(ins, ctx, typ, func, 2)


def compile_minmax(ins: Instr, ctx):
    typ = ins.mods[-1] if ins.mods else ""
    if typ in FLOAT_TYPES:
        return ops_float.compile_float(ins, ctx)
    typ, _ = _type_and_mods(ins, ctx, set(), ARITH_INT)
    return _simple(ins, ctx, typ, np.minimum if ins.opcode == "min" else np.maximum, 2)


def compile_neg_abs(ins: Instr, ctx):
    typ = ins.mods[-1] if ins.mods else ""
    if typ in FLOAT_TYPES:
        return ops_float.compile_float(ins, ctx)
    typ, _ = _type_and_mods(ins, ctx, set(), {t for t in SIGNED if TYPE_BITS[t] >= 16})
    return _simple(ins, ctx, typ, (lambda a: -a) if ins.opcode == "neg" else np.abs, 1)


_INT_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}
_UNSIGNED_CMP = {"lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}


def _float_cmp(op: str):
    def ordered(fn):
        return lambda a, b: fn(a, b) & ~np.isnan(a) & ~np.isnan(b)

    def unordered(fn):
        return lambda a, b: fn(a, b) | np.isnan(a) | np.isnan(b)
    table = {"eq": ordered(np.equal), "ne": ordered(np.not_equal), "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal, "equ": unordered(np.equal),
             "neu": unordered(np.not_equal), "ltu": unordered(np.less), "leu": unordered(np.less_equal),
             "gtu": unordered(np.greater), "geu": unordered(np.greater_equal),
             "num": lambda a, b: ~np.isnan(a) & ~np.isnan(b), "nan": lambda a, b: np.isnan(a) | np.isnan(b)}
    return table.get(op)


def compile_setp(ins: Instr, ctx):
    if len(ins.mods) < 2:
        raise ctx.fail("setp needs a comparison and a type")
    cmp_op, typ = ins.mods[0], ins.mods[-1]
    combine = ins.mods[1:-1]
    if typ in ("f32", "f64"):
        fn = _float_cmp(cmp_op)
    elif typ in SIGNED and TYPE_BITS[typ] >= 16:
        fn = _INT_CMP.get(cmp_op)
    elif typ in (UNSIGNED | BITS) and TYPE_BITS[typ] >= 16:
        fn = _INT_CMP.get(cmp_op) or _UNSIGNED_CMP.get(cmp_op)
    else:
        raise ctx.fail(f"setp.{typ} is not supported")
    if fn is None:
        raise ctx.fail(f"comparison .{cmp_op} is not valid for .{typ}")
    if len(combine) > 1 or (combine and combine[0] not in ("and", "or", "xor")):
        raise ctx.fail(f"setp modifier .{'.'.join(combine)} is not supported")
    boolop = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[combine[0]] if combine else None
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise ctx.fail(f"setp takes {4 if boolop else 3} operands here, got {len(ops)}")
    dest = ops[0] if isinstance(ops[0], PredPair) else PredPair(ops[0], None)
    p_slot = ctx.dst(dest.first, "pred")[0] if dest.first is not None else None
    q_slot = ctx.dst(dest.second, "pred")[0] if dest.second is not None else None
    ga, gb = ctx.src(ops[1], typ), ctx.src(ops[2], typ)
    gc = ctx.src(ops[3], "pred") if boolop else None

    def run(cta, mask):
        R = cta.R
        t = fn(ga(R), gb(R))
        if boolop is None:
            p, q = t, ~t
        else:
            c = gc(R)
            p, q = boolop(t, c), boolop(~t, c)
        if p_slot is not None:
            store(cta, p_slot, p, mask)
        if q_slot is not None:
            store(cta, q_slot, q, mask)
    return run


def compile_selp(ins: Instr, ctx):
    allowed = (ARITH_INT | {"b16", "b32", "b64", "f32", "f64"})
    typ, _ = _type_and_mods(ins, ctx, set(), allowed)
    ops = _operands(ins, ctx, 4)
    slot, _ = ctx.dst(ops[0], typ)
    storage = storage_dtype(typ)
    ga, gb, gc = ctx.src(ops[1], typ), ctx.src(ops[2], typ), ctx.src(ops[3], "pred")
    return lambda cta, mask: store(cta, slot, np.where(gc(cta.R), ga(cta.R), gb(cta.R)).view(storage), mask)


def compile_mov(ins: Instr, ctx):
    allowed = {"pred", "b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64", "f32", "f64"}
    typ, _ = _type_and_mods(ins, ctx, set(), allowed)
    ops = _operands(ins, ctx, 2)
    dst, src = ops
    bits = TYPE_BITS[typ]
    if isinstance(dst, Vec) or isinstance(src, Vec):
        return _compile_pack(ins, ctx, typ, dst, src)
    # a tensor map's .param address (docs/ptx_facts/tma.md §9d)
    if isinstance(src, Name) and src.name in ctx.params:
        if bits not in (32, 64):
            raise ctx.fail(f"mov of .param symbol {src.name}'s address needs a 32- or 64-bit type")
        slot, _ = ctx.dst(dst, typ)
        address = np.array([ctx.params[src.name][0]], dtype=STORAGE_DTYPE[bits])
        return lambda cta, mask: store(cta, slot, address, mask)
    slot, _ = ctx.dst(dst, typ)
    storage = STORAGE_DTYPE[bits]
    get = ctx.src(src, typ)
    return lambda cta, mask: store(cta, slot, get(cta.R).view(storage), mask)


def _compile_pack(ins, ctx, typ, dst, src):
    """mov.b32/.b64 between a register and a vector of 2 (or 4) narrower registers, low part first."""
    if typ not in ("b32", "b64"):
        raise ctx.fail("vector mov needs .b32 or .b64")
    bits = TYPE_BITS[typ]
    if isinstance(src, Vec) and not isinstance(dst, Vec):
        n = len(src.items)
        part = {2: bits // 2, 4: bits // 4}.get(n)
        if part is None or part < 8:
            raise ctx.fail("pack needs 2 or 4 parts")
        ptype = f"b{part}"
        getters = [ctx.src(i, ptype) for i in src.items]
        slot, _ = ctx.dst(dst, typ)
        storage = STORAGE_DTYPE[bits]

        def run(cta, mask):
            parts = np.stack([np.broadcast_to(g(cta.R), (cta.n,)) for g in getters], axis=1)
            store(cta, slot, np.ascontiguousarray(parts).view(storage).reshape(cta.n), mask)
        return run
    if isinstance(dst, Vec) and not isinstance(src, Vec):
        n = len(dst.items)
        part = {2: bits // 2, 4: bits // 4}.get(n)
        if part is None or part < 8:
            raise ctx.fail("unpack needs 2 or 4 parts")
        ptype = f"b{part}"
        slots = [None if (isinstance(d, Name) and d.name == "_") else ctx.dst(d, ptype)[0] for d in dst.items]
        get = ctx.src(src, typ)
        pstore = STORAGE_DTYPE[part]

        def run(cta, mask):
            value = np.broadcast_to(get(cta.R), (cta.n,))
            parts = np.ascontiguousarray(value).view(pstore).reshape(cta.n, n)
            for k, s in enumerate(slots):
                if s is not None:
                    store(cta, s, np.ascontiguousarray(parts[:, k]), mask)
        return run
    raise ctx.fail("mov between two vectors is not supported")


def compile_cvta(ins: Instr, ctx):
    mods = list(ins.mods)
    if not mods or mods[-1] not in ("u32", "u64"):
        raise ctx.fail("cvta needs .u32 or .u64")
    typ = mods.pop()
    to = bool(mods) and mods[0] == "to"
    if to:
        mods.pop(0)
    space = mods[0].split("::")[0] if len(mods) == 1 else None
    if space == "param" and typ == "u64":     # .param address <-> generic (memory.PARAM_BASE + offset)
        ops = _operands(ins, ctx, 2)
        pslot, _ = ctx.dst(ops[0], typ)
        pget = ctx.src(ops[1], "u64")
        shift = np.uint64((-PARAM_BASE if to else PARAM_BASE) & 0xFFFFFFFFFFFFFFFF)
        return lambda cta, mask: store(cta, pslot, pget(cta.R) + shift, mask)
    if space not in ("global", "shared") or (len(mods) == 1 and mods[0] not in ("global", "shared", "shared::cta", "shared::cluster")):
        raise ctx.fail(f"cvta.{'.'.join(ins.mods)} is not supported (global and shared only)")
    ops = _operands(ins, ctx, 2)
    slot, _ = ctx.dst(ops[0], typ)
    get = ctx.src(ops[1], "u64", relaxed=False) if not _is_32bit(ops[1], ctx) else None
    get32 = ctx.src(ops[1], "u32") if get is None else None
    storage = storage_dtype(typ)
    offset = 0 if space == "global" else (-SHARED_GENERIC_BASE if to else SHARED_GENERIC_BASE)

    def run(cta, mask):
        a = get(cta.R) if get is not None else get32(cta.R).astype(np.uint64)
        out = a + np.uint64(offset & 0xFFFFFFFFFFFFFFFF)
        store(cta, slot, out.astype(storage), mask)
    return run


def _is_32bit(op, ctx) -> bool:
    return isinstance(op, Name) and op.name in ctx.regs and ctx.regs[op.name][1] == 32


OPS = {
    "add": compile_add_sub, "sub": compile_add_sub, "mul": compile_mul, "mad": compile_mad,
    "div": compile_div_rem, "rem": compile_div_rem,
    "shl": compile_shift, "shr": compile_shift,
    "and": compile_logic, "or": compile_logic, "xor": compile_logic, "not": compile_logic,
    "min": compile_minmax, "max": compile_minmax, "neg": compile_neg_abs, "abs": compile_neg_abs,
    "setp": compile_setp, "selp": compile_selp, "mov": compile_mov, "cvta": compile_cvta,
}
