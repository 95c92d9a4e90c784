"""Cluster launch control (sm_100a; docs/ptx_facts/sm100_formats.md §4) and the .b128 registers
its responses travel in.

    clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
        {.multicast::cluster::all}.b128 [resp], [mbar];
    clusterlaunchcontrol.query_cancel.is_canceled.pred.b128          p, rq;
    clusterlaunchcontrol.query_cancel.get_first_ctaid::{x,y,z}.b32.b128  r, rq;
    clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128    {x, y, z, _}, rq;
    mov.b128 rq, {lo64, hi64};   mov.b128 {lo64, hi64}, rq;   mov.b128 rq, rq2;

The launch keeps a LaunchQueue: clusters in launch order, each pending, started or cancelled. A
try_cancel cancels the first pending cluster (deterministic; it then never launches) and answers
with its first CTA's ctaid, or fails when every cluster has started or been cancelled. The answer
is decided when try_cancel issues and lands like a TMA load: 16 bytes in flight to [resp],
complete-tx 16 on [mbar] (so reading it before the wait is an async-pending hazard). The response
is opaque in the ISA; here it is four u32: ctaid x, y, z and 1 on success, all-ones x/y/z and 0 on
failure (get_first_ctaid of a failed response is undefined: the all-ones value fails loudly if used
as an index). A .b128 register is two 64-bit slots, low half first (program.py).
"""
from __future__ import annotations

import numpy as np

from .async_proxy import InFlight, barrier_at, check_barrier_address
from .cluster import CLUSTER_STRIDE
from .cluster import targets as cluster_targets
from .errors import Fault
from .operands import Name, Vec
from .ops_mem import address_getter, per_thread
from .parse import Instr
from .state import CtaState, store

PENDING, STARTED, CANCELLED = 0, 1, 2
RESPONSE_BYTES = 16
FAILED_CTAID = 0xFFFFFFFF
TARGETS = ("sm_100a", "sm_120a")     # the simulator's known targets among the ISA's sm_100+ list


