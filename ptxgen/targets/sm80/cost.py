"""A static cost model: the predicted time of a (Gemm, Schedule) on an arch's flagship part.

Why static: `ptxgen.compile(gemm)` must pick a good schedule with no GPU present, and the same
problem must get the same schedule everywhere. The model prices what decides a tensor-core GEMM's
time, term by term, so `ptxgen info` can say why one schedule beat another:

* per k-tile of one CTA, in SM clocks: tensor-core time (its flops over the SM's rate, scaled by
  the sub-partitions its warps keep busy), shared-memory time (cp.async writes and fragment reads
  over 128 B/clk), and issue time (warp instructions over the 4 schedulers); the busiest of the
  three is the CTA's throughput cost, and c co-resident CTAs share it (c x cost per k-tile);
* a latency floor per k-tile: a pipeline of S stages keeps S-1 tile loads in flight, so a CTA
  cannot finish a k-tile faster than DRAM latency / (S-1) (S = 1 pays latency plus compute);
* waves: CTAs / (SMs x CTAs per SM), occupancy from registers and shared memory
  (`occupancy.occupancy`); the tail wave runs with fewer CTAs per SM, priced as such;
* edge waste: tiles past M, N and K are computed anyway (the model charges whole tiles);
* traffic: L2 -> SM bytes (every CTA reads its BM x K and K x BN panels) over L2 bandwidth, and
  DRAM bytes (compulsory, plus the panels a wave's footprint re-reads when it overflows L2, which
  the raster order decides) over DRAM bandwidth;
* split-K and Stream-K: fewer k-tiles per CTA and more CTAs, paid for in f32 partial-tile traffic
  and a serial fix-up by the tile's last CTA.

sm_90a (wgmma) schedules are priced by `targets/sm90/choose.predict_hopper` instead: the same terms, plus
the persistent grid's whole-tile rounds, the producer warpgroup's overlap and the epilogue path.

The time is the overlap (`schedule.cost.overlap`, a p-norm between max and sum) of compute waves,
L2 time and DRAM time, + the launch; the units inside a k-tile and its latency floor combine the
same way, so a sub-dominant term still orders schedules the busiest one calls equal. The constants are a model, not
a measurement: `DeviceModel` cites each one, and the weak spots are listed in bench/choose_table.py.
"""
from __future__ import annotations

from dataclasses import replace

from ...schedule.cost import (BARRIER_CLOCKS, KTileCost, Prediction, ceil_div as _ceil, dram_bytes as _dram_bytes,
                              overlap, unit_terms)
from ...schedule.devices import DeviceModel, device_model
from ...schedule.geometry import k_tiles, operand_tiles, register_estimate, smem_bytes
from ...schedule.occupancy import occupancy
from ...schedule.problem import Gemm, instruction_shape
from ...schedule.schedule import Schedule
from ...schedule.streamk import stream_k_grid, stream_k_plan, tile_count

#: Warp instructions per k-tile besides copies, ldmatrix and mma: barrier, loop, address updates.
LOOP_OVERHEAD_INSTRUCTIONS = 24
#: Independent mma.sync a sub-partition needs in flight to keep its tensor core busy
#: (about 32 clocks of latency at one issue every 8 clocks for m16n8k16 on Ampere).
MMA_IN_FLIGHT = 4
#: Shared-memory reads of scalar (non-ldmatrix) fragments cost this many times the ldmatrix bytes:
#: 4-byte or 1-byte loads with bank conflicts (README: tf32/int8 with M- or N-contiguous tiles).
SCALAR_FRAGMENT_PENALTY = 4.0


