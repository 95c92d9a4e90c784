"""Interval-graph register allocation: every vreg gets one physical register for its whole life.

Each vreg's live range is approximated by the closed hull of the instruction positions where it
is live (live-in, written or read). Closed intervals that touch interfere, so an instruction's
destinations never share a register with its sources or with each other; vector instructions
(mma, ldmatrix, ld.v4) are therefore safe without special cases. Interval graphs are coloured
optimally by a greedy sweep in start order, so each class uses exactly as many registers as the
largest number of overlapping intervals. PTX registers are virtual to ptxas anyway; keeping the
count low mainly keeps the text compact and the declared counts honest.

Except the 64-bit class (UNSHARED_CLASSES): there every vreg gets a register of its own. ptxas
13.5 does not rename a reused 64-bit PTX register the way 13.0 does, and a wgmma descriptor
sharing its register with the previous k-step's loses its uniform registers there: the same
consumer loop took 74-85 SASS per k-tile under ptxas 13.5 against 50 with one register per value,
and 40 against 35 for 128x256x64 with two consumers (bench/results/*-sass-assemblers-sm_90a-*;
docs/ptx_facts/wgmma.md §9c). A kernel holds at most a few dozen 64-bit values, so the text stays
short and the peak live count (reported) is unchanged.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..ir import REG_CLASSES, Instr, Item, VReg

from .liveness import Liveness, compute_liveness, iter_bits

#: Register classes whose vregs never share a physical register (see the module docstring).
UNSHARED_CLASSES = ("b64",)


@dataclass(frozen=True)
class Allocation:
    """The result of `allocate`.

    `phys` maps every vreg to its physical name ("%r3"); `counts[cls]` is how many registers of
    that class are declared (0 when unused); `peak[cls]` is the exact peak live count from
    dataflow liveness (always <= counts); `intervals[v]` is the closed (first, last) item index
    of v's live range that the colouring used.
    """

    phys: dict[VReg, str]
    counts: dict[str, int]
    peak: dict[str, int]
    intervals: dict[VReg, tuple[int, int]]
    liveness: Liveness = field(repr=False, compare=False)

    def name(self, v: VReg) -> str:
        """The physical register assigned to `v`."""
        try:
            return self.phys[v]
        except KeyError:
            raise KeyError(f"vreg {v} does not occur in the allocated program") from None

    def declarations(self) -> list[str]:
        """`.reg` lines for the used classes, in REG_CLASSES order (`.reg .b32 %r<17>;`)."""
        lines = []
        for cls, (ptx_type, prefix) in REG_CLASSES.items():
            if self.counts.get(cls, 0):
                lines.append(f".reg {ptx_type} {prefix}<{self.counts[cls]}>;")
        return lines


def _check_all_defined(items: list[Item], live: Liveness) -> None:
    """Raise on a vreg that is read but written nowhere: a lowering bug, not an allocator case."""
    defined = 0
    for bits in live.def_bits:
        defined |= bits
    everything = (1 << len(live.vregs)) - 1
    if not everything & ~defined:
        return
    for pos, item in enumerate(items):
        if isinstance(item, Instr):
            for v in item.uses():
                if not (defined >> live.index[v]) & 1:
                    raise ValueError(
                        f"vreg {v} ({v.cls} #{v.id}) is used but never defined; "
                        f"first use: `{item.op}` at item {pos}"
                    )


def live_intervals(items: list[Item], live: Liveness) -> tuple[list[int], list[int]]:
    """Closed hull (start[k], end[k]) of the instruction positions where vreg k is live.

    Two sweeps with a `seen` bitset visit each vreg's bit once per direction, so the cost is
    O(instructions + vregs) big-int operations rather than O(total live-set size).
    """
    n = len(live.vregs)
    start = [-1] * n
    end = [-1] * n
    positions = [i for i, item in enumerate(items) if isinstance(item, Instr)]
    occupied = [live.occupied_bits[i] for i in positions]
    seen = 0
    for pos, bits in zip(positions, occupied):
        new = bits & ~seen
        if new:
            for k in iter_bits(new):
                start[k] = pos
            seen |= new
    seen = 0
    for pos, bits in zip(reversed(positions), reversed(occupied)):
        new = bits & ~seen
        if new:
            for k in iter_bits(new):
                end[k] = pos
            seen |= new
    return start, end


def _colour(order: list[tuple[int, int, int]], end: list[int]) -> tuple[dict[int, int], int]:
    """Greedy interval colouring: lowest free register number; returns (vreg -> reg, count).

    `order` holds (start, vreg id, dense index) sorted ascending. A register frees only when its
    interval ended strictly before the next start (closed intervals that touch interfere).
    """
    active: list[tuple[int, int]] = []  # (end, reg)
    free: list[int] = []
    assigned: dict[int, int] = {}
    count = 0
    for start, _, k in order:
        while active and active[0][0] < start:
            heapq.heappush(free, heapq.heappop(active)[1])
        if free:
            reg = heapq.heappop(free)
        else:
            reg = count
            count += 1
        assigned[k] = reg
        heapq.heappush(active, (end[k], reg))
    return assigned, count


def allocate(items: list[Item]) -> Allocation:
    """Assign a physical register to every vreg of `items`, as few per class as the intervals allow.

    Deterministic across processes: all ordering is by (cls, id) and positions, never by hashing.
    """
    live = compute_liveness(items)
    _check_all_defined(items, live)
    start, end = live_intervals(items, live)

    by_class: dict[str, list[tuple[int, int, int]]] = {}
    for k, v in enumerate(live.vregs):
        by_class.setdefault(v.cls, []).append((start[k], v.id, k))

    reg_of = [0] * len(live.vregs)
    counts = {cls: 0 for cls in REG_CLASSES}
    for cls, order in by_class.items():
        order.sort()
        if cls in UNSHARED_CLASSES:
            assigned, counts[cls] = {k: i for i, (_, _, k) in enumerate(order)}, len(order)
        else:
            assigned, counts[cls] = _colour(order, end)
        for k, reg in assigned.items():
            reg_of[k] = reg

    ordered = sorted(range(len(live.vregs)), key=lambda k: (live.vregs[k].cls, live.vregs[k].id))
    phys = {live.vregs[k]: f"{REG_CLASSES[live.vregs[k].cls][1]}{reg_of[k]}" for k in ordered}
    intervals = {live.vregs[k]: (start[k], end[k]) for k in ordered}
    return Allocation(phys=phys, counts=counts, peak=dict(live.peak), intervals=intervals, liveness=live)
