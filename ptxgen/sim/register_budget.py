"""The CTA's register pool under setmaxnreg (docs/ptx_facts/warp_specialisation.md §9g).

PTX ISA §9.7.19.5 "setmaxnreg": each warp owns a per-thread maximum register count; `.dec` releases
registers from the warp into a per-CTA pool, `.inc` takes them from the pool and *blocks until the
pool has enough*. The count a warp owns before `.dec N` must be >= N and before `.inc N` <= N
(otherwise undefined). ptxas does not check the budget (a kernel whose `.inc` overdraws the pool
assembles without a warning under ptxas 13.5), so the simulator does.

Model: with a `.maxnreg R` on the entry every warp starts owning R per thread and the CTA holds
warps x 32 x R registers in all (ptxas reports the cap as the kernel's count, §9g). Without
`.maxnreg` the starting count is ptxas's choice and nothing is checked. An `.inc` that leaves the
warps owning more than the CTA holds would block until other warps `.dec`; the simulator lets it
run on (warps' timing is not modelled) and remembers the first such line, forgetting it once decs
bring the total back within the pool. If the CTA ends still overdrawn, no `.dec` could ever have
unblocked it: a deadlock on hardware, reported naming the `.inc`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import Fault


@dataclass
class RegisterBudget:
    cap: int                         # the entry's .maxnreg: every warp's starting count
    per_warp: np.ndarray             # int64 per warp: per-thread registers it owns now
    pool: int                        # registers the CTA holds: warps x 32 x cap
    over: tuple[int, int, int] | None = None   # (line, N, warpgroup) of the .inc that overdrew the pool


def note(cta, warps, action: str, n: int, line: int, cap: int | None) -> None:
    """Warps `warps` (None: all) execute setmaxnreg.`action` n."""
    if cap is None:
        return
    budget = cta.regbudget
    if budget is None:
        budget = cta.regbudget = RegisterBudget(cap, np.full(cta.nwarps, cap, dtype=np.int64),
                                                cta.nwarps * 32 * cap)
    ids = np.arange(cta.nwarps) if warps is None else np.asarray(warps, dtype=np.int64)
    have = budget.per_warp[ids]
    bad = have < n if action == "dec" else have > n
    if bad.any():
        w = int(ids[bad][0])
        rule = "at least" if action == "dec" else "at most"
        raise Fault("out-of-bounds", f"setmaxnreg.{action} {n} in warp {w}, which owns {int(have[bad][0])} "
                    f"registers per thread: before .{action} N a warp must own {rule} N (PTX ISA setmaxnreg; "
                    "otherwise undefined)")
    budget.per_warp[ids] = n
    owned = int(budget.per_warp.sum()) * 32
    if owned <= budget.pool:
        budget.over = None
    elif action == "inc" and budget.over is None:
        budget.over = (line, n, int(ids[0]) // 4)


def check_at_end(cta) -> None:
    """Once every thread has exited: an .inc still overdrawing the pool could never have run."""
    budget = cta.regbudget
    if budget is None or budget.over is None or cta.n_active:
        return
    line, n, wg = budget.over
    per_thread = budget.per_warp * 32
    owned = int(per_thread.sum())
    mine = int(per_thread[4 * wg:4 * wg + 4].sum())
    fits = (budget.pool - (owned - mine)) // 128 // 8 * 8
    raise Fault("deadlock", f"setmaxnreg.inc {n} at line {line} (warpgroup {wg}) leaves the CTA's warps owning "
                f"{owned} registers, but the CTA holds {budget.pool} ({cta.nwarps * 32} threads x .maxnreg "
                f"{budget.cap}): the .inc blocks until other warps release registers with setmaxnreg.dec, and "
                f"none did before the CTA ended. Ask for at most {fits} there, or release more elsewhere")
