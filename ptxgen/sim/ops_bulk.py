"""TMA and bulk copies (cp.async.bulk{.tensor}), their bulk groups, prefetch.tensormap and the proxy
fences (docs/ptx_facts/tma.md §9d, mbarrier.md §9f).

Loads (global -> shared, `.mbarrier::complete_tx::bytes`) gather the whole box with numpy when
issued (out-of-bounds elements filled with zero or the map's NaN), lay it out in shared memory
with the map's swizzle and leave it in flight on the mbarrier (async_proxy.py): it lands when a
wait observes the phase complete. Stores (shared -> global, `.bulk_group`) read the swizzled box
when issued, clip it to the tensor and write global memory at once; the shared source stays marked
pending until a `cp.async.bulk.wait_group{.read}` of the issuing thread covers its group, so
overwriting it earlier is an `async-pending` hazard. A store source written through the generic
proxy needs `fence.proxy.async` in between (async_proxy.check_async_read).
"""
from __future__ import annotations

import numpy as np

from . import async_order, ops_async, ops_atomic
from .async_proxy import (BulkRead, InFlight, barrier_at, check_async_read, check_barrier_address, hopper, proxy_fence,
                          require)
from .cluster import CLUSTER_STRIDE, note_fence, own_offsets
from .cluster import targets as cluster_targets
from .errors import Fault
from .memory import PARAM_BASE
from .operands import Lit, Mem, TensorRef
from .ops_mem import address_getter, check_aligned, global_write, per_thread
from .parse import Instr
from .program import mark
from .state import CtaState
from . import tma_fp4
from .tensormap import MAP_BYTES, DecodedMap, decode, swizzle_addresses

LOAD_SPACES = ("shared::cluster", "shared::cta")
IGNORED = ("L2::cache_hint",)


def compile_cp(ins: Instr, ctx):
    if ins.mods[:2] != ("async", "bulk"):
        return ops_async.compile_cp(ins, ctx)
    require(ctx, "cp.async.bulk", (8, 0), 90)
    if "tensor" in ins.mods and len(ins.mods) > 4 and ins.mods[4] == "shared::cta":
        require(ctx, "a cp.async.bulk.tensor load into .shared::cta (use .shared::cluster before PTX 8.6)",
                (8, 6), 90)
    rest = ins.mods[2:]
    if rest == ("commit_group",):
        if ins.operands:
            raise ctx.fail("cp.async.bulk.commit_group takes no operands")
        return _commit
    if rest in (("wait_group",), ("wait_group", "read")):
        ops = ins.operands
        if len(ops) != 1 or not isinstance(ops[0], Lit) or ops[0].kind != "int" or ops[0].value < 0:
            raise ctx.fail("cp.async.bulk.wait_group needs an immediate group count")
        keep, line = int(ops[0].value), ctx.line
        return lambda cta, mask: _wait(cta, mask, keep, line)
    if rest and rest[0] == "tensor":
        return _compile_tensor(ins, ctx, rest[1:])
    if rest and rest[0] == "prefetch":
        return _compile_prefetch(ins, ctx, rest[1:])
    return _compile_plain(ins, ctx, rest)


def _compile_prefetch(ins: Instr, ctx, mods: tuple):
    """cp.async.bulk.prefetch{.tensor.Nd}.L2.global: a hint to fill L2, no effect on results; the
    operands are still checked for form."""
    mods = tuple(m for m in mods if m not in IGNORED)
    ops = _drop_hint(ctx, ins, list(ins.operands))
    if mods == ("L2", "global") and len(ops) == 2 and isinstance(ops[0], Mem):
        ctx.src(ops[1], "u32")
        return lambda cta, mask: None
    if (len(mods) >= 4 and mods[0] == "tensor" and mods[1] in ("1d", "2d", "3d", "4d", "5d")
            and mods[2:4] == ("L2", "global") and mods[4:] in ((), ("tile",)) and len(ops) == 1
            and isinstance(ops[0], TensorRef) and len(ops[0].coords) == int(mods[1][0])):
        for c in ops[0].coords:
            ctx.src(c, "s32")
        return lambda cta, mask: None
    raise ctx.fail(f"cp.async.bulk.prefetch.{'.'.join(mods)} is not supported (.L2.global [src], size; "
                   ".tensor.Nd.L2.global{.tile} [tensorMap, {coords}])")


