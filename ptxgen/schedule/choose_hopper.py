"""Choosing an sm_90a (wgmma) schedule: the candidates the built Hopper lowering can emit, and the
cost model's price of one.

Why separate from the mma.sync model: a wgmma CTA is one or two warpgroups fed by TMA, so its
k-tile costs tensor time at wgmma's full rate (not mma.sync's share), TMA writes plus descriptor
reads of shared memory (no ldmatrix, no cp.async issue), and its shared memory and registers come
from `hopper_plan`, the same numbers the verifier and the lowering use. Waves, the tail, edge
waste, L2 and DRAM traffic are priced as for sm_80 (`costmodel`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ..errors import LoweringNotBuilt, ScheduleError
from .costmodel import BARRIER_CLOCKS, KTileCost, Prediction, _ceil, _dram_bytes, _wave_clocks
from .devices import DeviceModel, device_model
from .hopper import CONSUMER_OVERHEAD_REGS, hopper_plan
from .occupancy import occupancy
from .problem import Gemm
from .schedule import Schedule
from .verify_sm90_built import SM80, check_sm90_built

#: (BM, consumers) the built lowering runs: 64 rows per warpgroup at least, 128 at most.
BLOCK_ROWS = ((64, 1), (128, 1), (128, 2), (256, 2))
#: wgmma N the chooser tries (any multiple of 8 is legal; these fill the 128-byte swizzle rows).
BLOCK_COLS = (64, 128, 192, 256)
#: BK in bytes: one 128-byte swizzle row per box (64 f16, 32 tf32, 128 fp8/int8 elements).
BK_BYTES = 128
STAGES = (2, 3, 4, 5, 6)
GROUP_M = 8
#: Warp instructions per k-tile of a consumer warp besides its wgmmas: the full-barrier wait, the
#: fence, commit/wait_group, descriptor and loop updates (one thread also issues the TMA copies).
WGMMA_LOOP_INSTRUCTIONS = 16


def _up_to_cover(sides: tuple, extent: int, key=lambda x: x) -> list:
    """The sides up to (and every one equal to) the first whose extent covers `extent`."""
    cover = next((key(side) for side in sides if key(side) >= extent), None)
    return [side for side in sides if cover is None or key(side) <= cover]


def _probe(g: Gemm) -> Schedule:
    return Schedule(block=(128, 128, BK_BYTES // g.in_bytes), instruction="wgmma", warp_specialized=False, persistent=False,
                    consumers=1, stages=3, swizzle=128)


def check_problem_built(g: Gemm, arch: str) -> None:
    """LoweringNotBuilt, naming arch='sm_90' as the fix, when no built wgmma schedule can run `g`."""
    check_sm90_built(g, _probe(g), arch)


def hopper_candidates(g: Gemm) -> Iterator[Schedule]:
    """Every schedule of the built sm_90a subset worth trying for `g`, legal or not (the verifier
    prunes): block rows and columns up to the first that covers M and N, BK 128 bytes, 2-6 stages,
    128-byte swizzle, row raster and (with more tile rows than a group) grouped raster."""
    bk = BK_BYTES // g.in_bytes
    for bm, consumers in _up_to_cover(BLOCK_ROWS, g.m, key=lambda rc: rc[0]):
        for bn in _up_to_cover(BLOCK_COLS, g.n):
            for stages in STAGES:
                s = Schedule(block=(bm, bn, bk), instruction="wgmma", warp_specialized=False, persistent=False,
                             consumers=consumers, stages=stages, swizzle=128)
                yield s
                if _ceil(g.m, bm) > GROUP_M and _ceil(g.n, bn) > 1:
                    yield Schedule(block=(bm, bn, bk), instruction="wgmma", warp_specialized=False,
                                   persistent=False, consumers=consumers, stages=stages, swizzle=128,
                                   raster="grouped", group_m=GROUP_M)


def no_candidate_error(g: Gemm, arch: str, first: ScheduleError | None) -> ScheduleError:
    """What `rank` raises when the verifier turns down every built wgmma candidate (e.g. rows not
    16-byte aligned for TMA): the first candidate's reason, with arch='sm_90' as the way out."""
    why = f"{first.field}={first.value!r}: {first.rule}" if first else "no candidate"
    return LoweringNotBuilt("arch", arch, f"no schedule of the built sm_90a lowering runs this {g.dtype} "
                            f"problem ({why})", SM80.replace("or compile", "compile"))


