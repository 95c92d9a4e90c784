"""Register allocation and shared-memory planning for lowered PTX.

`allocate(items)` maps every virtual register to a physical PTX register (interval colouring over
dataflow liveness); `plan_shared(buffers)` gives shared buffers byte offsets, letting buffers with
disjoint lifetimes share bytes.
"""
from .allocate import Allocation, allocate
from .cfg import Block, build_cfg
from .liveness import Liveness, compute_liveness
from .smem import SmemBuffer, SmemPlan, plan_shared

__all__ = [
    "Allocation",
    "Block",
    "Liveness",
    "SmemBuffer",
    "SmemPlan",
    "allocate",
    "build_cfg",
    "compute_liveness",
    "plan_shared",
]
