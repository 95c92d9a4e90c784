"""Which legal sm_90a schedules the Hopper lowering builds today (ptxgen/emit/sm90/pipeline.py).

`verify_rules` has already passed the schedule: every check here is a part of the Hopper design
that is not emitted yet, raised as LoweringNotBuilt naming the field and the setting that is built.
"""
from __future__ import annotations

from ..errors import LoweringNotBuilt
from .problem import Gemm
from .schedule import Schedule

#: Input dtypes the built path multiplies (f16/bf16 wgmma, f32 accumulation).
BUILT_DTYPES = ("f16", "bf16")
#: Output dtypes its direct epilogue stores.
BUILT_OUT = ("f32", "f16", "bf16")
SM80 = "or compile for arch='sm_90' with instruction='m16n8k16' (the mma.sync path)"


def _sm80(g: Gemm) -> str:
    fp8 = g.dtype in ("e4m3", "e5m2")
    return SM80 + (f"; {g.dtype} needs its operands converted to f16 first (exact)" if fp8 else "")


def _refuse(g: Gemm, field: str, value: object, what: str, fix: str) -> None:
    raise LoweringNotBuilt(field, value, f"{what}: not built yet in the sm_90a lowering", f"{fix}, {_sm80(g)}")


def check_sm90_built(g: Gemm, s: Schedule, arch: str) -> None:
    """Raise LoweringNotBuilt for the first part of (g, s) the sm_90a lowering cannot emit."""
    if s.persistent and not s.warp_specialized:
        _refuse(g, "schedule.persistent", s.persistent, "the persistent grid without warp specialisation (only the "
                "warp-specialised kernel walks tiles)", "set warp_specialized=True, or persistent=False")
    if tuple(s.cluster) != (1, 1) and not (s.warp_specialized and s.persistent):
        _refuse(g, "schedule.cluster", s.cluster, "thread-block clusters outside the warp-specialised persistent "
                "kernel (emit/sm90/cluster.py)", "set cluster=(1, 1), or warp_specialized=True and persistent=True "
                "(the defaults)")
    if g.dtype not in BUILT_DTYPES:
        _refuse(g, "gemm.dtype", g.dtype, f"{g.dtype} inputs (only {', '.join(BUILT_DTYPES)})", "use dtype='f16' or 'bf16'")
    if g.accumulator != "f32":
        _refuse(g, "gemm.accumulator", g.accumulator, "f16 accumulation", "use f32 accumulation")
    if s.split_k > 1 or s.stream_k:
        _refuse(g, "schedule.split_k", s.split_k if s.split_k > 1 else s.decomposition, "split-K or Stream-K",
                "set split_k=1 and decomposition='tiles'")
    if g.batch > 1:
        _refuse(g, "gemm.batch", g.batch, "batched GEMMs (3-D tensor maps)", "launch one GEMM per batch")
    if g.out_dtype not in BUILT_OUT:
        _refuse(g, "gemm.out_dtype", g.out_dtype, f"{g.out_dtype} output (only {', '.join(BUILT_OUT)})",
                "use out_dtype='f32', 'f16' or 'bf16'")
    if s.epilogue_via_smem:
        _refuse(g, "schedule.epilogue_via_smem", s.epilogue_via_smem, "the TMA-store epilogue (staged through shared "
                "memory)", "set epilogue_via_smem=False (direct stores)")
