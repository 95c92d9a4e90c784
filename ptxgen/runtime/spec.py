"""`LaunchSpec`: the little the runtime reads of a compiled kernel, so that it imports neither
`Kernel` nor any target (`ptxgen.Kernel` satisfies it; its target's backend answers the
parameter checks and arguments)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..schedule.problem import Gemm
    from .params import ParamDecl


class LaunchSpec(Protocol):
    """A kernel as the launcher sees it: its PTX and entry, launch shape, operands and arguments."""

    gemm: "Gemm"
    arch: str
    ptx: str
    entry: str
    block: tuple[int, int, int]
    smem_bytes: int

    @property
    def zeroes_c_first(self) -> bool: ...

    @property
    def cluster_dims(self) -> tuple[int, int, int]: ...

    @property
    def workspace_elements(self) -> int: ...

    @property
    def grid_follows_device(self) -> bool: ...

    @property
    def needs_co_residency(self) -> bool: ...

    def assemble(self) -> Any: ...

    def launch_grid(self, sm_count: int | None, cluster_slots: int | None = None) -> tuple[int, int, int]: ...

    def scratch_sizes(self, grid: tuple[int, int, int]) -> tuple[int, int]: ...

    def check_params(self, decls: list["ParamDecl"]) -> list["ParamDecl"]: ...

    def tensor_map_args(self, views: tuple, ptrs: list[int]) -> list[bytes]: ...

    def arguments(self, views: tuple, operands: list, maps: list) -> list: ...
