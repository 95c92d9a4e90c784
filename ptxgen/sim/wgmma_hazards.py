"""The wgmma ordering rules (docs/ptx_facts/wgmma.md §9b) as hazards, per warpgroup.

* In flight: from issue until a wgmma.wait_group retires its commit group, the accumulator and
  A-fragment registers of a wgmma may not be read or written by other instructions, and the
  shared bytes it reads may not be overwritten ("async-pending"). Only another wgmma of the same
  shape accumulating into the same registers may follow it without a wait (the ISA orders those).
* Fence: wgmma.fence must come before a warpgroup's first wgmma and between any other access of
  registers and a wgmma that uses them as accumulators or A fragments ("missing-fence").

Other instructions are checked by a whole-program pass: every instruction naming a register some
wgmma uses is wrapped (the rest run untouched, so programs without wgmma pay nothing).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import async_order
from .errors import Fault
from .operands import Mem, Name, NotPred, PredPair, Vec
from .ops_warp import participating_warps
from .state import CtaState


@dataclass
class InFlight:
    wg: int
    group: int                 # commit group (the warpgroup's commit count at issue)
    d_slots: frozenset
    a_slots: frozenset
    shape: str
    smem: np.ndarray           # shared byte indices it reads
    line: int
    names: dict

    @property
    def slots(self) -> frozenset:
        return self.d_slots | self.a_slots


@dataclass
class WgmmaState:
    commits: np.ndarray
    fenced: np.ndarray                                  # bool per warpgroup: a fence was executed
    touched: dict = field(default_factory=dict)         # slot -> int64 per warpgroup: line, 0 none
    inflight: list = field(default_factory=list)


def state_of(cta: CtaState) -> WgmmaState:
    if cta.wgmma is None:
        nwg = (cta.nwarps + 3) // 4
        cta.wgmma = WgmmaState(np.zeros(nwg, dtype=np.int64), np.zeros(nwg, dtype=bool))
    return cta.wgmma


def warpgroups_of(cta: CtaState, warps, what: str) -> np.ndarray:
    """Warpgroups executing a warpgroup-collective instruction; all 4 warps of each must take part."""
    warp_ids = np.arange(cta.nwarps) if warps is None else np.asarray(warps)
    groups = np.unique(warp_ids // 4)
    for wg in groups.tolist():
        have = int(np.count_nonzero(warp_ids // 4 == wg))
        if have != 4:
            exists = min(4, cta.nwarps - 4 * wg)
            why = (f"the CTA has only {exists} warps there (a warpgroup is 4 warps: use a multiple of "
                   "128 threads)") if exists < 4 else "the others did not execute it"
            raise Fault("divergence", f"{what} executed by {have} of the 4 warps of warpgroup {wg}: {why}")
    return groups


def active_groups(cta: CtaState, mask) -> np.ndarray:
    """bool per warpgroup: some thread of it executes the instruction."""
    nwg = (cta.nwarps + 3) // 4
    if mask is None:
        return np.ones(nwg, dtype=bool)
    padded = np.zeros(nwg * 128, dtype=bool)
    padded[: cta.n] = mask
    return padded.reshape(nwg, 128).any(axis=1)


def check_issue(st: WgmmaState, groups: np.ndarray, d_slots: tuple, a_slots: tuple, shape: str,
                names: dict) -> None:
    mine_d, mine_a = frozenset(d_slots), frozenset(a_slots)
    for wg in groups.tolist():
        if not st.fenced[wg]:
            raise Fault("missing-fence", f"warpgroup {wg} issues its first wgmma without a wgmma.fence "
                        "before it; add wgmma.fence.sync.aligned")
        for slot in d_slots + a_slots:
            touch = st.touched.get(slot)
            if touch is not None and touch[wg]:
                raise Fault("missing-fence", f"register {names[slot]} was accessed at line {int(touch[wg])} "
                            f"after the last wgmma.fence of warpgroup {wg}; put wgmma.fence.sync.aligned "
                            "between that access and this wgmma")
        for rec in st.inflight:
            if rec.wg != wg:
                continue
            chained = rec.shape == shape and rec.d_slots == mine_d
            clash = (rec.d_slots & (mine_d | mine_a)) | (rec.a_slots & mine_d)
            if clash and not chained:
                slot = min(clash)
                raise Fault("async-pending", f"register {names.get(slot, rec.names.get(slot))} is used by the "
                            f"wgmma at line {rec.line} still in flight (only a wgmma of the same shape "
                            "accumulating into the same registers may follow without a wgmma.wait_group)")


def check_access(cta: CtaState, mask, slots: frozenset, line: int, names: dict) -> None:
    """Run before an ordinary instruction touching registers some wgmma uses."""
    st = cta.wgmma
    if st is None:
        return
    active = active_groups(cta, mask)
    for rec in st.inflight:
        if active[rec.wg] and rec.slots & slots:
            slot = min(rec.slots & slots)
            raise Fault("async-pending", f"register {names[slot]} is an operand of the wgmma at line "
                        f"{rec.line}, still in flight in warpgroup {rec.wg}; retire it with "
                        "wgmma.wait_group first")
    for slot in slots:
        touch = st.touched.get(slot)
        if touch is None:
            touch = st.touched[slot] = np.zeros(len(active), dtype=np.int64)
        touch[active] = line


def fence(cta: CtaState, mask) -> None:
    groups = warpgroups_of(cta, participating_warps(cta, mask), "wgmma.fence")
    st = state_of(cta)
    st.fenced[groups] = True
    for touch in st.touched.values():
        touch[groups] = 0


def commit(cta: CtaState, mask) -> None:
    groups = warpgroups_of(cta, participating_warps(cta, mask), "wgmma.commit_group")
    st = state_of(cta)
    st.commits[groups] += 1


def wait(cta: CtaState, mask, keep: int, line: int = 0) -> None:
    """Retire every wgmma of the waiting warpgroups older than their `keep` newest committed groups.
    Its shared operands may be rewritten by other threads only once a barrier or mbarrier phase
    orders them after this wait (async_order.py)."""
    groups = warpgroups_of(cta, participating_warps(cta, mask), "wgmma.wait_group")
    st = state_of(cta)
    waiting = np.zeros(len(st.commits), dtype=bool)
    waiting[groups] = True
    remaining = []
    for rec in st.inflight:
        if waiting[rec.wg] and rec.group < st.commits[rec.wg] - keep:
            if len(rec.smem):
                np.subtract.at(cta.smem.async_reads, rec.smem, 1)
                waiters = np.zeros(cta.n, dtype=bool)
                waiters[rec.wg * 128:(rec.wg + 1) * 128] = True
                async_order.retire(cta, rec.smem, waiters, f"the wgmma at line {rec.line}",
                                   f"warpgroup {rec.wg}", line)
        else:
            remaining.append(rec)
    st.inflight = remaining


def _operand_slots(op, regs: dict) -> set:
    if op is None:
        return set()
    if isinstance(op, Name):
        return {regs[op.name][0]} if op.name in regs else set()
    if isinstance(op, Vec):
        return set().union(*(_operand_slots(i, regs) for i in op.items)) if op.items else set()
    if isinstance(op, Mem):
        return _operand_slots(op.base, regs) if op.base is not None else set()
    if isinstance(op, NotPred):
        return _operand_slots(op.name, regs)
    if isinstance(op, PredPair):
        return _operand_slots(op.first, regs) | _operand_slots(op.second, regs)
    return set()


def register_pass(ctx, slots: set) -> None:
    """Remember the wgmma operand registers; once per program, wrap the instructions touching them."""
    watched = ctx.passes.get("wgmma-watched")
    if watched is None:
        watched_slots: set = set()

        def run_pass(instrs, ops):
            names = {slot: name for name, (slot, _) in ctx.regs.items()}
            out = []
            for ins, op in zip(instrs, ops):
                touched = frozenset()
                if ins.opcode != "wgmma":
                    found = set().union(*(_operand_slots(o, ctx.regs) for o in ins.operands)) \
                        if ins.operands else set()
                    touched = frozenset(found & watched_slots)
                out.append(_wrap(op, touched, ins.line, names) if touched else op)
            return out
        run_pass.slots = watched_slots
        ctx.passes["wgmma-watched"] = watched = run_pass
    watched.slots.update(slots)


def _wrap(op: tuple, slots: frozenset, line: int, names: dict) -> tuple:
    fn, guard, negated = op

    def checked(cta: CtaState, mask):
        check_access(cta, mask, slots, line, names)
        return fn(cta, mask)
    for attr in ("yields", "communicates", "releases"):
        if hasattr(fn, attr):
            setattr(checked, attr, getattr(fn, attr))
    return checked, guard, negated
