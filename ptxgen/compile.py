"""`ptxgen.compile`: a list of named stages, verify -> plan_shared -> lower -> allocate -> launch ->
render, each reading the earlier stages' outputs; the Kernel keeps them all (`Kernel.stages`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from .ir.render import render
from .kernel import Kernel
from .regalloc import allocate
from .schedule.geometry import grid_for
from .schedule.problem import Gemm
from .schedule.schedule import Schedule
from .schedule.swap_ab import lowered_gemm
from .schedule.targets import Target, target
from .schedule.verify import verify
from .schedule.verify_types import check_arguments
from .targets.base import Backend
from .targets.registry import backend_for


@dataclass(frozen=True)
class Launch:
    """The launch configuration the header states and the Kernel keeps."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int


@dataclass
class CompileContext:
    """The inputs of one compilation and the outputs of the stages run so far, by stage name."""

    gemm: Gemm
    schedule: Schedule
    arch: str
    outputs: dict[str, Any] = field(default_factory=dict)
    #: The caller's problem when the stages lower another (swap-AB's swapped one, schedule/swap_ab.py).
    asked: Gemm | None = None

    @property
    def backend(self) -> Backend:
        """The target backend that lowers this (arch, instruction), once `verify` has passed."""
        return backend_for(self.arch, self.schedule.instruction)

    def __getitem__(self, stage: str) -> Any:
        return self.outputs[stage]


@dataclass(frozen=True)
class Stage:
    """One named step of `compile`: reads the context (earlier stages' outputs), returns its own."""

    name: str
    run: Callable[[CompileContext], Any]
    doc: str


def _verify(cx: CompileContext) -> Target:
    verify(cx.asked or cx.gemm, cx.schedule, cx.arch)
    return target(cx.arch)


def _lower(cx: CompileContext):
    return cx.backend.lower(cx.gemm, cx.schedule, cx["plan_shared"])


def _launch(cx: CompileContext) -> Launch:
    return Launch(grid_for(cx.gemm, cx.schedule, cx["verify"].sms), (cx.schedule.threads, 1, 1),
                  cx["plan_shared"].total)


def _render(cx: CompileContext) -> str:
    g, s, launch = cx.gemm, cx.schedule, cx["launch"]
    lines = cx.backend.header_lines(g, s, cx.arch, launch.grid, launch.smem_bytes)
    if cx.asked is not None:  # schedule/swap_ab.py
        a = cx.asked
        lines.insert(1, f"swap-AB: the caller's {a.m}x{a.n}x{a.k} C = A @ B computed as C^T = B^T @ A^T (the "
                        f"{g.m}x{g.n}x{g.k} problem below: its A is the caller's B), C stored transposed")
    return render(cx["lower"], cx["verify"], lines,
                  cx["allocate"].declarations(), cx["allocate"].name)


#: The stages of `compile`, in order (as a Triton backend names its stages); `Kernel.stages` keeps
#: every output under its stage's name.
STAGES: tuple[Stage, ...] = (
    Stage("verify", _verify, "check the schedule against the problem and the target -> Target"),
    Stage("plan_shared", lambda cx: cx.backend.plan_shared(cx.gemm, cx.schedule),
          "byte offsets of the shared buffers, reusing bytes across disjoint lifetimes -> SmemPlan"),
    Stage("lower", lambda cx: _lower(cx),
          "the kernel as instructions over virtual registers -> ir.Function"),
    Stage("allocate", lambda cx: allocate(cx["lower"].body), "virtual -> physical registers -> Allocation"),
    Stage("launch", _launch, "grid, block and dynamic shared memory -> Launch"),
    Stage("render", _render, "readable PTX text -> str"),
)


def compile(gemm: Gemm, schedule: Schedule, arch: str = "sm_80") -> Kernel:  # noqa: A001
    """Lower (gemm, schedule) to PTX for `arch`, running STAGES in order. Raises ScheduleError for an
    invalid schedule (ScheduleTypeError, also a TypeError, for a field of the wrong type) and
    TypeError for arguments that are not a Gemm, a Schedule and an arch string (e.g. swapped).

    A schedule is required here: `ptxgen.compile(gemm)` without one asks `ptxgen.tune` for it
    (tuning sits above compile and calls it, never the other way round)."""
    if schedule is None:
        raise TypeError("ptxgen.compile.compile(gemm, schedule, arch) needs a Schedule: call ptxgen.compile(gemm) "
                        "(or ptxgen.tune.compile_chosen) to have one chosen")
    check_arguments("compile", gemm, schedule, arch)
    lowered = lowered_gemm(gemm, schedule) if isinstance(schedule, Schedule) else gemm
    cx = CompileContext(lowered, schedule, arch, asked=gemm if lowered is not gemm else None)
    for stage in STAGES:
        cx.outputs[stage.name] = stage.run(cx)
    fn, launch = cx["lower"], cx["launch"]
    names = cx.backend.param_names(lowered, schedule)
    assert tuple(p.name for p in fn.params)[:len(names)] == names
    return Kernel(gemm=gemm, schedule=schedule, arch=arch, ptx=cx["render"], entry=fn.name, grid=launch.grid,
                  block=launch.block, smem_bytes=launch.smem_bytes, function=fn, allocation=cx["allocate"],
                  smem_plan=cx["plan_shared"], stages=dict(cx.outputs),
                  recompile=partial(compile, arch=arch), lowered_gemm=cx.gemm if cx.asked is not None else None)
