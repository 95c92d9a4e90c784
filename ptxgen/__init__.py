"""ptxgen: GEMM schedules lowered straight to hand-structured tensor-core PTX.

    import ptxgen
    k = ptxgen.compile(ptxgen.Gemm(4096, 4096, 4096), ptxgen.Schedule(block=(128, 128, 32)))
    print(k.ptx); print(k.resources)

Importing needs no GPU and no driver: the CUDA bindings load only when a kernel runs.
"""
from __future__ import annotations

from .targets import registry as _registry  # noqa: F401  (registers every target's schedule rules first)
from .compile import compile as _compile_schedule
from .errors import AssembleError, LoweringNotBuilt, ScheduleError, ScheduleTypeError
from .kernel import Kernel
from .schedule.block_scale import BlockScale
from .schedule.problem import Epilogue, Gemm
from .schedule.schedule import Schedule
from .schedule.verify import verify
from .tune import TuneResult, compile_chosen, tune
from .version import __version__
from . import sim


def compile(gemm: Gemm, schedule: Schedule | None = None, arch: str = "sm_80") -> Kernel:  # noqa: A001
    """Lower (gemm, schedule) to PTX for `arch` (`ptxgen.compile.compile`'s stages). Raises
    ScheduleError for an invalid schedule (ScheduleTypeError, also a TypeError, for a field of the
    wrong type) and TypeError for arguments that are not a Gemm, a Schedule and an arch string.

    Without a schedule, `tune.compile_chosen`: the winner `ptxgen.tune` measured for this problem
    class on this machine's GPU (the tuning cache), else the cost model's choice; `kernel.choice`
    says which and why."""
    if schedule is None:
        return compile_chosen(gemm, arch)
    return _compile_schedule(gemm, schedule, arch)


#: The other exceptions the README names, where they are defined; loaded on first use (`__getattr__`),
#: so that `import ptxgen` stays free of the runtime and the process pool.
_LAZY_EXCEPTIONS = {"DriverError": "runtime.driver", "AssemblerNotFound": "runtime.assemble",
                    "HazardError": "sim.errors", "OverlappingWrites": "scaleout.simulate",
                    "WorkerLost": "scaleout"}


def __getattr__(name: str) -> type:
    """`ptxgen.DriverError` and the other exceptions of `_LAZY_EXCEPTIONS`, imported when asked for."""
    if name in _LAZY_EXCEPTIONS:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY_EXCEPTIONS[name]}", __name__), name)
    raise AttributeError(f"module 'ptxgen' has no attribute {name!r}")


__all__ = ["Gemm", "Epilogue", "BlockScale", "Schedule", "Kernel", "compile", "verify", "ScheduleError", "ScheduleTypeError",
           "LoweringNotBuilt", "AssembleError", "sim", "tune", "TuneResult", "__version__", *_LAZY_EXCEPTIONS]
