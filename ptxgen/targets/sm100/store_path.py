"""Which way the sm_100a epilogue writes C: the TMA store through shared memory (epilogue_tma.py)
where TMA can write C, else direct stores (epilogue.py); and the staging unit of the TMA store.

Kept apart from the emitters so the plan (plan.py), the verifier and the epilogue all read one
decision without importing each other (docs/ptx_facts/tma.md §9d for TMA's rules on C).
"""
from __future__ import annotations

from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ..sm90.plan import TMA_STRIDE_ALIGN, EpilogueTile, epilogue_tile

#: Outputs the staging writes from the f32 epilogue math (f16/bf16 packed in pairs, f32 as they are).
STAGED_OUTPUTS = ("f32", "f16", "bf16")
C_MAP_PARAM = "tmapC"


def rows_per_warp(bm: int) -> int:
    """Rows of the tile one epilogue warp holds: its 32 TMEM lanes, or 16 with M = 64 (layout F)."""
    return 32 if bm == 128 else 16


def tma_store_refusal(g: Gemm, s: Schedule) -> str | None:
    """Why the TMA store cannot write this C (None: it can): TMA's rules on C's rows, base and box,
    and a grouped GEMM's group ends (the store clips at C's edge only: grouped.py)."""
    if g.grouped:
        return ("a grouped tile straddling its group's end would overwrite the next group's rows (TMA clips at "
                "C's edge, not at a group's end); grouped kernels store directly, guarded per group")
    if g.out_dtype not in STAGED_OUTPUTS:
        return f"the staging writes {', '.join(STAGED_OUTPUTS)} outputs, not {g.out_dtype}"
    if (g.leading_dims()[2] * g.out_bytes) % TMA_STRIDE_ALIGN or g.out_alignment() < TMA_STRIDE_ALIGN:
        return (f"TMA stores rows whose byte stride is a multiple of {TMA_STRIDE_ALIGN} from a {TMA_STRIDE_ALIGN}-byte "
                f"aligned C (ldc = {g.leading_dims()[2]} {g.out_dtype} elements, C {g.out_alignment()}-byte aligned)")
    if (s.bn * g.out_bytes) % TMA_STRIDE_ALIGN:
        return (f"a TMA box row is a multiple of {TMA_STRIDE_ALIGN} B; BN = {s.bn} {g.out_dtype} columns are "
                f"{s.bn * g.out_bytes} B")
    return None


def uses_tma_store(g: Gemm, s: Schedule) -> bool:
    """`epilogue_via_smem`, or where None the TMA store whenever TMA can write C (the verifier
    refuses epilogue_via_smem=True where it cannot; plan.sm100_plan also falls back to direct
    stores where None and the staging and C buffers would not fit beside the ring)."""
    if s.epilogue_via_smem is not None:
        return bool(s.epilogue_via_smem)
    return tma_store_refusal(g, s) is None


def staging_tile(g: Gemm, s: Schedule) -> EpilogueTile | None:
    """The staging unit of one epilogue warp, or None for direct stores. A CTA pair's CTA holds
    BM/2 rows of the pair's tile (cta_pair.py), all BN columns."""
    rows = s.bm // (s.cta_group if s.cta_group in (1, 2) else 1)
    if not uses_tma_store(g, s) or rows not in (64, 128) or tma_store_refusal(g, s) is not None:
        return None
    return epilogue_tile(rows_per_warp(rows), s.bn, g.out_bytes)
