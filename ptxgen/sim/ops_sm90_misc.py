"""The small Hopper instructions GEMM kernels use: stmatrix, elect.sync, setmaxnreg, griddepcontrol.

stmatrix (docs/ptx_facts/warp_specialisation.md §9i, shared_memory.md §4) is the inverse of
ldmatrix: the same address-supplying lanes and the same register/lane tables
(ops_warp.LDMATRIX_FLAT), data flowing the other way. elect.sync elects the lowest lane of
membermask; every lane of membermask must execute it. setmaxnreg
(docs/ptx_facts/warp_specialisation.md §9g) only redistributes registers: the simulator checks N,
that every warp of a warpgroup executes the same setmaxnreg sequence (SetmaxnregLog) and, under
.maxnreg, the CTA's register pool (register_budget.py). griddepcontrol (programmatic dependent launch) is a no-op on one launch.
"""
from __future__ import annotations

import numpy as np

from dataclasses import dataclass, field

from . import register_budget
from .errors import Fault
from .memory import bank_wavefronts
from .operands import Lit, PredPair
from .ops_mem import address_getter
from .ops_warp import LDMATRIX_FLAT, matrix_row_offsets, participating_warps
from .parse import Instr
from .state import CtaState, store
from .wgmma_hazards import warpgroups_of


def require_sm90a(ctx, what: str, targets: tuple[str, ...] = ("sm_90a",)) -> None:
    """wgmma exists only on the architecture-specific target sm_90a, setmaxnreg on sm_90a and
    sm_100a/sm_120a (docs/ptx_facts/module.md §10, sm100_formats.md §6)."""
    target = (getattr(ctx, "target", "") or "").replace(",", " ").split()
    if not target or target[0] not in targets:
        raise ctx.fail(f"{what} needs `.target {'` or `'.join(targets)}`; the module targets "
                       f"{target[0] if target else 'nothing'}")


