"""The sm_90a (wgmma + TMA + mbarrier) rules of the verifier.

`verify_target` runs for every schedule: it keeps wgmma, fp8 and the Hopper-only fields on
sm_90a, and sm_90a on wgmma. `verify_hopper` checks a wgmma schedule's derived plan
(`hopper.hopper_plan`, the numbers the lowering uses) against the ISA and TMA limits in
docs/ptx_facts/ (wgmma.md, tma.md, warp_specialisation.md, clusters.md, module.md). Every rule
raises ScheduleError naming the field, the rule and the fix; operands TMA cannot describe are
sent to the sm_80 path (arch="sm_90", instruction="m16n8k16") where it exists.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from ...schedule.rules import options_class

from .plan import (CONSUMER_OVERHEAD_REGS, FP8_DTYPES, MBARRIER_BYTES, SETMAXNREG_MAX, SETMAXNREG_MIN, SETMAXNREG_STEP,
                     TMA_BOX_MAX, TMA_STRIDE_ALIGN, TRANSPOSABLE, WARPGROUP_THREADS, WGMMA_N, HopperPlan,
                     hopper_plan)
from ...schedule.problem import DTYPE_BYTES, WGMMA_K, WGMMA_M, Gemm
from ...schedule.schedule import SWIZZLE_WIDTHS, Schedule
from .options import HOPPER_FIELDS
from ...schedule.targets import HOPPER_TARGETS, target
from ...errors import ScheduleError

#: Rows of a multicast box slice: a whole number of swizzle atoms (8 rows of the swizzle width).
MULTICAST_SLICE_ROWS = 8
SM80_PATH = "arch='sm_90' with instruction='m16n8k16' (the mma.sync path)"


def _fallback(g: Gemm) -> str:
    """Where an operand TMA cannot take may go instead."""
    if g.dtype in FP8_DTYPES:
        return (f"or, since fp8 has no mma.sync path, convert A and B to f16 (exact for every {g.dtype} value) "
                "and compile dtype='f16' for arch='sm_90'")
    return f"or use {SM80_PATH}, which takes any alignment and layout"


def verify_target(g: Gemm, s: Schedule, arch: str) -> None:
    """wgmma, fp8 and the Hopper fields need sm_90a; sm_90a lowers only wgmma schedules."""
    hopper_arch = target(arch).wgmma
    if g.dtype in FP8_DTYPES and not (hopper_arch and s.hopper) and s.instruction != "tcgen05":  # sm_100a's too
        raise ScheduleError("gemm.dtype", g.dtype, f"{g.dtype} (fp8) inputs are multiplied only by wgmma, which "
                            f"needs arch='sm_90a' (the mma.sync and wmma paths cannot multiply fp8)",
                            "use arch='sm_90a' with instruction='wgmma', or convert A and B to f16 (exact for "
                            f"every {g.dtype} value) and keep arch={arch!r}")
    if s.hopper and not hopper_arch:
        raise ScheduleError("arch", arch, "instruction='wgmma' needs the architecture-specific Hopper target "
                            "sm_90a (.target sm_90a, PTX 8.0): plain sm_90 has no wgmma or setmaxnreg",
                            f"use arch='sm_90a' on an H100/H200, or instruction="
                            f"{'tcgen05' if arch == 'sm_100a' else 'm16n8k16'!r} for {arch}")
    if hopper_arch and not s.hopper:
        raise ScheduleError("schedule.instruction", s.instruction, f"{arch} is the Hopper wgmma pipeline; "
                            "mma.sync and wmma schedules are the sm_90 path",
                            f"use instruction='wgmma' for {arch}, or arch='sm_90' for this schedule")
    if not s.hopper:
        own_cls = options_class(s.instruction)  # the fields the schedule's own target has too (cluster)
        own = {f.name for f in fields(own_cls)} if own_cls is not None else set()
        for name in HOPPER_FIELDS:
            if name not in own and getattr(s, name) is not None:  # a field its own target shares is its own
                raise ScheduleError(f"schedule.{name}", getattr(s, name), "applies to Hopper schedules only "
                                    f"(instruction='wgmma', arch={HOPPER_TARGETS[0]!r})",
                                    f"remove {name}, or use instruction='wgmma' with arch={HOPPER_TARGETS[0]!r}")


def verify_hopper(g: Gemm, s: Schedule, arch: str) -> None:
    """Every sm_90a rule, in the order a user fixes them: warpgroups and the wgmma shape, the
    operand layouts and TMA, registers, shared memory, the cluster, the grid walk."""
    verify_warpgroups(g, s)
    verify_wgmma_shape(g, s)
    verify_tma(g, s)
    plan = hopper_plan(g, s)
    verify_registers(g, s, plan)
    verify_hopper_smem(s, plan, arch)
    verify_cluster(g, s, plan, arch)
    verify_walk(g, s)


def verify_warpgroups(g: Gemm, s: Schedule) -> None:
    """1 or 2 consumer warpgroups, each owning BM/consumers rows, a multiple of wgmma's M = 64."""
    bm = s.bm
    if s.consumers not in (1, 2):
        raise ScheduleError("schedule.consumers", s.consumers, "a Hopper CTA has 1 or 2 consumer warpgroups",
                            "use consumers=1 or consumers=2 (None picks 2 when BM is a multiple of 128)")
    if bm % (WGMMA_M * s.consumers):
        fix = (f"make BM a multiple of {WGMMA_M * s.consumers}" + (" or use consumers=1" if s.consumers == 2 and
                                                                    bm % WGMMA_M == 0 else ""))
        raise ScheduleError("schedule.block.BM", bm, f"each of {s.consumers} consumer warpgroup(s) issues wgmma "
                            f"m{WGMMA_M} on whole 64-row slices, so BM must be a multiple of {WGMMA_M} x consumers", fix)
    if s.warps != (4 * s.consumers, 1):
        raise ScheduleError("schedule.warps", s.warps, f"a wgmma schedule's warps are its consumer warpgroups' "
                            f"warps, ({4 * s.consumers}, 1) for consumers={s.consumers}",
                            "leave warps unset (None) and choose consumers=1 or 2 instead")
    if s.smem_layout != "swizzle":
        raise ScheduleError("schedule.smem_layout", s.smem_layout, "TMA writes and wgmma descriptors read "
                            "swizzled tiles", "leave smem_layout=None (or 'swizzle'); pick the width with swizzle=")
    if s.swizzle is not None and s.swizzle not in SWIZZLE_WIDTHS:
        raise ScheduleError("schedule.swizzle", s.swizzle, "the TMA/wgmma swizzle is 128, 64 or 32 bytes",
                            "use swizzle=128, 64 or 32, or None for the widest the tiles allow")
    if not s.warp_specialized and (s.producer_regs is not None or s.consumer_regs is not None):
        raise ScheduleError("schedule.producer_regs" if s.producer_regs is not None else "schedule.consumer_regs",
                            s.producer_regs if s.producer_regs is not None else s.consumer_regs,
                            "setmaxnreg register counts need a producer warpgroup to move registers from",
                            "remove producer_regs/consumer_regs, or use warp_specialized=True")


