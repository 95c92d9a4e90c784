"""Control flow (bra, ret, exit), named barriers and bar.warp.sync.

A branch the running thread group disagrees on returns DIVERGE and the scheduler splits the group
(warps.py); `bra.uni` promises warp-uniformity, so a warp it splits is a divergence hazard. A
predicated ret/exit retires the threads whose predicate is true. Barriers (named_barriers.py) start
a new epoch for race detection, complete pending acquires (sync.py) and are points where the
scheduler may switch CTAs. The common case, every thread of a one-group CTA at a whole-CTA bar.sync,
completes at once without touching any barrier state (the fast path).
"""
from __future__ import annotations

import numpy as np

from . import async_order, named_barriers, register_budget
from .errors import Fault
from .operands import Lit
from .ops_sm90_misc import check_setmaxnreg_at_exit
from .tmem import check_exit
from .parse import Instr
from .program import mark
from .state import CtaState
from .warps import DIVERGE

EXIT = 1 << 30  # program counter meaning "this CTA is done"


def compile_bra(ins: Instr, ctx):
    if any(m != "uni" for m in ins.mods):
        raise ctx.fail(f"bra modifier .{ins.mods[0]} is not supported")
    if len(ins.operands) != 1:
        raise ctx.fail("bra takes one label")
    target = ctx.label(ins.operands[0])
    uni = "uni" in ins.mods

    def run(cta: CtaState, mask):
        if mask is None:
            return target
        taken = int(np.count_nonzero(mask))
        if taken == cta.n_active:
            return target
        if taken == 0:
            return None
        if uni:
            _check_warp_uniform(cta, mask)
        cta.split = (target, mask)
        return DIVERGE
    return run


def _check_warp_uniform(cta: CtaState, taken: np.ndarray) -> None:
    going = cta.group_mask()
    per_warp = taken.reshape(-1, 32)
    live = going.reshape(-1, 32)
    split = per_warp.any(axis=1) & (per_warp != live).any(axis=1)
    if split.any():
        w = int(np.flatnonzero(split)[0])
        t = int(np.flatnonzero(per_warp[w])[0]) + 32 * w
        u = int(np.flatnonzero(live[w] & ~per_warp[w])[0]) + 32 * w
        raise Fault("divergence", f"bra.uni is taken by thread {t} but not by thread {u} of warp {w}; "
                    ".uni promises that the branch is uniform in each warp (drop .uni if it is not)")


def compile_exit(ins: Instr, ctx):
    if ins.mods or ins.operands:
        raise ctx.fail(f"{ins.opcode} takes no modifiers or operands here")

    def run(cta: CtaState, mask):
        cta.exit_threads(mask)
        if cta.setmaxnreg:
            check_setmaxnreg_at_exit(cta)   # an exiting warp owes its warpgroup no setmaxnreg
            register_budget.check_at_end(cta)   # an .inc that overdrew the pool for good
        if cta.bars:
            named_barriers.recheck(cta)     # barriers waiting for the exited threads may complete
        if cta.tmem is not None and not cta.active.any():
            check_exit(cta)                 # tensor memory must be freed before the CTA ends
        return EXIT if cta.n_active == 0 else None
    return run


