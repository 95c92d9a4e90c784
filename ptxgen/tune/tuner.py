"""`ptxgen.tune(gemm, arch)`: rank the legal schedules with the cost model, measure the best `top`
on a GPU, and cache the measured winner for later `compile(gemm, arch)` calls. (The module is
`ptxgen.tune.tuner`, so the function `ptxgen.tune` does not shadow it.)

    result = ptxgen.tune(ptxgen.Gemm(4096, 4096, 4096), "sm_80", top=8)
    print("\\n".join(result.lines())); result.winner

Why measure only the top of the model's ranking: there are hundreds of legal schedules and each
measurement compiles, checks and times a kernel; the model is good enough to put the winner near
the top, and not good enough to trust blindly (its constants are estimates: schedule/devices.py).

Where measurements run: `measure=` (a function measure(gemm, schedule, arch) -> Measurement: the
seam for another timer, and what the tests inject), else Ray workers at `ray_address` with one GPU
each (`scaleout.ray_map(num_gpus=1)`), else this machine's GPU (`measure.DeviceMeasure`).
Without a GPU, tune says so in one line and ranks statically; nothing is cached. Only candidates
checked correct AND timed can win a measurement; the winner is cached (`tuning_cache`) under the
device that measured it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TextIO

from ..errors import ScheduleError
from ..scaleout.progress import ProgressArg, ProgressBar
from ..scaleout import Workers, spread
from .choose import Choice, Ranked, _order, assembled_resources, choose, describe_schedule, rank
from .costmodel import predict
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from ..schedule.units import seconds_text
from .measure import TIMING_UNAVAILABLE, DeviceMeasure, Measurement
from . import cache as tuning_cache

if TYPE_CHECKING:
    from ..kernel import Kernel

Measure = Callable[[Gemm, Schedule, str], Measurement]

#: Ranked candidates examined at most (per `top`) while dropping the ones that spill.
SPILL_LOOKAHEAD = 3
#: Statuses that take a candidate out of the running, measured or not.
BAD = ("wrong", "failed")


@dataclass
class Candidate:
    """One row of the tuning table."""

    schedule: Schedule
    predicted_s: float
    measured_s: float | None = None
    status: str = "not measured"
    reason: str = ""
    ranked: Ranked | None = field(default=None, repr=False)  # the model's terms behind predicted_s


@dataclass
class TuneResult:
    """The table (best predicted first), the winner, and how it was decided."""

    gemm: Gemm
    arch: str
    candidates: list[Candidate]
    winner: Schedule
    source: str                      # "measured" or "cost model"
    device: str | None = None        # the device that measured (None: nothing measured)
    notes: list[str] = field(default_factory=list)
    cached_at: str | None = None     # the tuning-cache file written, if any

    @property
    def measured(self) -> bool:
        return self.source == "measured"

    def lines(self) -> list[str]:
        """The table as `ptxgen tune` prints it."""
        g = self.gemm
        out = [f"tune {g.m}x{g.n}x{g.k} {g.dtype} for {self.arch}"
               + (f" on {self.device}" if self.device else "") + ":", *self.notes]
        width = max((len(describe_schedule(c.schedule)) for c in self.candidates), default=10)
        out.append(f"  {'#':>2}  {'schedule':<{width}}  {'predicted':>10}  {'measured':>10}  status")
        for i, c in enumerate(self.candidates, 1):
            measured = f"{seconds_text(c.measured_s):>10}" if c.measured_s is not None else f"{'-':>10}"
            mark = " <- winner" if c.schedule == self.winner and c.status not in BAD + ("dropped",) else ""
            status = c.status + (f": {c.reason}" if c.reason and c.status not in ("ok",) else "")
            out.append(f"  {i:>2}  {describe_schedule(c.schedule):<{width}}  {seconds_text(c.predicted_s):>10}  "
                       f"{measured}  {status}{mark}")
        out.append(f"winner: {describe_schedule(self.winner)} ({self.source})"
                   + (f"; cached in {self.cached_at}" if self.cached_at else ""))
        return out


def _measure_item(shared: tuple[Measure, Gemm, str], schedule: Schedule) -> Measurement:
    """One candidate on one worker (module-level: pickled by reference for processes and Ray)."""
    measure, g, arch = shared
    return measure(g, schedule, arch)


def _without_spills(g: Gemm, arch: str, ranked: list, top: int) -> tuple[list[Candidate], list[Candidate]]:
    """(the best `top` candidates that assemble without spilling, the spilled ones seen on the way)."""
    from ..runtime.assemble import AssemblerNotFound

    keep: list[Candidate] = []
    spilled: list[Candidate] = []
    check = True
    for r in ranked[:top * SPILL_LOOKAHEAD]:
        if len(keep) == top:
            break
        cand = Candidate(r.schedule, r.prediction.time_s, ranked=r)
        if check:
            try:
                regs, spill, _ = assembled_resources(g, r.schedule, arch)
            except AssemblerNotFound:
                check = False
            else:
                if spill:
                    cand.status, cand.reason = "dropped", f"spills {spill} B of registers"
                    spilled.append(cand)
                    continue
                cand.ranked = Ranked(r.schedule, predict(g, r.schedule, arch, registers=regs))
                cand.predicted_s = cand.ranked.prediction.time_s
        keep.append(cand)
    # re-ranked with the assembler's register counts, as `choose` does, so the static winner is its pick
    keep.sort(key=lambda c: _order(c.ranked))  # type: ignore[arg-type]
    return keep, spilled


def _bar(progress: ProgressArg, total: int, stream: TextIO) -> tuple[Callable[[int, Any], None] | None, Any]:
    """(spread's on_result, the bar to close) for a `progress` argument (see Kernel.simulate)."""
    done = [0]
    if callable(progress):
        def call(_i: int, _r: Any) -> None:
            done[0] += 1
            progress(done[0], total)
        return call, None
    if progress is None:
        progress = bool(getattr(stream, "isatty", lambda: False)())
    if not progress:
        return None, None
    bar = ProgressBar(total, stream=stream, label="tuning", unit="candidates")

    def tick(_i: int, _r: Any) -> None:
        done[0] += 1
        bar(done[0])
    return tick, bar


def tune(gemm: Gemm, arch: str = "sm_80", *, top: int = 8, repeats: int = 20, warmup: int = 3,
         ray_address: str | None = None, ray_gpus: float = 1.0, progress: ProgressArg = None,
         measure: Measure | None = None, save: bool = True, stream: TextIO | None = None) -> TuneResult:
    """Rank every legal schedule for (gemm, arch), measure the `top` best predicted, cache the winner.

    `repeats`/`warmup`: timed and untimed launches per candidate (the median is kept).
    `ray_address`: spread the measurements over a Ray cluster, one task per GPU ("" or "auto" as
    in `scaleout`); `ray_gpus` GPUs reserved per task (0 only with an injected `measure` that needs none).
    `progress`: None (a bar on `stream`, default stderr, when it is a terminal), True, False, or
    fn(done, total). `measure`: replaces the GPU measurement (module docstring). `save=False`
    leaves the tuning cache alone."""
    if not isinstance(gemm, Gemm):
        raise TypeError(f"tune(gemm, arch): the first argument must be a ptxgen.Gemm, got {type(gemm).__name__}")
    for name, value, least in (("top", top, 1), ("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"tune: {name}={value!r} must be an integer >= {least}; fix: {name}={max(least, 1)}")
    stream = stream or sys.stderr
    ranked = rank(gemm, arch)
    candidates, spilled = _without_spills(gemm, arch, ranked, top)
    if not candidates:
        raise ScheduleError("schedule", None, f"the {len(spilled)} best-ranked schedules all spill registers for "
                            f"this problem on {arch}", "give a schedule with a smaller warp tile explicitly")
    notes = [f"  {len(ranked)} legal schedules ranked by the cost model; the best {len(candidates)} shown"]
    workers = None
    if measure is not None:
        workers = Workers.of(1) if ray_address is None else Workers(ray=True, ray_address=ray_address,
                                                                    num_gpus=ray_gpus)
    elif ray_address is not None:
        measure = DeviceMeasure(repeats, warmup)
        workers = Workers(ray=True, ray_address=ray_address, num_gpus=ray_gpus)
    else:
        from ..runtime.driver import gpu_unavailable_reason

        reason = gpu_unavailable_reason()
        if reason:
            notes.append(f"  no GPU here ({reason}): ranked by the cost model only, nothing measured or cached")
        else:
            measure, workers = DeviceMeasure(repeats, warmup), Workers.of(1)
            slow = stand_in_warning(gemm, arch, [c.schedule for c in candidates])
            if slow:
                print(f"ptxgen tune: {slow}", file=stream)
    device = None
    if measure is not None and workers is not None:
        on_result, bar = _bar(progress, len(candidates), stream)
        try:
            results = spread(_measure_item, [c.schedule for c in candidates], workers,
                             shared=(measure, gemm, arch), on_result=on_result)
        finally:
            if bar is not None:
                bar.close()
        for c, m in zip(candidates, results):
            c.status, c.measured_s, c.reason = m.status, m.time_s, m.reason
        devices = sorted({m.device for m in results if m.status == "ok"})
        device = devices[0] if len(devices) == 1 else None
        if len(devices) > 1:
            notes.append(f"  measured on different devices ({', '.join(devices)}): not cached")
        if any(m.status == TIMING_UNAVAILABLE for m in results):
            notes.append(f"  {TIMING_UNAVAILABLE}: candidates were checked through the real launch path, "
                         "not timed; the winner is the model's")
    timed = [c for c in candidates if c.status == "ok" and c.measured_s is not None]
    usable = [c for c in candidates if c.status not in BAD]
    if len(usable) < len(candidates) and not usable:
        notes.append("  every measured candidate gave a wrong result or failed to run: this is a bug in ptxgen, "
                     "please report it with this table; the model's pick stands")
    result = TuneResult(gemm, arch, candidates + spilled, (usable or candidates)[0].schedule, "cost model", device,
                        notes)
    if timed:
        best = min(timed, key=lambda c: c.measured_s)  # type: ignore[arg-type, return-value]  # ties: the model's order
        result.winner, result.source = best.schedule, "measured"
        if save and device is not None:
            entry = tuning_cache.Entry(best.schedule, float(best.measured_s), device,  # type: ignore[arg-type]
                                       (gemm.m, gemm.n, gemm.k), len(timed), tuning_cache.now_utc())
            path = tuning_cache.store(gemm, arch, entry)
            result.cached_at = str(path) if path else None
    return result


#: Warn before checking candidates on the stand-in driver when that takes longer than this (seconds).
SLOW_STAND_IN_S = 60.0


def stand_in_warning(g: Gemm, arch: str, schedules: list[Schedule]) -> str | None:
    """What checking `schedules` costs on the simulator-backed stand-in (each candidate's whole grid
    runs on the CPU simulator), when it is over SLOW_STAND_IN_S; None on a real driver or when quick."""
    from ..compile import compile as compile_kernel
    from ..scaleout.progress import duration
    from ..runtime import simdriver
    from ..simulate import ROUGH_ESTIMATE_SLACK, estimate_seconds

    if not simdriver.selected():
        return None
    kernels = [compile_kernel(g, s, arch) for s in schedules]
    if sum(estimate_seconds(k, calibrate=False) for k in kernels) <= SLOW_STAND_IN_S / ROUGH_ESTIMATE_SLACK:
        return None  # quick even at the slowest pace: no warm-up runs spent to say so
    seconds = sum(estimate_seconds(k) for k in kernels)
    if seconds <= SLOW_STAND_IN_S:
        return None
    return (f"PTXGEN_DRIVER=sim: checking {len(schedules)} candidates runs each whole grid on the CPU simulator, "
            f"about {duration(seconds)} (it cannot time them); fix: a smaller shape or --top, or a GPU")


def cached_choice(g: Gemm, arch: str) -> Choice | None:
    """The tuning cache's winner for (g, arch) on this machine's GPU as a Choice with its kernel, or
    None: no GPU, no entry, or a winner that does not fit this exact shape (the verifier refuses it,
    or it spills here); then the cost model chooses."""
    from ..compile import compile as compile_kernel
    from ..errors import ScheduleError
    from ..runtime.assemble import AssemblerNotFound
    from ..schedule.verify import verify

    if not tuning_cache.has_entries():
        return None
    device = tuning_cache.current_device()
    if device is None:
        return None
    entry = tuning_cache.load(g, arch, device)
    if entry is None:
        return None
    try:
        verify(g, entry.schedule, arch)
    except ScheduleError:
        return None
    kernel = compile_kernel(g, entry.schedule, arch)
    try:
        spill = kernel.resources.spill_bytes
    except AssemblerNotFound:
        spill = 0
    if spill:
        return None
    m, n, k = entry.shape
    source = (f"tuning cache (measured {seconds_text(entry.measured_s)} on {entry.device} for {m}x{n}x{k}, "
              f"{entry.when}, best of {entry.candidates})")
    return Choice(entry.schedule, predict(g, entry.schedule, arch), [], entry.candidates, source=source,
                  arch=arch, kernel=kernel)


def compile_chosen(gemm: Gemm, arch: str = "sm_80") -> "Kernel":
    """`ptxgen.compile(gemm, arch=arch)` with no schedule: the winner `tune` measured for this problem
    class on this machine's GPU (the tuning cache), else the cost model's choice (`choose`): the
    fastest predicted legal schedule that assembles without spilling; `kernel.choice` says which
    and why."""
    from ..compile import compile as compile_kernel

    if not isinstance(gemm, Gemm):
        raise TypeError(f"compile(gemm, schedule=None, arch): the first argument must be a ptxgen.Gemm, got "
                        f"{type(gemm).__name__}")
    if not isinstance(arch, str):
        raise TypeError(f"compile(gemm, schedule=None, arch): arch must be a string, got {type(arch).__name__}")
    choice = cached_choice(gemm, arch) or choose(gemm, arch)
    kernel = choice.kernel or compile_kernel(gemm, choice.schedule, arch)
    choice.kernel = None  # the kernel holds its choice, not the other way round
    kernel.choice = choice
    return kernel