def verify_wgmma_shape(g: Gemm, s: Schedule) -> None:
    """BN is a legal wgmma N for the dtype (s8/u8: 8, 16, 24, multiples of 16); BK a multiple of
    the instruction's K (32 bytes of K)."""
    bn, bk = s.bn, s.bk
    legal = WGMMA_N[g.dtype]
    if bn not in legal:
        steps = "8, 16, 24 or a multiple of 16 up to 256" if legal[3] == 32 else "a multiple of 8 up to 256"
        near = min(legal, key=lambda n: (abs(n - bn), n))
        raise ScheduleError("schedule.block.BN", bn, f"one wgmma covers all of BN, and wgmma .{g.dtype} has N "
                            f"{steps} (docs/ptx_facts/wgmma.md §9a)", f"use BN={near}")
    k = WGMMA_K[g.dtype]
    if bk % k:
        raise ScheduleError("schedule.block.BK", bk, f"BK is not a multiple of {k}, the K of wgmma m64n{bn}k{k} "
                            f"for {g.dtype}", f"make BK a multiple of {k}, e.g. {128 // DTYPE_BYTES[g.dtype]}")


def verify_tma(g: Gemm, s: Schedule) -> None:
    """What TMA and the wgmma descriptors need of the operands: K-major unless 16-bit, 16-byte
    aligned strides and bases, whole swizzle widths along each tile's contiguous extent, boxes
    of at most 256 per dimension, and a C that TMA can store when the epilogue goes through it."""
    esize = g.in_bytes
    wrong = [(name, layout, k_major) for name, layout, k_major in (("A", g.a_layout, "row"), ("B", g.b_layout, "col"))
             if layout != k_major and g.dtype not in TRANSPOSABLE]
    if wrong:  # every operand that must change is named, so that following the fix is enough
        name, layout, _ = wrong[0]
        stores = " and ".join(f"{n} {k}-major" for n, _, k in wrong)
        fields = ", ".join(f"{n.lower()}_layout='{k}'" for n, _, k in wrong)
        raise ScheduleError(f"gemm.{name.lower()}_layout", layout, f"wgmma reads {g.dtype} operands K-major only "
                            "(its transpose bits exist for f16/bf16)", f"store {stores} ({fields}); " + _fallback(g))
    align = g.alignment()
    if align < TMA_STRIDE_ALIGN:
        lda, ldb, _ = g.leading_dims()
        field, value = (("gemm.align", g.align) if g.align is not None else
                        ("gemm.lda", lda) if (lda * esize) % TMA_STRIDE_ALIGN else ("gemm.ldb", ldb))
        raise ScheduleError(field, value, f"TMA needs 16-byte aligned base pointers and row strides; A and B "
                            f"are aligned to {align} B", f"pad lda and ldb to multiples of "
                            f"{TMA_STRIDE_ALIGN // esize} elements (with 16-byte aligned pointers); " + _fallback(g))
    if s.epilogue_via_smem is True:
        ldc = g.leading_dims()[2]
        if (ldc * g.out_bytes) % TMA_STRIDE_ALIGN or g.out_alignment() < TMA_STRIDE_ALIGN:
            raise ScheduleError("schedule.epilogue_via_smem", True, f"the TMA store of C needs 16-byte aligned "
                                f"rows; ldc={ldc} {g.out_dtype} elements is {ldc * g.out_bytes} B",
                                "use epilogue_via_smem=None or False (direct stores), or pad ldc to a multiple of "
                                f"{TMA_STRIDE_ALIGN // g.out_bytes}")
        if (s.bn * g.out_bytes) % TMA_STRIDE_ALIGN:
            raise ScheduleError("schedule.epilogue_via_smem", True, f"the TMA store of C moves boxes whose rows are "
                                f"multiples of 16 B; BN={s.bn} {g.out_dtype} columns are {s.bn * g.out_bytes} B",
                                "use epilogue_via_smem=None or False (direct stores), or make BN a multiple of "
                                f"{TMA_STRIDE_ALIGN // g.out_bytes}")
    bm, bn, bk = s.block
    tiles = (("A", g.a_layout == "row", bm, "BM"), ("B", g.b_layout == "col", bn, "BN"))
    for name, k_major, mn, mn_name in tiles:
        extent_name, extent = ("BK", bk) if k_major else (mn_name, mn)
        row_bytes = extent * esize
        widths = (s.swizzle,) if s.swizzle is not None else SWIZZLE_WIDTHS
        if not any(row_bytes % w == 0 for w in widths):
            w = widths[0] if s.swizzle is not None else SWIZZLE_WIDTHS[-1]
            raise ScheduleError(f"schedule.block.{extent_name}", extent, f"{name}'s tile is {extent_name}={extent} "
                                f"{g.dtype} = {row_bytes} B along its contiguous dimension, not a whole number of "
                                f"{w}-byte swizzle rows (each TMA box's inner extent is one swizzle width)",
                                f"make {extent_name} x {esize} B a multiple of {w}"
                                + (" or choose a narrower swizzle (swizzle=64 or 32)" if s.swizzle == 128 else
                                   " (or leave swizzle=None)" if s.swizzle is not None else ""))
        outer, outer_name = (mn, mn_name) if k_major else (bk, "BK")
        if outer > TMA_BOX_MAX:
            raise ScheduleError(f"schedule.block.{outer_name}", outer, f"{name}'s TMA box is {outer} rows, over "
                                f"TMA's {TMA_BOX_MAX} per box dimension (docs/ptx_facts/tma.md §9d′)",
                                f"use {outer_name} <= {TMA_BOX_MAX}")


