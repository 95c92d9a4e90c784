"""shfl.sync: exchange a 32-bit register between the lanes of a warp.

`shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask;` (PTX ISA, "Parallel
Synchronization and Communication Instructions: shfl.sync"). c packs the clamp value (bits 0-4)
and the segment mask (bits 8-12); the ISA's pseudocode, per lane:

    maxLane = (lane & segmask) | (cval & ~segmask);  minLane = lane & segmask
    up:   j = lane - b;                 pval = j >= maxLane
    down: j = lane + b;                 pval = j <= maxLane
    bfly: j = lane ^ b;                 pval = j <= maxLane
    idx:  j = minLane | (b & ~segmask); pval = j <= maxLane
    if !pval: j = lane                  (the lane keeps its own value)
    d = a of lane j;  p = pval

b is taken modulo 32 (b[4:0]). Every lane in membermask must execute the instruction, the
executing lane must be in membermask, and a lane may read only from a lane that is in membermask
and executing: otherwise the result is undefined, which is reported as a divergence hazard.
"""
from __future__ import annotations

import numpy as np

from .errors import Fault
from .operands import PredPair
from .parse import Instr
from .state import CtaState, store

MODES = ("up", "down", "bfly", "idx")


def source_lanes(mode: str, lane: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source lane j, pval) per lane, as the ISA's pseudocode computes them."""
    b = b & 0x1F
    cval, seg = c & 0x1F, (c >> 8) & 0x1F
    max_lane = (lane & seg) | (cval & ~seg)
    min_lane = lane & seg
    if mode == "up":
        j = lane - b
        pval = j >= max_lane
    elif mode == "down":
        j = lane + b
        pval = j <= max_lane
    elif mode == "bfly":
        j = lane ^ b
        pval = j <= max_lane
    else:
        j = min_lane | (b & ~seg)
        pval = j <= max_lane
    return np.where(pval, j, lane), pval


def compile_shfl(ins: Instr, ctx):
    mods = list(ins.mods)
    mode = [m for m in mods if m in MODES]
    if "sync" not in mods or len(mode) != 1 or "b32" not in mods or not set(mods) <= {"sync", "b32", *MODES}:
        raise ctx.fail(f"shfl.{'.'.join(mods)} is not supported (shfl.sync.{{up,down,bfly,idx}}.b32 only)")
    mode = mode[0]
    if len(ins.operands) != 5:
        raise ctx.fail("shfl.sync takes d[|p], a, b, c, membermask")
    dest, a, b, c, member = ins.operands
    d_op, p_op = (dest.first, dest.second) if isinstance(dest, PredPair) else (dest, None)
    d_slot = ctx.dst(d_op, "b32")[0]
    p_slot = ctx.dst(p_op, "pred")[0] if p_op is not None else None
    ga, gb, gc, gm = (ctx.src(x, "b32") for x in (a, b, c, member))

    def run(cta: CtaState, mask):
        n = cta.n
        R = cta.R
        ids = np.arange(n)
        lane = (ids % 32).astype(np.int64)
        value = np.broadcast_to(ga(R), (n,)).astype(np.uint32)
        bv, cv = (np.broadcast_to(g(R), (n,)).astype(np.int64) for g in (gb, gc))
        members = np.broadcast_to(gm(R), (n,)).astype(np.int64)
        active = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        in_mask = ((members >> lane) & 1).astype(bool)
        stray = active & ~in_mask
        if stray.any():
            t = int(np.flatnonzero(stray)[0])
            raise Fault("divergence", f"thread {t} (lane {t % 32}) executes shfl.sync but is not in its "
                        f"membermask {int(members[t]) & 0xFFFFFFFF:#010x}")
        warp_base = ids - lane
        for w in np.unique(ids[active] // 32):  # each warp with an executing lane
            base = int(w) * 32
            m = int(members[base + int(np.flatnonzero(active[base:base + 32])[0])]) & 0xFFFFFFFF
            want = np.array([(m >> i) & 1 for i in range(32)], dtype=bool)
            here = active[base:base + 32]
            if (want & ~here).any():
                missing = int(np.flatnonzero(want & ~here)[0])
                raise Fault("divergence", f"lane {missing} of warp {base // 32} is in shfl.sync's membermask "
                            f"{m:#010x} but does not execute it")
        j, pval = source_lanes(mode, lane, bv, cv)
        src = warp_base + j
        readable = active[src] & ((members >> j) & 1).astype(bool)
        bad = active & ~readable
        if bad.any():
            t = int(np.flatnonzero(bad)[0])
            raise Fault("divergence", f"lane {t % 32} of warp {t // 32} reads lane {int(j[t])} in shfl.sync, "
                        "which is outside the membermask or not executing: the value is undefined")
        store(cta, d_slot, value[src], mask)
        if p_slot is not None:
            store(cta, p_slot, pval, mask)
    return run


OPS = {"shfl": compile_shfl}
