"""The sm_100a (tcgen05) rules of the verifier, and what the first lowering builds.

`verify_pairing` runs for every schedule: tcgen05 and its field `cta_group` need sm_100a, and
sm_100a lowers only tcgen05 schedules. `verify_blackwell` checks a tcgen05 schedule's plan
(plan.py) against the ISA (docs/ptx_facts/tcgen05.md §12b-§12d) and TMA (tma.md §9d). Every rule
raises ScheduleError naming the field, the rule and a fix; `check_built` raises LoweringNotBuilt
for a legal schedule the lowering does not have yet. Shared Schedule fields the tcgen05 kernel has
no use for are refused unless they hold its value (`verify_mma_sync_fields`), never ignored.
"""
from __future__ import annotations

from dataclasses import fields

from ...schedule.rules import options_class

from ...errors import LoweringNotBuilt, ScheduleError
from ...schedule.problem import FP4_DTYPES, FP8_DTYPES, Gemm
from ...schedule.schedule import Schedule
from ...schedule.targets import target
from ..sm90.plan import TMA_BOX_MAX, TMA_STRIDE_ALIGN
from .options import BLACKWELL_FIELDS
from .kinds import K_MAJOR_ONLY, i8_n_ok
from .scales import verify_scales
from .store_path import tma_store_refusal
from .plan import EPILOGUE_WARPS, KIND, MMA_K, MMA_M, MMA_N_MAX, TMEM_COLUMNS, mma_n_step, sm100_plan
from .verify_cluster import MMA_M_PAIR, check_cluster_built, check_pair_built, verify_cluster, verify_multicast

ARCH = "sm_100a"
#: Output dtypes the tcgen05 epilogue stores (from f32 accumulators).
OUTPUTS = ("f32", "f16", "bf16")
#: ... and from the s32 accumulators of s8/u8 inputs: the exact s32, quantised s8/u8, or dequantised
#: floats (the rows of schedule/verify.verify_dtype_table, as on sm_90a).
INT_OUTPUTS = ("s32", "s8", "u8", "f32", "f16", "bf16")


def verify_pairing(g: Gemm, s: Schedule, arch: str) -> None:
    """tcgen05 needs sm_100a; sm_100a lowers only tcgen05; `cta_group` belongs to tcgen05."""
    tcgen05 = s.instruction == "tcgen05"
    if tcgen05 and arch != ARCH:
        raise ScheduleError("arch", arch, "instruction='tcgen05' needs the architecture-specific Blackwell target "
                            "sm_100a (.target sm_100a, PTX 8.6): no other target has tcgen05 or tensor memory",
                            f"use arch='sm_100a' on a B200/GB200, or instruction='m16n8k16' for {arch}")
    if arch == ARCH and not tcgen05:
        raise ScheduleError("schedule.instruction", s.instruction, "sm_100a is the Blackwell tcgen05 pipeline; "
                            "mma.sync, wmma and wgmma schedules are not lowered for it",
                            "use instruction='tcgen05' for sm_100a, or arch='sm_80'/'sm_90a' for this schedule")
    if g.b_dtype is not None and not tcgen05:
        raise ScheduleError("gemm.b_dtype", g.b_dtype, f"mixed fp8 ({g.dtype} x {g.b_dtype}) is built in sm_100a's "
                            "tcgen05 kernels only (kind::f8f6f4 takes A's and B's types separately)",
                            f"use arch={ARCH!r} with instruction='tcgen05', or one dtype for A and B")
    if not tcgen05:
        own_cls = options_class(s.instruction)  # the fields the schedule's own target has too (cluster)
        own = {f.name for f in fields(own_cls)} if own_cls is not None else set()
        for name in BLACKWELL_FIELDS:
            if name not in own and getattr(s, name) is not None:  # cluster is sm_90a's field too
                raise ScheduleError(f"schedule.{name}", getattr(s, name), "applies to Blackwell schedules only "
                                    f"(instruction='tcgen05', arch={ARCH!r})",
                                    f"remove {name}, or use instruction='tcgen05' with arch={ARCH!r}")


def _fail(field: str, value: object, rule: str, fix: str) -> None:
    raise ScheduleError(field, value, rule, fix)


