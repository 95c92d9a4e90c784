"""Running CTAs: one after another, or interleaved when they can talk to each other.

Inside a CTA, thread groups with their own program counters run one at a time (warps.py); a
CTA whose threads all follow one path is one group and runs in lock step. A program without
synchronising operations (no atom/red, no .relaxed/.acquire/.release/.volatile accesses, no
fence) cannot wait for another CTA, so its CTAs simply run to completion one after another (the
fast path).

Otherwise the CTAs run cooperatively, round-robin: a CTA gives way after every bar.sync, every
synchronising load, store or atomic, and every taken backward branch, so a CTA spinning on a flag
lets the CTA that will set it make progress. A persistent grid (one CTA per SM) runs whole. At
most a window of CTAs is resident at once (as many as the memory budget allows, at least 132):
the next CTA in launch order starts when one finishes, so waiting for an earlier CTA always works.
The CTAs of a thread block cluster (cluster.py) start together, as a group, once the window has
room for all of them: they are co-scheduled on hardware and may wait for each other.

A CTA whose iterations keep waiting (see below) backs off exponentially, skipping up to
MAX_BACKOFF - 1 of its turns, so hundreds of spinning CTAs cost little while one computes.

Deadlock: an "iteration" is what a CTA does between two taken backward branches. It is waiting if
it executed a synchronising load that returned exactly what the same instruction returned last
time, and made no progress (a new value, a global store, an atomic that changed memory). When
DEADLOCK_SWITCHES switches in a row come from waiting CTAs only, no CTA can ever change what the
others read, and a HazardError("deadlock") names the load the first of them keeps repeating. A
CTA whose waiting group has another thread group ready beside it (warps.py) is not waiting: that
group gets its turn within FAIR_BACKEDGES of the spinner's iterations, however many CTAs spin
meanwhile (counting them made 20+ CTAs of a cluster GEMM, each a producer thread spinning at the
exit barrier.cluster.wait while its consumers had yet to run, look deadlocked).
"""
from __future__ import annotations

from collections import deque
from typing import Callable

from .errors import Fault, HazardError
from .exit_checks import check_cta_end
from .memory import SharedMemory
from .program import Program
from .state import CtaState
from . import warps

MAX_STEPS_PER_CTA = 5_000_000
DEADLOCK_SWITCHES = 10_000
MAX_BACKOFF = 32             # a waiting CTA is run at most every this many turns


def run_slice(program: Program, cta: CtaState, switching: bool) -> int:
    """Run `cta` from cta.pc until it finishes or (if switching) reaches a switch point.

    Returns the thread-instructions executed; sets cta.done / cta.backedge. While the CTA is one
    thread group, `stop` is the program's end and this is the lock-step loop; otherwise the running
    group also stops where a parked group waits, and executors' DIVERGE/BLOCK results and yield
    points hand over between groups (warps.py)."""
    ops = program.ops
    yields = program.yields
    nops = len(ops)
    R = cta.R
    pc = cta.pc
    steps = cta.steps
    executed = 0
    stop = warps.stop_pc(cta, nops)
    while True:
        while pc < stop:
            fn, guard, negated = ops[pc]
            if guard < 0:
                mask = cta.mask_all
            else:
                g = R[guard]
                if negated:
                    g = ~g
                mask = g if cta.mask_all is None else g & cta.mask_all
                if not mask.any():
                    executed += cta.n_active
                    pc += 1
                    continue
                if cta.mask_all is None and mask.all():
                    mask = None
            executed += cta.n_active
            steps += 1
            try:
                nxt = fn(cta, mask)
            except Fault as f:
                raise hazard(program, pc, cta, f) from None
            if nxt is None:
                pc += 1
                if yields[pc - 1]:
                    if cta.groups:
                        warps.after_yield(cta, program, pc)
                        pc, stop = cta.pc, warps.stop_pc(cta, nops)
                    if switching:
                        cta.pc, cta.steps = pc, steps
                        return executed
            elif nxt >= 0:
                back = nxt <= pc
                pc = nxt
                if back:
                    if cta.groups:
                        warps.after_backedge(cta, program, pc)
                        pc, stop = cta.pc, warps.stop_pc(cta, nops)
                    if switching:
                        cta.pc, cta.steps, cta.backedge = pc, steps, True
                        return executed
            else:                           # the group splits (branch) or waits (barrier)
                back = nxt == warps.DIVERGE and cta.split[0] <= pc
                if nxt == warps.DIVERGE:
                    warps.diverge(cta, program, pc)
                else:
                    warps.block(cta, program, pc + 1)
                pc, stop = cta.pc, warps.stop_pc(cta, nops)
                if switching and (back or nxt == warps.BLOCK):
                    cta.pc, cta.steps, cta.backedge = pc, steps, back
                    return executed
            if steps > MAX_STEPS_PER_CTA:
                raise RuntimeError(f"CTA {cta.cta_xyz} ran more than {MAX_STEPS_PER_CTA} instructions; "
                                   f"infinite loop near PTX line {program.op_lines[min(pc, nops - 1)]}?")
        if pc >= nops and not cta.groups:
            break
        warps.reached(cta, program, pc, nops)   # this group ended, or met a parked group's pc
        pc, stop = cta.pc, warps.stop_pc(cta, nops)
    cta.pc, cta.steps, cta.done = pc, steps, True
    check_cta_end(program, cta)        # nothing asynchronous may outlive the CTA's shared memory
    return executed


