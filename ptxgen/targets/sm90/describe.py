"""`ptxgen info`'s description of an sm_90a kernel (`cli/report.describe` asks the backend)."""
from __future__ import annotations

from typing import Any

from ...emit.describe import describe_epilogue
from ...schedule.problem import instruction_name
from ...schedule.grouping import describe as describe_grouping
from .grouped import describe_group_walk
from .header import describe_sm90_stores
from .mainloop import ring_layout
from .plan import ALIGN_SLACK, hopper_plan
from .promotion import describe_accumulation
from .splitk import flag_bytes as split_k_flag_bytes


def describe_hopper(k: Any) -> list[str]:
    """`describe` for a wgmma kernel: warpgroups, the TMA boxes and swizzle its tensor maps carry
    and the mbarrier ring, not the sm_80 warp grid, cp.async copies and ldmatrix fragments."""
    g, s = k.problem, k.schedule  # swap-AB: the swapped problem the kernel computes
    plan = hopper_plan(g, s)
    ring = ring_layout(plan, s.bm, s.bn, s.bk, g.in_bytes, s.stages)
    live = ", ".join(f"{c} {n}" for c, n in k.peak_live.items() if n)
    roles = (f"1 producer (warpgroup {plan.consumers}: one thread issues the TMA copies, setmaxnreg.dec "
             f"{plan.producer_regs}) + {plan.consumers} consumer warpgroup{'s' if plan.consumers > 1 else ''} "
             f"(wgmma + epilogue, setmaxnreg.inc {plan.consumer_regs}; launch cap .maxnreg {plan.launch_regs})"
             if plan.warp_specialized else
             f"{plan.consumers} warpgroup{'s' if plan.consumers > 1 else ''} (not warp-specialised: "
             "each loads and multiplies)")
    maps = "; ".join(f"{m.param}: {m.operand} box {'x'.join(map(str, m.box))}, {m.swizzle} swizzle, "
                     f"{'row' if m.operand == 'C' else 'K' if m.k_major else 'MN'}-major"
                     + ((" (3-D: group outermost)" if g.grouped else " (3-D: batch outermost)") if m.batched else "") for m in k.tensor_maps)
    grid = (f"{s.decomposition} over a persistent grid (each CTA runs its share of the k-tiles)" if s.stream_k else
            "persistent (one CTA per SM walks the tiles)" if s.persistent else "one CTA per output tile")
    if s.split_k > 1:
        grid += f", split-K {s.split_k} (f32 partials, the last split sums them)"
    flag = split_k_flag_bytes(s)
    return [
        f"kernel     {k.entry} ({k.arch})",
        f"problem    C[{g.m}x{g.n}] {g.out_dtype} = A[{g.m}x{g.k}] {g.dtype} {g.a_layout}-major "
        f"@ B[{g.k}x{g.n}] {g.dtype} {g.b_layout}-major, "
        + describe_accumulation(g, s),
        *([f"grouped    {describe_grouping(g)}; {describe_group_walk(g)}"] if g.grouped else []),
        f"schedule   block {s.bm}x{s.bn}x{s.bk}, {roles}, {plan.rows_per_consumer} rows each, "
        f"{instruction_name(g, 'wgmma', s.bn)} ({plan.wgmmas_per_k_tile} per warpgroup per k-tile), "
        f"stages {s.stages}, raster {s.raster}, {grid}, cluster {plan.cluster[0]}x{plan.cluster[1]}",
        f"launch     grid {k.grid} x block {k.block} = {plan.threads} threads/CTA, "
        f"{k.smem_bytes} B dynamic shared memory"
        + (f"; {k.grid_source}" if k.grid_follows_device or "_grid_source" in k.__dict__ else "")
        + ("; cooperative (Stream-K: every CTA resident at once)" if s.stream_k else ""),
        f"tma        {maps}; {plan.stage_tx_bytes} B per stage on a full mbarrier"
        + ("; consumers release a stage on its empty mbarrier (one arrival per consumer warp) once the wgmma "
           "reading it retired" if plan.warp_specialized else "")
        + (f"; {'B' if plan.multicast == ('B',) else 'A' if plan.multicast == ('A',) else 'A and B'} multicast "
           "to the cluster's CTAs sharing it, each stage released on every CTA it came from (remote arrivals)"
           if plan.multicast else ""),
        f"smem       {s.stages} stages x ({ring.a_bytes} B of A + {ring.b_bytes} B of B) + "
        f"{ring.nbytes - ring.barriers} B {'full + empty' if ring.empty_barriers else 'full'} mbarriers"
        + (f" + {flag} B split-K flag" if flag else "")
        + f" + {ALIGN_SLACK} B to align the base to 1024 B = {ring.nbytes + flag + ALIGN_SLACK} B"
        + (f"; + {k.smem_bytes - ring.nbytes - ALIGN_SLACK} B of epilogue "
           f"{'C-load mbarriers' if plan.smem.staging_in_ring else 'staging'} "
           f"= {k.smem_bytes} B" if k.smem_bytes > ring.nbytes + flag + ALIGN_SLACK else "")
        + (f"; the epilogue stages C in the idle ring ({plan.smem.staging_in_ring} B)" if plan.smem.staging_in_ring
           else ""),
        f"epilogue   {describe_epilogue(g)}; " + (describe_sm90_stores(plan, g) if plan.epilogue_tile is not None
                                                   else "direct stores from the accumulator registers"),
        f"registers  {plan.accumulator_regs} accumulators/thread"
        + (f" (x2 with the fp8 promotion's temporary: {plan.held_accumulator_regs})" if plan.promotion_k else "")
        + (f" + {plan.block_scale_regs} for the block scales (pointers, sa * sb factors)" if plan.block_scale_regs else "")
        + " (the assembler's count is below); "
        f"ptxgen peak live: {live}",
        *(k.choice.lines() if k.choice is not None else []),
    ]
