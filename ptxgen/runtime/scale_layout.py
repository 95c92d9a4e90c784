"""The block scales of an sm_100a block-scaled kernel in the layout its TMA loads read: the
"128x4" scale-factor blocks of CUTLASS (`SfKMajorAtom`) and cuBLAS (the "swizzled" scale layout),
made here from the user's logical scales (schedule/block_scale.py: sa (M, ceil(K/group)), sb
(ceil(K/group), N)).

Each operand's scales are taken as (rows, groups) (A's rows are M, B's are N: sb is transposed),
padded with the code of 1.0 to whole blocks of 128 rows x 4 groups, and stored block by block: block
(a, d) holds rows 128a..128a+127 and groups 4d..4d+3 as 512 bytes, scale[128a + 32b + c, 4d + e] at
byte 16c + 4b + e. A tcgen05.cp.32x128b.warpx4 of one block puts its 16-byte row c into TMEM lanes c,
32 + c, 64 + c, 96 + c, byte 4b + e to column b, byte e (docs/ptx_facts/tcgen05.md §12g); the MMA
then reads row r's scale for group e at lane r & 127, column r >> 5, byte SF_ID = e (§12h) — so one
block feeds four K groups of 128 rows, the layout the Gluon corpus kernels `gluon_mma_scaled_cp_*`
load (tests/sim/blackwell_corpus). The padding is 1.0, not 0: padded K groups meet TMA's zero-filled
operands and padded rows are never stored, and a NaN (ue8m0 0xFF) would poison them.

The array returned is (ceil(rows/128), 2 * ceil(groups/4), 256) uint8, contiguous: the 3-D tensor
map the kernel loads boxes of (row blocks, 2 * blocks per k-tile, 256) from (a 512-byte block is two
256-byte rows, TMA's box limit being 256 elements).

A masked grouped GEMM (schedule/grouping.py: sa (G, max_m, Kg), sb (G, Kg, N)) has each group's
blocked scales stacked along the row blocks, (G * ceil(max_m/128), ...) for A and (G * ceil(N/128),
...) for B, so group g's row block r is block g * ceil(rows/128) + r of one tensor map (the kernel
adds the group term: targets/sm100/scales.py). A contiguous group starts at any row, so its rows
would not line up with 128-row blocks: that grouping is refused with block scales (sm100/verify.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..schedule.block_scale import SCALE_ONE, BlockScale

#: rows and K groups of one scale block, and its bytes (a 32x16-byte tcgen05.cp source).
BLOCK_ROWS, BLOCK_GROUPS, BLOCK_BYTES = 128, 4, 512
#: innermost extent of the tensor map over the blocks (TMA boxes have at most 256 elements a side).
MAP_ROW = 256


def blocked_shape(rows: int, groups: int) -> tuple[int, int, int]:
    return -(-rows // BLOCK_ROWS), 2 * -(-groups // BLOCK_GROUPS), MAP_ROW


def block_scales(scales: Any, one: int) -> Any:
    """Logical (rows, groups) uint8 scales (numpy, or a torch tensor on any device) in the 128x4
    block layout (module docstring), padded with the code `one`."""
    rows, groups = scales.shape
    rb, gb = -(-rows // BLOCK_ROWS), -(-groups // BLOCK_GROUPS)
    if isinstance(scales, np.ndarray):
        padded = np.full((rb * BLOCK_ROWS, gb * BLOCK_GROUPS), one, dtype=np.uint8)
        padded[:rows, :groups] = scales
        blocks = padded.reshape(rb, 4, 32, gb, 4).transpose(0, 3, 2, 1, 4)   # [a, b, c, d, e] -> [a, d, c, b, e]
        return np.ascontiguousarray(blocks).reshape(blocked_shape(rows, groups))
    padded = scales.new_full((rb * BLOCK_ROWS, gb * BLOCK_GROUPS), one)      # torch: the same on the device
    padded[:rows, :groups] = scales
    return padded.reshape(rb, 4, 32, gb, 4).permute(0, 3, 2, 1, 4).contiguous().reshape(blocked_shape(rows, groups))


def stacked_shapes(g: Any) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The shapes of A's and B's blocked arrays for Gemm `g`: `blocked_shape` of (M, Kg) and (N, Kg),
    the row blocks G times over for a grouped (masked) GEMM (module docstring)."""
    kg = -(-g.k // g.block_scale.group_k)
    times = g.groups if getattr(g, "grouped", False) else 1
    return tuple((times * rb, rows, width) for rb, rows, width in  # type: ignore[return-value]
                 (blocked_shape(g.m, kg), blocked_shape(g.n, kg)))


def kernel_scales(bs: BlockScale, scale_a: Any, scale_b: Any, groups: int | None = None) -> tuple[Any, Any]:
    """(A's, B's) blocked scales from the logical sa (M, groups) and sb (groups, N); with `groups`
    (a masked grouped GEMM's G), sa (G, max_m, Kg) and sb (G, Kg, N), each group's blocks stacked."""
    one = SCALE_ONE[bs.dtype]
    if groups is None:
        return block_scales(scale_a, one), block_scales(scale_b.T, one)
    stacked = []
    for per_group in ([block_scales(scale_a[i], one) for i in range(groups)],
                      [block_scales(scale_b[i].T, one) for i in range(groups)]):
        if isinstance(per_group[0], np.ndarray):
            stacked.append(np.concatenate(per_group))
        else:   # torch tensors, on their device
            import torch

            stacked.append(torch.cat(per_group))
    return stacked[0], stacked[1]


def logical_scales(blocked: np.ndarray, rows: int, groups: int) -> np.ndarray:
    """The inverse of `block_scales` (numpy): the (rows, groups) scales a blocked array holds."""
    rb, g2, _ = blocked.shape
    x = blocked.reshape(rb, g2 // 2, 32, 4, 4).transpose(0, 3, 2, 1, 4)    # [a, d, c, b, e] -> [a, b, c, d, e]
    return x.reshape(rb * BLOCK_ROWS, g2 // 2 * BLOCK_GROUPS)[:rows, :groups]


def reads_scales_by_tma(kernel: Any) -> bool:
    """Whether the kernel loads its block scales through tensor maps (sm_100a) rather than by
    pointer (sm_90a): then the runtime passes the blocked arrays' maps instead of sa, sb and strides."""
    return any(t.operand in ("SFA", "SFB") for t in kernel.tensor_maps)


def blocked_scale_views(bs: BlockScale, scale_a: Any, scale_b: Any, device: int | None,
                        groups: int | None = None) -> tuple:
    """The driver path's views of A's and B's blocked scales (checked already as logical arrays by
    `block_scales.check_block_scales`): host numpy arrays or device tensors, as 2-D (blocks * 2, 256)
    row-major uint8 matrices whose device pointers the kernel's scale tensor maps describe; `groups`:
    a masked grouped GEMM's G (`kernel_scales`)."""
    from .operands import check_operand

    views = []
    for name, x in zip(("scale_a", "scale_b"), kernel_scales(bs, scale_a, scale_b, groups)):
        rows = x.shape[0] * x.shape[1]
        kw = {} if device is None else {"device": device}
        views.append(check_operand(x.reshape(rows, MAP_ROW), name=f"{name} (128x4 blocks)", shape=(rows, MAP_ROW),
                                   dtype="u8", layout="row", align=16, **kw))
    return tuple(views)
