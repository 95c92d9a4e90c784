"""`Backend`: everything `compile`, the runtime, the simulator, the tuner and the CLI ask of a GPU
target, so that none of them branches on the architecture (docs/architecture.md).

A backend owns the instructions it lowers (`instructions`) on the architectures it names
(`archs`). `ptxgen.targets.registry` picks one from (arch, schedule.instruction) and registers
its schedule-layer rules (`ScheduleRules`: defaults, persistent grid, verifier rules, what is
built) with `ptxgen.schedule.rules`, which the schedule layer reads without importing targets.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ir import Function
    from ..regalloc.smem import SmemPlan
    from ..runtime.params import ParamDecl
    from ..schedule.cost import Prediction
    from ..schedule.rules import TargetOptions
    from ..schedule.problem import Gemm
    from ..schedule.schedule import Schedule


class Backend(ABC):
    """One GPU target's lowering, launch conventions, cost model and candidates."""

    #: A short name ("sm80", "sm90") for messages and docs.
    name: str
    #: The `Schedule.instruction` values this backend lowers.
    instructions: tuple[str, ...]
    #: The `arch` strings it lowers them for; the first is where `compile(gemm)` picks its schedules.
    archs: tuple[str, ...]
    #: Whether tf32 inputs may give f16/bf16 outputs (`ScheduleRules`).
    tf32_narrow_outputs: bool = False
    #: Whether the target builds block-scaled fp8 (Gemm.block_scale; schedule/block_scale.py).
    block_scaled = False
    #: The class of this target's own schedule fields (`Schedule.options`), None when it has none.
    options: "type[TargetOptions] | None" = None

    # -- the schedule layer's questions (`schedule.rules.ScheduleRules`) ------------------------
    def fill_defaults(self, s: "Schedule") -> None:
        """Set this target's schedule fields left None (none by default)."""

    def grid(self, g: "Gemm", s: "Schedule", sms: int) -> tuple[int, int, int] | None:
        """A launch grid of the target's own (a persistent one), or None for the tile grid."""
        return None

    @abstractmethod
    def verify(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise ScheduleError for the first of this target's rules (g, s) breaks on `arch`."""

    def check_built(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise LoweringNotBuilt for a legal schedule this backend cannot lower yet."""

    def check_pairing(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise ScheduleError where (g, s, arch) uses what this target reserves (its arch, dtypes or
        fields) with another target's instruction; run for every schedule."""

    # -- compile's stages ----------------------------------------------------------------------
    @abstractmethod
    def plan_shared(self, g: "Gemm", s: "Schedule") -> "SmemPlan":
        """Byte offsets of the kernel's shared-memory buffers."""

    @abstractmethod
    def lower(self, g: "Gemm", s: "Schedule", plan: "SmemPlan") -> "Function":
        """The kernel as instructions over virtual registers."""

    @abstractmethod
    def header_lines(self, g: "Gemm", s: "Schedule", arch: str, grid: tuple[int, int, int],
                     smem: int) -> list[str]:
        """The comment lines that open the PTX: what it computes, how, and how to launch it."""

    @abstractmethod
    def param_names(self, g: "Gemm", s: "Schedule") -> tuple[str, ...]:
        """The leading kernel parameters, in order (the rest follow from the Gemm)."""

    def tensor_maps(self, g: "Gemm", s: "Schedule") -> tuple:
        """The CUtensorMaps the kernel takes by value, in parameter order; () for pointer kernels."""
        return ()

    # -- the launch (runtime and simulator) ----------------------------------------------------
    def fills_device(self, s: "Schedule") -> bool:
        """Whether the grid is persistent, sized by the device's SM count when `s.sms` is None."""
        return s.stream_k

    def walks_tiles(self, s: "Schedule") -> bool:
        """Whether each CTA of the grid walks output tiles x, x + gridDim.x, ... (not Stream-K)."""
        return False

    def cluster_dims(self, s: "Schedule") -> tuple[int, int, int]:
        """Thread-block cluster dimensions of the launch; (1, 1, 1) for no cluster."""
        return (1, 1, 1)

    @abstractmethod
    def check_params(self, kernel: Any, decls: list["ParamDecl"]) -> list["ParamDecl"]:
        """The entry's declared parameters, checked against what the launch will pass."""

    def check_operand(self, kernel: Any, view: Any) -> None:
        """Refuse an operand view the kernel cannot read (e.g. a TMA stride); none by default."""

    def tensor_map_args(self, kernel: Any, views: tuple, ptrs: list[int]) -> list[bytes]:
        """The tensor maps to pass by value for operand views at device pointers `ptrs`."""
        return []

    @abstractmethod
    def arguments(self, g: "Gemm", views: tuple, operands: list, maps: list) -> list:
        """The leading kernel arguments (before the epilogue vectors and scratch): `views` are A's,
        B's and C's operand views, `operands` their pointers (or simulator buffers), `maps` the
        tensor maps (`tensor_map_args`, or the simulator's) where the kernel takes them."""

    # -- tuning --------------------------------------------------------------------------------
    @abstractmethod
    def predict(self, g: "Gemm", s: "Schedule", arch: str, registers: int | None = None) -> "Prediction":
        """The cost model's time for a schedule the verifier accepts."""

    @abstractmethod
    def register_need(self, g: "Gemm", s: "Schedule") -> int:
        """Registers per thread the schedule needs by the backend's estimate, uncapped (the chooser
        skips candidates that need no less than one that spilled, and falls back to the least)."""

    @abstractmethod
    def rank(self, g: "Gemm", arch: str) -> list[tuple["Schedule", "Prediction"]]:
        """Every legal candidate schedule with its prediction, best first (`order_key`)."""

    @abstractmethod
    def order_key(self, s: "Schedule", p: "Prediction") -> tuple:
        """Sort key among candidates: the predicted time's bucket, then the simpler schedule."""

    @abstractmethod
    def describe_schedule(self, s: "Schedule") -> str:
        """The schedule as the CLI flags that give it."""

    def describe(self, kernel: Any) -> list[str] | None:
        """`ptxgen info`'s lines for a kernel of this target; None for the shared layout."""
        return None
