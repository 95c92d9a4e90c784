"""What the parts of an sm_90a kernel share, as values: the registers set once per kernel (its
setup, `Sm90Lowering.setup`, builds and returns an `Sm90Context`) and what a role works on per
tile (`TmaOperands`, returned by the tile walk, Stream-K's unit or the setup's one tile).

Nothing here is written after it is built: a helper that computes a value returns it (a tile's
origin, its batch coordinate and C matrix, a role's warp-uniform warpgroup index through
`dataclasses.replace`), as the sm_80 driver does with `Tile`, `KRange` and `TileOperands`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...ir import Builder, VReg
from .plan import HopperPlan
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...emit.index import ExprEmitter
from ...emit.mbarrier_ring import MbarrierRing
from ...emit.scalar_ops import ScalarOps
from ...emit.tiles import Tile, ZSlot

if TYPE_CHECKING:
    from .cluster import ClusterRoles
    from .mainloop import RingLayout


@dataclass(frozen=True, eq=False)
class Sm90Context(ScalarOps):
    """One sm_90a kernel's problem, plan and kernel-invariant registers.

    `ptr`: global pointers, C (moved to the CTA's batch when the launch gives each CTA one, see
    `batch`), then bias / scale, then Stream-K's workspace and counters. `batch`: the TMA copies'
    batch coordinate of a CTA with one batch (empty when not batched or when tiles choose it).
    `dims` is the lowering's lazily filled cache of .u32 size parameters (ScalarOps.dim)."""

    b: Builder
    dims: dict[str, VReg]
    g: Gemm
    s: Schedule
    plan: HopperPlan
    layout: RingLayout
    tid: VReg
    ex: ExprEmitter
    leader: VReg                 # thread 0
    warpgroup: VReg              # tid >> 7: the consumer warpgroup (its BM/consumers rows)
    tmaps: dict[str, VReg]       # generic addresses of the tensor maps: A, B (and C)
    ptr: dict[str, VReg]
    z: ZSlot | None              # %ctaid.z as (batch, split), when the grid has a z dimension
    batch: tuple[VReg, ...]
    smem: VReg                   # the 1024-aligned shared base of the ring
    ring: MbarrierRing
    cluster: ClusterRoles | None


@dataclass(frozen=True)
class TmaOperands:
    """What a role works on for one output tile: the tile (its origin is the TMA copies' and the
    stores' coordinate), the copies' batch coordinate (empty unless batched), C's matrix (the
    batch's), and the thread's consumer warpgroup index (warp-uniform in the consumers of the
    warp-specialised kernel).

    Grouped GEMMs (targets/sm90/grouped.py) also set `b_batch` (B's group coordinate, where A has
    none: contiguous groups), `rows_end` (the end of the tile's group in the tile's row
    coordinates, which the stores and the scales' rows are bounded by instead of M) and `group`."""

    tile: Tile
    batch: tuple[VReg, ...]
    c: VReg
    warpgroup: VReg
    b_batch: tuple[VReg, ...] | None = None
    rows_end: VReg | None = None
    group: VReg | None = None

    @property
    def b_coordinate(self) -> tuple[VReg, ...]:
        """B's outer TMA coordinates: its group's, else the batch's (A's too)."""
        return self.batch if self.b_batch is None else self.b_batch
