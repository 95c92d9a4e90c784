"""ld / st on .param, .global, .shared, .shared::cluster and generic addresses, weak or synchronising.

.shared::cluster (space "cluster" here) and generic addresses in a peer CTA's window (cluster.py)
reach the shared memory of another CTA of the cluster (distributed shared memory).

Every access is checked for alignment (to its total width), bounds, races and pending cp.async
bytes, and shared accesses are charged bank-conflict wavefronts (memory.bank_wavefronts).
.relaxed/.acquire/.release with a scope and .volatile (= .relaxed.sys) accesses are strong; their
release/acquire effects between CTAs follow sync.py, and the scheduler may switch CTAs after them.
"""
from __future__ import annotations

import numpy as np

from .cluster import CLUSTER_STRIDE, NON_PORTABLE_CLUSTER, own_offsets, remote_read, remote_write, window_base
from .cluster import targets as cluster_targets
from .async_proxy import require
from .errors import Fault
from .memory import SHARED_GENERIC_BASE, bank_wavefronts
from .operands import Mem, Vec
from .parse import Instr
from .program import mark
from .ptxtypes import TYPE_BITS, VIEW_DTYPE, STORAGE_DTYPE, type_bytes, widen
from .state import CtaState, scatter
from .sync import check_scope, group_by_clock

MEM_TYPES = {"b8", "u8", "s8", "b16", "u16", "s16", "b32", "u32", "s32", "f32", "b64", "u64", "s64", "f64"}
CACHE_OPS = {"ca", "cg", "cs", "lu", "cv", "nc", "wb", "wt"}
SEMS = {"weak", "volatile", "relaxed", "acquire", "release"}
SCOPES = {"cta", "cluster", "gpu", "sys"}
SPACE_NAMES = {"cluster": "shared::cluster"}    # the state space the internal name "cluster" stands for


def lanes_per_phase(width: int) -> int:
    """<=32-bit accesses are one 32-lane phase, 64-bit two, 128-bit four
    (docs/ptx_facts/shared_memory.md §7)."""
    return 32 if width <= 4 else (16 if width == 8 else 8)


def address_getter(ctx, mem: Mem, space: str):
    """Function R -> int64 addresses ((n,) or (1,)) for [base+offset] in `space`."""
    offset = mem.offset
    if mem.base is None:
        const = np.array([offset], dtype=np.int64)
        return lambda R: const
    name = mem.base.name
    if name in ctx.regs:
        slot, bits = ctx.regs[name]
        if bits not in (32, 64):
            raise ctx.fail(f"address register {name} must be 32- or 64-bit")
        off = np.int64(offset)
        if bits == 32:
            return lambda R: R[slot].astype(np.int64) + off
        return lambda R: R[slot].view(np.int64) + off
    if name in ctx.symbols:
        if space not in ("shared", "generic", "cluster"):
            raise ctx.fail(f"shared symbol {name} used with a .{space} access")
        get = ctx.shared_symbol(name, "s64", offset + (SHARED_GENERIC_BASE if space == "generic" else 0))
        return lambda R: get(R).astype(np.int64)
    raise ctx.fail(f"address base {name!r} is not a register or shared symbol")


def _parse_ldst(ins: Instr, ctx):
    """(space, vector count, type, sem or None, scope or None) of an ld/st."""
    space, vec, typ, sem, scope, cache = "generic", 1, None, None, None, False
    for m in ins.mods:
        if m in ("global", "shared", "shared::cta", "param", "param::entry"):
            space = m.split("::")[0]
        elif m == "shared::cluster":
            space = "cluster"
            require(ctx, f"{ins.opcode}.shared::cluster", (7, 8), 90)
        elif m in ("v2", "v4"):
            vec = int(m[1])
        elif m in MEM_TYPES and typ is None:
            typ = m
        elif m in SEMS and sem is None:
            sem = m
        elif m in SCOPES and scope is None:
            scope = m
        elif m in CACHE_OPS:
            cache = True
        elif m.startswith("L1::") or (m.startswith("L2::") and m != "L2::cache_hint"):
            continue            # eviction priority / prefetch size: performance hints
        else:
            raise ctx.fail(f"{ins.opcode} modifier .{m} is not supported")
    if typ is None or ins.mods[-1] != typ:
        raise ctx.fail(f"{ins.opcode} needs a memory type as its last modifier")
    if vec > 1 and TYPE_BITS[typ] * vec > 128:
        raise ctx.fail(f"{ins.opcode}.v{vec}.{typ} is wider than 128 bits")
    if sem == "weak":
        sem = None
    if sem == ("release" if ins.opcode == "ld" else "acquire"):
        raise ctx.fail(f"{ins.opcode} cannot be .{sem}")
    if (sem in ("relaxed", "acquire", "release")) != (scope is not None):
        raise ctx.fail(f"{ins.opcode}: .relaxed/.acquire/.release need a scope (.cta/.gpu/.sys) and a "
                       "scope needs one of them")
    if sem is not None and (cache or space == "param"):
        raise ctx.fail(f"{ins.opcode}.{sem} takes no cache operator and no .param space")
    return space, vec, typ, sem, scope


