"""The sm_90a backend: wgmma from shared-memory descriptors fed by TMA on an mbarrier ring, with
warp specialisation, persistent grids and clusters (`.target sm_90a`, PTX 8.0)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import ScheduleError
from ...ir import Function
from ...regalloc import plan_shared
from ...regalloc.smem import SmemPlan
from ...runtime.params import ParamDecl
from ...schedule.cost import Prediction, time_bucket
from ...schedule.problem import Gemm
from ...schedule.schedule import DEFAULT_PRODUCER_REGS, Schedule
from ...schedule.verify import verify as verify_schedule, without_fix_search
from ..base import Backend
from .args import check_sm90_params, check_tma_batch_stride, sm90_tensor_maps
from .choose import (VARIANT_BASES, check_problem_built, describe_hopper, hopper_candidates, hopper_variants,
                     hopper_register_need, no_candidate_error, predict_hopper)
from .describe import describe_hopper as describe_kernel
from .grouped import describe_group_walk
from .header import sm90_header_lines
from .options import Sm90Options
from .pipeline import RING_BUFFER, Sm90Pipeline, lower_sm90, param_names, tensor_map_specs
from .plan import default_consumer_regs, persistent_ctas
from .verify import verify_hopper, verify_target
from .verify_built import check_sm90_built


def fill_defaults(s: Schedule) -> None:
    """Build the schedule's `Sm90Options` with the fields left None set to the sm_90a defaults
    (the ones that need the Gemm, `swizzle` and `epilogue_via_smem`, are resolved by
    `plan.hopper_plan`), and `warps` from the consumers. Values of a wrong type are left as
    given, for the verifier to name. Called from the Schedule's constructor."""
    o = s.options if s.options is not None else Sm90Options()
    if not isinstance(o, Sm90Options):
        return  # verify_types names it
    bm = s.block[0] if isinstance(s.block, tuple) and s.block and isinstance(s.block[0], int) else 0
    o = defaults(o, consumers=2 if bm % 128 == 0 and bm > 0 else 1)
    # split-K and Stream-K are built in the non-specialised kernel (verify_built.py): their
    # defaults follow; Stream-K's grid is persistent, split-K's one CTA per (tile, split)
    split = isinstance(s.split_k, int) and s.split_k > 1
    streamk = s.decomposition in ("stream-k", "stream-k-pure")
    o = defaults(o, warp_specialized=not (split or streamk), persistent=not split, cluster=(1, 1))
    o = defaults(o, multicast=isinstance(o.cluster, tuple) and o.cluster != (1, 1))
    consumers = o.consumers
    if isinstance(consumers, int) and not isinstance(consumers, bool) and s.warps is None:
        object.__setattr__(s, "warps", (4 * consumers, 1))
    if o.warp_specialized is True and isinstance(consumers, int) and 1 <= consumers <= 2:
        o = defaults(o, producer_regs=DEFAULT_PRODUCER_REGS)
        if isinstance(o.producer_regs, int):
            o = defaults(o, consumer_regs=default_consumer_regs(consumers, o.producer_regs))
    object.__setattr__(s, "options", o)


def defaults(o: Sm90Options, **values: object) -> Sm90Options:
    """`o` with those of `values`' fields it leaves None set."""
    return replace(o, **{name: v for name, v in values.items() if getattr(o, name) is None})


def rank_hopper(g: Gemm, arch: str) -> list[tuple[Schedule, Prediction]]:
    """The built wgmma candidates the verifier accepts, fastest first; a problem the built sm_90a
    lowering cannot run raises LoweringNotBuilt naming arch='sm_90' instead of picking anything."""
    check_problem_built(g, arch)
    ranked, first = [], None
    for s in hopper_candidates(g):
        try:
            with without_fix_search():  # refused ones are dropped (the first one's advice is general)
                verify_schedule(g, s, arch)
        except ScheduleError as e:
            first = first or e
            continue
        ranked.append((s, predict_hopper(g, s, arch)))
    if not ranked:
        raise no_candidate_error(g, arch, first)
    ranked.sort(key=lambda r: order_key(*r))
    bases = [s for s, _ in ranked if not s.warp_specialized][:VARIANT_BASES]
    seen = {s for s, _ in ranked}
    for base in bases:  # split-K and Stream-K, built in the non-specialised kernel
        for v in hopper_variants(g, base):
            if v in seen:
                continue
            seen.add(v)
            try:
                with without_fix_search():
                    verify_schedule(g, v, arch)
            except ScheduleError:
                continue
            ranked.append((v, predict_hopper(g, v, arch)))
    return sorted(ranked, key=lambda r: order_key(*r))