def _directions(ctx, mods, what: str):
    """('load'|'store', leftover modifiers) from the dst.src space pair."""
    mods = [m for m in mods if m not in IGNORED]
    if len(mods) >= 3 and mods[0] in LOAD_SPACES and mods[1] == "global":
        rest = mods[2:]
        if "mbarrier::complete_tx::bytes" not in rest:
            raise ctx.fail(f"{what} global->shared needs .mbarrier::complete_tx::bytes")
        rest.remove("mbarrier::complete_tx::bytes")
        return "load", rest
    if len(mods) >= 3 and mods[0] == "global" and mods[1] == "shared::cta":
        rest = mods[2:]
        if "bulk_group" not in rest:
            raise ctx.fail(f"{what} shared->global needs .bulk_group")
        rest.remove("bulk_group")
        return "store", rest
    raise ctx.fail(f"{what}.{'.'.join(mods)} is not supported (global->shared::cluster|shared::cta with "
                   ".mbarrier::complete_tx::bytes, shared::cta->global with .bulk_group)")


def _drop_hint(ctx, ins: Instr, ops: list) -> list:
    if "L2::cache_hint" in ins.mods:
        if not ops:
            raise ctx.fail(".L2::cache_hint needs a cache-policy operand")
        ops = ops[:-1]
    return ops


def _shared_getter(ctx, op):
    return address_getter(ctx, ctx.mem(op), "shared")


# ------------------------------------------------------------------ tensor copies
def _compile_tensor(ins: Instr, ctx, mods: tuple):
    if not mods or mods[0] not in ("1d", "2d", "3d", "4d", "5d"):
        raise ctx.fail("cp.async.bulk.tensor needs a dimension .1d .. .5d")
    rank = int(mods[0][0])
    groups = [m for m in mods[1:] if m in ("cta_group::1", "cta_group::2")]
    direction, rest = _directions(ctx, [m for m in mods[1:] if m not in groups], "cp.async.bulk.tensor")
    if groups and (direction != "load" or len(groups) > 1):
        raise ctx.fail("cp.async.bulk.tensor takes one .cta_group::1|::2, on a load into shared memory only")
    rest = rest + groups
    multicast = direction == "load" and "multicast::cluster" in rest
    pair = direction == "load" and "cta_group::2" in rest
    if groups:
        from .ops_tcgen05 import require_tcgen05
        require_tcgen05(ctx, "cp.async.bulk.tensor .cta_group")
    if pair and multicast:
        raise ctx.fail("cp.async.bulk.tensor .multicast::cluster with .cta_group::2 is not simulated (which "
                       "CTA of each destination's pair its mbarrier is in is not modelled); drop one of them")
    rest = [m for m in rest if m not in ("tile", "multicast::cluster", "cta_group::1", "cta_group::2")
            or (m.startswith("cta_group") and direction != "load")]
    if rest:
        raise ctx.fail(f"cp.async.bulk.tensor modifier(s) .{' .'.join(rest)} not supported (tile mode only; "
                       "im2col is not simulated)")
    ops = _drop_hint(ctx, ins, list(ins.operands))
    line = ctx.line
    get_mask = None
    if direction == "load":
        if len(ops) != 3 + multicast or not isinstance(ops[1], TensorRef):
            raise ctx.fail("cp.async.bulk.tensor load takes [dstMem], [tensorMap, {coords}], [mbar]"
                           + (", ctaMask" if multicast else ""))
        get_dst, tref, get_bar = _shared_getter(ctx, ops[0]), ops[1], _shared_getter(ctx, ops[2])
        if multicast:
            get_mask = ctx.src(ops[3], "b16")
    else:
        if len(ops) != 2 or not isinstance(ops[0], TensorRef):
            raise ctx.fail("cp.async.bulk.tensor store takes [tensorMap, {coords}], [srcMem]")
        tref, get_src = ops[0], _shared_getter(ctx, ops[1])
    if len(tref.coords) != rank:
        raise ctx.fail(f"a .{rank}d copy needs {rank} coordinates, got {len(tref.coords)}")
    coords = [ctx.src(c, "s32") for c in tref.coords]
    get_map = _map_getter(ctx, tref.base)
    what = f"cp.async.bulk.tensor.{rank}d ({direction})"

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        maps = per_thread(get_map(cta.R), tids)
        cs = np.stack([per_thread(g(cta.R), tids).astype(np.int64) for g in coords], axis=1)
        for k, tid in enumerate(tids.tolist()):
            tmap = _resolve(cta, int(maps[k]), rank, what)
            start = tuple(int(c) for c in cs[k][::-1])
            if direction == "load":
                dst = int(per_thread(get_dst(cta.R), tids)[k])
                mbar = int(per_thread(get_bar(cta.R), tids)[k])
                cta_mask = None if get_mask is None else int(per_thread(get_mask(cta.R), tids)[k])
                _load_box(cta, tid, tmap, start, dst, mbar, line, what, cta_mask, pair)
            else:
                src = own_offsets(cta, per_thread(get_src(cta.R), tids)[k:k + 1], what + " source")
                _store_box(cta, tid, tmap, start, int(src[0]), what, line)
    return run


