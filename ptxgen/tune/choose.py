"""Choosing a schedule for a problem: enumerate, prune with the verifier, rank with the cost model,
and take the best that the assembler compiles without spilling.

Why the assembler check: the verifier's register estimate is a model too, and an edge-heavy
problem (77x131x45) takes more registers than the estimate says, so a 64x64 warp tile spills there.
A spill puts local-memory round trips inside the k-loop, so a chosen schedule never spills: the
ranked candidates are lowered and assembled best-first (each check cached per process, and the
cubin cache keeps the assembly across processes) until one assembles clean. Its real register
count then re-prices it, since fewer CTAs per SM can make the runner-up faster.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ScheduleError
from .candidates import base_schedules, legal, variants
from ..targets.sm90.choose import (VARIANT_BASES as HOPPER_VARIANT_BASES, check_problem_built, describe_hopper,
                            hopper_candidates, hopper_variants, no_candidate_error)
from .costmodel import Prediction, predict
from ..schedule.devices import device_model
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from ..schedule.verify import verify, verify_fields

if TYPE_CHECKING:
    from ..kernel import Kernel

#: Base schedules whose ordering/sharing variants (raster, split-K, Stream-K) are tried.
VARIANT_BASES = 12
#: Candidates assembled at most, best-first, looking for one that does not spill.
MAX_ASSEMBLED = 8
#: Runners-up kept in the Choice (and shown by `ptxgen info`).
RUNNERS_UP = 4


@dataclass(frozen=True)
class Ranked:
    schedule: Schedule
    prediction: Prediction


@dataclass
class Choice:
    """Why `schedule` was chosen: its prediction (with the assembler's register count where it
    was checked), the runners-up, and the candidates turned down for spilling."""

    schedule: Schedule
    prediction: Prediction
    runners_up: list[Ranked]
    considered: int                     # legal candidates the model ranked
    spilled: list[tuple[Schedule, int]] = field(default_factory=list)  # (schedule, spill bytes)
    registers_checked: bool = True      # False when no assembler was available
    source: str = "cost model"
    arch: str = "sm_80"
    kernel: "Kernel | None" = field(default=None, repr=False)  # the checked kernel, reused by compile

    def lines(self) -> list[str]:
        """What `ptxgen info` prints under `chosen`."""
        dev = device_model(self.arch)
        how = (f"by the {self.source} over {self.considered} legal schedules for {dev.name}"
               if self.source == "cost model" else f"from the {self.source}; the model for {dev.name} says")
        out = [f"chosen     {describe_schedule(self.schedule)}, {how}:",
               f"           {self.prediction.summary()}"]
        if not self.registers_checked:
            out.append("           (no assembler: registers are the verifier's estimate, spills unchecked)")
        for s, spill in self.spilled:
            out.append(f"  spilled  {describe_schedule(s)}: {spill} B of spills, so not chosen")
        for r in self.runners_up:
            out.append(f"  runner-up {describe_schedule(r.schedule)}: {r.prediction.time_s * 1e6:.1f} us, "
                       f"{r.prediction.waves:.2f} waves, {r.prediction.ctas_per_sm} CTAs/SM ({r.prediction.limiter})")
        return out


def describe_schedule(s: Schedule) -> str:
    """The schedule as the CLI flags that give it."""
    if s.instruction == "wgmma":
        return describe_hopper(s)
    text = f"--block {s.bm}x{s.bn}x{s.bk} --warps {s.warps[0]}x{s.warps[1]} --stages {s.stages}"
    if s.raster == "grouped":
        text += f" --raster grouped --group-m {s.group_m}"
    if s.split_k > 1:
        text += f" --split-k {s.split_k}"
    if s.stream_k:
        text += " --stream-k" + (" pure" if s.decomposition == "stream-k-pure" else "")
    return text


def rank(g: Gemm, arch: str) -> list[Ranked]:
    """Every legal candidate, fastest predicted first (ties: fewer splits, then fewer warps)."""
    device_model(arch)
    if arch == "sm_90a":
        return _rank_hopper(g, arch)
    verify_fields(g, Schedule(block=(128, 128, 32)), arch)  # a bad problem fails here, named
    base = [Ranked(s, predict(g, s, arch)) for s in legal(g, base_schedules(g), arch)]
    base.sort(key=_order)
    extra = [Ranked(v, predict(g, v, arch)) for r in base[:VARIANT_BASES]
             for v in legal(g, variants(g, r.schedule), arch)]
    ranked = sorted(base + extra, key=_order)
    if not ranked:
        verify(g, Schedule(block=(128, 128, 32)), arch)  # a problem no schedule fits: its own error
        raise ScheduleError("schedule", None, f"no candidate schedule passes the verifier for this "
                            f"{g.dtype} problem on {arch}", "give a schedule explicitly")
    return ranked


def _rank_hopper(g: Gemm, arch: str) -> list[Ranked]:
    """The built wgmma candidates the verifier accepts, fastest first; a problem the built sm_90a
    lowering cannot run raises LoweringNotBuilt naming arch='sm_90' instead of picking anything."""
    check_problem_built(g, arch)
    ranked, first = [], None
    for s in hopper_candidates(g):
        try:
            verify(g, s, arch)
        except ScheduleError as e:
            first = first or e
            continue
        ranked.append(Ranked(s, predict(g, s, arch)))
    if not ranked:
        raise no_candidate_error(g, arch, first)
    ranked.sort(key=_order)
    bases = [r.schedule for r in ranked if not r.schedule.warp_specialized][:HOPPER_VARIANT_BASES]
    seen = {r.schedule for r in ranked}
    for base in bases:  # split-K and Stream-K, built in the non-specialised kernel
        for v in hopper_variants(g, base):
            if v in seen:
                continue
            seen.add(v)
            try:
                verify(g, v, arch)
            except ScheduleError:
                continue
            ranked.append(Ranked(v, predict(g, v, arch)))
    return sorted(ranked, key=_order)


#: Predicted times within this factor of each other rank as ties: the model is not that precise.
TIE = 1.02


def _order(r: Ranked) -> tuple:
    """Time in TIE-wide buckets, then the simpler and more robust schedule: no split-K or Stream-K,
    row raster, four warps (latency hidden by other warps, not only by other CTAs), larger BK
    (fewer barriers per flop), three stages (latency hidden without the most shared memory), the
    larger tile."""
    s = r.schedule
    bucket = math.floor(math.log(r.prediction.time_s) / math.log(TIE))
    if s.instruction == "wgmma":  # no split, the warp-specialised persistent kernel, the default epilogue,
        # row raster, three or four stages, the larger tile, fewer warpgroups
        return (bucket, s.split_k, s.stream_k, not s.warp_specialized, s.epilogue_via_smem is not None,
                s.raster != "row", abs(s.stages - 3.5), -s.bm * s.bn, s.consumers, s.block)
    return (bucket, s.split_k, s.stream_k, s.raster != "row", abs(s.num_warps - 4), -s.bk, abs(s.stages - 3),
            -s.bm * s.bn, s.block, s.warps)


#: (gemm, schedule, arch) -> (registers, spill bytes): the assembler's verdict, once per process.
_assembled: dict[tuple[Gemm, Schedule, str], tuple[int, int]] = {}


def assembled_resources(g: Gemm, s: Schedule, arch: str) -> tuple[int, int, "Kernel"]:
    """(registers per thread, spill bytes, the kernel) from lowering and assembling (g, s)."""
    from ..compile import compile as compile_kernel

    k = compile_kernel(g, s, arch)
    key = (g, s, arch)
    if key not in _assembled:
        r = k.resources
        _assembled[key] = (r.registers, r.spill_bytes)
    regs, spill = _assembled[key]
    return regs, spill, k


def choose(g: Gemm, arch: str = "sm_80", check_spills: bool = True) -> Choice:
    """The schedule the cost model ranks fastest among those that assemble without spilling."""
    from ..runtime.assemble import AssemblerNotFound

    ranked = rank(g, arch)
    spilled: list[tuple[Schedule, int]] = []
    checked: list[tuple[Ranked, "Kernel"]] = []
    registers_checked = check_spills
    if check_spills:
        for i, r in enumerate(ranked[:MAX_ASSEMBLED]):
            try:
                regs, spill, kernel = assembled_resources(g, r.schedule, arch)
            except AssemblerNotFound:
                registers_checked = False
                break
            if spill:
                spilled.append((r.schedule, spill))
                continue
            checked.append((Ranked(r.schedule, predict(g, r.schedule, arch, registers=regs)), kernel))
            nxt = ranked[i + 1].prediction.time_s if i + 1 < len(ranked) else float("inf")
            if min(c.prediction.time_s for c, _ in checked) <= nxt:
                break  # no unchecked candidate is predicted faster than the best checked one
    if checked:
        best, kernel = min(checked, key=lambda ck: _order(ck[0]))
    elif registers_checked and check_spills:
        raise ScheduleError("schedule", None, f"the {MAX_ASSEMBLED} best-ranked schedules all spill registers "
                            f"for this problem on {arch}", "give a schedule with a smaller warp tile explicitly")
    else:
        best, kernel = ranked[0], None
    runners = [r for r in ranked if r.schedule != best.schedule
               and r.schedule not in {s for s, _ in spilled}][:RUNNERS_UP]
    return Choice(best.schedule, best.prediction, runners, len(ranked), spilled, registers_checked,
                  arch=arch, kernel=kernel)