def hopper_ktile_cost(g: Gemm, s: Schedule, dev: DeviceModel) -> KTileCost:
    """Clocks of one k-tile of one wgmma CTA on an idle SM: tensor time at wgmma's full rate (a
    warpgroup spans the 4 sub-partitions), shared memory (TMA writes A and B once; each consumer's
    wgmmas read its A rows and all of B), issue, and the pipeline's latency floor."""
    plan = hopper_plan(g, s)
    mma = 2 * s.bm * s.bn * s.bk / dev.tensor_flops_per_clk_sm[g.dtype]
    writes = (s.bm + s.bn) * s.bk * g.in_bytes
    reads = (s.bm + plan.consumers * s.bn) * s.bk * g.in_bytes
    smem = (reads + writes) / dev.smem_bytes_per_clk_sm
    warps = plan.threads // 32
    issue = (plan.consumers * 4 * plan.wgmmas_per_k_tile + warps * WGMMA_LOOP_INSTRUCTIONS) / dev.schedulers_per_sm
    if s.stages > 1:
        return KTileCost(mma, smem, issue, dev.dram_latency_clk / (s.stages - 1) + BARRIER_CLOCKS)
    return KTileCost(mma, smem, issue, dev.dram_latency_clk + BARRIER_CLOCKS, serial=True)


def predict_hopper(g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
    """The model's time for a built wgmma schedule. `registers`: the assembler's count per thread
    (default: accumulators + the consumer overhead estimate, capped at the launch registers)."""
    dev = device_model(arch)
    # the lowering follows the plan's epilogue path (TMA store with its staging where C allows it)
    plan = hopper_plan(g, s)
    regs = registers if registers is not None else min(
        plan.launch_regs, _ceil(plan.accumulator_regs + CONSUMER_OVERHEAD_REGS, 8) * 8)
    occ = occupancy(arch, regs, plan.smem.total, plan.threads, dev.sms)
    per_sm = max(1, occ.ctas_per_sm)
    tiles_m, tiles_n = plan.tiles
    ctas = tiles_m * tiles_n
    kt = _ceil(g.k, s.bk)
    sm_bytes_per_clk = dev.dram_bytes_per_s / dev.clock_hz / dev.sms
    epilogue = s.bm * s.bn * g.out_bytes / sm_bytes_per_clk + s.bm * s.bn / plan.threads * 4
    wave_ctas = per_sm * dev.sms
    full, rest = divmod(ctas, wave_ctas)
    cost = hopper_ktile_cost(g, s, dev)
    clocks = full * _wave_clocks(cost, per_sm, kt, epilogue, dev)
    if rest:
        clocks += _wave_clocks(cost, _ceil(rest, dev.sms), kt, epilogue, dev)
    compute_s = clocks / dev.clock_hz
    l2 = ctas * (s.bm + s.bn) * kt * s.bk * g.in_bytes
    l2_s = l2 / (dev.l2_bytes_per_clk * dev.clock_hz)
    dram = _dram_bytes(g, s, dev, wave_ctas)
    dram_s = dram / dev.dram_bytes_per_s
    terms = {"waves": compute_s, "L2": l2_s, "DRAM": dram_s, "launch": dev.launch_s}
    bound, slowest = max(("waves", compute_s), ("L2", l2_s), ("DRAM", dram_s), key=lambda kv: kv[1])
    if bound == "waves":
        bound = "latency" if cost.latency >= per_sm * cost.throughput else cost.resource
    time_s = slowest + dev.launch_s
    computed = ctas * s.bm * s.bn * kt * s.bk
    return Prediction(
        time_s=time_s, efficiency=g.flops * g.batch / (time_s * dev.peak_flops(g.dtype, instruction_share=False)),
        ctas=ctas, ctas_per_sm=occ.ctas_per_sm, limiter=occ.limiter, registers=regs, waves=ctas / wave_ctas,
        edge_waste=1 - g.m * g.n * g.k / computed, dram_bytes=int(dram), l2_bytes=int(l2), bound=bound, terms=terms)


def describe_hopper(s: Schedule) -> str:
    """A wgmma schedule as the CLI flags that give it."""
    text = (f"--instruction wgmma --block {s.bm}x{s.bn}x{s.bk} --consumers {s.consumers} --stages {s.stages} "
            f"--swizzle {s.swizzle} --no-warp-specialized --no-persistent")
    if s.raster == "grouped":
        text += f" --raster grouped --group-m {s.group_m}"
    return text

