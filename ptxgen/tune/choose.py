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

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import ScheduleError
from ..compile import compile as compile_kernel
from ..runtime.assemble import AssemblerNotFound
from ..schedule.cost import TIE, Prediction, deciding_terms
from ..schedule.devices import device_model
from ..schedule.problem import Gemm
from ..schedule.block_scale import verify_block_scale
from ..schedule.verify import verify_fast_accum
from ..schedule.schedule import Schedule
from ..targets.registry import backend_for_instruction, default_backend
from .costmodel import predict
from .swap_ab import swap_candidates
from ..schedule.swap_ab import lowered_gemm
from ..schedule.units import counted, seconds_text

if TYPE_CHECKING:
    from ..kernel import Kernel

#: Candidates assembled at most, best-first, looking for one that does not spill (then the last
#: resort, the candidate with the fewest registers, is assembled).
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
    #: The best candidate of the other kind (plain when swap-AB was chosen, and the reverse), where
    #: swap-AB candidates were ranked (decode-sized M: tune/swap_ab.py); `ptxgen info` compares them.
    other_kind: Ranked | None = None
    gemm: Gemm | None = field(default=None, repr=False)

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
        out.extend(self.decided_lines())
        out.extend(self.swap_lines())
        for i, r in enumerate(self.runners_up, 1):
            out.append(f"  runner-up {i} {describe_schedule(r.schedule)}: {seconds_text(r.prediction.time_s)}, "
                       f"{r.prediction.waves:.2f} waves, {counted(r.prediction.ctas_per_sm, 'CTA')}/SM "
                       f"({r.prediction.limiter})")
        return out


    def swap_lines(self) -> list[str]:
        """Whether swap-AB was chosen and why: the best kernel of the other kind and its time."""
        if self.other_kind is None:
            return []
        other, g = self.other_kind, self.gemm
        ratio = other.prediction.time_s / self.prediction.time_s
        rows = self.schedule.mma_shape[0]  # the instruction's M: 16 (mma.sync), 64 (wgmma)
        shape = f" (M={g.m} fills {min(g.m, rows)} of the {rows} rows an unswapped tile's MMA computes at least)" \
            if g is not None and g.m < rows else ""
        if self.schedule.swap_ab:
            return [f"  swap-AB  chosen: C^T = B^T A^T puts N on the MMA's M side{shape}; the best plain kernel, "
                    f"{describe_schedule(other.schedule)}, is predicted {seconds_text(other.prediction.time_s)} "
                    f"({ratio:.2f}x the time)"]
        return [f"  swap-AB  not chosen: the best swap-AB kernel, {describe_schedule(other.schedule)}, is predicted "
                f"{seconds_text(other.prediction.time_s)} ({ratio:.2f}x the time; within {TIE - 1:.1%} the plain "
                "kernel is preferred as the simpler)"]

    def decided_lines(self) -> list[str]:
        """The terms that decided against the best runner-up that is another kernel (not the same
        one in another raster order): seconds of each unit alone over the k-loop, and traffic."""
        other = next((i for i, r in enumerate(self.runners_up) if not same_up_to_raster(r.schedule, self.schedule)),
                     None)
        if other is None:
            return []
        rival = self.runners_up[other].prediction
        words = [f"{seconds_text(abs(saved))} {'less' if saved > 0 else 'more'} {name}"
                 for name, saved in deciding_terms(self.prediction, rival) if abs(saved) >= 0.005e-6]
        if rival.time_s < self.prediction.time_s:  # the same TIE-wide bucket: the simpler one first
            return [f"  decided  by simplicity: runner-up {other + 1} is within {TIE - 1:.1%} "
                    f"({seconds_text(self.prediction.time_s - rival.time_s)} faster by the model)"]
        slower = f"runner-up {other + 1} ({seconds_text(rival.time_s - self.prediction.time_s)} slower)"
        if not words:
            return [f"  decided  against {slower}: no single term moves it 0.01 µs"]
        return [f"  decided  against {slower} by " + ", ".join(words)]


def same_up_to_raster(a: Schedule, b: Schedule) -> bool:
    """Whether two schedules are the same kernel but for the order their tiles are walked in."""
    return replace(a, raster="row", group_m=8) == replace(b, raster="row", group_m=8)


def describe_schedule(s: Schedule) -> str:
    """The schedule as the CLI flags that give it (its backend's words)."""
    text = backend_for_instruction(s.instruction).describe_schedule(s)
    return text + " --swap-ab" if s.swap_ab is True else text


def rank(g: Gemm, arch: str) -> list[Ranked]:
    """Every legal candidate of `arch`'s backend, fastest predicted first (ties: the simpler one)."""
    device_model(arch)
    backend = default_backend(arch)
    verify_fast_accum(g)   # a no-effect flag, named before any candidate
    verify_block_scale(g, backend.instructions[0], arch)
    ranked = [Ranked(s, p) for s, p in backend.rank(g, arch)]
    swaps = [Ranked(s, p) for s, p in swap_candidates(g, arch)]  # decode-sized M only (tune/swap_ab.py)
    return sorted(ranked + swaps, key=_order) if swaps else ranked