def verify_blackwell(g: Gemm, s: Schedule, arch: str) -> None:
    """Every sm_100a rule, in the order a user fixes them: the CTA group, the MMA shape and kind,
    TMA, tensor memory, shared memory."""
    bm, bn, bk = s.block
    verify_mma_sync_fields(s)
    if s.cta_group not in (1, 2):
        _fail("schedule.cta_group", s.cta_group, "a tcgen05.mma runs on 1 CTA or a CTA pair (2)",
              "use cta_group=1 (None picks 1)")
    if s.cta_group == 2 and bm not in MMA_M_PAIR:
        _fail("schedule.block.BM", bm, "a cta_group::2 tcgen05.mma has the pair's M = 128 or 256 (ISA Table 39; "
              "each CTA of the pair holds M/2 rows of A and D)", f"use block=(256, {bn}, {bk}) with cta_group=2")
    if s.cta_group == 1 and bm not in MMA_M:
        _fail("schedule.block.BM", bm, f"a cta_group::1 tcgen05.mma has M = {' or '.join(map(str, MMA_M))} "
              "(ISA Table 39; one CTA's tensor memory has 128 lanes)",
              f"use block=({128 if bm > 64 else 64}, {bn}, {bk})")
    if g.dtype not in KIND:
        _fail("gemm.dtype", g.dtype, f"the tcgen05 lowering takes {', '.join(KIND)} inputs "
              "(kind::f16, tf32, f8f6f4 and i8)", "use one of those dtypes")
    step = mma_n_step(bm)
    if bn % step or not step <= bn <= MMA_N_MAX:
        what = f"an M = {bm}" + (" cta_group::2" if s.cta_group == 2 else "")
        _fail("schedule.block.BN", bn, f"{what} tcgen05.mma has N a multiple of {step} from {step} to "
              f"{MMA_N_MAX} (ISA Table 39)", f"use BN = {min(MMA_N_MAX, max(step, bn - bn % step))}")
    if KIND[g.dtype] == "i8" and not i8_n_ok(bm, bn, s.cta_group):
        if s.cta_group == 2:
            _fail("schedule.block.BN", bn, "a cta_group::2 kind::i8 tcgen05.mma has the pair's N a multiple of 32 "
                  "from 32 to 256 (ISA Table 39; tcgen05.md §12i)", f"use BN = {max(32, bn - bn % 32)}")
        _fail("schedule.block.BN", bn, "a kind::i8 tcgen05.mma has N = 8, 16, 24 or a multiple of 16 from 32 "
              "to 256 (ISA Table 39)", f"use BN = {max(32, bn - bn % 16)}")
    k = MMA_K[g.dtype]
    if bk % k:
        _fail("schedule.block.BK", bk, f"one kind::{KIND[g.dtype]} tcgen05.mma covers K = {k} ({g.dtype}: 32 bytes "
              "per row), and BK holds whole MMAs", f"use BK = {max(k, bk - bk % k)}")
    if g.fast_accum:
        _fail("gemm.fast_accum", g.fast_accum, "selects sm_90a wgmma's promotion of fp8 partial sums; the sm_100a "
              "kernel has one kind of fp8 accumulation (every k-tile's tcgen05.mma adds into the f32 tensor-memory "
              "accumulator, no promotion step), so the flag would change nothing", "drop fast_accum for sm_100a")
    outputs = INT_OUTPUTS if g.accumulator == "s32" else OUTPUTS
    if g.out_dtype not in outputs or g.accumulator not in ("f32", "s32"):
        acc = "s32 accumulators (s8/u8 inputs) and stores s32, s8, u8, f32, f16 or bf16" if g.accumulator == "s32" \
            else "f32 accumulators and stores f32, f16 or bf16"
        _fail("gemm.out_dtype", g.out_dtype, f"the tcgen05 epilogue reads {acc}",
              f"use out_dtype={outputs[0]!r} (acc_dtype='f32' for float inputs)")
    if KIND[g.dtype] in K_MAJOR_ONLY and (g.a_layout != "row" or g.b_layout != "col"):
        why = ("the MN-major tf32 layout needs the 128B-with-32B-atomicity swizzle" if g.dtype == "tf32"
               else "the MN-major 8-bit layouts are not built")
        _fail("gemm.layout", f"{g.a_layout}/{g.b_layout}", f"{g.dtype} operands are K-major only ({why})",
              "pass A row-major and B column-major (a_layout='row', b_layout='col')")
    if s.epilogue_via_smem is True and tma_store_refusal(g, s) is not None:
        _fail("schedule.epilogue_via_smem", True, f"the TMA-store epilogue cannot write this C: "
              f"{tma_store_refusal(g, s)}", "use epilogue_via_smem=None (TMA where it can write C) or False "
              "(direct stores)")
    if s.tile_scheduler == "clc" and s.sms is not None:
        _fail("schedule.sms", s.sms, "tile_scheduler='clc' launches one CTA per tile and the hardware decides how "
              "many run at once (each takes its next tile by cancelling a CTA not yet launched), so no SM count "
              "sizes its grid", "use sms=None with tile_scheduler='clc', or tile_scheduler='static' for a grid "
              "of `sms` CTAs")
    verify_cluster(g, s, arch)
    verify_scales(g, s)
    plan = sm100_plan(g, s)
    if plan.swizzle is None or plan.a_tile is None or plan.b_tile is None:
        _fail("schedule.block", s.block, "each operand's contiguous extent (BK for a K-major operand, BM or BN "
              "for an MN-major one) must be a multiple of a 32/64/128-byte TMA swizzle",
              f"use BK a multiple of {128 // g.in_bytes} (and BM, BN multiples of 64 for MN-major operands)")
    verify_multicast(s, plan)
    for box in (plan.a_box, plan.b_box):
        assert box is not None
        if box.outer > TMA_BOX_MAX:
            _fail("schedule.block", s.block, f"{box.operand}'s TMA box has {box.outer} rows, over TMA's "
                  f"{TMA_BOX_MAX}", f"use BK <= {TMA_BOX_MAX} for MN-major operands")
    # only mma.sync's inputs have a kernel for any leading dimension (fp8 and fp4 multiply on wgmma
    # and tcgen05 alone, both TMA-fed)
    elsewhere = "" if g.dtype in FP8_DTYPES + FP4_DTYPES else ", or use arch='sm_80' (any leading dimension)"
    for name, ld in zip(("lda", "ldb"), g.leading_dims()[:2]):
        if (ld * g.in_bytes) % TMA_STRIDE_ALIGN:
            _fail(f"gemm.{name}", ld, f"TMA reads rows whose byte stride is a multiple of {TMA_STRIDE_ALIGN} "
                  f"(got {ld * g.in_bytes} B rows)", f"pad {name} to a multiple of {TMA_STRIDE_ALIGN // g.in_bytes} "
                  f"elements{elsewhere}")
    if g.alignment() < TMA_STRIDE_ALIGN:
        _fail("gemm.align", g.align, f"TMA reads from {TMA_STRIDE_ALIGN}-byte aligned pointers (the operands are "
              f"{g.alignment()}-byte aligned)", f"pass {TMA_STRIDE_ALIGN}-byte aligned A and B and state "
              f"align={TMA_STRIDE_ALIGN} (or None), or use arch='sm_80'")
    if plan.acc_buffers * bn > TMEM_COLUMNS:
        _fail("schedule.block.BN", bn, f"{plan.acc_buffers} accumulator(s) of {bn} f32 columns exceed the "
              f"{TMEM_COLUMNS} columns of tensor memory", f"use BN <= {TMEM_COLUMNS // plan.acc_buffers}")
    if plan.scales is not None and plan.tmem_columns > TMEM_COLUMNS:
        _fail("schedule.stages", s.stages, f"{plan.acc_buffers} accumulator(s) of {bn} columns and {s.stages} stages "
              f"of {plan.scales.stage_columns} scale columns exceed the {TMEM_COLUMNS} columns of tensor memory",
              f"use stages={(TMEM_COLUMNS - bn) // plan.scales.stage_columns} or a smaller BN")
    limit = target(arch).smem_per_block
    if s.stages < 1 or plan.smem_bytes > limit:
        fit = max(0, (limit - plan.smem_bytes + s.stages * plan.stage_bytes) // (plan.stage_bytes + 16))
        a_rows, b_rows = bm // plan.cta_group, bn // plan.cta_group
        _fail("schedule.stages", s.stages, f"{s.stages} stages of {plan.stage_bytes} B (A {a_rows}x{bk} and B {b_rows}x{bk}"
              + (" per CTA of the pair" if plan.cta_group == 2 else "") + ") "
              f"need {plan.smem_bytes} B of shared memory; sm_100a gives a block {limit} B (228 KB per SM)",
              f"use stages={fit}" if fit >= 1 else "use a smaller block")


def verify_mma_sync_fields(s: Schedule) -> None:
    """The shared Schedule fields the tcgen05 kernel has no use for, refused unless they hold the
    value it has (never silently ignored): its warps are fixed roles (4 epilogue warps, then the TMA
    and MMA warps), its stages are swizzled for TMA and the MMA's descriptors, and the MMA reads
    shared memory itself (no register fragments to double-buffer)."""
    if s.warps != (EPILOGUE_WARPS, 1):
        _fail("schedule.warps", s.warps, f"a tcgen05 kernel's warps are fixed roles: {EPILOGUE_WARPS} epilogue warps "
              "(one TMEM lane quarter each), then the TMA warp and the MMA warp", "leave warps=None (it becomes "
              f"({EPILOGUE_WARPS}, 1))")
    if s.smem_layout != "swizzle":
        _fail("schedule.smem_layout", s.smem_layout, "TMA writes and tcgen05.mma's shared-memory descriptors read "
              "swizzled stages", "leave smem_layout=None (or 'swizzle'); the plan picks the swizzle width")
    if not s.frag_double_buffer:
        _fail("schedule.frag_double_buffer", s.frag_double_buffer, "double-buffers mma.sync's register fragments; "
              "tcgen05.mma reads its operands from shared memory itself, so it would change nothing",
              "leave frag_double_buffer=True (the default)")


def check_built(g: Gemm, s: Schedule, arch: str) -> None:
    """What the tcgen05 lowering does not have: grouped GEMMs beyond the 1-CTA static walk, CTA
    pairs past M = 256 in a (2, 1) cluster, cluster launch control with clusters, split-K, Stream-K."""
    check_grouped_built(g, s)
    fix = "use split_k=1 and decomposition='tiles' (built)"
    check_pair_built(s)
    check_cluster_built(s)
    for field, value, bad in (("schedule.split_k", s.split_k, s.split_k > 1),
                              ("schedule.decomposition", s.decomposition, s.stream_k)):
        if bad:
            raise LoweringNotBuilt(field, value, "not built yet in the sm_100a lowering (every CTA computes whole "
                                   "tiles of one persistent tile walk)", fix)


def check_grouped_built(g: Gemm, s: Schedule) -> None:
    """The sm_100a grouped kernel (grouped.py) is the 1-CTA one on the static persistent walk,
    storing directly (verify_blackwell refuses the TMA store for it); block-scaled only as masked
    MXFP8 (scales.py: each group's scale blocks stacked, runtime/scale_layout.py)."""
    if not g.grouped:
        return
    rules = [
        (s.cta_group == 2, "schedule.cta_group", s.cta_group, "CTA pairs are not built for grouped GEMMs (a pair's "
         "tile would need its group's rows in both CTAs)", "use cta_group=1 (the default)"),
        (tuple(s.cluster or (1, 1)) != (1, 1), "schedule.cluster", s.cluster, "thread-block clusters are not built "
         "for grouped GEMMs (a cluster's tiles may lie in different groups)", "use cluster=(1, 1) (the default)"),
        (s.tile_scheduler == "clc", "schedule.tile_scheduler", s.tile_scheduler, "cluster launch control is not "
         "built for grouped GEMMs (their tile count is read on the device)", "use tile_scheduler='static'"),
        (g.b_dtype is not None, "gemm.b_dtype", g.b_dtype, "mixed fp8 grouped GEMMs are not built (the grouped "
         "operands carry one dtype)", f"use b_dtype=None (B of dtype {g.dtype!r})"),
        # block scales: masked MXFP8 is built (scales.py); fp4 (MXFP4, NVFP4) grouped GEMMs are refused
        # by schedule/grouping.py's input rule (this target's grouped_inputs are f16/bf16/e4m3/e5m2)
        (g.block_scale is not None and g.grouping == "contiguous", "gemm.grouping", g.grouping, "block-scaled "
         "contiguous grouped GEMMs are not built for sm_100a: the MMA's scale factors come in blocks of 128 rows x "
         "4 K-groups (runtime/scale_layout.py) and a contiguous group starts at any row, so its tiles' rows do "
         "not line up with the blocks", "use grouping='masked' (each group in its own slot of max_m rows), or "
         "arch='sm_90a' with instruction='wgmma' (its grouped kernel) for 1x128 f32 block scales"),
    ]
    for broken, field, value, rule, fix in rules:
        if broken:
            raise LoweringNotBuilt(field, value, rule, fix)
