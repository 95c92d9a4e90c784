"""The terms every target's cost model prices in (`Prediction`, `KTileCost`) and the parts they
share: the DRAM traffic of a wave's operand panels. Each target's model lives in its backend
(targets/sm80/cost.py, targets/sm90/choose.py); `ptxgen.tune.costmodel.predict` picks one."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .devices import DeviceModel
from .problem import Gemm
from .schedule import Schedule
from .units import counted, seconds_text

#: Clocks a CTA spends at each k-tile's barrier that its own warps cannot hide.
BARRIER_CLOCKS = 30
#: Share of L2 a wave's operand panels may occupy before they start evicting each other.
L2_USABLE = 0.5
#: The norm that combines resources that run at the same time (`overlap`). Units that overlap
#: perfectly combine by max (p = infinity) and units that take turns by sum (p = 1). A GPU overlaps
#: its tensor pipe, shared memory, issue, latency and memory traffic through other warps and CTAs,
#: but not perfectly: a sub-dominant unit at half the busiest one's time costs about 1.5%, at 80%
#: about 9%. An estimate (no GPU measured it); what it buys is that a schedule with less L2 traffic,
#: fewer shared-memory reads or a deeper pipeline is priced faster than one with more, where a
#: plain max called them equal (the 8 best at 4096^3 all showed 491.5 us under it).
OVERLAP_NORM = 6


def overlap(*terms: float) -> float:
    """The time of resources that run concurrently: the p-norm of their times (`OVERLAP_NORM`),
    at least the busiest one's and at most their sum."""
    top = max(terms)
    if top <= 0:
        return 0.0
    return top * sum((t / top) ** OVERLAP_NORM for t in terms) ** (1 / OVERLAP_NORM)


@dataclass(frozen=True)
class Prediction:
    """What the model says about one schedule, with the terms that decided it."""

    time_s: float
    efficiency: float        # flops / (time x the instruction's peak for the dtype)
    ctas: int
    ctas_per_sm: int
    limiter: str             # what bounds CTAs per SM
    registers: int           # per thread: the estimate, or the assembler's count when given
    waves: float
    edge_waste: float        # share of the computed MACs outside the problem
    dram_bytes: int
    l2_bytes: int
    bound: str               # the term that set the time
    terms: dict[str, float] = field(default_factory=dict)  # seconds of each term

    def summary(self) -> str:
        return (f"{seconds_text(self.time_s)} predicted ({self.efficiency:.0%} of the mma peak, "
                f"{self.bound}-bound), {self.waves:.2f} waves, {counted(self.ctas_per_sm, 'CTA')}/SM "
                f"(limited by {self.limiter}), {self.registers} registers, edge waste {self.edge_waste:.0%}")


@dataclass(frozen=True)
class KTileCost:
    """Clocks one CTA's k-tile costs on an otherwise idle SM, by resource."""

    mma: float
    smem: float
    issue: float
    latency: float           # the floor set by the pipeline depth
    serial: bool = False     # one stage: the load's latency adds to the compute instead of hiding under it

    @property
    def throughput(self) -> float:
        """The units' time together: they overlap across warps, imperfectly (`overlap`)."""
        return overlap(self.mma, self.smem, self.issue)

    @property
    def resource(self) -> str:
        return max((("tensor", self.mma), ("shared memory", self.smem), ("issue", self.issue)),
                   key=lambda kv: kv[1])[0]


#: The terms `deciding_terms` compares: what each unit would take alone over the whole k-loop
#: (`unit_terms`), the pipeline fills and the epilogues of the waves, and the traffic terms. "waves" (their overlap) and "launch" (the same for all) are not.
UNIT_TERMS = ("tensor", "shared memory", "issue", "latency", "barriers", "fill", "epilogue", "L2", "DRAM")


def unit_terms(parts: list[tuple[int, KTileCost, int]], kt: int, clock_hz: float,
               barrier: bool = True) -> dict[str, float]:
    """Seconds each unit of the k-loop would take alone: tensor, shared memory and issue (shared
    by the CTAs on an SM), the pipeline's latency floor, and (`barrier`) the exposed part of each
    k-tile's CTA barrier. `parts`: (waves, the k-tile cost, CTAs on an SM) of the full waves and
    the tail. What `ptxgen info` names as the terms that decided between two schedules."""
    out = dict.fromkeys(("tensor", "shared memory", "issue", "latency", "barriers"), 0.0)
    for waves, cost, on_sm in parts:
        rounds = waves * kt / clock_hz
        out["tensor"] += rounds * on_sm * cost.mma
        out["shared memory"] += rounds * on_sm * cost.smem
        out["issue"] += rounds * on_sm * cost.issue
        out["latency"] += rounds * cost.latency
        out["barriers"] += rounds * BARRIER_CLOCKS / on_sm if barrier else 0.0
    return out