def _order(r: Ranked) -> tuple:
    """The sort key of a ranked schedule: its backend's (the time's TIE-wide bucket, then simplicity),
    with swap-AB after the plain kernel within a bucket (the plain one is the simpler)."""
    bucket, *rest = backend_for_instruction(r.schedule.instruction).order_key(r.schedule, r.prediction)
    return (bucket, r.schedule.swap_ab, *rest)


#: (gemm, schedule, arch) -> (registers, spill bytes): the assembler's verdict, once per process.
_assembled: dict[tuple[Gemm, Schedule, str], tuple[int, int]] = {}


def assembled_resources(g: Gemm, s: Schedule, arch: str) -> tuple[int, int, "Kernel"]:
    """(registers per thread, spill bytes, the kernel) from lowering and assembling (g, s)."""
    k = compile_kernel(g, s, arch)
    key = (g, s, arch)
    if key not in _assembled:
        r = k.resources
        _assembled[key] = (r.registers, r.spill_bytes)
    regs, spill = _assembled[key]
    return regs, spill, k


def _not_smaller(g: Gemm, s: Schedule, spilled: Schedule) -> bool:
    """Whether `s` needs at least what a spilled schedule needed: a warp tile no smaller and no
    fewer estimated registers (accumulators included). Such a schedule would spill too, so the
    chooser does not spend an assembly on it."""
    tm, tn = s.warp_tile
    sm, sn = spilled.warp_tile
    return tm * tn >= sm * sn and register_need(g, s) >= register_need(g, spilled)


def register_need(g: Gemm, s: Schedule) -> int:
    """Registers per thread the schedule's backend estimates, uncapped."""
    return backend_for_instruction(s.instruction).register_need(lowered_gemm(g, s), s)


def last_resort(g: Gemm, ranked: list[Ranked]) -> Ranked:
    """The candidate with the fewest estimated registers (the best ranked among equals): the
    smallest warp tile the backend builds, which leaves room under the register limit for any
    edge handling, so it assembles without spilling where every larger one did."""
    order = {id(r): i for i, r in enumerate(ranked)}
    return min(ranked, key=lambda r: (register_need(g, r.schedule), order[id(r)]))


def _assemble_best(g: Gemm, arch: str, ranked: list[Ranked]
                   ) -> tuple[list[tuple[Ranked, "Kernel"]], list[tuple[Schedule, int]]]:
    """Assemble candidates best-first until one that does not spill is at least as fast as every
    unchecked one; after a spill, skip the candidates that need no less (`_not_smaller`), so the
    MAX_ASSEMBLED tries go to different warp tiles and register needs. If every try spilled, the
    last resort (`last_resort`) is assembled. Raises AssemblerNotFound without an assembler."""
    spilled: list[tuple[Schedule, int]] = []
    checked: list[tuple[Ranked, "Kernel"]] = []
    tries = 0
    for i, r in enumerate(ranked):
        if tries >= MAX_ASSEMBLED:
            break
        if any(_not_smaller(g, r.schedule, s) for s, _ in spilled):
            continue
        tries += 1
        regs, spill, kernel = assembled_resources(g, r.schedule, arch)
        if spill:
            spilled.append((r.schedule, spill))
            continue
        checked.append((Ranked(r.schedule, predict(g, r.schedule, arch, registers=regs)), kernel))
        nxt = ranked[i + 1].prediction.time_s if i + 1 < len(ranked) else float("inf")
        if min(c.prediction.time_s for c, _ in checked) <= nxt:
            break  # no unchecked candidate is predicted faster than the best checked one
    if not checked:
        r = last_resort(g, ranked)
        regs, spill, kernel = assembled_resources(g, r.schedule, arch)
        if spill:
            raise ScheduleError("schedule", None, f"every candidate tried spills registers for this problem on "
                                f"{arch}, even the one with the fewest ({describe_schedule(r.schedule)}: "
                                f"{spill} B)", "report it: the register model has missed something; "
                                "meanwhile give a schedule with a smaller warp tile")
        checked.append((Ranked(r.schedule, predict(g, r.schedule, arch, registers=regs)), kernel))
    return checked, spilled


def choose(g: Gemm, arch: str = "sm_80", check_spills: bool = True) -> Choice:
    """The schedule the cost model ranks fastest among those that assemble without spilling."""
    ranked = rank(g, arch)
    spilled: list[tuple[Schedule, int]] = []
    checked: list[tuple[Ranked, "Kernel"]] = []
    registers_checked = check_spills
    if check_spills:
        try:
            checked, spilled = _assemble_best(g, arch, ranked)
        except AssemblerNotFound:
            registers_checked = False
    if checked:
        best, kernel = min(checked, key=lambda ck: _order(ck[0]))
    else:
        best, kernel = ranked[0], None
    runners = [r for r in ranked if r.schedule != best.schedule
               and r.schedule not in {s for s, _ in spilled}][:RUNNERS_UP]
    other = None
    if any(r.schedule.swap_ab for r in ranked):
        other = next((r for r in ranked if r.schedule.swap_ab != best.schedule.swap_ab
                      and r.schedule not in {s for s, _ in spilled}), None)
    return Choice(best.schedule, best.prediction, runners, len(ranked), spilled, registers_checked,
                  arch=arch, kernel=kernel, other_kind=other, gemm=g)