def verify_registers(g: Gemm, s: Schedule, plan: HopperPlan) -> None:
    """setmaxnreg counts legal and ordered around the launch cap, the CTA's registers not
    overdrawn, and each consumer thread's accumulators fitting its count."""
    if plan.warp_specialized:
        for name in ("producer_regs", "consumer_regs"):
            v = getattr(s, name)
            if not (SETMAXNREG_MIN <= v <= SETMAXNREG_MAX and v % SETMAXNREG_STEP == 0):
                raise ScheduleError(f"schedule.{name}", v, f"setmaxnreg takes a multiple of {SETMAXNREG_STEP} "
                                    f"from {SETMAXNREG_MIN} to {SETMAXNREG_MAX}",
                                    f"use e.g. {name}={40 if name == 'producer_regs' else 232}, or None")
        cap = plan.launch_regs
        if s.producer_regs > cap:
            raise ScheduleError("schedule.producer_regs", s.producer_regs, f"the producer's setmaxnreg.dec must "
                                f"lower its count from the launch cap of {cap} (.maxnreg for {plan.threads} threads)",
                                f"use producer_regs <= {cap} (40 is usual)")
        if s.consumer_regs < cap:
            raise ScheduleError("schedule.consumer_regs", s.consumer_regs, f"the consumers' setmaxnreg.inc must "
                                f"raise their count from the launch cap of {cap}",
                                f"use consumer_regs >= {cap}, or None")
        used = (s.producer_regs + s.consumers * s.consumer_regs) * WARPGROUP_THREADS
        pool = cap * plan.threads
        if used > pool:
            room = (pool // WARPGROUP_THREADS - s.producer_regs) // s.consumers // SETMAXNREG_STEP * SETMAXNREG_STEP
            raise ScheduleError("schedule.consumer_regs", s.consumer_regs,
                                f"(producer {s.producer_regs} + {s.consumers} x {s.consumer_regs}) x 128 threads = "
                                f"{used} registers, more than the {pool} the CTA launches with ({cap} x "
                                f"{plan.threads} threads; setmaxnreg only moves registers between warpgroups)",
                                f"use consumer_regs <= {room} or a smaller producer_regs")
    need = plan.held_accumulator_regs + CONSUMER_OVERHEAD_REGS + plan.block_scale_regs
    have = plan.consumer_regs
    if need > have and plan.promotion_k is not None:
        verify_promotion_registers(g, s, plan, need, have)
    if need > have:
        field, value = (("schedule.consumer_regs", s.consumer_regs) if plan.warp_specialized and have < SETMAXNREG_MAX
                        else ("schedule.block", s.block))
        raise ScheduleError(field, value, f"each consumer thread holds {plan.accumulator_regs} {g.accumulator} "
                            f"accumulator registers ({plan.rows_per_consumer}x{s.bn} per warpgroup) plus about "
                            f"{CONSUMER_OVERHEAD_REGS} others, over its {have} registers",
                            "; ".join(fix for fix, applies in (
                                (f"raise consumer_regs to {-(-need // SETMAXNREG_STEP) * SETMAXNREG_STEP}",
                                 field.endswith("regs") and need <= SETMAXNREG_MAX),
                                ("use consumers=2", s.consumers == 1 and s.bm % 128 == 0),
                                ("use a smaller BN or BM", True)) if applies))


def verify_promotion_registers(g: Gemm, s: Schedule, plan: HopperPlan, need: int, have: int) -> None:
    """fp8 promotion holds a second f32 accumulator per consumer thread (targets/sm90/promotion.py):
    refused, with the widest BN that fits or the single-level kernel, where both do not fit."""
    # 2 x rows x BN / 128 held registers per thread: the widest BN (a multiple of 8) that fits
    room = (max(0, have - CONSUMER_OVERHEAD_REGS - plan.block_scale_regs) * WARPGROUP_THREADS
            // (2 * plan.rows_per_consumer) // 8 * 8)
    fixes = [f"use a smaller BN (<= {room})" if room >= 8 else "use a smaller BM or BN"]
    if s.consumers == 1 and s.bm % 128 == 0:
        fixes.append("consumers=2")
    budget = "setmaxnreg.inc budget" if plan.warp_specialized else "launch cap (.maxnreg)"
    raise ScheduleError("gemm.fast_accum", g.fast_accum, f"fp8 accumulator promotion (the default) keeps the wgmma's "
                        f"temporary and the promoted f32 accumulator: 2 x {plan.accumulator_regs} registers "
                        + (f"and {plan.block_scale_regs} for the block scales " if plan.block_scale_regs else "") +
                        f"({plan.rows_per_consumer}x{s.bn} per consumer warpgroup) plus about {CONSUMER_OVERHEAD_REGS} "
                        f"others, over the consumer thread's {have}-register {budget}",
                        f"{', '.join(fixes)}" + ("" if g.block_scale is not None else
                                                 ", or fast_accum=True (the single-level kernel, less accurate at large K)"))


def verify_hopper_smem(s: Schedule, plan: HopperPlan, arch: str) -> None:
    """stages x (A + B tiles) + epilogue staging + mbarriers + alignment fit the target."""
    limit = target(arch).smem_per_block
    if plan.smem.total > limit:
        per_stage = plan.smem.a_stage + plan.smem.b_stage + 2 * MBARRIER_BYTES  # tiles, full + empty barrier
        fixed = plan.smem.total - s.stages * per_stage
        fits = max(0, (limit - fixed) // per_stage)
        raise ScheduleError("schedule.stages", s.stages, f"{plan.smem.describe()} of shared memory, over {arch}'s "
                            f"{limit} B per block", (f"use stages <= {fits}" if fits else "use a smaller block tile")
                            + (", or epilogue_via_smem=False (no C staging)" if plan.smem.epilogue_store else ""))


def verify_multicast_slices(plan: Any, cluster: tuple[int, int], setting: str, fallback: str) -> None:
    """Each of the CTAs sharing an operand by TMA multicast loads 1/parts of its box (B along CM,
    A along CN), and each slice must be a whole number of swizzle atoms so that every CTA's part
    lands on the same swizzle pattern. `plan` is a Hopper or Blackwell plan (a_box, b_box,
    multicast); `setting` says what shares the box, `fallback` the setting that avoids the rule."""
    cm, cn = cluster
    for box, parts, along in ((plan.b_box, cm, "CM"), (plan.a_box, cn, "CN")):
        if box is None or box.operand not in plan.multicast:
            continue
        if box.outer % (MULTICAST_SLICE_ROWS * parts):
            dim = ("BN" if box.operand == "B" else "BM") if box.k_major else "BK"
            raise ScheduleError(f"schedule.block.{dim}", box.outer, f"{setting} each of the {along}={parts} "
                                f"CTAs sharing {box.operand} loads 1/{parts} of its {box.outer}-row TMA box, and "
                                f"each slice must be a multiple of {MULTICAST_SLICE_ROWS} rows (one swizzle atom) "
                                "so that every CTA's part lands on the same swizzle pattern",
                                f"make {dim} a multiple of {MULTICAST_SLICE_ROWS * parts}, or use {fallback}")


def verify_cluster(g: Gemm, s: Schedule, plan: HopperPlan, arch: str) -> None:
    """At most 8 CTAs, multicast only within a real cluster, slices of a multicast box that start
    on a swizzle atom, and a tile walk that keeps a cluster's CTAs on the same k-tiles. The tile
    grid need not be a multiple of the cluster: it is rounded up to whole clusters, and a CTA whose
    tile lies past M or N loads zeros and stores nothing (targets/sm90/cluster.py)."""
    cm, cn = s.cluster
    size, most = cm * cn, target(arch).max_cluster
    if size > most:
        raise ScheduleError("schedule.cluster", s.cluster, f"{size} CTAs per cluster, over the portable limit of "
                            f"{most}", "use cluster=(2, 1) or (1, 2)")
    verify_multicast_slices(plan, (cm, cn), "with multicast", "multicast=False")
    if s.multicast and size == 1:
        raise ScheduleError("schedule.multicast", True, "TMA multicast shares loads between the CTAs of a cluster, "
                            "and cluster=(1, 1) has one", "use multicast=None/False, or cluster=(2, 1) or (1, 2)")
    if size > 1 and s.stream_k:
        raise ScheduleError("schedule.decomposition", s.decomposition, "Stream-K gives CTAs unequal k-ranges, but "
                            "a cluster's CTAs share TMA loads and must walk the same k-tiles",
                            "use cluster=(1, 1) with Stream-K, or decomposition='tiles'")
    if size > 1 and s.raster == "grouped" and s.group_m % cm:
        raise ScheduleError("schedule.group_m", s.group_m, f"a grouped raster must keep whole clusters of {cm} "
                            "tile rows in one group", f"use a group_m that is a multiple of {cm}")
    if s.persistent and s.sms is not None and s.sms % size:
        raise ScheduleError("schedule.sms", s.sms, f"a persistent grid of clusters of {size} CTAs needs a multiple "
                            f"of {size} CTAs", f"use sms={max(size, s.sms // size * size)}")


def verify_walk(g: Gemm, s: Schedule) -> None:
    """Stream-K is a persistent grid; the rest of split-K/Stream-K is the sm_80 rules'."""
    if s.stream_k and not s.persistent:
        raise ScheduleError("schedule.persistent", False, "Stream-K shares work out over a persistent grid",
                            "use persistent=None/True with Stream-K, or decomposition='tiles'")

