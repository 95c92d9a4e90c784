"""ptxgen: GEMM schedules lowered straight to hand-structured tensor-core PTX.

    import ptxgen
    k = ptxgen.compile(ptxgen.Gemm(4096, 4096, 4096), ptxgen.Schedule(block=(128, 128, 32)))
    print(k.ptx); print(k.resources)

Importing needs no GPU and no driver: the CUDA bindings load only when a kernel runs.
"""
from __future__ import annotations

from .compile import compile
from .errors import AssembleError, ScheduleError, ScheduleTypeError
from .kernel import Kernel
from .schedule.problem import Epilogue, Gemm
from .schedule.schedule import Schedule
from .schedule.verify import verify
from .tune.tuner import TuneResult, tune
from . import sim

__all__ = ["Gemm", "Epilogue", "Schedule", "Kernel", "compile", "verify", "ScheduleError", "ScheduleTypeError",
           "AssembleError", "sim", "tune", "TuneResult"]
__version__ = "0.1.0"
