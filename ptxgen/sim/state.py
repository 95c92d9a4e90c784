"""State of one CTA while it runs, and the register-write helper every executor uses.

Registers are numpy arrays over the CTA's threads (padded to whole warps). Executors never modify
a register array in place: they build a new array and store it, so arrays may be shared freely
(e.g. by mov, or the common zero array every register starts as).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .memory import GlobalMemory, SharedMemory
from .sync import CtaSync


@dataclass
class AsyncChunk:
    """cp.async copies issued by one instruction that have not landed yet."""
    threads: np.ndarray      # issuing thread per copy
    groups: np.ndarray       # commit-group index per copy (== thread's commit count at issue)
    dst: np.ndarray          # shared address per copy
    data: np.ndarray         # (copies, cp_size) bytes, zero-filled past src-size
    line: int


@dataclass
class CtaState:
    R: list[np.ndarray]
    n: int                        # threads incl. padding to whole warps
    nthreads: int                 # real threads
    active: np.ndarray            # bool (n,): not exited (padding is never active)
    n_active: int
    tids: np.ndarray              # int64 arange(n)
    cta_index: int
    cta_xyz: tuple[int, int, int]
    smem: SharedMemory
    gmem: GlobalMemory
    param_bytes: np.ndarray
    epoch: int = 0
    commit_count: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pending: list[AsyncChunk] = field(default_factory=list)
    smem_stats: dict[int, list[int]] = field(default_factory=dict)
    mask_all: np.ndarray | None = None   # None while every thread is active
    sync: CtaSync | None = None          # happens-before state (sync.py)
    pc: int = 0                          # where the scheduler resumes this CTA
    steps: int = 0
    done: bool = False
    backedge: bool = False               # the last slice ended at a taken backward branch
    streak: int = 0                      # consecutive waiting iterations (scheduler back-off)
    skip: int = 0                        # scheduler turns still to skip
    wgmma: object | None = None          # wgmma groups in flight (ops_wgmma.WgmmaState), lazily
    hopper: object = None                # mbarriers, TMA and bulk groups (async_proxy.HopperState)
    tmem: object = None                  # tensor memory and tcgen05 operations (tmem.TmemState), lazily
    cluster: object = None               # cluster.ClusterMember: rank, barrier.cluster counts
    setmaxnreg: dict | None = None       # warpgroup -> ops_sm90_misc.SetmaxnregLog, lazily
    launch_queue: object = None          # ops_clc.LaunchQueue of the launch, when it uses try_cancel
    regbudget: object = None             # register_budget.RegisterBudget under .maxnreg, lazily
    # independent warps (warps.py): while the CTA runs as one group these stay empty, and pc /
    # mask_all / n_active describe the whole CTA; otherwise they describe the running group
    groups: list = field(default_factory=list)   # parked thread groups (warps.Group)
    bars: dict | None = None             # named barrier phases in progress (named_barriers.py)
    split: object = None                 # what a DIVERGE/BLOCK executor result refers to
    polled: bool = False                 # an mbarrier wait failed since the last group switch
    fair: int = 0                        # backward branches since the last group switch
    trace: object = None                 # trace.CtaTrace while a traced launch records this CTA

    @property
    def nwarps(self) -> int:
        return self.n // 32

    def threads(self, mask: np.ndarray | None) -> np.ndarray:
        """Ids of the threads an instruction acts for."""
        if mask is None:
            return self.tids
        return np.flatnonzero(mask)

    def group_mask(self) -> np.ndarray:
        """The running group's threads (all threads while mask_all is None)."""
        return np.ones(self.n, dtype=bool) if self.mask_all is None else self.mask_all

    def exit_threads(self, mask: np.ndarray | None) -> None:
        """Retire `mask` (None: the whole running group); the running group keeps the rest."""
        if mask is None:
            mask = self.group_mask()
        self.active = self.active & ~mask
        self.mask_all = self.active if self.mask_all is None else self.mask_all & ~mask
        self.n_active = int(np.count_nonzero(self.mask_all))

    def add_smem_stat(self, line: int, wavefronts: int, ideal: int) -> None:
        if ideal == 0:
            return
        entry = self.smem_stats.get(line)
        if entry is None:
            self.smem_stats[line] = [wavefronts, ideal]
        else:
            entry[0] += wavefronts
            entry[1] += ideal


def store(cta: CtaState, slot: int, value: np.ndarray, mask: np.ndarray | None) -> None:
    """Write `value` (already in the register's storage dtype) to the threads in `mask`."""
    if value.shape[0] != cta.n:
        value = np.repeat(value, cta.n) if value.shape[0] == 1 else value
    if mask is None:
        cta.R[slot] = value if value.flags.c_contiguous else np.ascontiguousarray(value)
    else:
        cta.R[slot] = np.where(mask, value, cta.R[slot])


def scatter(cta: CtaState, slot: int, threads: np.ndarray, values: np.ndarray,
            mask: np.ndarray | None) -> None:
    """Write per-thread `values` (one per id in `threads`) to a register."""
    if mask is None and len(threads) == cta.n:
        cta.R[slot] = np.ascontiguousarray(values)
        return
    new = cta.R[slot].copy()
    new[threads] = values
    cta.R[slot] = new
