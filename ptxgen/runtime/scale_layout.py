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


def kernel_scales(bs: BlockScale, scale_a: Any, scale_b: Any) -> tuple[Any, Any]:
    """(A's, B's) blocked scales from the logical sa (M, groups) and sb (groups, N)."""
    one = SCALE_ONE[bs.dtype]
    return block_scales(scale_a, one), block_scales(scale_b.T, one)


def logical_scales(blocked: np.ndarray, rows: int, groups: int) -> np.ndarray:
    """The inverse of `block_scales` (numpy): the (rows, groups) scales a blocked array holds."""
    rb, g2, _ = blocked.shape
    x = blocked.reshape(rb, g2 // 2, 32, 4, 4).transpose(0, 3, 2, 1, 4)    # [a, d, c, b, e] -> [a, b, c, d, e]
    return x.reshape(rb * BLOCK_ROWS, g2 // 2 * BLOCK_GROUPS)[:rows, :groups]


def reads_scales_by_tma(kernel: Any) -> bool:
    """Whether the kernel loads its block scales through tensor maps (sm_100a) rather than by
    pointer (sm_90a): then the runtime passes the blocked arrays' maps instead of sa, sb and strides."""
    return any(t.operand in ("SFA", "SFB") for t in kernel.tensor_maps)


def blocked_scale_views(bs: BlockScale, scale_a: Any, scale_b: Any, device: int | None) -> tuple:
    """The driver path's views of A's and B's blocked scales (checked already as logical arrays by
    `block_scales.check_block_scales`): host numpy arrays or device tensors, as 2-D (blocks * 2, 256)
    row-major uint8 matrices whose device pointers the kernel's scale tensor maps describe."""
    from .operands import check_operand

    views = []
    for name, x in zip(("scale_a", "scale_b"), kernel_scales(bs, scale_a, scale_b)):
        rows = x.shape[0] * x.shape[1]
        kw = {} if device is None else {"device": device}
        views.append(check_operand(x.reshape(rows, MAP_ROW), name=f"{name} (128x4 blocks)", shape=(rows, MAP_ROW),
                                   dtype="u8", layout="row", align=16, **kw))
    return tuple(views)
