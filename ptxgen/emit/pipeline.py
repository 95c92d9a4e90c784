"""The `Pipeline` protocol: what a GEMM lowering asks of a math pipeline, on every target.

A pipeline owns how operand tiles reach the tensor cores and where the accumulators live: its
shared-memory buffers, its per-thread setup, its accumulator registers, the main loop over a
k-range of one tile, the tile's epilogue store path, and how accumulators move to and from the
split-K / Stream-K partial tiles. Everything around it (tile scheduling, split-K and Stream-K
protocols, edge guards, the epilogue math) is shared. The protocol is generic in two types a
target chooses: its accumulators (`AccT`) and a tile's operands (`OpsT`: what the main loop and
the epilogue need of the tile beyond its `Tile`).

Implementations:
  * `Sm80Pipeline` (cp.async + ldmatrix + mma.sync) and `WmmaPipeline` (cp.async + wmma): the
    `CpAsyncPipeline` below (Accumulators, TileOperands: global pointers and edge checks), which
    adds the pointer moves and the staged epilogue's fragment writes;
  * `Sm90Pipeline` (targets/sm90/pipeline.py: TMA + mbarrier ring + wgmma): accumulators one
    fragment per m64 block, operands `sm90.context.TmaOperands` (origin, batch coordinate, C,
    warpgroup), k-ranges by k-tile index (`KRange.first`). Its warp-specialised kernel runs the
    pipeline's pieces in two roles (targets/sm90/warp_specialized.py) instead of `mainloop`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from ..regalloc.smem import SmemBuffer
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from .index import Expr
from ..ir import VReg

if TYPE_CHECKING:
    from .epilogue.staged import StagedEpilogue
    from .tiles import KRange, Tile, TileOperands

#: Lifetime phases handed to the shared-memory planner: main-loop buffers and epilogue buffers
#: never live at once, so the planner may overlap them.
PHASE_MAINLOOP, PHASE_EPILOGUE = 0, 1

#: The warp tile's accumulators: [m block][n block] -> the fragment's registers.
Accumulators = list[list[tuple[VReg, ...]]]

AccT = TypeVar("AccT")
OpsT = TypeVar("OpsT", contravariant=True)
AccIn = TypeVar("AccIn", contravariant=True)


class TileEpilogue(Protocol[AccIn]):
    """One tile's epilogue store path, built by `Pipeline.epilogue`."""

    def emit(self, acc: AccIn) -> None:
        """The whole epilogue of the tile from the accumulators `acc`."""
        ...


class Pipeline(Protocol[AccT, OpsT]):
    """One math pipeline of a GEMM kernel, any target (see the module docstring)."""

    @classmethod
    def shared_buffers(cls, g: Gemm, s: Schedule) -> list[SmemBuffer]:
        """The buffers the main loop needs; asked before lowering, when the shared-memory plan is made."""
        ...

    def setup(self) -> None:
        """Tile-independent per-thread values and barriers (emitted once, before any tile)."""
        ...

    def accumulators(self) -> AccT:
        """Fresh accumulator registers (not yet zeroed)."""
        ...

    def mainloop(self, acc: AccT, ops: OpsT, k: "KRange") -> None:
        """acc += the tile's A @ B over the k-tiles of `k`, from the tile's operands `ops`."""
        ...

    def epilogue(self, tile: "Tile", ops: OpsT) -> TileEpilogue[AccT]:
        """The epilogue store path for the tile (its `emit(acc)` writes C)."""
        ...

    # -- partial tiles (split-K workspace, Stream-K fix-up) ---------------------------------------
    def partial_origin(self, row_elems: int) -> Expr:
        """Element offset of this thread's (or warp's) first element in a row-major partial tile."""
        ...

    def store_partial(self, acc: AccT, base: VReg, row_elems: int) -> None:
        """Store the f32 accumulators to the partial tile at `base` (plus partial_origin)."""
        ...

    def add_partial(self, acc: AccT, base: VReg, row_elems: int) -> None:
        """acc += the partial tile at `base`, element by element."""
        ...


class CpAsyncPipeline(Pipeline[Accumulators, "TileOperands"], Protocol):
    """A cp.async pipeline (sm_80 mma.sync, wmma): operands are global pointers it moves itself."""

    def prepare_loop(self) -> None:
        """Loop-invariant values of the main loop (emitted once, before the first one)."""
        ...

    def operands(self, tile: "Tile") -> "TileOperands":
        """The tile's operand state: pointers to its k-tile 0 and its edge checks."""
        ...

    def skip_k_tiles(self, gptr: dict[str, VReg], first: VReg, what: str) -> None:
        """Move the operand pointers `gptr` on by `first` k-tiles (split-K, Stream-K units)."""
        ...

    def stage_fragments(self, acc: Accumulators, base: VReg, epi: "StagedEpilogue") -> None:
        """Write the accumulators as f32 (f16 with f16 accumulation) into the staging tile at `base`."""
        ...


def mainloop_buffers(g: Gemm, s: Schedule) -> list[SmemBuffer]:
    """The multi-buffered A and B stage tiles of a cp.async pipeline (both pipelines use them)."""
    from ..schedule.geometry import operand_tiles

    return [SmemBuffer(t.name, s.stages * t.stage_bytes, t.align, PHASE_MAINLOOP, PHASE_MAINLOOP)
            for t in operand_tiles(g, s)]
