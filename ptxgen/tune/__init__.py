"""Tuning, above `compile`: the chooser (`choose`: every target backend's candidates ranked by its
cost model, `costmodel`), the measured tuner (`tuner`, timing on the GPU with `measure`) and its
cache (`cache`). This package calls `compile`; `compile` never imports it, and
`ptxgen.compile(gemm)` without a schedule asks `compile_chosen` here for one."""
from __future__ import annotations

from .tuner import TuneResult, compile_chosen, tune

__all__ = ["TuneResult", "compile_chosen", "tune"]