def compile_barrier(ins: Instr, ctx):
    """bar{.cta}.sync / .arrive and barrier{.cta}.sync / .arrive {.aligned}: a barrier id 0..15 and an
    optional (arrive: required) thread count, a multiple of 32, each an immediate or a register
    (CUTLASS's NamedBarrier passes both in registers) that must be uniform over the executing threads."""
    mods = [m for m in ins.mods if m != "cta"]
    aligned = ins.opcode == "bar" or "aligned" in mods
    kind = [m for m in mods if m != "aligned"]
    ok = kind in (["sync"], ["arrive"]) and (ins.opcode == "barrier" or "aligned" not in mods)
    if not ok:
        raise ctx.fail(f"{ins.opcode}.{'.'.join(ins.mods)} is not supported (bar.sync, bar.arrive, "
                       "barrier.sync{.aligned}, barrier.arrive{.aligned}; bar.red is not simulated)")
    wait = kind == ["sync"]
    ops = ins.operands
    if len(ops) not in (1, 2):
        raise ctx.fail(f"{ins.opcode} takes a barrier id and an optional thread count")
    if len(ops) == 1 and not wait:
        raise ctx.fail(f"{ins.opcode}.arrive needs a thread count: {ins.opcode}.arrive id, <threads>;")
    for op, what, ok in ((ops[0], "barrier id", lambda v: 0 <= v < 16),
                         (ops[-1] if len(ops) == 2 else None, "barrier thread count",
                          lambda v: 0 < v <= 1024 and v % 32 == 0)):
        if isinstance(op, Lit) and (op.kind != "int" or not ok(op.value)):
            raise ctx.fail(f"{what} {op.value} is outside its range (id 0..15; count a positive "
                           "multiple of 32, at most 1024)")
    get_id = ctx.src(ops[0], "u32")
    get_count = ctx.src(ops[1], "u32") if len(ops) == 2 else None
    what = f"{ins.opcode}.{'.'.join(ins.mods)}"
    line = ctx.line

    def run(cta: CtaState, mask):
        if wait and get_count is None and not cta.groups and not cta.bars and (
                mask is None or int(np.count_nonzero(mask)) == cta.n_active):
            cta.epoch += 1                  # the whole (one-group) CTA is here: complete at once
            cta.sync.barrier()
            async_order.order_all(cta)
            return None
        key = _uniform(cta, mask, get_id, "barrier id", what)
        count = None if get_count is None else _uniform(cta, mask, get_count, "thread count", what)
        if not 0 <= key < 16:
            raise Fault("out-of-bounds", f"{what}: barrier id {key} is outside 0..15")
        if count is not None and not (0 < count <= 1024 and count % 32 == 0):
            raise Fault("out-of-bounds", f"{what}: thread count {count} is not a positive multiple of 32 "
                        "(at most 1024)")
        return named_barriers.arrive(cta, mask, key, count, wait, aligned, what, line)
    return mark(run, yields=True)


def _uniform(cta: CtaState, mask, get, name: str, what: str) -> int:
    """A barrier operand's value; it must be the same in every executing thread."""
    values = np.broadcast_to(get(cta.R), (cta.n,))
    values = values if mask is None else values[mask]
    first = int(values[0])
    if (values != values[0]).any():
        raise Fault("divergence", f"{what}: the {name} differs between the executing threads "
                    f"({first} and {int(values[values != values[0]][0])})")
    return first


def compile_warp_barrier(ins: Instr, ctx):
    """bar.warp.sync with a full-warp mask: a barrier of the warp's lanes (named_barriers.WARP_KEY).
    Every non-exited lane must take part. Race detection keeps one epoch per CTA, so the ordering is
    credited only where the warp is the whole CTA (exact there); in a larger CTA the race
    checker does not credit it, so a race it alone would prevent is reported, never hidden."""
    ops = ins.operands
    if len(ops) != 1 or not (isinstance(ops[0], Lit) and ops[0].kind == "int"
                             and ops[0].value & 0xFFFFFFFF == 0xFFFFFFFF):
        raise ctx.fail("bar.warp.sync is simulated with an immediate full-warp mask (-1 or 0xffffffff) only")
    line = ctx.line

    def run(cta: CtaState, mask):
        lanes = cta.active.reshape(-1, 32)
        if (lanes.any(axis=1) & ~lanes.all(axis=1)).any():
            raise Fault("divergence", "bar.warp.sync with a full mask in a warp some of whose lanes exited")
        if not cta.groups:
            if mask is not None and int(np.count_nonzero(mask)) != cta.n_active:
                raise Fault("divergence", "bar.warp.sync reached by only some of the lanes of a warp, "
                            "and the other lanes are not on their way to it")
            if cta.n == 32:
                cta.epoch += 1
                cta.sync.barrier()
                async_order.order_all(cta)
            return None
        going = cta.group_mask() if mask is None else mask
        result = None
        for w in np.flatnonzero(going.reshape(-1, 32).any(axis=1)).tolist():
            own = np.zeros(cta.n, dtype=bool)
            own[32 * w:32 * w + 32] = going[32 * w:32 * w + 32]
            if named_barriers.arrive(cta, own, named_barriers.WARP_KEY + w, 32, True, False,
                                     "bar.warp.sync", line) is not None:
                result = cta.split if result is None else (result[0], result[1] | cta.split[1], line)
        cta.split = result
        return None if result is None else named_barriers.BLOCK
    return mark(run, yields=True)


def compile_bar(ins: Instr, ctx):
    if tuple(ins.mods) == ("warp", "sync"):
        return compile_warp_barrier(ins, ctx)
    return compile_barrier(ins, ctx)


OPS = {"bra": compile_bra, "ret": compile_exit, "exit": compile_exit,
       "bar": compile_bar, "barrier": compile_barrier}
