"""wgmma register fragments as data: (thread, register) -> (row, col) (docs/ptx_facts/wgmma.md,
"Accumulator fragment" and "Register A fragment"; PTX ISA "Register Fragments and Shared Memory
Matrix Layouts" for wgmma, whose figures CuTe's CLayout_64xN / ALayout_64x16 transcribe).

Coordinates are `Expr`s of %tid.x (the warpgroup's thread is tid & 127), so the lowering emits the
same formula the tests evaluate. `th = tid & 127`, `w = th >> 5` (warp in the warpgroup),
`g = lane >> 2`, `t = lane & 3`.
"""
from __future__ import annotations

from ...emit.index import Expr, Tid
from .wgmma_isa import M

WG_THREAD = Tid() & 127
WARP_IN_GROUP = WG_THREAD >> 5
_LANE = Tid() & 31
GROUP = _LANE >> 2
THREAD_IN_GROUP = _LANE & 3


def accumulator_coord(i: int) -> tuple[Expr, Expr]:
    """(row, col) of accumulator element d_i in the 64 x N tile of one warpgroup:
    row 16w + g + 8*((i>>1)&1), col 8*(i>>2) + 2t + (i&1). Every 4 elements form the m16n8 C tile
    of mma.sync for columns 8*(i>>2)..+7; each warp owns rows 16w..16w+15."""
    return (16 * WARP_IN_GROUP + GROUP + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * THREAD_IN_GROUP + (i & 1))


def accumulator_elements(n: int) -> int:
    """Accumulator elements per thread: 64*N/128 (f32 and s32: one per register; f16: two per
    register, d_{2j} in the low half of register j)."""
    return M * n // 128


def accumulator_table(n: int) -> list[tuple[Expr, Expr]]:
    return [accumulator_coord(i) for i in range(accumulator_elements(n))]


def a_register_coord(kind: str, i: int) -> tuple[Expr, Expr]:
    """(row, col) of element i (register order, low bits first) of A held in registers, 64 x K:
    warp w holds rows 16w..16w+15 in mma.sync's A layout of the same element size.
    kind: "16bit" (f16/bf16, k16, 8 halves), "tf32" (k8, 4 words), "8bit" (k32, 16 bytes)."""
    row0 = 16 * WARP_IN_GROUP + GROUP
    if kind == "16bit":
        return row0 + 8 * ((i >> 1) & 1), 2 * THREAD_IN_GROUP + (i & 1) + 8 * (i >> 2)
    if kind == "tf32":
        return row0 + 8 * (i & 1), THREAD_IN_GROUP + 4 * (i >> 1)
    if kind == "8bit":
        return row0 + 8 * ((i >> 2) & 1), 4 * THREAD_IN_GROUP + (i & 3) + 16 * (i >> 3)
    raise ValueError(f"register-A kind {kind!r}: use '16bit', 'tf32' or '8bit'")


#: Elements per thread of register A per kind (4 .b32 registers each).
A_ELEMENTS = {"16bit": 8, "tf32": 4, "8bit": 16}
#: Register-A kind per input type.
A_KIND = {"f16": "16bit", "bf16": "16bit", "tf32": "tf32", "e4m3": "8bit", "e5m2": "8bit",
          "s8": "8bit", "u8": "8bit"}


def a_register_table(kind: str) -> list[tuple[Expr, Expr]]:
    return [a_register_coord(kind, i) for i in range(A_ELEMENTS[kind])]