def _map_getter(ctx, mem: Mem):
    if mem.base is not None and mem.base.name in ctx.params:
        const = np.array([ctx.params[mem.base.name][0] + mem.offset], dtype=np.int64)
        return lambda R: const
    return address_getter(ctx, mem, "global")


def _resolve(cta: CtaState, addr: int, rank: int, what: str) -> DecodedMap:
    """The map at a generic address (cvta.param of a .param address, or global memory) or at a
    .param address (a `mov` of the parameter's name without cvta)."""
    if addr % 64:
        raise Fault("misaligned", f"{what}: tensor map address {addr:#x} is not 64-byte aligned")
    start = addr - PARAM_BASE if addr >= PARAM_BASE else addr
    if 0 <= start <= len(cta.param_bytes) - MAP_BYTES:
        raw = cta.param_bytes[start:start + MAP_BYTES]
    else:
        raw = cta.gmem.read(np.array([addr], dtype=np.int64), MAP_BYTES, cta.sync, f"{what} reads the tensor map")[0]
    tmap = decode(raw)
    if tmap is None:
        raise Fault("out-of-bounds", f"{what}: address {addr:#x} holds no tensor map; pass a sim.TensorMap "
                    "for a `.param .align 64 .b8 name[128]` parameter and use its address")
    if len(tmap.dims) != rank:
        raise Fault("out-of-bounds", f"{what}: the tensor map has rank {len(tmap.dims)}, the copy is .{rank}d")
    return tmap