def ktile_cost(g: Gemm, s: Schedule, dev: DeviceModel, warps_per_sm: int) -> KTileCost:
    """The clocks of one k-tile of one CTA; `warps_per_sm` (all resident CTAs' warps) sets how many
    sub-partitions' tensor cores are fed."""
    im, in_, ik = instruction_shape(g, s.instruction)
    tm, tn = s.warp_tile
    mmas_per_warp = (tm // im) * (tn // in_) * (s.bk // ik)
    independent = (tm // im) * (tn // in_)
    per_subpartition = max(1.0, warps_per_sm / dev.schedulers_per_sm)
    fed = min(1.0, warps_per_sm / dev.schedulers_per_sm) * min(1.0, independent * per_subpartition / MMA_IN_FLIGHT)
    rate = dev.tensor_flops_per_clk_sm[g.dtype] * dev.mma_sync_share
    mma = 2 * s.bm * s.bn * s.bk / (rate * fed)
    a, b = operand_tiles(g, s)
    reads = 0.0
    for tile, rows in ((a, tm), (b, tn)):
        per_warp = rows * s.bk * g.in_bytes
        reads += s.num_warps * per_warp * (SCALAR_FRAGMENT_PENALTY if tile.scalar_fragments else 1.0)
    writes = (s.bm + s.bn) * s.bk * g.in_bytes
    smem = (reads + writes) / dev.smem_bytes_per_clk_sm
    copies = (a.copies_per_thread + b.copies_per_thread) * 2 * s.num_warps  # a copy + its address
    ldmatrix = reads / 512  # an ldmatrix.x4 moves 512 B per warp
    issue = (s.num_warps * (mmas_per_warp + LOOP_OVERHEAD_INSTRUCTIONS) + copies + ldmatrix) / dev.schedulers_per_sm
    if s.stages > 1:
        return KTileCost(mma, smem, issue, dev.dram_latency_clk / (s.stages - 1) + BARRIER_CLOCKS)
    return KTileCost(mma, smem, issue, dev.dram_latency_clk + BARRIER_CLOCKS, serial=True)


#: Bytes of one L1 line: a warp's global access is processed one line it touches per clock.
L1_LINE_BYTES = 128


def store_lines(g: Gemm, s: Schedule) -> int:
    """The 128-byte lines one output tile's stores touch (C is row-major: a tile row is a run of
    BN elements), so a 64x16 tile pays 4x the store wavefronts of a 16x64 one for the same bytes."""
    return s.bm * _ceil(s.bn * g.out_bytes, L1_LINE_BYTES)


def _wave_clocks(cost: KTileCost, ctas_on_sm: int, kt: int, tile_epilogue: float, dev: DeviceModel,
                 alone: float) -> float:
    """Clocks for `ctas_on_sm` CTAs sharing one SM to run `kt` k-tiles each and their epilogues.
    Each k-tile ends in a CTA barrier whose wait the other resident CTAs' work fills in part, so a
    larger BK (fewer barriers per flop) and more CTAs per SM pay less of it; but never less than one
    CTA's own k-tile (`alone`: its work fed by its own warps) and barrier wait, which no other CTA
    can shorten, so more CTAs on an SM are never predicted faster per k-tile."""
    shared = max(ctas_on_sm * cost.throughput + BARRIER_CLOCKS / ctas_on_sm,  # the SM's units, shared by its CTAs
                 alone + BARRIER_CLOCKS)
    per_ktile = cost.latency + shared if cost.serial else overlap(shared, cost.latency)
    return dev.dram_latency_clk + kt * per_ktile + ctas_on_sm * tile_epilogue + dev.dram_latency_clk


def predict(g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
    """The model's time for (g, s), a schedule the verifier accepts, on `arch`'s flagship part.
    `registers`: the assembler's count per thread (default: the register estimate, rounded up to
    the allocation unit of 8)."""
    dev = device_model(arch)
    regs = registers if registers is not None else min(255, _ceil(register_estimate(g, s)["total"], 8) * 8)
    occ = occupancy(arch, regs, smem_bytes(g, s), s.threads, dev.sms)
    per_sm = max(1, occ.ctas_per_sm)
    if g.grouping == "k-contiguous":  # grid z = G, each CTA over its group's slice: priced as G equal slices of K
        g = replace(g, batch=g.groups, k=max(1, -(-g.k // g.groups)), groups=1, grouping=None)
    kt_total = k_tiles(g, s)
    tiles = tile_count(g, s)
    out_tile_bytes = s.bm * s.bn * g.out_bytes
    # epilogue per tile: its stores at the SM's share of DRAM bandwidth, a pass over the tile, and
    # the L1's store path (one 128-byte line a clock: a tile row narrower than a line costs a clock)
    sm_bytes_per_clk = dev.dram_bytes_per_s / dev.clock_hz / dev.sms
    epilogue = out_tile_bytes / sm_bytes_per_clk + s.bm * s.bn / s.threads * 4 + store_lines(g, s)
    partial_bytes = 0
    if s.stream_k:
        grid = stream_k_grid(g, s, dev.sms)
        plan = stream_k_plan(g, s, grid)
        ctas = grid
        kt_tile = plan.iters_per_tile
        dp = _ceil(plan.dp_tiles, grid)                           # whole tiles of the busiest CTA
        sk = _ceil(plan.sk_iters, plan.sk_ctas) if plan.sk_ctas else 0  # its Stream-K iterations
        kt = dp * kt_tile + sk                                      # the busiest CTA sets the time
        partial_bytes = 2 * 4 * s.bm * s.bn * min(plan.sk_ctas, plan.sk_tiles * 2)
        # each unit ends in an epilogue or a published partial (written, and read back by its owner)
        units = dp + (_ceil(sk, kt_tile) + 1 if sk else 0)
        epilogue = units * (epilogue + 2 * 4 * s.bm * s.bn / sm_bytes_per_clk)
    else:
        ctas = tiles * s.split_k
        kt = _ceil(kt_total, s.split_k)
        if s.split_k > 1:
            partial_bytes = 2 * 4 * s.bm * s.bn * ctas  # every split writes, the last reads them all
            epilogue += 4 * s.bm * s.bn * s.split_k / sm_bytes_per_clk
    wave_ctas = per_sm * dev.sms
    full, rest = divmod(ctas, wave_ctas)
    cost = ktile_cost(g, s, dev, occ.warps_per_sm)
    alone = ktile_cost(g, s, dev, s.num_warps).throughput  # one CTA's k-tile, fed by its own warps
    clocks = full * _wave_clocks(cost, per_sm, kt, epilogue, dev, alone)
    parts = [(full, cost, per_sm)]
    if rest:
        on_sm = _ceil(rest, dev.sms)
        tail_cost = ktile_cost(g, s, dev, on_sm * s.num_warps)
        clocks += _wave_clocks(tail_cost, on_sm, kt, epilogue, dev, alone)
        parts.append((1, tail_cost, on_sm))
    compute_s = clocks / dev.clock_hz
    l2 = ctas * (s.bm + s.bn) * kt * s.bk * g.in_bytes + partial_bytes
    l2_s = l2 / (dev.l2_bytes_per_clk * dev.clock_hz)
    # the CTAs resident at once: a Stream-K grid smaller than a wave walks its tiles only that wide,
    # whatever the occupancy (a tile grid's wave is clipped to its tiles inside dram_bytes)
    dram = _dram_bytes(g, s, dev, min(ctas, wave_ctas)) + partial_bytes
    dram_s = dram / dev.dram_bytes_per_s
    terms = {"waves": compute_s, "L2": l2_s, "DRAM": dram_s, "launch": dev.launch_s,
             **unit_terms(parts, kt, dev.clock_hz),
             "fill": sum(w for w, _, _ in parts) * 2 * dev.dram_latency_clk / dev.clock_hz,
             "epilogue": sum(w * on_sm for w, _, on_sm in parts) * epilogue / dev.clock_hz}
    slowest = max(("waves", compute_s), ("L2", l2_s), ("DRAM", dram_s), key=lambda kv: kv[1])
    bound = slowest[0]
    if bound == "waves":  # name the resource inside the waves: the pipeline's latency or the busiest unit
        bound = "latency" if cost.latency >= per_sm * cost.throughput else cost.resource
    time_s = overlap(compute_s, l2_s, dram_s) + dev.launch_s
    computed = tiles * s.bm * s.bn * kt_total * s.bk
    useful = g.batch * g.m * g.n * g.k
    return Prediction(
        time_s=time_s, efficiency=g.flops * g.batch / (time_s * dev.peak_flops(g.dtype)), ctas=ctas,
        ctas_per_sm=occ.ctas_per_sm, limiter=occ.limiter, registers=regs,
        waves=ctas / wave_ctas, edge_waste=1 - useful / computed, dram_bytes=int(dram), l2_bytes=int(l2),
        bound=bound, terms=terms)
