"""The schedule: how a GEMM is tiled onto CTAs, warps and mma instructions, and pipelined."""
from __future__ import annotations

from dataclasses import dataclass

#: Instruction shapes (m, n, k) by name.
INSTRUCTIONS = {"m16n8k16": (16, 8, 16)}
SMEM_LAYOUTS = ("swizzle", "pad", "plain")
RASTERS = ("row", "grouped")


@dataclass(frozen=True)
class Schedule:
    """Block tile (BM, BN, BK), warp grid (WM, WN) and pipeline choices.

    * `stages`: 1 = one buffer, no overlap; 2 = double buffering; >=3 = multistage cp.async pipeline.
    * `smem_layout`: "swizzle" (XOR on 16-byte chunks), "pad" (+16 B per row) or "plain".
    * `raster`: CTA launch order, "row" or "grouped" (groups of `group_m` CTA rows share B tiles in L2).
    * `frag_double_buffer`: load the fragments of k-step s+1 while the mma.sync of step s run.
    """

    block: tuple[int, int, int]
    warps: tuple[int, int] = (2, 2)
    instruction: str = "m16n8k16"
    stages: int = 3
    smem_layout: str = "swizzle"
    raster: str = "row"
    group_m: int = 8
    frag_double_buffer: bool = True

    @property
    def bm(self) -> int:
        return self.block[0]

    @property
    def bn(self) -> int:
        return self.block[1]

    @property
    def bk(self) -> int:
        return self.block[2]

    @property
    def num_warps(self) -> int:
        return self.warps[0] * self.warps[1]

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    @property
    def warp_tile(self) -> tuple[int, int]:
        return self.bm // self.warps[0], self.bn // self.warps[1]

    @property
    def mma_shape(self) -> tuple[int, int, int]:
        return INSTRUCTIONS[self.instruction]
