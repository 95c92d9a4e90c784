"""Traced wrappers of the synchronising instructions (trace_ops.py picks them): mbarrier waits and
arrivals, TMA/bulk copies, cp.async and its groups, wgmma and its groups, named and cluster
barriers. Each reads the operands it needs with its own getters, runs the executor, and records
what changed: spans on the warp's track, copies and groups in flight, the event that completed an
mbarrier phase and the waits that phase released (flow arrows), the stage ring's fill level.
"""
from __future__ import annotations

from .cluster import CLUSTER_STRIDE
from .errors import Fault
from .operands import Lit, TensorRef
from .ops_mem import per_thread
from .trace_ops import barrier_of, barrier_targets, first_value, shared_address
from .warps import BLOCK

MAX_LISTED = 8          # copies listed in one TMA span's args


def _call(ct, fn, cta, mask, line):
    try:
        return fn(cta, mask)
    except Fault as f:
        ct.fault(cta, f.kind, f.detail, line)
        raise


def _check_ready(rec, pct, off: int, bar, source) -> None:
    """Remember the event after which a copy barrier's phase can complete (its copies pay off the
    transaction count and no arrival is pending): the phase completes, in the simulator, only when
    a wait observes it, but this is what released it."""
    if bar is not None and pct is not None and not bar.pending and bar.inflight \
            and bar.tx == sum(c.nbytes for c in bar.inflight):
        rec.ready[(pct.pid, off)] = source