def _box_elements(tmap: DecodedMap, start: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(byte offset of each box element from the tensor start, in-bounds mask), box order."""
    offs = np.zeros(1, dtype=np.int64)
    valid = np.ones(1, dtype=bool)
    for s, n, dim, stride in zip(start, tmap.box, tmap.dims, tmap.strides):
        idx = s + np.arange(n, dtype=np.int64)
        offs = (offs[:, None] + idx * stride).reshape(-1)
        valid = (valid[:, None] & (idx >= 0) & (idx < dim)).reshape(-1)
    return offs, valid


def _smem_box(cta: CtaState, base: int, nbytes: int, swizzle: int, what: str) -> np.ndarray:
    """Swizzled shared byte indices of a box laid out densely from `base`."""
    check_aligned(np.array([base], dtype=np.int64), 128, f"{what} shared address")
    cta.smem.check_bounds(np.array([base], dtype=np.int64), nbytes, what)
    return swizzle_addresses(base + np.arange(nbytes, dtype=np.int64), swizzle)


def _load_box(cta: CtaState, tid: int, tmap: DecodedMap, start, dst: int, mbar: int, line: int, what: str,
              cta_mask: int | None = None, pair: bool = False):
    if tmap.padded:          # innermost coordinate in values; map in packed words (tma_fp4.py)
        start = tuple(start[:-1]) + (tma_fp4.inner_coordinate(tmap.padded, start[-1], what),)
    offs, valid = _box_elements(tmap, start)
    es = tmap.esize
    elems = np.zeros((len(offs), es), dtype=np.uint8)
    if tmap.fill is not None:
        elems[:] = np.array([tmap.fill], dtype=f"<u{es}").view(np.uint8)
    if valid.any():
        elems[valid] = cta.gmem.read(tmap.address + offs[valid], es, cta.sync, what + " reads",
                                     np.full(int(valid.sum()), tid))
    data = elems.reshape(-1)
    tx = len(data)                  # complete-tx counts the bytes read (packed, for padded fp4/fp6)
    if tmap.padded:
        data = tma_fp4.expand(tmap.padded, data)
    for peer, dst_off, bar_cta, mbar_off in _destinations(cta, dst, mbar, len(data), cta_mask, what, pair):
        _in_flight(peer, tid, dst_off, data, tmap.swizzle, mbar_off, line, what, cta, tx, bar_cta)


def _destinations(cta: CtaState, dst: int, mbar: int, nbytes: int, cta_mask: int | None, what: str,
                  pair: bool = False):
    """[(CTA, shared offset, mbarrier's CTA, mbarrier offset)] a load lands in: the CTA a
    .shared::cluster `dst` names, its mbarrier in the same CTA, or with .cta_group::2 in that CTA
    or its pair peer (cluster rank differing in bit 0), or with .multicast::cluster every CTA in
    `cta_mask` at the same CTA-relative offsets (PTX ISA cp.async.bulk.tensor;
    docs/ptx_facts/tcgen05.md §12m)."""
    if cta_mask is None:
        (peer, _, offs), = cluster_targets(cta, np.array([dst], dtype=np.int64), nbytes, what + " destination")
        (bpeer, _, boffs), = cluster_targets(cta, np.array([mbar], dtype=np.int64), 8, what + " mbarrier")
        if bpeer is not peer:
            r, b = (0, 0) if peer.cluster is None else (peer.cluster.rank, bpeer.cluster.rank)
            if not pair:
                raise Fault("out-of-bounds", f"{what}: the destination is in cluster CTA rank {r} but the "
                            f"mbarrier in rank {b}; they must be in the same CTA (.cta_group::2 lets the "
                            "mbarrier be in the destination's pair peer)")
            if b != r ^ 1:
                raise Fault("out-of-bounds", f"{what}.cta_group::2: the destination is in cluster CTA rank {r} "
                            f"but the mbarrier in rank {b}, which is not its pair peer (rank {r ^ 1}); the "
                            "mbarrier must be in the destination CTA or its peer")
        return [(peer, int(offs[0]), bpeer, int(boffs[0]))]
    size = cta.cluster.cluster.size
    if cta_mask >> size:
        raise Fault("out-of-bounds", f"{what}: ctaMask {cta_mask:#06x} names CTA ranks outside this cluster of "
                    f"{size} CTA(s)")
    if cta_mask == 0:
        raise Fault("out-of-bounds", f"{what}: ctaMask is 0, so the copy lands nowhere and its mbarrier "
                    "never receives the bytes")
    out = []
    for r in range(size):
        if cta_mask >> r & 1:
            rel_dst = dst % CLUSTER_STRIDE
            (peer, _, offs), = cluster_targets(cta, np.array([r * CLUSTER_STRIDE + rel_dst], dtype=np.int64),
                                                nbytes, what + " destination")
            out.append((peer, int(offs[0]), peer, mbar % CLUSTER_STRIDE))
    return out


def _barrier_init_seen(issuer: CtaState, tid: int, owner: CtaState, mbar: int, what: str) -> None:
    """The copy's complete-tx accesses its mbarrier through the generic proxy on behalf of the
    issuing thread, so the barrier's mbarrier.init must be ordered before the issue like any other
    use of it: a bar.sync in the CTA, or for a peer's barrier a cluster-scope release (a plain
    barrier.cluster.arrive, or fence.mbarrier_init.release.cluster before a relaxed one) and a
    barrier.cluster.wait. No proxy fence is needed (docs/ptx_facts/mbarrier.md §9e "init")."""
    use = f"{what} (its complete-tx on the mbarrier)"
    if owner is issuer:
        owner.smem.read(np.array([tid]), np.array([mbar], dtype=np.int64), 8, owner.epoch, use)
    elif owner.smem.cross is not None:
        owner.smem.cross.access(mbar + np.arange(8), np.full(8, tid), issuer.cluster, False, use)


def _in_flight(cta: CtaState, tid: int, dst: int, data: np.ndarray, swizzle: int, mbar: int, line: int,
               what: str, issuer: CtaState, tx: int | None = None, bar_cta: CtaState | None = None) -> None:
    """Put a load's bytes in flight into `cta`'s shared memory, completing on the mbarrier at `mbar`
    in `bar_cta` (default `cta`): the bytes land when that barrier's phase is waited for."""
    bar_cta = cta if bar_cta is None else bar_cta
    mbars = np.array([mbar], dtype=np.int64)
    check_barrier_address(bar_cta, mbars, what)
    bar = barrier_at(bar_cta, mbar, what if bar_cta.cluster is None or bar_cta.cluster.cluster.size == 1 else
                     f"{what} (cluster CTA rank {bar_cta.cluster.rank})")
    _barrier_init_seen(issuer, tid, bar_cta, mbar, what)
    idx = _smem_box(cta, dst, len(data), swizzle, what)
    cta.smem.check_not_pending(idx, np.full(len(idx), tid), 1, what + " writes")
    async_order.check_write(cta, idx, tid, what, issuer)   # after the waits of earlier async reads
    reads = cta.smem.async_reads
    if reads is not None and reads[idx].any():  # the copy may land at once: a wgmma must not still read it
        k = int(np.flatnonzero(reads[idx])[0])
        raise Fault("async-pending", f"thread {tid} {what} writes shared byte {int(idx[k]):#x} that a wgmma still in "
                    "flight reads; retire it with wgmma.wait_group (in every warp that issued it, then a barrier) "
                    "before the copy is issued")
    cta.smem.pending[idx] += 1
    bar.inflight.append(InFlight(idx, data, len(data) if tx is None else tx, line,
                                 None if bar_cta is cta else cta.smem))
    bar.version += 1


def _store_box(cta: CtaState, tid: int, tmap: DecodedMap, start, src: int, what: str, line: int) -> None:
    if tmap.padded:
        raise Fault("unsupported", f"{what}: a TMA store through a {tmap.padded.name} (padded {tmap.padded.values}) "
                    "map is not simulated")
    idx = _smem_box(cta, src, tmap.box_bytes, tmap.swizzle, what)
    data = _read_source(cta, tid, idx, what).reshape(-1, tmap.esize)
    offs, valid = _box_elements(tmap, start)
    if valid.any():
        global_write(cta, np.full(int(valid.sum()), tid), tmap.address + offs[valid], data[valid], what + " writes")
    _hold_source(cta, tid, idx, line)


def _read_source(cta: CtaState, tid: int, idx: np.ndarray, what: str) -> np.ndarray:
    """The store's source bytes; another store still reading them is no conflict (two reads), so
    their holds are lifted while the read checks for in-flight writes into the bytes."""
    check_async_read(cta, idx, what + " reads")
    smem = cta.smem
    holds = [r.idx for r in hopper(cta).bulk_reads]
    for h in holds:
        smem.pending[h] -= 1
    try:
        return smem.read(np.full(len(idx), tid), idx, 1, cta.epoch, what + " reads").reshape(-1)
    finally:
        for h in holds:
            smem.pending[h] += 1


def _hold_source(cta: CtaState, tid: int, idx: np.ndarray, line: int) -> None:
    state = hopper(cta)
    cta.smem.pending[idx] += 1
    state.bulk_reads.append(BulkRead(tid, state.bulk_commits.get(tid, 0), idx, line))


# ------------------------------------------------------------------ non-tensor bulk copies
def _compile_plain(ins: Instr, ctx, mods: tuple):
    direction, rest = _directions(ctx, mods, "cp.async.bulk")
    if rest:
        raise ctx.fail(f"cp.async.bulk modifier(s) .{' .'.join(rest)} not supported (.multicast::cluster "
                       "is not simulated)")
    ops = _drop_hint(ctx, ins, list(ins.operands))
    if len(ops) != (4 if direction == "load" else 3):
        raise ctx.fail("cp.async.bulk takes [dstMem], [srcMem], size" + (", [mbar]" if direction == "load" else ""))
    get_size = ctx.src(ops[2], "u32")
    what = f"cp.async.bulk ({direction})"
    line = ctx.line
    if direction == "load":
        get_dst, get_src = _shared_getter(ctx, ops[0]), address_getter(ctx, ctx.mem(ops[1]), "global")
        get_bar = _shared_getter(ctx, ops[3])
    else:
        get_dst, get_src = address_getter(ctx, ctx.mem(ops[0]), "global"), _shared_getter(ctx, ops[1])

    def run(cta: CtaState, mask):
        tids = cta.threads(mask)
        dsts, srcs = per_thread(get_dst(cta.R), tids), per_thread(get_src(cta.R), tids)
        sizes = per_thread(get_size(cta.R), tids)
        bars = own_offsets(cta, per_thread(get_bar(cta.R), tids), what) if direction == "load" else None
        if direction == "load":
            dsts = own_offsets(cta, dsts, what + " destination")
        else:
            srcs = own_offsets(cta, srcs, what + " source")
        for k, tid in enumerate(tids.tolist()):
            size, dst, src = int(sizes[k]), int(dsts[k]), int(srcs[k])
            if size % 16 or size == 0:
                raise Fault("misaligned", f"{what}: size {size} is not a positive multiple of 16 bytes")
            check_aligned(np.array([dst, src], dtype=np.int64), 16, what + " address")
            if direction == "load":
                data = cta.gmem.read(np.array([src], dtype=np.int64), size, cta.sync, what + " reads",
                                     np.array([tid]))[0]
                mbars = np.array([int(bars[k])], dtype=np.int64)
                check_barrier_address(cta, mbars, what)
                bar = barrier_at(cta, int(bars[k]), what)
                _barrier_init_seen(cta, tid, cta, int(bars[k]), what)
                cta.smem.check_bounds(np.array([dst], dtype=np.int64), size, what)
                idx = dst + np.arange(size, dtype=np.int64)
                cta.smem.check_not_pending(idx, np.full(size, tid), 1, what + " writes")
                async_order.check_write(cta, idx, tid, what, cta)
                cta.smem.pending[idx] += 1
                bar.inflight.append(InFlight(idx, data, size, line))
                bar.version += 1
            else:
                cta.smem.check_bounds(np.array([src], dtype=np.int64), size, what)
                idx = src + np.arange(size, dtype=np.int64)
                data = _read_source(cta, tid, idx, what)
                global_write(cta, np.array([tid]), np.array([dst], dtype=np.int64), data[None, :], what + " writes")
                _hold_source(cta, tid, idx, line)
    return run


# ------------------------------------------------------------------ bulk groups
def _commit(cta: CtaState, mask) -> None:
    state = hopper(cta)
    for tid in cta.threads(mask).tolist():
        state.bulk_commits[tid] = state.bulk_commits.get(tid, 0) + 1


def _wait(cta: CtaState, mask, keep: int, line: int) -> None:
    """Release the store sources of groups older than the waiting threads' `keep` newest. Global
    writes happened at issue, so .read and the full wait are the same here. The async proxy may
    read a source until this wait returns, so other threads may rewrite it only once a barrier or
    mbarrier phase orders them after the wait (async_order.py)."""
    state = hopper(cta) if cta.hopper is not None else None
    if state is None or not state.bulk_reads:
        return
    waiting = set(cta.threads(mask).tolist())
    remaining = []
    for r in state.bulk_reads:
        if r.thread in waiting and r.group < state.bulk_commits.get(r.thread, 0) - keep:
            cta.smem.pending[r.idx] -= 1
            waiter = np.zeros(cta.n, dtype=bool)
            waiter[r.thread] = True
            async_order.retire(cta, r.idx, waiter, f"the bulk store issued at line {r.line} by thread {r.thread}",
                               f"thread {r.thread}", line)
        else:
            remaining.append(r)
    state.bulk_reads = remaining


# ------------------------------------------------------------------ fences and prefetch
def compile_fence(ins: Instr, ctx):
    mods = ins.mods
    if mods and mods[0] == "proxy":
        mods = mods[1:]
        require(ctx, f"fence.{'.'.join(ins.mods)}", (8, 3) if mods[:1] == ("tensormap::generic",) else (8, 0), 90)
    elif mods and mods[0] == "mbarrier_init":
        require(ctx, "fence.mbarrier_init", (8, 0), 90)
        if mods[1:] != ("release", "cluster") or ins.operands:
            raise ctx.fail("fence.mbarrier_init takes .release.cluster and no operands")
        return lambda cta, mask: note_fence(cta)   # makes a following relaxed cluster arrive a release
    elif ins.opcode == "fence" and mods and mods[-1] == "cluster" and not ins.operands and (
            mods[:-1] in ((), ("sc",), ("acq_rel",), ("release",), ("acquire",))):
        require(ctx, f"fence.{'.'.join(mods)}", (7, 8), 90)
        if mods[:-1] == ("acquire",):          # barrier.cluster.wait is an acquire already
            return lambda cta, mask: None
        return lambda cta, mask: note_fence(cta)   # orders DSMEM before a relaxed cluster arrive
    else:
        inner = ops_atomic.compile_fence(ins, ctx)
        if not mods or mods[0] == "acquire" or mods[-1] not in ("gpu", "sys"):
            return inner

        def wider(cta: CtaState, mask):        # a .gpu/.sys release fence covers cluster scope too
            inner(cta, mask)
            note_fence(cta)
        return mark(wider, yields=inner.yields, communicates=inner.communicates, releases=inner.releases)
    if mods and mods[0] == "async":
        if mods[1:] not in ((), ("shared::cta",), ("shared::cluster",), ("global",)):
            raise ctx.fail(f"fence.proxy.async.{'.'.join(mods[1:])} is not supported")
        if ins.operands:
            raise ctx.fail("fence.proxy.async takes no operands")
        if mods[1:] == ("global",):
            return lambda cta, mask: None      # global memory: TMA stores read only shared memory
        return lambda cta, mask: proxy_fence(cta)
    if mods and mods[0] == "tensormap::generic":
        return lambda cta, mask: None          # tensor maps are never modified in place here
    raise ctx.fail(f"fence.proxy.{'.'.join(mods)} is not supported (fence.proxy.async, "
                   "fence.proxy.tensormap::generic)")


def compile_prefetch(ins: Instr, ctx):
    mods = ins.mods
    if mods and mods[-1] == "tensormap" and mods[:-1] in ((), ("const",), ("param",)):
        require(ctx, "prefetch.tensormap", (8, 0), 90)
    elif mods not in (("global", "L1"), ("global", "L2"), ("L1",), ("L2",)):
        raise ctx.fail(f"prefetch.{'.'.join(mods)} is not supported (prefetch{{.param,.const}}.tensormap, "
                       "prefetch{.global}.L1/.L2)")
    if len(ins.operands) != 1 or not isinstance(ins.operands[0], Mem):
        raise ctx.fail("prefetch takes one address [a]")
    return lambda cta, mask: None              # a cache hint: no effect on results


OPS = {"cp": compile_cp, "fence": compile_fence, "prefetch": compile_prefetch}
