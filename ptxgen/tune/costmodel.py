"""The cost model's time for any schedule: the static model of the backend that lowers it
(targets/sm80/cost.py for mma.sync and wmma, targets/sm90/choose.py for wgmma), so that the
chooser, the tuner and `ptxgen info` ask one function. Why static: `ptxgen.compile(gemm)` must
pick a good schedule with no GPU present, and the same problem must get the same schedule
everywhere."""
from __future__ import annotations

from ..schedule.cost import KTileCost, Prediction
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from ..targets.registry import backend_for_instruction

__all__ = ["KTileCost", "Prediction", "predict"]


def predict(g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
    """The model's time for (g, s), a schedule the verifier accepts, on `arch`'s flagship part.
    `registers`: the assembler's count per thread (default: the register estimate, rounded up to
    the allocation unit of 8)."""
    if s.swap_ab is True:  # the swapped problem's prediction and the transposed store
        from .swap_ab import predict_swap

        return predict_swap(g, s, arch, registers)
    return backend_for_instruction(s.instruction).predict(g, s, arch, registers)