def term_weights(p: Prediction) -> dict[str, float]:
    """How much a second of each UNIT_TERMS term moves the predicted time: the derivative of the
    `overlap` norm, (term / what it overlaps with)^(p-1), through the nesting the models use
    (tensor, shared memory and issue overlap each other; their busiest overlaps the latency floor,
    the barriers add to it; the waves, with the fills and epilogues added, overlap L2 and DRAM).
    A term far below the one it overlaps with weighs almost nothing, however large it is."""
    t = p.terms
    q = OVERLAP_NORM - 1

    def share(x: float, top: float) -> float:
        return (x / top) ** q if top > 0 else 0.0

    units = ("tensor", "shared memory", "issue")
    busiest = max(t.get(u, 0.0) for u in units)
    floor = max(busiest, t.get("latency", 0.0))
    waves = share(t.get("waves", 0.0), max(t.get("waves", 0.0), t.get("L2", 0.0), t.get("DRAM", 0.0)))
    through = share(busiest, floor) * waves
    out = {u: share(t.get(u, 0.0), busiest) * through for u in units}
    out.update({"latency": share(t.get("latency", 0.0), floor) * waves, "barriers": through,
                "fill": waves, "epilogue": waves})
    top = max(t.get("waves", 0.0), t.get("L2", 0.0), t.get("DRAM", 0.0))
    out.update({m: share(t.get(m, 0.0), top) for m in ("L2", "DRAM")})
    return out


def deciding_terms(best: Prediction, other: Prediction, count: int = 3) -> list[tuple[str, float]]:
    """The `count` terms (UNIT_TERMS) whose differences move the predicted time most between two
    predictions, as (name, seconds of predicted time `other` loses on it): positive where the
    chosen schedule saves time. Each difference is weighted by how much that term sets the time
    (`term_weights`, averaged over the two), so a large but hidden term does not read as a reason."""
    wb, wo = term_weights(best), term_weights(other)
    diffs = [(name, (other.terms.get(name, 0.0) - best.terms.get(name, 0.0)) * (wb[name] + wo[name]) / 2)
             for name in UNIT_TERMS]
    return sorted(diffs, key=lambda kv: -abs(kv[1]))[:count]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def dram_bytes(g: Gemm, s: Schedule, dev: DeviceModel, wave_ctas: int) -> int:
    """Compulsory bytes, plus re-reads of operand panels when a wave's footprint overflows L2."""
    tm, tn = ceil_div(g.m, s.bm), ceil_div(g.n, s.bn)
    a_panel, b_panel = s.bm * g.k * g.in_bytes, s.bn * g.k * g.in_bytes
    a_all, b_all = tm * a_panel, tn * b_panel
    out = g.m * g.n * g.out_bytes * (2 if g.epi.beta else 1)
    usable = dev.l2_bytes * L2_USABLE
    if a_all + b_all <= usable:
        operands = a_all + b_all
    else:
        tiles = tm * tn
        waves = max(1, ceil_div(tiles, wave_ctas))
        if s.raster == "grouped" and tm > 1:
            rows = min(tm, s.group_m)
            cols = min(tn, ceil_div(min(wave_ctas, tiles), rows))
        else:
            cols = min(tn, wave_ctas)
            rows = min(tm, ceil_div(min(wave_ctas, tiles), tn) + 1)
        # each wave reads its rows of A and columns of B; whatever fits L2 across waves is read once
        a_reads = a_all if a_all <= usable / 2 else min(waves * rows * a_panel, tiles * a_panel)
        b_reads = b_all if b_all <= usable / 2 else min(waves * cols * b_panel, tiles * b_panel)
        operands = max(a_reads, a_all) + max(b_reads, b_all)
    return g.batch * (operands + out)


#: Predicted times within this factor of each other rank as ties, ordered by simplicity: the model
#: is not that precise. 0.5% (was 2%): with the terms overlapping (`overlap`), a 1-2% difference
#: is the L2 traffic or pipeline depth the model prices, and 2% buckets let the simplicity order
#: override it (4096^3 f16 on sm_80 took a 4-warp 128x128 tile over CUTLASS's 128x256x64, predicted
#: 1.4% faster).
TIE = 1.005


def time_bucket(p: Prediction) -> int:
    """The TIE-wide bucket of a predicted time: candidates in one bucket rank by simplicity."""
    return math.floor(math.log(p.time_s) / math.log(TIE))