def _vector_items(op, vec: int, ctx, what: str) -> tuple:
    if vec == 1:
        # ptxas takes a one-element brace as the scalar (`ld.global.b32 { %r1 }, [...]`: Triton
        # writes every unvectorised load and store so); two or more need .v2/.v4.
        if isinstance(op, Vec) and len(op.items) == 1:
            return op.items
        if isinstance(op, Vec):
            raise ctx.fail(f"{what} is a vector of {len(op.items)} but the instruction has no .v2/.v4")
        return (op,)
    return ctx.vec(op, vec, what)


def check_aligned(addrs: np.ndarray, align: int, what: str) -> None:
    bad = (addrs % align) != 0
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise Fault("misaligned", f"{what} at address {int(addrs[k]):#x} is not {align}-byte aligned")


def in_peer_window(cta: CtaState, addrs: np.ndarray) -> np.ndarray:
    """Boolean per generic address: another cluster CTA's shared window (mapa's generic form)."""
    lo = SHARED_GENERIC_BASE
    inside = (addrs >= lo) & (addrs < lo + NON_PORTABLE_CLUSTER * CLUSTER_STRIDE)
    return inside & ((addrs - lo) // CLUSTER_STRIDE != (0 if cta.cluster is None else cta.cluster.rank))


def split_generic(cta: CtaState, addrs: np.ndarray) -> np.ndarray:
    """Boolean per address: inside the executing CTA's generic shared window."""
    lo = SHARED_GENERIC_BASE + window_base(cta)
    return (addrs >= lo) & (addrs < lo + cta.smem.size)


def read_memory(cta: CtaState, space: str, tids: np.ndarray, addrs: np.ndarray, width: int,
                line: int, what: str, strong: bool = False) -> np.ndarray:
    """(k, width) bytes for the threads `tids` from shared, global or generic addresses."""
    check_aligned(addrs, width, what)
    if space == "cluster":
        out = np.empty((len(addrs), width), dtype=np.uint8)
        for peer, sel, offs in cluster_targets(cta, addrs, width, what):
            t = tids if sel is None else tids[sel]
            data = (read_memory(cta, "shared", t, addrs if sel is None else addrs[sel], width, line, what)
                    if peer is cta
                    else remote_read(cta, peer, t, offs, width, what))
            if sel is None:
                return data
            out[sel] = data
        return out
    if space == "generic":
        remote = in_peer_window(cta, addrs)
        if remote.any():
            out = np.empty((len(addrs), width), dtype=np.uint8)
            out[remote] = read_memory(cta, "cluster", tids[remote], addrs[remote] - SHARED_GENERIC_BASE,
                                      width, line, what)
            if not remote.all():
                out[~remote] = read_memory(cta, space, tids[~remote], addrs[~remote], width, line, what, strong)
            return out
        in_shared = split_generic(cta, addrs)
        if in_shared.all():
            return read_memory(cta, "shared", tids, addrs - SHARED_GENERIC_BASE, width, line, what)
        if not in_shared.any():
            return read_memory(cta, "global", tids, addrs, width, line, what, strong)
        out = np.empty((len(addrs), width), dtype=np.uint8)
        out[in_shared] = read_memory(cta, "shared", tids[in_shared], addrs[in_shared] - SHARED_GENERIC_BASE,
                                     width, line, what)
        out[~in_shared] = read_memory(cta, "global", tids[~in_shared], addrs[~in_shared], width, line, what,
                                      strong)
        return out
    if space == "shared":
        addrs = own_offsets(cta, addrs, what)
        data = cta.smem.read(tids, addrs, width, cta.epoch, what)
        cta.add_smem_stat(line, *bank_wavefronts(tids >> 5, tids & 31, addrs, width, lanes_per_phase(width)))
        return data
    return cta.gmem.read(addrs, width, cta.sync, what, tids, strong)


def write_memory(cta: CtaState, space: str, tids: np.ndarray, addrs: np.ndarray, data: np.ndarray,
                 line: int, what: str, strong: bool = False) -> None:
    width = data.shape[1]
    check_aligned(addrs, width, what)
    if space == "cluster":
        for peer, sel, offs in cluster_targets(cta, addrs, width, what):
            t, d = (tids, data) if sel is None else (tids[sel], data[sel])
            if peer is cta:
                write_memory(cta, "shared", t, addrs if sel is None else addrs[sel], d, line, what)
            else:
                remote_write(cta, peer, t, offs, d, what)
        return
    if space == "generic":
        remote = in_peer_window(cta, addrs)
        if remote.any():
            write_memory(cta, "cluster", tids[remote], addrs[remote] - SHARED_GENERIC_BASE, data[remote], line,
                         what)
            if not remote.all():
                write_memory(cta, space, tids[~remote], addrs[~remote], data[~remote], line, what, strong)
            return
        in_shared = split_generic(cta, addrs)
        if in_shared.any():
            write_memory(cta, "shared", tids[in_shared], addrs[in_shared] - SHARED_GENERIC_BASE,
                         data[in_shared], line, what)
        if not in_shared.all():
            write_memory(cta, "global", tids[~in_shared], addrs[~in_shared], data[~in_shared], line, what,
                         strong)
        return
    if space == "shared":
        addrs = own_offsets(cta, addrs, what)
        cta.smem.write(tids, addrs, data, cta.epoch, what)
        cta.add_smem_stat(line, *bank_wavefronts(tids >> 5, tids & 31, addrs, width, lanes_per_phase(width)))
        return
    global_write(cta, tids, addrs, data, what, strong)


def global_write(cta: CtaState, tids: np.ndarray, addrs: np.ndarray, data: np.ndarray, what: str,
                 strong: bool = False, atomic: bool = False, progress: bool = True) -> None:
    """Every global store goes through here: tags, race checks, dropping stale release clocks;
    `progress` tells the deadlock detector that this CTA changed something others may read."""
    cta.gmem.write(addrs, data, cta.sync, what, tids, strong, atomic)
    model = cta.sync.model
    if model.clocks:
        model.forget(addrs, data.shape[1])
    if progress:
        cta.sync.iter_fresh = True


def global_part(cta: CtaState, space: str, addrs: np.ndarray) -> np.ndarray | None:
    """Boolean per access: it goes to global memory (None: all of them do)."""
    if space == "global":
        return None
    if space == "shared":
        return np.zeros(len(addrs), dtype=bool)
    return ~split_generic(cta, addrs)


def per_thread(values: np.ndarray, tids: np.ndarray) -> np.ndarray:
    return np.repeat(values, len(tids)) if values.shape[0] == 1 else values[tids]


def compile_ld(ins: Instr, ctx):
    space, vec, typ, sem, scope = _parse_ldst(ins, ctx)
    if len(ins.operands) != 2:
        raise ctx.fail("ld takes a destination and an address")
    items = _vector_items(ins.operands[0], vec, ctx, "ld destination")
    dests = [ctx.dst(item, typ, relaxed=True) for item in items]
    esize = type_bytes(typ)
    width = esize * vec
    view = VIEW_DTYPE[typ]
    mem = ctx.mem(ins.operands[1])
    line = ctx.line
    what = f"ld.{SPACE_NAMES.get(space, space)}" if space != "generic" else "ld (generic)"
    if space == "param":
        return _compile_ld_param(ctx, mem, dests, typ, width, esize)
    get_addr = address_getter(ctx, mem, space)
    if sem is not None:
        return _compile_sync_ld(ctx, space, sem, scope, get_addr, dests, typ, width, esize, what)

    def run(cta, mask):
        tids = cta.threads(mask)
        addrs = per_thread(get_addr(cta.R), tids)
        data = read_memory(cta, space, tids, addrs, width, line, what + " reads")
        values = data.view(STORAGE_DTYPE[esize * 8]).view(view)
        for j, (slot, bits) in enumerate(dests):
            scatter(cta, slot, tids, widen(np.ascontiguousarray(values[:, j]), typ, bits), mask)
    return run


def _compile_sync_ld(ctx, space, sem, scope, get_addr, dests, typ, width, esize, what):
    """ld.volatile / ld.relaxed.scope / ld.acquire.scope: strong, may acquire, a switch point."""
    strong = sem == "volatile" or check_scope(scope, ctx.fail)
    acquire = strong and sem == "acquire"
    line = ctx.line
    view = VIEW_DTYPE[typ]
    what = f"ld.{sem}{'.' + scope if scope else ''} ({space}) reads"

    def run(cta, mask):
        tids = cta.threads(mask)
        addrs = per_thread(get_addr(cta.R), tids)
        data = read_memory(cta, space, tids, addrs, width, line, what, strong)
        values = data.view(STORAGE_DTYPE[esize * 8]).view(view)
        for j, (slot, bits) in enumerate(dests):
            scatter(cta, slot, tids, widen(np.ascontiguousarray(values[:, j]), typ, bits), mask)
        sync = cta.sync
        if strong and sync.model.clocks:
            glob = global_part(cta, space, addrs)
            g_addrs, g_tids = (addrs, tids) if glob is None else (addrs[glob], tids[glob])
            words = sync.model.words(g_addrs, width)
            rep = np.repeat(g_tids, words.shape[1])
            for m, clock in group_by_clock(sync.model, words.reshape(-1), rep, cta.n):
                if acquire:
                    sync.acquire(m, clock, cta.active)
                else:
                    sync.observe(m, clock)
        sync.note_load(line, data)
    return mark(run, yields=True, communicates=True)


def _compile_ld_param(ctx, mem: Mem, dests, typ: str, width: int, esize: int):
    if mem.base is None or mem.base.name not in ctx.params:
        raise ctx.fail("ld.param must address a kernel parameter by name ([param] or [param+imm])")
    offset, decl = ctx.params[mem.base.name]
    if mem.offset < 0 or mem.offset + width > decl.size:
        raise Fault("out-of-bounds", f"ld.param of {width} bytes at offset {mem.offset} is outside "
                    f"parameter {decl.name} ({decl.size} bytes)")
    start = offset + mem.offset
    if start % width:
        raise Fault("misaligned", f"ld.param of {width} bytes at parameter offset {start} is misaligned")
    view = VIEW_DTYPE[typ]

    def run(cta, mask):
        raw = cta.param_bytes[start:start + width].copy()
        values = raw.view(view)
        for j, (slot, bits) in enumerate(dests):
            col = np.repeat(values[j:j + 1], cta.n)
            full = widen(col, typ, bits)
            if mask is None:
                cta.R[slot] = full
            else:
                cta.R[slot] = np.where(mask, full, cta.R[slot])
    return run


def compile_st(ins: Instr, ctx):
    space, vec, typ, sem, scope = _parse_ldst(ins, ctx)
    if space == "param":
        raise ctx.fail("st.param is not supported in a kernel")
    if len(ins.operands) != 2:
        raise ctx.fail("st takes an address and a source")
    items = _vector_items(ins.operands[1], vec, ctx, "st source")
    getters = [ctx.src(item, typ, relaxed=True) for item in items]
    esize = type_bytes(typ)
    width = esize * vec
    storage = STORAGE_DTYPE[esize * 8]
    get_addr = address_getter(ctx, ctx.mem(ins.operands[0]), space)
    line = ctx.line
    what = f"st.{SPACE_NAMES.get(space, space)}" if space != "generic" else "st (generic)"

    if sem is not None:
        return _compile_sync_st(ctx, space, sem, scope, get_addr, getters, storage, width)

    def run(cta, mask):
        tids = cta.threads(mask)
        addrs = per_thread(get_addr(cta.R), tids)
        cols = [per_thread(g(cta.R), tids).view(storage) for g in getters]
        data = np.stack(cols, axis=1).view(np.uint8).reshape(len(tids), width)
        write_memory(cta, space, tids, addrs, data, line, what + " writes")
    return run


def _compile_sync_st(ctx, space, sem, scope, get_addr, getters, storage, width):
    """st.volatile / st.relaxed.scope / st.release.scope: strong; a release (or a relaxed store after
    a release fence of the same thread) attaches the CTA's clock to the words it writes."""
    strong = sem == "volatile" or check_scope(scope, ctx.fail)
    release = strong and sem == "release"
    line = ctx.line
    what = f"st.{sem}{'.' + scope if scope else ''} ({space}) writes"

    def run(cta, mask):
        tids = cta.threads(mask)
        addrs = per_thread(get_addr(cta.R), tids)
        cols = [per_thread(g(cta.R), tids).view(storage) for g in getters]
        data = np.stack(cols, axis=1).view(np.uint8).reshape(len(tids), width)
        write_memory(cta, space, tids, addrs, data, line, what, strong)
        if not strong:
            return
        sync = cta.sync
        glob = global_part(cta, space, addrs)
        g_addrs, g_tids = (addrs, tids) if glob is None else (addrs[glob], tids[glob])
        if len(g_addrs) == 0:
            return
        if release:
            snap = sync.release(mask, cta.gmem)
            clocks = [snap] * len(g_tids)
        else:
            clocks = sync.fence_clock_of(g_tids)
            if all(c is None for c in clocks):
                return
        words = sync.model.words(g_addrs, width)
        sync.model.attach(words.reshape(-1), [c for c in clocks for _ in range(words.shape[1])])
    return mark(run, yields=True, communicates=True, releases=release)


OPS = {"ld": compile_ld, "st": compile_st}
