"""fp8 accumulator promotion on sm_90a (docs/ptx_facts/wgmma.md §9b′).

Hopper's fp8 wgmma is reported to keep only about 14 bits when it adds each k32 product group into
its f32 accumulator (DeepSeek-V3 technical report, arXiv 2412.19437, §3.3.2), so a long K loses
accuracy when the wgmma accumulates all of it. By default (`Gemm.fast_accum=False`) an fp8 kernel
therefore keeps two accumulators per consumer thread, as CUTLASS's fp8 mainloops (their
`mma_promotion_interval`) and DeepGEMM (per 128 of K) do:

  * the wgmma's *temporary*: at most FP8_PROMOTION_K of K (one k-tile for BK <= 128, each 128 of
    a wider k-tile), its first wgmma with scale-d = 0 (D = A*B: no zeroing needed);
  * the *promoted* accumulator: f32 in registers, zeroed per tile, that the epilogue reads;
    after the wgmma.wait_group that retires a chunk, `add.f32 acc, acc, tmp` per register.

The chunk's wgmma group must retire before its temporary is read, so a promoted loop keeps no
group in flight across k-tiles (wait_group 0 each k-tile; the ring still runs S stages ahead),
and each consumer thread holds twice the accumulator registers (plan.py `held_accumulator_regs`,
checked by verify.py against the setmaxnreg budget). `promotion_clocks` prices both for the
chooser. `fast_accum=True` is the single-level kernel: no temporary, no promotion.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import VReg
from ...ir import ops as ptx
from ...ir.ops import F32
from ...schedule.problem import FP8_DTYPES, FP8_PROMOTION_K, Gemm
from ...schedule.schedule import Schedule
from .block_scales import BlockScales

if TYPE_CHECKING:
    from ...schedule.devices import DeviceModel
    from .context import Sm90Context, TmaOperands
    from .plan import HopperPlan

#: Clocks a consumer warpgroup's tensor work stalls at each promotion: the wgmma pipeline drains
#: (wait_group 0) before the adds may read the temporary, and refills after (an estimate; no GPU
#: measured it). A second consumer warpgroup's wgmmas fill about half of it.
PROMOTION_DRAIN_CLOCKS = 64


def promotion_k(g: Gemm, s: Schedule) -> int | None:
    """K one temporary covers before it is promoted (at most FP8_PROMOTION_K: the k-tile when
    BK <= 128), or None for a kernel without promotion (not fp8, or fast_accum=True)."""
    if g.dtype not in FP8_DTYPES or g.fast_accum:
        return None
    return min(s.bk, FP8_PROMOTION_K)


def promotions_per_k_tile(bk: int, interval: int) -> int:
    return -(-bk // interval)


def describe_accumulation(g: Gemm, s: Schedule) -> str:
    """How a kernel accumulates, for the PTX header and `ptxgen info`: fp8 promoted or not, else
    the accumulator's own type ("s32 accumulation" for s8/u8, whose wgmma accumulates in s32)."""
    interval = promotion_k(g, s)
    if interval is not None and g.block_scale is not None:
        bs = g.block_scale
        return (f"f32 accumulation with block-scaled fp8 promotion ({bs.dtype} scales per {bs.a[0]}x{bs.a[1]} block of A "
                f"and {bs.b[0]}x{bs.b[1]} of B): wgmma accumulates {interval} of K into a temporary, then "
                "acc += tmp * (sa[row, kb] * sb[kb, n-block]) after each wait_group")
    if interval is not None:
        return (f"f32 accumulation with fp8 promotion: wgmma accumulates {interval} of K into a temporary, added "
                "into a separate f32 accumulator after each wait_group (fast_accum=False)")
    if g.dtype in FP8_DTYPES:
        return "single-level f32 accumulation in the fp8 wgmma (fast_accum=True: no promotion)"
    return f"{g.accumulator} accumulation"


