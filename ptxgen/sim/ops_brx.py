"""brx.idx: an indirect branch through a `.branchtargets` list (docs/ptx_facts/sm100_formats.md §5).

    tlist: .branchtargets L0, L1, L2;
    brx.idx{.uni} index, tlist;

Each thread jumps to the label at position `index` (a .u32) of the list; an index past the end is
undefined behaviour, reported here as an out-of-bounds hazard. Triton 3.9 dispatches
warp-specialised partitions this way on sm_100a, so threads of one group commonly disagree: the
threads of the first executing thread's index take their branch and the others execute brx.idx
again (warps.diverge's third split field), one index per round. `.uni` promises each warp agrees.
"""
from __future__ import annotations

import numpy as np

from .errors import Fault
from .operands import Name
from .parse import Instr
from .state import CtaState
from .warps import DIVERGE


def compile_brx(ins: Instr, ctx):
    mods = tuple(ins.mods)
    if mods not in (("idx",), ("idx", "uni")):
        raise ctx.fail(f"brx.{'.'.join(mods)}: write brx.idx{{.uni}} index, tlist")
    if len(ins.operands) != 2 or not isinstance(ins.operands[1], Name):
        raise ctx.fail("brx.idx takes an index register and a .branchtargets list name")
    lists = getattr(ctx, "branchtargets", {})
    name = ins.operands[1].name
    if name not in lists:
        raise ctx.fail(f"brx.idx target {name!r} is not a `.branchtargets` list of this function "
                       f"(declare `{name}: .branchtargets L0, L1, ...;`)")
    targets = np.array([ctx.label(Name(label)) for label in lists[name]], dtype=np.int64)
    get = ctx.src(ins.operands[0], "u32")
    uni, here, count = "uni" in mods, ctx.index, len(targets)

    def run(cta: CtaState, mask):
        going = cta.group_mask() if mask is None else mask
        index = np.broadcast_to(np.asarray(get(cta.R)), (cta.n,))
        live = np.flatnonzero(going)
        if len(live) == 0:
            return None
        bad = live[index[live] >= count]
        if len(bad):
            t = int(bad[0])
            raise Fault("out-of-bounds", f"brx.idx index {int(index[t])} of thread {t} is past the end of "
                        f"{name} ({count} targets): undefined behaviour")
        if uni:
            _check_warp_uniform(cta, going, index)
        first = int(index[live[0]])
        taken = going & (index == first)
        if int(np.count_nonzero(taken)) == cta.n_active:
            return int(targets[first])
        cta.split = (int(targets[first]), taken, here)    # the rest run brx.idx again
        return DIVERGE
    return run


def _check_warp_uniform(cta: CtaState, going: np.ndarray, index: np.ndarray) -> None:
    live = going.reshape(-1, 32)
    idx = index.reshape(-1, 32)
    for w in np.flatnonzero(live.any(axis=1)):
        values = np.unique(idx[w][live[w]])
        if len(values) > 1:
            raise Fault("divergence", f"brx.idx.uni: warp {int(w)} has indices {values.tolist()}; .uni promises "
                        "every thread of a warp takes the same target (drop .uni if it does not)")


OPS = {"brx": compile_brx}