def order_key(s: Schedule, p: Prediction) -> tuple:
    """Time in TIE-wide buckets, then: no split, the warp-specialised persistent kernel, no
    cluster, the default epilogue, row raster, the deeper ring (CUTLASS's sm90 builder takes as
    many stages as fit: StageCountAutoCarveout), the larger tile, fewer warpgroups, then the
    predicted time itself (so only the same kernel up to raster or cluster shape ties)."""
    clustered = s.cluster is not None and tuple(s.cluster) != (1, 1)
    return (time_bucket(p), s.split_k, s.stream_k, not s.warp_specialized, clustered, s.epilogue_via_smem is not None,
            s.raster != "row", -s.stages, -s.bm * s.bn, s.consumers, s.block, p.time_s)


class Sm90Backend(Backend):
    """wgmma kernels: A and B (and C for the TMA-store epilogue) through tensor maps by value."""

    name = "sm90"
    instructions = ("wgmma",)
    archs = ("sm_90a",)
    tf32_narrow_outputs = True  # the wgmma epilogue casts tf32's f32 accumulators to f16/bf16 too
    block_scaled = True  # the promoted fp8 kernels' promotion multiplies by the block scales (block_scales.py)
    #: grouped GEMMs in the warp-specialised persistent kernel (grouped.py; block-scaled fp8 too)
    grouped_inputs = ("f16", "bf16", "e4m3", "e5m2")
    options = Sm90Options

    def fill_defaults(self, s: Schedule) -> None:
        fill_defaults(s)

    def grid(self, g: Gemm, s: Schedule, sms: int) -> tuple[int, int, int] | None:
        return (persistent_ctas(g, s, sms), 1, 1) if s.persistent else None  # CTA x walks x, x + gridDim.x, ...

    def verify(self, g: Gemm, s: Schedule, arch: str) -> None:
        verify_hopper(g, s, arch)

    def check_built(self, g: Gemm, s: Schedule, arch: str) -> None:
        check_sm90_built(g, s, arch)

    def check_pairing(self, g: Gemm, s: Schedule, arch: str) -> None:
        verify_target(g, s, arch)

    def plan_shared(self, g: Gemm, s: Schedule) -> SmemPlan:
        return plan_shared(Sm90Pipeline.shared_buffers(g, s))

    def lower(self, g: Gemm, s: Schedule, plan: SmemPlan) -> Function:
        return lower_sm90(g, s, plan.offsets[RING_BUFFER])

    def header_lines(self, g: Gemm, s: Schedule, arch: str, grid: tuple[int, int, int], smem: int) -> list[str]:
        return sm90_header_lines(g, s, arch, grid, smem)

    def param_names(self, g: Gemm, s: Schedule) -> tuple[str, ...]:
        return param_names(g, s)

    def tensor_maps(self, g: Gemm, s: Schedule) -> tuple:
        return tensor_map_specs(g, s)

    def fills_device(self, s: Schedule) -> bool:
        return bool(s.stream_k or s.persistent)

    def walks_tiles(self, s: Schedule) -> bool:
        return bool(s.persistent and not s.stream_k)

    def cluster_dims(self, s: Schedule) -> tuple[int, int, int]:
        """(CM*CN, 1, 1): consecutive CTAs of the 1-D persistent grid, as the entry's
        .reqnctapercluster says (cluster.py)."""
        if s.cluster is None:
            return (1, 1, 1)
        return (s.cluster[0] * s.cluster[1], 1, 1)

    def check_params(self, kernel: Any, decls: list[ParamDecl]) -> list[ParamDecl]:
        return check_sm90_params(kernel, decls)

    def check_operand(self, kernel: Any, view: Any) -> None:
        check_tma_batch_stride(view)

    def tensor_map_args(self, kernel: Any, views: tuple, ptrs: list[int]) -> list[bytes]:
        return sm90_tensor_maps(kernel, views, ptrs)

    def arguments(self, g: Gemm, views: tuple, operands: list, maps: list) -> list:
        """Tensor maps by value instead of the A and B pointers (pipeline.py's parameters)."""
        cv = views[2]
        strided = g.batch > 1 or g.grouping == "masked"   # C's matrices: batches, or a masked GEMM's groups
        return list(maps) + [operands[2], g.m, g.n, g.k, cv.ld] + ([cv.batch_stride] if strided else [])

    def predict(self, g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
        return predict_hopper(g, s, arch, registers)

    def register_need(self, g: Gemm, s: Schedule) -> int:
        return hopper_register_need(g, s)

    def rank(self, g: Gemm, arch: str) -> list[tuple[Schedule, Prediction]]:
        return rank_hopper(g, arch)

    def order_key(self, s: Schedule, p: Prediction) -> tuple:
        return order_key(s, p)

    def describe_schedule(self, s: Schedule) -> str:
        return describe_hopper(s)

    def describe(self, kernel: Any) -> list[str] | None:
        return describe_kernel(kernel)

    def group_walk_text(self, kernel: Any) -> str:
        """How a grouped kernel finds its tiles, for `ptxgen info` and `run` (cli/report.py)."""
        return f"persistent grid of {kernel.grid[0]} CTAs: {describe_group_walk(kernel.gemm)}"