# -------------------------------------------------------------------- mbarrier
def mbarrier_wait(fn, ins, ctx):
    from .ops_mbarrier import _addr_getter, _split_mods
    kind, space = _split_mods(ins, ctx)
    ops, line = ins.operands, ins.line
    parity = kind[-1] == "parity"
    pred_slot, _ = ctx.dst(ops[0], "pred")
    get_addr = _addr_getter(ctx, ops[1], space)
    get_phase = ctx.src(ops[2], "u32" if parity else "b64", relaxed=parity)

    def run(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        rec = ct.rec
        rec.step += 1
        addr = first_value(get_addr, cta, mask) % CLUSTER_STRIDE
        want = first_value(get_phase, cta, mask)
        bar = barrier_of(cta, addr)
        flying = bar.inflight if bar is not None else None
        before = bar.phase if bar is not None else 0
        res = _call(ct, fn, cta, mask, line)
        ok = bool(cta.R[pred_slot][cta.threads(mask)].all())
        stage = ct.stages.get(addr)
        empty = rec.empty_of.get((ct.pid, addr))
        name = (f"wait stage {stage} full" if stage is not None else f"wait stage {empty} empty" if empty is not None
                else f"wait mbarrier {addr:#x}")
        args = {"barrier": hex(addr), "parity" if parity else "phase": want, "line": line}
        if stage is not None or empty is not None:
            args["stage"] = stage if stage is not None else empty
        runs = ct.act(cta, "wait mbarrier", name, ("wait mbarrier", addr, want), args)
        for r in runs:
            r.pending = not ok
        if bar is None or not ok:
            return res
        warps = ct.group(cta)
        if flying and bar.inflight is not flying:         # the copies landed now
            load = rec.loads.pop((ct.pid, addr), None)
            if load is not None:
                start, copies, nbytes, stg, phase = load
                rec.asyncs.append((ct.pid, f"TMA in flight → stage {stg}", "copy in flight", start, rec.step,
                                   {"stage": stg, "phase": phase, "copies": copies, "bytes": nbytes}))
        if bar.phase > before:
            src = rec.ready.pop((ct.pid, addr), None) or (rec.step, ct.pid, warps[0])
            for p in range(before, bar.phase):
                rec.completed(ct.pid, addr, p, src)
        done = bar.phase - 1 if parity else want
        if done >= 0:
            rec.released(ct, warps, ct.pid, addr, done)
            if stage is not None and not any(k[0] == ct.pid for k in rec.empty_of) \
                    and (addr, done) not in ct.consumed:
                ct.consumed.add((addr, done))
                ct.add_fill(-1)               # no empty barriers: a stage is consumed when waited for
        for w in warps:
            ct.last_wait[w] = addr
        return res
    return run


def mbarrier_arrive(fn, ins, ctx, kind):
    from .ops_mbarrier import _addr_getter, _split_mods
    _, space = _split_mods(ins, ctx)
    ops, line = ins.operands, ins.line
    expect = "expect_tx" in kind
    at = 1 if kind[0] == "arrive" else 0
    get_addr = _addr_getter(ctx, ops[at], space)
    get_n = ctx.src(ops[-1], "u32") if expect else None

    def run(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        rec = ct.rec
        rec.step += 1
        addrs = per_thread(get_addr(cta.R), cta.threads(mask))
        targets = barrier_targets(cta, addrs)
        before = [(peer, off, b.phase if (b := barrier_of(peer, off)) is not None else None) for peer, off in targets]
        res = _call(ct, fn, cta, mask, line)
        if not targets:                          # a peer not started: nothing to attribute
            ct.act(cta, "arrive", ".".join(kind), ("arrive",))
            return res
        warps = ct.group(cta)
        src = (rec.step, ct.pid, warps[0])
        peer, off = targets[0]
        pct = peer.trace
        pid = pct.pid if pct is not None else -1
        args = {"barrier": hex(off), "line": line}
        if peer is not cta:
            args["cta"] = list(peer.cta_xyz)
        if expect and pct is not None:
            stage = pct.stage_of(off)
            args.update(stage=stage, bytes=first_value(get_n, cta, mask))
            name = f"{'.'.join(kind)} stage {stage}"
            for w in warps:                     # the empty barrier this warp waited on before filling
                e = ct.last_wait.get(w)
                if e is not None and e != off and e not in ct.stages:
                    rec.empty_of[(ct.pid, e)] = stage
        else:
            stage = rec.empty_of.get((pid, off))
            if stage is not None:
                args["stage"] = stage
            name = f"release stage {stage}" if stage is not None else f"{'.'.join(kind)} {off:#x}"
        ct.act(cta, "arrive", name, ("arrive", off, pid), args)
        for peer, off, ph0 in before:
            bar, pct = barrier_of(peer, off), peer.trace
            if bar is None or pct is None:
                continue
            if ph0 is not None and bar.phase > ph0:
                for p in range(ph0, bar.phase):
                    rec.completed(pct.pid, off, p, src)
                    if (pct.pid, off) in rec.empty_of:
                        pct.add_fill(-1)
            _check_ready(rec, pct, off, bar, src)
        return res
    return run


# -------------------------------------------------------------------- TMA and bulk copies
def bulk_copy(fn, ins, ctx):
    from .ops_bulk import _map_getter, _resolve
    mods, line = ins.mods, ins.line
    ops = list(ins.operands)
    if "L2::cache_hint" in mods:
        ops = ops[:-1]
    tensor = mods[2] == "tensor"
    spaces = [m for m in mods[2:] if m in ("shared::cluster", "shared::cta", "global")]
    load = spaces[0].startswith("shared")
    get_mask = coords = get_map = None
    if tensor:
        tref = ops[1] if load else ops[0]
        if not isinstance(tref, TensorRef):
            raise Fault("unsupported", "not a tensor reference")
        coords = [ctx.src(c, "s32") for c in tref.coords]
        get_map = _map_getter(ctx, tref.base)
        rank = len(tref.coords)
    if load:
        get_bar = shared_address(ctx, ops[2] if tensor else ops[3])
        if tensor and "multicast::cluster" in mods:
            get_mask = ctx.src(ops[3], "b16")
    get_size = None if tensor else ctx.src(ops[2], "u32")
    what = "TMA load" if load else "TMA store"
    if not tensor:
        what = "bulk load" if load else "bulk store"

    def run(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        rec = ct.rec
        rec.step += 1
        tids = cta.threads(mask)
        info = {"line": line}
        box = None
        if tensor:
            info["coords"] = [int(per_thread(g(cta.R), tids)[0]) for g in coords]
            try:
                tmap = _resolve(cta, int(per_thread(get_map(cta.R), tids)[0]), rank, what)
                box, info["box"] = tmap.box_bytes, list(tmap.box)
            except Fault:
                pass
        else:
            info["bytes"] = first_value(get_size, cta, mask)
        mbars = per_thread(get_bar(cta.R), tids) if load else None
        cmask = per_thread(get_mask(cta.R), tids) if get_mask is not None else None
        res = _call(ct, fn, cta, mask, line)
        warps = ct.group(cta)
        if not load:
            if box is not None:
                info["bytes"] = box
            runs = ct.act(cta, "TMA store", what, ("TMA store",), None)
            _list(runs, info)
            return res
        src = (rec.step, ct.pid, warps[0])
        stage = None
        for k in range(len(tids)):
            if cmask is None:
                dests = barrier_targets(cta, mbars[k:k + 1])
            else:
                members = cta.cluster.cluster.members
                dests = [(members[r], int(mbars[k]) % CLUSTER_STRIDE) for r in range(len(members))
                         if int(cmask[k]) >> r & 1 and members[r] is not None]
            for peer, off in dests:
                pct, bar = peer.trace, barrier_of(peer, off)
                if pct is None or bar is None or not bar.inflight:
                    continue
                chunk = bar.inflight[-1]
                s = pct.stage_of(off)
                stage = s if peer is cta else stage
                got = rec.loads.get((pct.pid, off))
                if got is None:
                    rec.loads[(pct.pid, off)] = [rec.step, 1, chunk.nbytes, s, bar.phase]
                    pct.add_fill(+1)
                else:
                    got[1] += 1
                    got[2] += chunk.nbytes
                lo, hi = int(chunk.idx.min()), int(chunk.idx.max())
                old = pct.regions.get(s)
                pct.regions[s] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
                _check_ready(rec, pct, off, bar, src)
                info.setdefault("bytes", chunk.nbytes)
        if stage is not None:
            info["stage"] = stage
        if cmask is not None:
            info["multicast"] = hex(int(cmask[0]))
        runs = ct.act(cta, "TMA load", f"{what} stage {stage}" if stage is not None else what,
                      ("TMA load", stage), {"stage": stage} if stage is not None else None)
        _list(runs, info)
        return res
    return run


def _list(runs, info) -> None:
    for r in runs:
        copies = r.args.setdefault("copies", [])
        if len(copies) < MAX_LISTED:
            copies.append(info)


# -------------------------------------------------------------------- cp.async
def cp_async(fn, ins, ctx):
    rest, line = ins.mods[1:], ins.line
    if rest == ("commit_group",):
        def commit(cta, mask):
            ct = cta.trace
            if ct is None:
                return fn(cta, mask)
            ct.rec.step += 1
            res = _call(ct, fn, cta, mask, line)
            if ct.cp_ref in ct.group(cta):
                _commit(ct)
            return res
        return commit
    if rest in (("wait_group",), ("wait_all",)):
        keep = 0 if rest == ("wait_all",) else int(ins.operands[0].value)
        name = "cp.async.wait_all" if keep == 0 and rest == ("wait_all",) else f"cp.async.wait_group {keep}"

        def wait(cta, mask):
            ct = cta.trace
            if ct is None:
                return fn(cta, mask)
            ct.rec.step += 1
            ct.act(cta, "wait async", name, ("wait async", name))
            res = _call(ct, fn, cta, mask, line)
            if ct.cp_ref in ct.group(cta):
                if rest == ("wait_all",):
                    _commit(ct)
                while len(ct.cp_flying) > keep:
                    start, nbytes, number = ct.cp_flying.pop(0)
                    ct.rec.asyncs.append((ct.pid, f"cp.async group {number}", "copy in flight", start, ct.rec.step,
                                          {"group": number, "bytes": nbytes}))
                _level(ct)
            return res
        return wait
    size = ins.operands[2].value if len(ins.operands) > 2 and isinstance(ins.operands[2], Lit) else 0

    def copy(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        ct.rec.step += 1
        ct.act(cta, "cp.async", "cp.async", ("cp.async",))
        res = _call(ct, fn, cta, mask, line)
        warps = ct.group(cta)
        if ct.cp_ref < 0:
            ct.cp_ref = warps[0]
        if ct.cp_ref in warps:
            if not ct.cp_open:
                ct.cp_open = [ct.rec.step, 0]
            ct.cp_open[1] += size * len(cta.threads(mask))
        return res
    return copy


def _commit(ct) -> None:
    start, nbytes = ct.cp_open if ct.cp_open else (ct.rec.step, 0)
    ct.cp_flying.append((start, nbytes, ct.cp_groups))
    ct.cp_groups += 1
    ct.cp_open = []
    _level(ct)


def _level(ct) -> None:
    ct.fill_label = "cp.async groups in flight"
    ct.level = len(ct.cp_flying)
    ct.fill.append((ct.rec.step, ct.level))


# -------------------------------------------------------------------- wgmma
def wgmma(fn, ins, ctx):
    from .trace_ops import _plain
    head, line = ins.mods[0] if ins.mods else "", ins.line
    if head == "mma_async":
        def issue(cta, mask):
            ct = cta.trace
            if ct is None:
                return fn(cta, mask)
            ct.rec.step += 1
            ct.act(cta, "wgmma", "wgmma", ("wgmma",))
            before = len(cta.wgmma.inflight) if cta.wgmma is not None else 0
            res = _call(ct, fn, cta, mask, line)
            for r in cta.wgmma.inflight[before:]:
                entry = ct.wgmma.get((r.wg, r.group))
                if entry is None:
                    entry = ct.wgmma[(r.wg, r.group)] = [ct.rec.step, 0, set(), r.shape]
                entry[1] += 1
                if len(r.smem):
                    s = ct.stage_reading(int(r.smem.min()))
                    if s is not None:
                        entry[2].add(s)
            return res
        return issue
    if head == "wait_group":
        keep = int(ins.operands[0].value)
        name = f"wgmma.wait_group {keep}"

        def wait(cta, mask):
            ct = cta.trace
            if ct is None:
                return fn(cta, mask)
            ct.rec.step += 1
            ct.act(cta, "wait async", name, ("wait async", name))
            before = list(cta.wgmma.inflight) if cta.wgmma is not None else []
            res = _call(ct, fn, cta, mask, line)
            after = {id(r) for r in cta.wgmma.inflight} if cta.wgmma is not None else set()
            for key in sorted({(r.wg, r.group) for r in before if id(r) not in after}):
                entry = ct.wgmma.pop(key, None)
                if entry is not None:
                    ct.rec.asyncs.append((ct.pid, f"wgmma group (warpgroup {key[0]})", "wgmma in flight", entry[0],
                                          ct.rec.step, {"warpgroup": key[0], "group": key[1], "wgmma": entry[1],
                                                        "stages": sorted(entry[2]), "shape": entry[3]}))
            return res
        return wait
    return _plain(fn, line)


# -------------------------------------------------------------------- barriers
def named_barrier(fn, ins, ctx):
    from .trace_ops import _plain
    mods, line = ins.mods, ins.line
    if tuple(mods) == ("warp", "sync"):
        return _plain(fn, line)
    wait = "sync" in mods
    get_id = ctx.src(ins.operands[0], "u32")
    what = f"{ins.opcode}.{'sync' if wait else 'arrive'}"

    def run(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        ct.rec.step += 1
        bid = first_value(get_id, cta, mask)
        res = _call(ct, fn, cta, mask, line)
        if not wait:
            ct.act(cta, "arrive", f"{what} {bid}", ("arrive", "bar", bid), {"id": bid, "line": line})
        else:
            runs = ct.act(cta, "wait barrier", f"{what} {bid}", ("wait barrier", bid), {"id": bid, "line": line})
            blocked = res == BLOCK
            for r in runs:
                r.pending = blocked
            if blocked:
                ct.bar_wait.setdefault(bid, set()).update(ct.warps_of(cta, cta.split[1]))
        waiting = ct.bar_wait.get(bid)
        if waiting:
            b = (cta.bars or {}).get(bid)
            freed = [w for w in waiting if b is None or not b.waiting[32 * w:32 * w + 32].any()]
            if freed:
                ct.extend_waits(freed, ct.rec.step)
                waiting.difference_update(freed)
        return res
    return run


def cluster_barrier(fn, ins, ctx):
    line = ins.line
    wait = "wait" in ins.mods

    def run(cta, mask):
        ct = cta.trace
        if ct is None:
            return fn(cta, mask)
        ct.rec.step += 1
        res = _call(ct, fn, cta, mask, line)
        if wait:
            runs = ct.act(cta, "wait cluster", "barrier.cluster.wait", ("wait cluster",), {"line": line})
            for r in runs:
                r.pending = res is not None
        else:
            ct.act(cta, "arrive", "barrier.cluster.arrive", ("arrive", "cluster"), {"line": line})
        return res
    return run