def compile_stmatrix(ins: Instr, ctx):
    mods = set(ins.mods)
    count = [m for m in ins.mods if m in ("x1", "x2", "x4")]
    allowed = {"sync", "aligned", "m8n8", "x1", "x2", "x4", "trans", "shared", "shared::cta", "b16"}
    if not {"sync", "aligned", "m8n8", "b16"} <= mods or len(count) != 1 or not mods <= allowed:
        raise ctx.fail(f"stmatrix.{'.'.join(ins.mods)} is not supported "
                       "(stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared}.b16 only)")
    nmat = int(count[0][1])
    space = "shared" if mods & {"shared", "shared::cta"} else "generic"
    if len(ins.operands) != 2:
        raise ctx.fail("stmatrix takes [address], {registers}")
    get_addr = address_getter(ctx, ctx.mem(ins.operands[0]), space)
    getters = [ctx.src(r, "b32") for r in ctx.vec(ins.operands[1], nmat, "stmatrix source")]
    flat = LDMATRIX_FLAT["trans" in mods]
    nlanes = 8 * nmat
    line = ctx.line

    def run(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        warp_ids = np.arange(cta.nwarps) if warps is None else warps
        if len(warp_ids) == 0:
            return
        addr = np.broadcast_to(get_addr(cta.R), (cta.n,)).reshape(cta.nwarps, 32)[warp_ids]
        rows = matrix_row_offsets(cta, addr[:, :nlanes].reshape(-1), space, "stmatrix")
        mats = np.empty((len(warp_ids), nmat, 64), dtype=np.uint16)
        for j, get in enumerate(getters):
            vals = np.broadcast_to(get(cta.R), (cta.n,)).reshape(cta.nwarps, 32)[warp_ids]
            halves = np.ascontiguousarray(vals).view(np.uint16).reshape(len(warp_ids), 32, 2)
            mats[:, j][:, flat] = halves
        data = mats.reshape(-1, 8).view(np.uint8)   # one 16-byte row per supplier
        suppliers = (warp_ids[:, None] * 32 + np.arange(nlanes)).reshape(-1)
        cta.smem.write(suppliers, rows, data, cta.epoch, "stmatrix writes")
        cta.add_smem_stat(line, *bank_wavefronts(suppliers >> 5, suppliers & 31, rows, 16, 8))
    return run


def compile_elect(ins: Instr, ctx):
    if tuple(ins.mods) != ("sync",) or len(ins.operands) != 2 or not isinstance(ins.operands[0], PredPair):
        raise ctx.fail("write elect.sync %r|%p, membermask; (either destination may be _)")
    dst = ins.operands[0]
    r_slot = ctx.dst(dst.first, "b32")[0] if dst.first is not None else None
    p_slot = ctx.dst(dst.second, "pred")[0] if dst.second is not None else None
    get_member = ctx.src(ins.operands[1], "b32")

    def run(cta: CtaState, mask):
        member = np.broadcast_to(get_member(cta.R), (cta.n,)).reshape(cta.nwarps, 32)
        executing = np.ones((cta.nwarps, 32), dtype=bool) if mask is None else mask.reshape(cta.nwarps, 32)
        lanes = np.arange(32, dtype=np.uint32)
        in_mask = ((member >> lanes) & 1).astype(bool)
        live = executing.any(axis=1)
        if (live[:, None] & (member != member[:, :1])).any():
            raise Fault("divergence", "elect.sync membermask differs between the lanes of a warp")
        missing = live[:, None] & in_mask & ~executing
        if missing.any():
            w, lane = (int(v[0]) for v in np.nonzero(missing))
            raise Fault("divergence", f"elect.sync: lane {lane} of warp {w} is in membermask but does not "
                        "execute it")
        first = np.where(in_mask.any(axis=1), np.argmax(in_mask, axis=1), 32)
        leader = np.repeat(first, 32).astype(np.uint32)
        if r_slot is not None:
            store(cta, r_slot, leader, mask)
        if p_slot is not None:
            store(cta, p_slot, np.tile(lanes, cta.nwarps) == leader, mask)
    return run


@dataclass
class SetmaxnregLog:
    """The setmaxnreg operations one warpgroup's warps have executed, for the uniformity check.

    The k-th setmaxnreg of each of the 4 warps must be the same operation (action and count): that
    is what the warpgroup agrees on. Warps need not execute it at the same PTX line or at the same
    moment (independent warps): Gluon's warp_specialize sends a warpgroup's producer warp and its
    idle warps through different blocks, each with its own `setmaxnreg.dec 40`. `ops` keeps the
    operations some warp has executed and another has not yet, from index `base` on."""
    counts: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    ops: list[tuple[str, int, int]] = field(default_factory=list)   # (action, N, PTX line)
    base: int = 0


def log_setmaxnreg(cta: CtaState, warps, action: str, n: int, line: int) -> None:
    """Record that `warps` (whole warpgroups' members, any subset) execute setmaxnreg.action n."""
    warp_ids = np.arange(cta.nwarps) if warps is None else np.asarray(warps)
    logs = cta.setmaxnreg if cta.setmaxnreg is not None else {}
    cta.setmaxnreg = logs
    for w in warp_ids.tolist():
        wg = w // 4
        if cta.nwarps - 4 * wg < 4:
            warpgroups_of(cta, [w], f"setmaxnreg.{action}")    # names the partial warpgroup
        log = logs.setdefault(wg, SetmaxnregLog())
        k = log.counts[w % 4] - log.base
        if k < len(log.ops):
            first = log.ops[k]
            if first[:2] != (action, n):
                raise Fault("divergence", f"warp {w} executes setmaxnreg.{action} {n} where another warp of "
                            f"warpgroup {wg} executed setmaxnreg.{first[0]} {first[1]} (line {first[2]}): the "
                            "4 warps of a warpgroup must execute the same setmaxnreg")
        else:
            log.ops.append((action, n, line))
        log.counts[w % 4] += 1
        while log.ops and min(log.counts) > log.base:
            log.ops.pop(0)
            log.base += 1


def check_setmaxnreg_at_exit(cta: CtaState) -> None:
    """After threads exit: a warp that has exited must have executed every setmaxnreg the other
    warps of its warpgroup executed (and they all of its own, once they have exited too)."""
    if not cta.setmaxnreg:
        return
    gone = ~cta.active.reshape(cta.nwarps, 32).any(axis=1)
    for wg, log in cta.setmaxnreg.items():
        top = max(log.counts)
        for i, count in enumerate(log.counts):
            w = 4 * wg + i
            if gone[w] and count < top:
                action, n, line = log.ops[count - log.base]
                raise Fault("divergence", f"warp {w} exits without executing setmaxnreg.{action} {n}, which "
                            f"another warp of warpgroup {wg} executed (line {line}): all 4 warps of a "
                            "warpgroup must execute the same setmaxnreg")


def compile_setmaxnreg(ins: Instr, ctx):
    require_sm90a(ctx, "setmaxnreg", ("sm_90a", "sm_100a", "sm_120a"))
    mods = tuple(ins.mods)
    if len(mods) != 4 or mods[0] not in ("inc", "dec") or mods[1:] != ("sync", "aligned", "u32"):
        raise ctx.fail(f"setmaxnreg.{'.'.join(mods)}: write setmaxnreg.{{inc|dec}}.sync.aligned.u32 N")
    op = ins.operands[0] if len(ins.operands) == 1 else None
    if not isinstance(op, Lit) or op.kind != "int" or not 24 <= op.value <= 256 or op.value % 8:
        raise ctx.fail("setmaxnreg needs one immediate register count N, a multiple of 8 in 24..256")

    action, n, line = mods[0], int(op.value), ctx.line
    cap = ctx.perf["maxnreg"][0] if ctx.perf.get("maxnreg") else None

    def run(cta: CtaState, mask):
        warps = participating_warps(cta, mask)
        log_setmaxnreg(cta, warps, action, n, line)
        register_budget.note(cta, warps, action, n, line, cap)   # the CTA's pool (register_budget.py)
    return run


def compile_griddepcontrol(ins: Instr, ctx):
    if tuple(ins.mods) not in (("launch_dependents",), ("wait",)) or ins.operands:
        raise ctx.fail("write griddepcontrol.launch_dependents; or griddepcontrol.wait;")
    return lambda cta, mask: None


OPS = {"stmatrix": compile_stmatrix, "elect": compile_elect, "setmaxnreg": compile_setmaxnreg,
       "griddepcontrol": compile_griddepcontrol}
