"""Which legal sm_90a schedules the Hopper lowering builds today (ptxgen/targets/sm90/pipeline.py).

`verify_rules` has already passed the schedule: every check here is a part of the Hopper design
that is not emitted yet, raised as LoweringNotBuilt naming the field and the setting that is built.
"""
from __future__ import annotations

from ...errors import LoweringNotBuilt
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule

#: Input dtypes the built path multiplies: f16/bf16 (either major), tf32, e4m3/e5m2 (f32 accumulation)
#: and s8/u8 (s32 accumulation), the last three K-major (verify_hopper.verify_tma refuses the rest).
BUILT_DTYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
#: Output dtypes its direct epilogue stores (which input gives which: verify.verify_dtype_table).
BUILT_OUT = ("f32", "f16", "bf16", "s32", "s8", "u8")
SM80 = "or compile for arch='sm_90' with instruction='m16n8k16' (the mma.sync path)"


def _sm80(g: Gemm) -> str:
    """The mma.sync way out; fp8, which mma.sync does not multiply, as f16 (exact) on it."""
    if g.dtype in ("e4m3", "e5m2"):
        return (f"or convert A and B to f16 first (exact for every {g.dtype} value) and compile dtype='f16' for "
                "arch='sm_90' with instruction='m16n8k16' (the mma.sync path)")
    return SM80


def _refuse(g: Gemm, field: str, value: object, what: str, fix: str) -> None:
    raise LoweringNotBuilt(field, value, f"{what}: not built yet in the sm_90a lowering", f"{fix}, {_sm80(g)}")


def check_sm90_built(g: Gemm, s: Schedule, arch: str) -> None:
    """Raise LoweringNotBuilt for the first part of (g, s) the sm_90a lowering cannot emit."""
    check_grouped_built(g, s)
    if s.persistent and not s.warp_specialized and not s.stream_k:  # Stream-K's grid: targets/sm90/streamk.py
        _refuse(g, "schedule.persistent", s.persistent, "the persistent grid of whole tiles without warp "
                "specialisation (the warp-specialised kernel and Stream-K walk tiles)",
                "set warp_specialized=True, or persistent=False")
    if s.epilogue_via_smem and g.out_bytes == 1:
        _refuse(g, "schedule.epilogue_via_smem", s.epilogue_via_smem, f"the TMA-store epilogue for 1-byte "
                f"({g.out_dtype}) output", "set epilogue_via_smem=None or False (direct stores)")
    if s.epilogue_via_smem and (g.batch > 1 or s.split_k > 1 or s.stream_k):
        what = "batched GEMMs" if g.batch > 1 else "split-K" if s.split_k > 1 else "Stream-K"
        _refuse(g, "schedule.epilogue_via_smem", s.epilogue_via_smem, f"the TMA-store epilogue for {what}",
                "set epilogue_via_smem=None or False (direct stores)")
    if s.warp_specialized and (s.split_k > 1 or s.stream_k):  # batches: the walk covers them (persistent.py)
        what = "split-K" if s.split_k > 1 else "Stream-K"
        _refuse(g, "schedule.warp_specialized", s.warp_specialized, f"{what} in the warp-specialised kernel (built "
                "in the non-specialised one)", "set warp_specialized=False" + ("" if s.stream_k else
                                                                                 " and persistent=False"))
    if tuple(s.cluster) != (1, 1) and not (s.warp_specialized and s.persistent):
        _refuse(g, "schedule.cluster", s.cluster, "thread-block clusters outside the warp-specialised persistent "
                "kernel (targets/sm90/cluster.py)", "set cluster=(1, 1), or warp_specialized=True and persistent=True "
                "(the defaults)")
    if g.dtype not in BUILT_DTYPES:
        _refuse(g, "gemm.dtype", g.dtype, f"{g.dtype} inputs (only {', '.join(BUILT_DTYPES)})", "use dtype='f16' or 'bf16'")
    if g.accumulator not in ("f32", "s32"):  # s32: the s8/u8 inputs' own accumulator
        _refuse(g, "gemm.accumulator", g.accumulator, "f16 accumulation", "use f32 accumulation")
    if s.split_k > 1 and s.split_k_mode == "atomic":
        _refuse(g, "schedule.split_k_mode", s.split_k_mode, "atomic split-K (partials added into C)",
                "set split_k_mode='workspace' (the built split-K)")
    if g.out_dtype not in BUILT_OUT:
        _refuse(g, "gemm.out_dtype", g.out_dtype, f"{g.out_dtype} output (only {', '.join(BUILT_OUT)})",
                "use out_dtype='f32', 'f16' or 'bf16'")


def check_grouped_built(g: Gemm, s: Schedule) -> None:
    """The sm_90a grouped kernel (grouped.py) is the warp-specialised persistent one, without
    clusters, storing directly: each refusal names the setting that is built."""
    if not g.grouped:
        return
    rules = [
        (not s.warp_specialized, "schedule.warp_specialized", s.warp_specialized, "the sm_90a grouped kernel is "
         "the warp-specialised persistent one (its roles walk the groups' tiles, counted on the device)",
         "set warp_specialized=True and persistent=True (the defaults)"),
        (not s.persistent, "schedule.persistent", s.persistent, "the sm_90a grouped kernel is the persistent one "
         "(its CTAs walk the groups' tiles, counted on the device)", "set persistent=True (the default)"),
        (tuple(s.cluster) != (1, 1), "schedule.cluster", s.cluster, "thread-block clusters are not built for "
         "grouped GEMMs (a cluster's tiles may lie in different groups)", "use cluster=(1, 1)"),
        (bool(s.epilogue_via_smem), "schedule.epilogue_via_smem", s.epilogue_via_smem, "the TMA-store epilogue "
         "clips at C's edge, not at a group's end, so a tile straddling two groups would overwrite the next "
         "group's rows", "use epilogue_via_smem=False (the direct stores, guarded per group)"),
    ]
    for broken, field, value, rule, fix in rules:
        if broken:
            raise LoweringNotBuilt(field, value, rule, fix)
