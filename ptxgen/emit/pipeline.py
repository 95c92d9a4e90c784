"""The `Pipeline` protocol: what the GEMM lowering asks of a math pipeline.

A pipeline owns how operand tiles reach the tensor cores and where the accumulators live: its
shared-memory buffers, its per-thread setup, its accumulator registers, the main loop over a
k-range, and how accumulators move to and from the split-K / Stream-K partial tiles and the
epilogue's staging tile. Everything around it (tile scheduling, split-K and Stream-K protocols,
edge guards, the epilogue math) is shared. Implementations: `Sm80Pipeline` (cp.async + ldmatrix
+ mma.sync) and `WmmaPipeline` (cp.async + wmma.load/mma/store). The sm_90a `Sm90Pipeline`
(emit/sm90/pipeline.py: TMA + mbarrier + wgmma) has the roles its first slice needs (shared
buffers, setup, accumulators, main loop, epilogue; no partial tiles: split-K is not built there)
and is driven by its own `Sm90Lowering`, since its kernels take tensor maps instead of A and B.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..regalloc.smem import SmemBuffer
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from .index import Expr
from ..ir import VReg

if TYPE_CHECKING:
    from .edges import StoreEdges
    from .epilogue.math import EpilogueMath
    from .epilogue.staged import StagedEpilogue
    from .tiles import KRange, Tile, TileOperands

#: Lifetime phases handed to the shared-memory planner: main-loop buffers and epilogue buffers
#: never live at once, so the planner may overlap them.
PHASE_MAINLOOP, PHASE_EPILOGUE = 0, 1

#: The warp tile's accumulators: [m block][n block] -> the fragment's registers.
Accumulators = list[list[tuple[VReg, ...]]]


class Pipeline(Protocol):
    """One math pipeline of a GEMM kernel (see the module docstring)."""

    @classmethod
    def shared_buffers(cls, g: Gemm, s: Schedule) -> list[SmemBuffer]:
        """The buffers the main loop needs (live in PHASE_MAINLOOP); asked before lowering, when
        the shared-memory plan is made."""
        ...

    def setup(self) -> None:
        """Tile-independent per-thread shared addresses (emitted once, before any tile)."""
        ...

    def prepare_loop(self) -> None:
        """Loop-invariant values of the main loop (emitted once, before the first one)."""
        ...

    def operands(self, tile: "Tile") -> "TileOperands":
        """The tile's operand state: pointers to its k-tile 0 and its edge checks."""
        ...

    def skip_k_tiles(self, gptr: dict[str, VReg], first: VReg, what: str) -> None:
        """Move the operand pointers `gptr` on by `first` k-tiles (split-K, Stream-K units)."""
        ...

    def accumulators(self) -> Accumulators:
        """Fresh accumulator registers of the warp tile (not yet zeroed)."""
        ...

    def mainloop(self, acc: Accumulators, ops: "TileOperands", k: "KRange") -> None:
        """acc += the tile's A @ B over the k-tiles of `k`, from the pointers of `ops`."""
        ...

    def epilogue(self, tile: "Tile", edge: "StoreEdges") -> "EpilogueMath":
        """The epilogue store path for the tile (its `emit(acc)` writes C)."""
        ...

    def stage_fragments(self, acc: Accumulators, base: VReg, epi: "StagedEpilogue") -> None:
        """Write the accumulators as f32 (f16 with f16 accumulation) into the staging tile at `base`."""
        ...

    # -- partial tiles (split-K workspace, Stream-K fix-up) ---------------------------------------
    def partial_origin(self, row_elems: int) -> Expr:
        """Element offset of this thread's (or warp's) first element in a row-major partial tile."""
        ...

    def store_partial(self, acc: Accumulators, base: VReg, row_elems: int) -> None:
        """Store the f32 accumulators to the partial tile at `base` (plus partial_origin)."""
        ...

    def add_partial(self, acc: Accumulators, base: VReg, row_elems: int) -> None:
        """acc += the partial tile at `base`, element by element."""
        ...


def mainloop_buffers(g: Gemm, s: Schedule) -> list[SmemBuffer]:
    """The multi-buffered A and B stage tiles of a cp.async pipeline (both pipelines use them)."""
    from ..schedule.geometry import operand_tiles

    return [SmemBuffer(t.name, s.stages * t.stage_bytes, t.align, PHASE_MAINLOOP, PHASE_MAINLOOP)
            for t in operand_tiles(g, s)]
