"""Swap-AB for decode (small M against a large weight): compute Cᵀ = Bᵀ·Aᵀ so that the large N
fills the MMA's M side (64 rows per wgmma, 16 per mma.sync) instead of wasting it on M = 1-64 rows.

`Schedule(swap_ab=True)` keeps the caller's problem: `Kernel.gemm` is the Gemm asked for, and A, B,
C are passed as for any kernel. The backend lowers `swapped(g)`: M' = N, N' = M, A' = Bᵀ, B' = Aᵀ.
Transposing a logical matrix and flipping its layout names the same bytes with the same leading
dimension, so no data moves: A' is B's buffer (layout flipped, ld = ldb), B' is A's (ld = lda).
The epilogue stores C'[i, j] at C + (j * ldc + i) elements, the caller's row-major C (the
"transposed store", one element per store since the pair a fragment holds is a column of C).

The swapped problem goes through its backend's own verifier, so operand rules follow the roles
the operands really play: fp8 wgmma wants both operands K-major (docs/ptx_facts/wgmma.md §9a),
and A row-major (K-major) becomes B' column-major (K-major) while B column-major becomes A' row-
major: a pair that is legal unswapped is legal swapped, and one that is not is named by the
swapped problem's rule (`verify_swap_ab` says how the roles moved).
"""
from __future__ import annotations

import dataclasses

from .problem import Epilogue, Gemm
from ..errors import ScheduleError

#: The instructions whose direct epilogue has the transposed store (targets/sm80/epilogue.py,
#: targets/sm90/epilogue.py).
SWAP_INSTRUCTIONS = ("m16n8k16", "wgmma")
_FLIP = {"row": "col", "col": "row"}


def swapped(g: Gemm) -> Gemm:
    """The problem a swap-AB kernel lowers: (N, M, K) with A' = Bᵀ, B' = Aᵀ over the same buffers
    (layouts flipped, leading dimensions exchanged), C' = Cᵀ whose row stride in the caller's C is
    its ldc (so ldc is C's, explicitly); row and column epilogue vectors change places."""
    lda, ldb, ldc = g.lda, g.ldb, g.leading_dims()[2]
    return dataclasses.replace(g, m=g.n, n=g.m, a_layout=_FLIP[g.b_layout], b_layout=_FLIP[g.a_layout],
                               lda=ldb, ldb=lda, ldc=ldc, epilogue=transposed_epilogue(g.epilogue))


def lowered_gemm(g: Gemm, s: object) -> Gemm:
    """The problem the backend lowers for schedule `s`: `swapped(g)` under swap_ab, else `g`."""
    return swapped(g) if getattr(s, "swap_ab", False) is True else g


def verify_swap_ab(g: Gemm, s: object, arch: str) -> None:
    """The rules swap-AB adds to the swapped problem's own (schedule/verify.py runs both)."""
    def refuse(field: str, value: object, rule: str, fix: str) -> None:
        raise ScheduleError(field, value, f"swap_ab=True (Cᵀ = Bᵀ·Aᵀ) {rule}", fix)

    if s.instruction not in SWAP_INSTRUCTIONS:
        refuse("schedule.instruction", s.instruction, f"is built for {' and '.join(SWAP_INSTRUCTIONS)} only",
               "use instruction='m16n8k16' (sm_80 path) or 'wgmma' (sm_90a), or drop swap_ab")
    if g.grouped:
        refuse("gemm.grouping", g.grouping, "is not built for grouped GEMMs (the groups split M, which "
               "swap-AB turns into the MMA's N, or K, which the swapped kernel does not walk)", "drop swap_ab for a grouped GEMM")
    if g.block_scale is not None:
        refuse("gemm.block_scale", g.block_scale, "is not built with block scaling (the scale groups "
               "follow A's rows, which swap-AB turns into columns)", "drop swap_ab, or block_scale")
    if g.m > g.n:
        refuse("gemm.m", g.m, f"pays only when M <= N (here N={g.n}): the swapped kernel tiles N by the "
               "MMA's M side", "drop swap_ab (M is already the larger side)")
    if s.epilogue_via_smem is not False:
        refuse("schedule.epilogue_via_smem", s.epilogue_via_smem, "stores C transposed straight from the "
               "accumulators, element by element", "write epilogue_via_smem=False (or leave it None)")


def explain(e: ScheduleError, g: Gemm) -> ScheduleError:
    """A rule the swapped problem broke, told in the caller's words: which of its operands became
    which (A' = Bᵀ, B' = Aᵀ) and that dropping swap_ab is a fix."""
    moved = (f"under swap_ab the kernel computes Cᵀ = Bᵀ·Aᵀ: its A is your B ({g.b_layout}-major as B, "
             f"{_FLIP[g.b_layout]}-major as A), its B is your A, its M x N is {g.n} x {g.m}")
    return type(e)(e.field, e.value, f"{e.rule} ({moved})", f"{e.fix}; or drop swap_ab")


def transposed_epilogue(e: Epilogue | None) -> Epilogue | None:
    """`e` with row and column vectors exchanged (what `swapped` gives the lowered problem)."""
    if e is None:
        return None
    return dataclasses.replace(e, bias=_FLIP.get(e.bias) if e.bias else None,
                               scale=_FLIP.get(e.scale) if e.scale else None)
