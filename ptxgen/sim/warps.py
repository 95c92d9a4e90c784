"""Warps of a CTA running independently: thread groups, each with its own program counter.

Fast path: a CTA whose threads all follow one path runs as ONE group. Its pc and thread mask live
in CtaState (pc, mask_all, n_active), nothing is parked in cta.groups, and scheduler.run_slice is
the lock-step loop it always was. A branch the running group's threads disagree on splits it in
two (the executor returns DIVERGE); a barrier some of them must wait at parks those (BLOCK).

Which group runs, and why that reconverges: the ready group with the LOWEST pc. After a forward
branch splits a warp (a predicated branch around a block, an elect.sync-guarded section) the part
with the lower pc runs until it reaches the other part's pc, where the two merge; threads that stay
in a loop longer than others run until they leave it too. Groups at one pc always merge (unless they
wait at different barriers), and one group holding every non-exited thread is the fast path again.

A group gives the processor away (warp-specialised kernels: a producer warp issuing TMA, consumer
warpgroups issuing wgmma, each waiting on mbarriers the other side signals):
* BLOCKED at a named barrier (named_barriers.py) until that barrier completes;
* SPIN after an mbarrier wait or a barrier.cluster.wait that failed (cta.polled): the lowest-pc ready group other than this one
  runs; spinning groups run again, oldest first, only while no group is ready;
* after FAIR_BACKEDGES taken backward branches without a switch (a loop spinning on a plain shared
  flag set by another group), so such loops make progress too.
No group ready and none spinning is a deadlock naming the barriers they wait at; groups that spin on
an mbarrier that cannot complete are reported by async_proxy.note_stall (the CTA-level machinery).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import HazardError

READY, SPIN, BLOCKED = 0, 1, 2
DIVERGE = -1        # executor result: cta.split = (target, taken mask) of a divergent branch
BLOCK = -2          # executor result: cta.split = (barrier key, waiting mask, line)
FAIR_BACKEDGES = 512


@dataclass
class Group:
    """Threads that share a program counter while the CTA is divergent."""
    pc: int
    mask: np.ndarray          # bool per thread
    n: int                    # threads in mask
    state: int = READY
    bar: int = -1             # barrier key while BLOCKED (named_barriers.py)
    line: int = 0             # PTX line of that barrier instruction


def stop_pc(cta, nops: int) -> int:
    """Where the running group must stop: the lowest pc of a parked ready group (nops if none)."""
    groups = cta.groups
    if not groups:
        return nops
    return min((g.pc for g in groups if g.state == READY), default=nops)


def _current(cta, pc: int) -> Group:
    return Group(pc, cta.group_mask(), cta.n_active)


def _enter(cta, group: Group) -> None:
    cta.pc, cta.mask_all, cta.n_active = group.pc, group.mask, group.n
    cta.fair = 0
    cta.polled = False
    if not cta.groups and np.array_equal(group.mask, cta.active):   # reconverged: the fast path
        cta.mask_all = None if group.n == cta.n else cta.active


def _merge(groups: list[Group]) -> list[Group]:
    """Merge groups at the same pc (and, if blocked, at the same barrier); order is kept."""
    out: list[Group] = []
    where: dict[tuple[int, int], int] = {}
    for g in groups:
        key = (g.pc, g.bar if g.state == BLOCKED else -1)
        k = where.get(key)
        if k is None:
            where[key] = len(out)
            out.append(g)
            continue
        h = out[k]
        state = READY if READY in (h.state, g.state) else h.state
        out[k] = Group(h.pc, h.mask | g.mask, h.n + g.n, state, h.bar, h.line)
    return out


def _schedule(cta, program, groups: list[Group], avoid: Group | None = None) -> None:
    """Run the lowest-pc ready group (another than `avoid` if there is one), else the oldest spinning
    one; with neither, every group waits at a barrier that cannot complete: deadlock."""
    groups = _merge([g for g in groups if g.n])
    ready = [g for g in groups if g.state == READY]
    choice = None
    if ready:
        others = [g for g in ready if g is not avoid] or ready
        choice = min(others, key=lambda g: g.pc)
    else:
        spinning = [g for g in groups if g.state == SPIN]
        if spinning:
            choice = ([g for g in spinning if g is not avoid] or spinning)[0]
    if choice is None:
        raise _deadlock(cta, program, groups)
    cta.groups = [g for g in groups if g is not choice]
    choice.state = READY
    _enter(cta, choice)


def diverge(cta, program, pc: int) -> None:
    """The branch at `pc` was taken by some of the running group's threads: split the group. The
    others go on at pc + 1, or at a pc the executor names third in cta.split (brx.idx: the rest
    execute it again, each round sending the threads of one index to their target)."""
    target, taken, *rest_pc = cta.split
    cta.split = None
    mask = cta.group_mask()
    rest = mask & ~taken
    n_taken = int(np.count_nonzero(taken))
    _schedule(cta, program, cta.groups + [Group(target, taken, n_taken),
                                          Group(rest_pc[0] if rest_pc else pc + 1, rest, cta.n_active - n_taken)])


def block(cta, program, pc: int) -> None:
    """Threads of the running group wait at the barrier before `pc`; the others go on."""
    key, waiting, line = cta.split
    cta.split = None
    mask = cta.group_mask()
    stay = mask & ~waiting
    n_wait = int(np.count_nonzero(waiting))
    _schedule(cta, program, cta.groups + [Group(pc, waiting, n_wait, BLOCKED, key, line),
                                          Group(pc, stay, cta.n_active - n_wait)])


def after_yield(cta, program, pc: int) -> None:
    """After a yield point: a group whose mbarrier wait failed lets another group run."""
    cta.pc = pc
    if not cta.polled:
        return
    cur = _current(cta, pc)
    cur.state = SPIN
    if any(g.state == READY for g in cta.groups):
        cta.sync.iter_fresh = True      # another group can progress: this CTA is not stuck
    _schedule(cta, program, cta.groups + [cur], avoid=cur)


def after_backedge(cta, program, pc: int) -> None:
    """Count backward branches; after FAIR_BACKEDGES, give the other groups a turn."""
    cta.pc = pc
    cta.fair += 1
    if cta.fair >= FAIR_BACKEDGES or cta.polled:
        cur = _current(cta, pc)
        cur.state = SPIN
        if any(g.state == READY for g in cta.groups):
            cta.sync.iter_fresh = True      # another group can progress: this CTA is not stuck
        _schedule(cta, program, cta.groups + [cur], avoid=cur)


def reached(cta, program, pc: int, nops: int) -> None:
    """The running group finished (pc >= nops) or got to a parked ready group's pc."""
    if pc >= nops:
        if cta.n_active:
            cta.exit_threads(None)      # ran off the end: these threads are done
        from .named_barriers import recheck   # exits may complete barriers waiting for them
        recheck(cta)
        _schedule(cta, program, list(cta.groups))
        return
    _schedule(cta, program, cta.groups + [_current(cta, pc)])