def promotion_clocks(g: Gemm, s: Schedule, plan: "HopperPlan", dev: "DeviceModel") -> tuple[float, float]:
    """(issue, stall) clocks one k-tile's promotions add on an SM: every consumer warp's add.f32 per
    accumulator register, and the drained wgmma pipeline at each wait_group 0 (half of it hidden by
    a second consumer warpgroup). (0, 0) without promotion."""
    interval = promotion_k(g, s)
    if interval is None:
        return 0.0, 0.0
    times = promotions_per_k_tile(s.bk, interval)
    issue = times * 4 * plan.consumers * plan.accumulator_regs / dev.schedulers_per_sm
    stall = times * PROMOTION_DRAIN_CLOCKS / plan.consumers
    return issue, stall


class Promotion:
    """The temporary accumulator of a promoted kernel and its promotion step (`add`)."""

    def __init__(self, ctx: "Sm90Context", interval: int):
        self.ctx, self.b, self.interval = ctx, ctx.b, interval
        self._temp: list[tuple[VReg, ...]] | None = None
        #: block-scaled fp8 (block_scales.py): the promotion multiplies by sa * sb
        self.scales = BlockScales(ctx) if ctx.g.block_scale is not None else None

    def begin_tile(self, ops: "TmaOperands") -> None:
        """Per tile, before its k-loop: the block scales' pointers (nothing without block scaling)."""
        if self.scales is not None:
            self.scales.begin_tile(ops)

    def begin_k_tile(self, kt: VReg) -> None:
        """At the top of k-tile kt: its block scales' factors (nothing without block scaling)."""
        if self.scales is not None:
            self.scales.load_k_tile(kt)

    def temporaries(self, acc: list[tuple[VReg, ...]]) -> list[tuple[VReg, ...]]:
        """The wgmma's temporary accumulators, shaped as `acc` (allocated on first use, once per kernel)."""
        if self._temp is None:
            self._temp = [self.b.regs("f32", len(frag)) for frag in acc]
        return self._temp

    def starts_chunk(self, kk: int) -> bool:
        """Whether the wgmma at k offset kk of a k-tile starts a temporary (scale-d = 0)."""
        return kk % self.interval == 0

    def promote(self, acc: list[tuple[VReg, ...]], where: str, chunk: int) -> None:
        """The promotion step after the wait_group that retired chunk `chunk` of the k-tile: `add`,
        or `scaled_add` for a block-scaled kernel."""
        if self.scales is not None:
            self.scaled_add(acc, where, chunk)
        else:
            self.add(acc, where)

    def scaled_add(self, acc: list[tuple[VReg, ...]], where: str, chunk: int) -> None:
        """acc = fma(temporary, sa * sb, acc), every register (block_scales.py: the chunk's factors)."""
        temp = self.temporaries(acc)
        assert self.scales is not None
        self.b.comment(f"block-scaled fp8 promotion ({where}): acc += tmp * (sa[row, kb] * sb[kb, n-block]) "
                       f"({sum(len(f) for f in acc)} fma.rn.f32, factors of the k-tile's chunk {chunk})")
        for m, (frag, tmp) in enumerate(zip(acc, temp)):
            for i, (a, t) in enumerate(zip(frag, tmp)):
                ptx.fma(self.b, F32, t, self.scales.factor(chunk, m, i), a, into=a)

    def add(self, acc: list[tuple[VReg, ...]], where: str) -> None:
        """acc += temporary, every register: after the wait_group that retired the chunk's wgmma."""
        temp = self.temporaries(acc)
        self.b.comment(f"fp8 promotion ({where}): the retired wgmma temporary ({self.interval} of K at most) is added "
                       f"into the f32 accumulator ({sum(len(f) for f in acc)} add.f32); the next chunk's first wgmma "
                       "starts the temporary again with scale-d = 0")
        for frag, tmp in zip(acc, temp):
            for a, t in zip(frag, tmp):
                ptx.add(self.b, F32, a, t, into=a)