class LaunchQueue:
    """The clusters of one launch in launch order (machine.launch's CTA names, `csize` per cluster)."""

    def __init__(self, names: list[tuple[int, int, int]], csize: int):
        self.names, self.csize = names, csize
        self.state = np.zeros(len(names) // csize, dtype=np.int8)
        self.cancels = 0

    def start(self, slot: int) -> None:
        self.state[slot // self.csize] = STARTED

    def cancelled(self, slot: int) -> bool:
        """Whether the cluster of CTA `slot` was cancelled (the launch must skip it)."""
        return bool(self.state[slot // self.csize] == CANCELLED)

    def cancel_next(self) -> tuple[int, int, int] | None:
        pending = np.flatnonzero(self.state == PENDING)
        if len(pending) == 0:
            return None
        cluster = int(pending[0])
        self.state[cluster] = CANCELLED
        self.cancels += 1
        return self.names[cluster * self.csize]


def uses_clc(entry) -> bool:
    """Whether the entry issues try_cancel (machine.launch then keeps a LaunchQueue)."""
    return any(isinstance(i, Instr) and i.opcode == "clusterlaunchcontrol" for i in entry.body)


def response(ctaid: tuple[int, int, int] | None) -> np.ndarray:
    words = [FAILED_CTAID] * 3 + [0] if ctaid is None else [*ctaid, 1]
    return np.array(words, dtype="<u4").view(np.uint8)


def _require_target(ctx, what: str) -> None:
    target = (getattr(ctx, "target", "") or "").replace(",", " ").split()
    if not target or target[0] not in TARGETS:
        raise ctx.fail(f"{what} needs `.target sm_100a` or newer (PTX ISA clusterlaunchcontrol: sm_100+); the "
                       f"module targets {target[0] if target else 'nothing'}")


def compile_clc(ins: Instr, ctx):
    mods = tuple(ins.mods)
    _require_target(ctx, "clusterlaunchcontrol")
    if mods[:1] == ("try_cancel",):
        return _compile_try_cancel(ins, ctx, mods[1:])
    if mods[:1] == ("query_cancel",):
        return _compile_query(ins, ctx, mods[1:])
    raise ctx.fail(f"clusterlaunchcontrol.{'.'.join(mods)}: expected try_cancel or query_cancel")


def _compile_try_cancel(ins: Instr, ctx, mods: tuple):
    base = ("async", "shared::cta", "mbarrier::complete_tx::bytes")
    multicast = "multicast::cluster::all" in mods
    if tuple(m for m in mods if m != "multicast::cluster::all") != base + ("b128",):
        raise ctx.fail("write clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
                       "{.multicast::cluster::all}.b128 [addr], [mbar]")
    if len(ins.operands) != 2:
        raise ctx.fail("clusterlaunchcontrol.try_cancel takes [addr], [mbar]")
    get_addr = address_getter(ctx, ctx.mem(ins.operands[0]), "shared")
    get_bar = address_getter(ctx, ctx.mem(ins.operands[1]), "shared")
    line, what = ctx.line, "clusterlaunchcontrol.try_cancel"

    def run(cta: CtaState, mask):
        queue = cta.launch_queue
        if queue is None:
            raise Fault("unsupported", f"{what} outside machine.launch (no launch queue)")
        tids = cta.threads(mask)
        addrs, bars = per_thread(get_addr(cta.R), tids), per_thread(get_bar(cta.R), tids)
        for k, tid in enumerate(tids.tolist()):
            data = response(queue.cancel_next())
            for peer, off, mbar in _destinations(cta, int(addrs[k]), int(bars[k]), multicast, what):
                _land_later(peer, tid, off, data, mbar, line, what)
    return run


def _destinations(cta: CtaState, addr: int, mbar: int, multicast: bool, what: str):
    """[(CTA, response offset, mbarrier offset)]: this CTA, or with .multicast::cluster::all every
    CTA of the cluster at the same offsets (each signalling its own mbarrier)."""
    if addr % RESPONSE_BYTES:
        raise Fault("misaligned", f"{what}: response address {addr:#x} is not 16-byte aligned")
    size = cta.cluster.cluster.size if multicast and cta.cluster is not None else 1
    out = []
    for r in range(size):
        rel = (lambda a: r * CLUSTER_STRIDE + a % CLUSTER_STRIDE) if multicast else (lambda a: a)
        (peer, _, offs), = cluster_targets(cta, np.array([rel(addr)], dtype=np.int64), RESPONSE_BYTES, what)
        (bpeer, _, boffs), = cluster_targets(cta, np.array([rel(mbar)], dtype=np.int64), 8, what + " mbarrier")
        out.append((peer, int(offs[0]), int(boffs[0])))
    return out


def _land_later(cta: CtaState, tid: int, off: int, data: np.ndarray, mbar: int, line: int, what: str) -> None:
    """Put the response in flight on the mbarrier, as a TMA load's bytes are (async_proxy.py)."""
    check_barrier_address(cta, np.array([mbar], dtype=np.int64), what)
    bar = barrier_at(cta, mbar, what)
    idx = off + np.arange(RESPONSE_BYTES, dtype=np.int64)
    cta.smem.check_not_pending(idx, np.full(RESPONSE_BYTES, tid), 1, what + " writes")
    cta.smem.pending[idx] += 1
    bar.inflight.append(InFlight(idx, data, RESPONSE_BYTES, line))
    bar.version += 1


def _b128(ctx, op, what: str) -> int:
    """The low slot of a .b128 register (its high half is the next slot)."""
    if not isinstance(op, Name) or op.name not in ctx.regs or ctx.regs[op.name][1] != 128:
        raise ctx.fail(f"{what} needs a .b128 register, got {op!r}")
    return ctx.regs[op.name][0]


def _compile_query(ins: Instr, ctx, mods: tuple):
    if len(ins.operands) != 2:
        raise ctx.fail("clusterlaunchcontrol.query_cancel takes d, response")
    src = _b128(ctx, ins.operands[1], "clusterlaunchcontrol.query_cancel")

    def words(cta: CtaState) -> tuple[np.ndarray, ...]:
        lo, hi = cta.R[src].astype(np.uint64), cta.R[src + 1].astype(np.uint64)
        mask32 = np.uint64(0xFFFFFFFF)
        return lo & mask32, lo >> np.uint64(32), hi & mask32, hi >> np.uint64(32)

    if mods == ("is_canceled", "pred", "b128"):
        slot, _ = ctx.dst(ins.operands[0], "pred")
        return lambda cta, mask: store(cta, slot, (words(cta)[3] & np.uint64(1)).astype(bool), mask)
    axes = {"get_first_ctaid::x": 0, "get_first_ctaid::y": 1, "get_first_ctaid::z": 2}
    if len(mods) == 3 and mods[0] in axes and mods[1:] == ("b32", "b128"):
        slot, _ = ctx.dst(ins.operands[0], "b32")
        axis = axes[mods[0]]
        return lambda cta, mask: store(cta, slot, words(cta)[axis].astype(np.uint32), mask)
    if mods == ("get_first_ctaid", "v4", "b32", "b128"):
        items = ctx.vec(ins.operands[0], 4, "get_first_ctaid.v4 destination")
        slots = [None if isinstance(it, Name) and it.name == "_" else ctx.dst(it, "b32")[0] for it in items]

        def run(cta: CtaState, mask):
            w = words(cta)
            for slot, value in zip(slots, (*w[:3], np.zeros_like(w[3]))):   # element 4 is unspecified: 0
                if slot is not None:
                    store(cta, slot, value.astype(np.uint32), mask)
        return run
    raise ctx.fail(f"clusterlaunchcontrol.query_cancel.{'.'.join(mods)} is not a form the PTX ISA defines")


def wrap_mov(inner):
    """mov.b128 (pack two .b64 into a .b128, unpack, or copy); other movs go to `inner`."""
    def compile_mov(ins: Instr, ctx):
        if tuple(ins.mods) != ("b128",):
            return inner(ins, ctx)
        dst, src = ins.operands if len(ins.operands) == 2 else (None, None)
        if isinstance(src, Vec) and isinstance(dst, Name):
            d = _b128(ctx, dst, "mov.b128")
            lo, hi = (ctx.src(it, "b64") for it in ctx.vec(src, 2, "mov.b128 source"))
            return _copy([(d, lo), (d + 1, hi)])
        if isinstance(dst, Vec) and isinstance(src, Name):
            s = _b128(ctx, src, "mov.b128")
            lo, hi = (ctx.dst(it, "b64")[0] for it in ctx.vec(dst, 2, "mov.b128 destination"))
            return _copy([(lo, lambda R: R[s]), (hi, lambda R: R[s + 1])])
        if isinstance(dst, Name) and isinstance(src, Name):
            d, s = _b128(ctx, dst, "mov.b128"), _b128(ctx, src, "mov.b128")
            return _copy([(d, lambda R: R[s]), (d + 1, lambda R: R[s + 1])])
        raise ctx.fail("mov.b128 takes d, {lo, hi} or {lo, hi}, a or d, a with .b128/.b64 registers")
    return compile_mov


def _copy(moves):
    """An executor storing each getter's 64-bit value into its slot (all read before any write)."""
    def run(cta: CtaState, mask):
        values = [get(cta.R).copy() for _, get in moves]
        for (slot, _), value in zip(moves, values):
            store(cta, slot, value, mask)
    return run


OPS = {"clusterlaunchcontrol": compile_clc}
