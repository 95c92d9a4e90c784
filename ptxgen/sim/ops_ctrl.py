"""Control flow (bra, ret, exit), CTA barriers and bar.warp.sync.

The CTA runs in lock step with one program counter, so a branch must go the same way for every
active thread; a predicated ret/exit just retires the threads whose predicate is true. A barrier
starts a new epoch for race detection, completes pending acquires (sync.py) and is a point where
the scheduler may switch CTAs.
"""
from __future__ import annotations

import numpy as np

from .errors import Fault
from .operands import Lit
from .parse import Instr
from .program import mark
from .state import CtaState

EXIT = 1 << 30  # program counter meaning "this CTA is done"


def compile_bra(ins: Instr, ctx):
    if any(m != "uni" for m in ins.mods):
        raise ctx.fail(f"bra modifier .{ins.mods[0]} is not supported")
    if len(ins.operands) != 1:
        raise ctx.fail("bra takes one label")
    target = ctx.label(ins.operands[0])

    def run(cta: CtaState, mask):
        if mask is None:
            return target
        taken = int(np.count_nonzero(mask))
        if taken == cta.n_active:
            return target
        if taken == 0:
            return None
        raise Fault("divergence", f"branch taken by {taken} of {cta.n_active} active threads "
                    f"(first taking thread {int(np.flatnonzero(mask)[0])}, first not taking "
                    f"{int(np.flatnonzero(cta.active & ~mask)[0])}); the simulator needs CTA-uniform branches")
    return run


def compile_exit(ins: Instr, ctx):
    if ins.mods or ins.operands:
        raise ctx.fail(f"{ins.opcode} takes no modifiers or operands here")

    def run(cta: CtaState, mask):
        cta.exit_threads(mask)
        return EXIT if cta.n_active == 0 else None
    return run


def compile_barrier(ins: Instr, ctx):
    mods = [m for m in ins.mods if m != "cta"]
    if ins.opcode == "bar":
        ok = mods == ["sync"]
    else:
        ok = mods in (["sync"], ["sync", "aligned"])
    if not ok:
        raise ctx.fail(f"{ins.opcode}.{'.'.join(ins.mods)} is not supported (only bar.sync / barrier.sync)")
    ops = ins.operands
    if len(ops) not in (1, 2) or not all(isinstance(o, Lit) and o.kind == "int" for o in ops):
        raise ctx.fail("barrier id and thread count must be immediates")
    if not 0 <= ops[0].value < 16:
        raise ctx.fail(f"barrier id {ops[0].value} is outside 0..15")
    count = int(ops[1].value) if len(ops) == 2 else None
    if count is not None and (count <= 0 or count % 32):
        raise ctx.fail(f"barrier thread count {count} must be a positive multiple of 32")

    def run(cta: CtaState, mask):
        if count is not None and count != cta.n:
            raise Fault("unsupported", f"barrier with {count} threads in a CTA of {cta.n} (padded) threads; "
                        "only whole-CTA barriers are simulated")
        if mask is not None and int(np.count_nonzero(mask)) != cta.n_active:
            raise Fault("divergence", "barrier reached by only some of the active threads")
        cta.epoch += 1
        cta.sync.barrier()
    return mark(run, yields=True)


def compile_warp_barrier(ins: Instr, ctx):
    """bar.warp.sync with a full-warp mask: every lane of each warp must reach it, and it orders
    the warp's memory accesses. Race detection keeps one epoch per CTA, so the ordering is
    credited only where the warp is the whole CTA (exact there); in a larger CTA the race
    checker does not credit it, so a race it alone would prevent is reported, never hidden."""
    ops = ins.operands
    if len(ops) != 1 or not (isinstance(ops[0], Lit) and ops[0].kind == "int"
                             and ops[0].value & 0xFFFFFFFF == 0xFFFFFFFF):
        raise ctx.fail("bar.warp.sync is simulated with an immediate full-warp mask (-1 or 0xffffffff) only")

    def run(cta: CtaState, mask):
        if mask is not None and int(np.count_nonzero(mask)) != cta.n_active:
            raise Fault("divergence", "bar.warp.sync reached by only some of the active threads")
        lanes = cta.active.reshape(-1, 32)
        if (lanes.any(axis=1) & ~lanes.all(axis=1)).any():
            raise Fault("divergence", "bar.warp.sync with a full mask in a warp some of whose lanes exited")
        if cta.n == 32:
            cta.epoch += 1
            cta.sync.barrier()
    return mark(run, yields=True)


def compile_bar(ins: Instr, ctx):
    if tuple(ins.mods) == ("warp", "sync"):
        return compile_warp_barrier(ins, ctx)
    return compile_barrier(ins, ctx)


OPS = {"bra": compile_bra, "ret": compile_exit, "exit": compile_exit,
       "bar": compile_bar, "barrier": compile_barrier}