def release(cta, key: int, lanes: np.ndarray) -> None:
    """Barrier `key` completed for `lanes`: parked groups waiting there become ready."""
    out = []
    for g in cta.groups:
        if g.state != BLOCKED or g.bar != key:
            out.append(g)
            continue
        free = g.mask & lanes
        n_free = int(np.count_nonzero(free))
        if n_free == g.n:
            g.state, g.bar = READY, -1
            out.append(g)
        elif n_free:
            out.append(Group(g.pc, free, n_free))
            out.append(Group(g.pc, g.mask & ~lanes, g.n - n_free, BLOCKED, g.bar, g.line))
        else:
            out.append(g)
    cta.groups = out


def _warps_text(mask: np.ndarray) -> str:
    warps = np.flatnonzero(mask.reshape(-1, 32).any(axis=1)).tolist()
    if len(warps) > 1 and warps == list(range(warps[0], warps[-1] + 1)):
        return f"warps {warps[0]}-{warps[-1]}"
    return ("warp " if len(warps) == 1 else "warps ") + ", ".join(map(str, warps))


def _deadlock(cta, program, groups: list[Group]) -> HazardError:
    from .named_barriers import describe
    parts = [f"{_warps_text(g.mask)} ({g.n} threads) at line {g.line}, {describe(cta, g.bar)}"
             for g in groups]
    line = groups[0].line if groups else program.op_lines[-1]
    text = program.lines[line - 1] if 0 < line <= len(program.lines) else ""
    detail = ("every thread group of the CTA waits at a barrier that cannot complete: " + "; ".join(parts)
              + f" [CTA {cta.cta_xyz}]; no other thread is left to arrive (check the barrier ids and "
              "thread counts of the bar.sync/bar.arrive pairs)")
    return HazardError("deadlock", line, detail, text)