def run_sequential(program: Program, cta: CtaState) -> int:
    return run_slice(program, cta, False)


def run_interleaved(program: Program, make: Callable[[int, SharedMemory | None], CtaState], count: int,
                    window: int, subset: bool, on_done: Callable[[int], None] | None = None,
                    group: int = 1, skip: Callable[[int], bool] | None = None) -> int:
    """Round-robin over CTAs 0..count-1 until all finish; raises HazardError("deadlock") if they cannot.

    At most `window` CTAs are resident; the next one starts (in launch order, reusing a finished
    CTA's shared window) when one finishes, as on hardware; CTAs start `group` at a time (a cluster)."""
    live: deque[CtaState] = deque()
    pool: list[SharedMemory] = []
    started = 0
    executed = 0
    quiet = 0
    finished = 0
    while live or started < count:
        while started < count and len(live) + group <= window:
            if skip is not None and skip(started):    # a cluster cancelled by try_cancel (ops_clc.py)
                started += group
                continue
            for _ in range(group):
                live.append(make(started, pool.pop() if pool else None))
                started += 1
        if not live:
            continue
        cta = live.popleft()
        if cta.skip:                 # backing off after waiting iterations (like nanosleep)
            cta.skip -= 1
            live.append(cta)
            continue
        cta.backedge = False
        executed += run_slice(program, cta, True)
        if cta.done:
            pool.append(cta.smem)
            cta.smem = None
            quiet = 0
            finished += 1
            if on_done is not None:  # progress reporting (machine.launch's on_cta_done)
                on_done(finished)
            continue
        s = cta.sync
        # a CTA whose spinning group has a ready group parked beside it is not stuck: that group
        # gets its turn within FAIR_BACKEDGES (warps.py), however many CTAs spin meanwhile
        waiting = s.iter_stale and not s.iter_fresh and not any(g.state == warps.READY for g in cta.groups)
        quiet = quiet + 1 if waiting else 0
        if cta.backedge:
            cta.streak = cta.streak + 1 if waiting else 0
            cta.skip = min(1 << cta.streak, MAX_BACKOFF) - 1 if waiting else 0
            s.iter_stale = s.iter_fresh = False
        live.append(cta)
        if quiet >= DEADLOCK_SWITCHES:
            raise _deadlock(program, list(live), subset, count - started)
    return executed


def _deadlock(program: Program, live: list[CtaState], subset: bool, waiting_to_start: int) -> HazardError:
    waiting = [c for c in live if c.sync.stale_line]
    first = waiting[0] if waiting else live[0]
    line = first.sync.stale_line or program.op_lines[min(first.pc, len(program.op_lines) - 1)]
    shown = ", ".join(f"CTA {c.cta_xyz} at line {c.sync.stale_line}" for c in waiting[:4])
    more = f" and {len(waiting) - 4} more" if len(waiting) > 4 else ""
    detail = (f"all {len(live)} running CTAs keep re-reading unchanged values ({shown}{more}) for "
              f"{DEADLOCK_SWITCHES} scheduler switches; nothing left running can change them")
    if waiting_to_start:
        detail += (f"; {waiting_to_start} more CTAs cannot start until one of the {len(live)} resident "
                   "ones finishes (waiting for a later CTA deadlocks on hardware too)")
    if subset:
        detail += "; only some CTAs of the grid were simulated (ctas=...), perhaps the awaited one was not"
    text = program.lines[line - 1] if 0 < line <= len(program.lines) else ""
    return HazardError("deadlock", line, detail, text)


def hazard(program: Program, pc: int, cta: CtaState, fault: Fault) -> HazardError:
    line = program.op_lines[pc]
    text = program.lines[line - 1] if 0 < line <= len(program.lines) else ""
    return HazardError(fault.kind, line, f"{fault.detail} [CTA {cta.cta_xyz}]", text)
