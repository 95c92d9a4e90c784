"""The sm_80 backend: mma.sync m16n8k16 and wmma m16n16k16 with cp.async pipelines, for sm_80,
sm_86, sm_89 and sm_90 (`.target sm_90` at PTX 7.8 runs the same kernels on Hopper)."""
from __future__ import annotations

from typing import Any

from ...emit.epilogue.staged import STAGE_BUFFER
from ...emit.pipeline import PHASE_EPILOGUE
from ...emit.splitk import FLAG_BUFFER
from ...ir import Function
from ...regalloc import SmemBuffer, plan_shared
from ...regalloc.smem import SmemPlan
from ...runtime.params import ParamDecl
from ...schedule.cost import Prediction
from ...schedule.geometry import register_estimate, staging_layout
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ..base import Backend
from . import candidates, cost, header
from .lowering import lower_gemm, pipeline_class
from .verify import verify_sm80

#: Parameter names in kernel order (the Kernel's docstring lists the optional ones after them).
PARAM_NAMES = ("A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc")


def plan_tile_buffers(g: Gemm, s: Schedule) -> SmemPlan:
    """Offsets of the multi-buffered A and B tiles (live through the main loop) and of the
    epilogue's buffers, which may reuse the tiles' bytes."""
    buffers = pipeline_class(s).shared_buffers(g, s)
    st = staging_layout(g, s)
    if st is not None:
        buffers.append(SmemBuffer(STAGE_BUFFER, st.bytes, 128, PHASE_EPILOGUE, PHASE_EPILOGUE))
    if s.split_k > 1 and s.split_k_mode == "workspace":
        buffers.append(SmemBuffer(FLAG_BUFFER, 4, 4, PHASE_EPILOGUE, PHASE_EPILOGUE))
    return plan_shared(buffers)


def check_pointer_params(kernel: Any, decls: list[ParamDecl]) -> list[ParamDecl]:
    """The entry must take A, B, C, the sizes and leading dimensions, then the optional pointers."""
    types = [d.type for d in decls]
    epi = kernel.gemm.epi
    g = kernel.gemm
    strides = 3 if g.batch > 1 or g.grouping == "masked" else 1 if g.grouping in ("contiguous", "k-contiguous") else 0
    want = ["u64"] * 3 + ["u32"] * 6 + ["u64"] * strides + \
        (["u64"] if epi.bias else []) + (["u64"] if epi.scale else []) + \
        (["u64"] * 2 if kernel.workspace_elements else []) + (["u64"] if g.grouped else [])
    if len(decls) != len(want) or any(t[1:] != w[1:] or t[0] not in "ubs" for t, w in zip(types, want)):
        raise ValueError(f"entry {kernel.entry} declares parameters "
                         f"{[f'{d.name}:.{d.type}' for d in decls]}; ptxgen kernels must take "
                         f"{list(PARAM_NAMES)} as 3 × .u64 then 6 × .u32, then 3 × .u64 batch "
                         f"strides when batched, .u64 bias and scale pointers when the epilogue has them, "
                         f"and .u64 workspace and counters for split-K / Stream-K; grouped: .u64 "
                         f"batch_stride_b (contiguous), batch_stride_c (k-contiguous) or the 3 strides "
                         f"(masked) after ldc and .u64 "
                         f"offs / masked_m last")
    return decls


class Sm80Backend(Backend):
    """mma.sync and wmma kernels: A, B and C by pointer, cp.async into padded or swizzled tiles."""

    name = "sm80"
    instructions = ("m16n8k16", "wmma")
    archs = ("sm_80", "sm_86", "sm_89", "sm_90")

    def verify(self, g: Gemm, s: Schedule, arch: str) -> None:
        verify_sm80(g, s, arch)

    def plan_shared(self, g: Gemm, s: Schedule) -> SmemPlan:
        return plan_tile_buffers(g, s)

    def lower(self, g: Gemm, s: Schedule, plan: SmemPlan) -> Function:
        return lower_gemm(g, s, plan)

    def header_lines(self, g: Gemm, s: Schedule, arch: str, grid: tuple[int, int, int], smem: int) -> list[str]:
        return header.header_lines(g, s, arch, grid, smem)

    def param_names(self, g: Gemm, s: Schedule) -> tuple[str, ...]:
        return PARAM_NAMES

    def check_params(self, kernel: Any, decls: list[ParamDecl]) -> list[ParamDecl]:
        return check_pointer_params(kernel, decls)

    def arguments(self, g: Gemm, views: tuple, operands: list, maps: list) -> list:
        av, bv, cv = views[:3]
        if g.grouping == "contiguous":
            strides = [bv.batch_stride]
        elif g.grouping == "k-contiguous":  # A and B are single matrices; C has one per group
            strides = [cv.batch_stride]
        else:
            strides = [v.batch_stride for v in views[:3]] if g.batch > 1 or g.grouping == "masked" else []
        return list(operands[:3]) + [g.m, g.n, g.k, av.ld, bv.ld, cv.ld] + strides

    def predict(self, g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
        return cost.predict(g, s, arch, registers)

    def register_need(self, g: Gemm, s: Schedule) -> int:
        return register_estimate(g, s)["total"]

    def rank(self, g: Gemm, arch: str) -> list[tuple[Schedule, Prediction]]:
        return candidates.rank(g, arch)

    def order_key(self, s: Schedule, p: Prediction) -> tuple:
        return candidates.order_key(s, p)

    def describe_schedule(self, s: Schedule) -> str:
        return candidates.describe_schedule(s)
