"""The sm_80 path's verifier rules (mma.sync and wmma): tiling, copies, staging and resources."""
from __future__ import annotations

from ...errors import ScheduleError
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...schedule.verify import verify_copies, verify_resources, verify_staging, verify_tiling, verify_wmma


def verify_sm80(g: Gemm, s: Schedule, arch: str) -> None:
    """The rules of an mma.sync or wmma schedule, in the order a user fixes them."""
    if s.instruction == "wmma" and g.dtype not in ("f16", "bf16"):
        raise ScheduleError("schedule.instruction", s.instruction, f"the wmma path takes f16/bf16, not {g.dtype}",
                            "use instruction='m16n8k16' (mma.sync)")
    verify_tiling(g, s)
    verify_copies(g, s)
    verify_wmma(g, s)
    verify_staging(g, s)
    verify_resources(g, s, arch)
