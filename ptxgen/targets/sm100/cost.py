"""The static cost model of a tcgen05 schedule on B200 (schedule/devices.py `B200`), priced as the
Hopper chooser prices wgmma (targets/sm90/choose.py) with Blackwell's differences:

* the accumulator lives in tensor memory, so a k-tile costs tensor time at tcgen05's full rate, the
  TMA writes and the MMA's reads of shared memory (one CTA reads its A rows and its B columns once
  per k-tile, whatever BN: no per-warpgroup re-read of B as with two wgmma consumers), and two warps'
  issue (the producer's loop and the MMA warp's, one tcgen05.mma per K step);
* the ring keeps S - 1 stages in flight (the stage the MMAs read is released only by their
  tcgen05.commit), so a k-tile's latency floor is a stage's round trip over S - 1 (Little's law);
* with two accumulator buffers (2 x BN <= 512 TMEM columns) tile t's epilogue (tcgen05.ld, the
  math, the stores) runs while the MMA warp works on tile t+1, so only what exceeds a tile's main
  loop is exposed; with one buffer the MMA warp waits for the whole epilogue;
* the grid is persistent (one CTA per SM, or per SM of a CTA pair with cta_group=2), so the waves
  are whole tiles per CTA and the pipeline fills once per CTA.

`cta_group` and `cluster` (other designs' fields) are read generically: a CTA pair computes a
BM x BN tile on two SMs, each CTA holding BM/2 rows of A and BN/2 columns of B (ISA "tcgen05.mma
cta_group::2", docs/ptx_facts/tcgen05.md §12c), so its shared-memory traffic per MMA flop halves
for B; a cluster multicasts the shared operand, so each CTA loads only its slice from L2.

Estimates (no Blackwell GPU measured these): every figure devices.py marks as one, the per-k-tile
loop instruction counts, and the store sectors of the direct epilogue (each thread stores two
adjacent elements of its own row, so one warp store touches 32 rows' sectors: bench/sass.py
--arch sm_100a shows the STG count).
"""
from __future__ import annotations

from ...schedule.cost import (KTileCost, Prediction, ceil_div, dram_bytes, overlap, unit_terms)
from ...schedule.devices import DeviceModel, device_model
from ...schedule.problem import K_PACK, Gemm
from ...schedule.schedule import Schedule
from .plan import EPILOGUE_WARPS, LD_COLUMNS, persistent_ctas, sm100_plan

#: Instructions of one pass of the MMA warp's k loop besides its tcgen05.mma: the full-barrier
#: wait, descriptor updates, the commit to the empty barrier, the loop (from bench/sass.py's
#: sm_100a table: about 20 SASS per k-tile around 4 UTCHMMA, an estimate for other tiles).
MMA_LOOP_INSTRUCTIONS = 20
#: The producer warp's pass: empty wait, expect_tx, two TMA loads, the loop.
PRODUCER_LOOP_INSTRUCTIONS = 16
#: Epilogue instructions per accumulator element and thread: the cast, the bound checks, the
#: store's share (a few, as the emitted 32-column chunks show; more with a fused epilogue).
EPILOGUE_INSTRUCTIONS_PER_ELEMENT = 3
#: Bytes of C one thread stores per st.global of the direct epilogue (two adjacent elements).
STORE_ELEMENTS = 2
SECTOR_BYTES = 32
#: Clocks a release takes to reach a multicast peer's empty barrier (as targets/sm90/choose.py's
#: CLUSTER_RELEASE_CLOCKS: an estimate of an L2 hit's round trip).
CLUSTER_RELEASE_CLOCKS = 300


def cta_pair(s: Schedule) -> int:
    """CTAs sharing one tcgen05.mma: 1, or 2 for `cta_group=2` (None before the defaults: 1)."""
    return getattr(s, "cta_group", None) or 1


def cluster_of(s: Schedule) -> tuple[int, int]:
    c = getattr(s, "cluster", None)
    return tuple(c) if c else (1, 1)


def cta_tile(s: Schedule) -> tuple[int, int]:
    """(A rows, B columns) one CTA holds in shared memory: BM/2 and BN/2 in a CTA pair."""
    pair = cta_pair(s)
    return s.bm // pair, s.bn // pair


def loaded_bytes_per_stage(g: Gemm, s: Schedule) -> int:
    """Bytes one CTA's producer loads from L2 per stage: its slices of A and B, cut once more per
    CTA sharing it in a cluster with multicast (A along the cluster's N side, B along M)."""
    rows, cols = cta_tile(s)
    cm, cn = cluster_of(s)
    pair = cta_pair(s)
    return int((rows / cn + cols / max(1, cm // pair)) * s.bk * g.in_bytes / K_PACK.get(g.dtype, 1))


def stage_round_trip(g: Gemm, s: Schedule, dev: DeviceModel) -> float:
    """Clocks from a stage's release to its refill landing: the loaded memory latency, the stage's
    bytes at the SM's share of L2 bandwidth, and a cluster peer's release when multicast."""
    transfer = loaded_bytes_per_stage(g, s) / (dev.l2_bytes_per_clk / dev.sms)
    cm, cn = cluster_of(s)
    return dev.dram_latency_clk + transfer + (CLUSTER_RELEASE_CLOCKS if cm * cn > cta_pair(s) else 0)


def tensor_rate(g: Gemm, dev: DeviceModel) -> float:
    """Dense flops per clock per SM for the problem's MMA kind (block-scaled kinds by their key)."""
    bs = getattr(g, "block_scale", None)
    key = g.dtype
    if bs is not None and g.dtype in ("e4m3", "e5m2"):
        key = "mxf8"
    rates = dev.tensor_flops_per_clk_sm
    if key not in rates:
        raise ValueError(f"{dev.name} has no tensor rate for {key!r} inputs in schedule/devices.py; "
                         f"modelled: {', '.join(rates)}")
    return rates[key]


def ktile_cost(g: Gemm, s: Schedule, dev: DeviceModel) -> KTileCost:
    """Clocks of one k-tile on one SM: tcgen05's tensor time for this CTA's share of the MMA, the
    ring's shared-memory traffic (TMA writes, MMA reads), the two issuing warps, and the latency
    floor (a stage's round trip over the S - 1 stages in flight)."""
    rows, cols = cta_tile(s)
    mma = 2 * rows * s.bn * s.bk / tensor_rate(g, dev)
    stage = (rows + cols) * s.bk * g.in_bytes // K_PACK.get(g.dtype, 1)
    smem = 2 * stage / dev.smem_bytes_per_clk_sm  # written by TMA, read by the MMA
    mmas = s.bk // sm100_plan(g, s).mma[2]
    issue = max(mmas + MMA_LOOP_INSTRUCTIONS, PRODUCER_LOOP_INSTRUCTIONS)  # two warps, two schedulers
    round_trip = stage_round_trip(g, s, dev)
    in_flight = s.stages - 1
    if in_flight >= 1:
        return KTileCost(mma, smem, issue, round_trip / in_flight)
    return KTileCost(mma, smem, issue, round_trip, serial=True)


def epilogue_clocks(g: Gemm, s: Schedule, dev: DeviceModel) -> float:
    """Clocks of one tile's epilogue on its SM: the slowest of the tcgen05.ld reads of the f32
    accumulator, the 4 epilogue warps' instructions (one warp per scheduler) and the direct stores'
    L2 sectors (each warp store touches one sector per row: 32 per instruction) at the SM's share
    of L2 bandwidth."""
    rows, _ = cta_tile(s)
    tmem = rows * s.bn * 4 / dev.tmem_read_bytes_per_clk_sm
    chunks = -(-s.bn // LD_COLUMNS)
    math = chunks * LD_COLUMNS * EPILOGUE_INSTRUCTIONS_PER_ELEMENT * (rows / (32 * EPILOGUE_WARPS))
    stores = rows * s.bn / STORE_ELEMENTS
    sectors = stores * max(SECTOR_BYTES, STORE_ELEMENTS * g.out_bytes) / (dev.l2_bytes_per_clk / dev.sms)
    return max(tmem, math, sectors)


def predict_blackwell(g: Gemm, s: Schedule, arch: str) -> Prediction:
    """The model's time for a tcgen05 schedule: each walking CTA (pair) runs ceil(tiles / walkers)
    tiles of ceil(K / BK) k-tiles after one pipeline fill; per tile the epilogue's excess over the
    main loop is exposed (all of it with one TMEM buffer); the last tile's epilogue drains after
    the loop. L2 and DRAM traffic overlap the compute as in the Hopper model. A grouped problem is
    priced as the sm_90a model prices it: G equal groups as a batch of G matrices (priced_problem)."""
    if g.grouped:
        from ..sm90.grouped import priced_problem

        g = priced_problem(g)
    dev = device_model(arch)
    plan = sm100_plan(g, s)
    pair = cta_pair(s)
    tiles = ceil_div(g.m, s.bm) * ceil_div(g.n, s.bn) * g.batch
    ctas = persistent_ctas(g, s, dev.sms)
    # cluster launch control launches one CTA per tile, of which one per SM runs at a time (each
    # then takes further tiles): the walkers are min(tiles, SMs) resident CTAs
    resident = min(ctas, dev.sms) if s.tile_scheduler == "clc" else ctas
    walkers = max(1, resident // pair)
    per_cta = ceil_div(tiles, walkers)
    kt = ceil_div(g.k, s.bk)
    cost = ktile_cost(g, s, dev)
    per_ktile = cost.latency + cost.throughput if cost.serial else overlap(cost.throughput, cost.latency)
    mainloop = kt * per_ktile
    epilogue = epilogue_clocks(g, s, dev)
    exposed = max(0.0, epilogue - mainloop) if plan.acc_buffers == 2 else epilogue
    fill = dev.dram_latency_clk
    clocks = fill + per_cta * (mainloop + exposed) + epilogue
    compute_s = clocks / dev.clock_hz
    l2 = tiles * pair * loaded_bytes_per_stage(g, s) * kt
    l2_s = l2 / (dev.l2_bytes_per_clk * dev.clock_hz)
    dram = dram_bytes(g, s, dev, walkers)
    dram_s = dram / dev.dram_bytes_per_s
    terms = {"waves": compute_s, "L2": l2_s, "DRAM": dram_s, "launch": dev.launch_s,
             **unit_terms([(1, cost, 1)], per_cta * kt, dev.clock_hz, barrier=False),
             "fill": fill / dev.clock_hz, "epilogue": (per_cta * exposed + epilogue) / dev.clock_hz}
    bound, _ = max(("waves", compute_s), ("L2", l2_s), ("DRAM", dram_s), key=lambda kv: kv[1])
    if bound == "waves":
        bound = "latency" if cost.latency >= cost.throughput else cost.resource
    time_s = overlap(compute_s, l2_s, dram_s) + dev.launch_s
    flops = 2 * g.m * g.n * g.k * g.batch
    computed = 2 * tiles * s.bm * s.bn * kt * s.bk
    peak = tensor_rate(g, dev) * dev.sms * dev.clock_hz
    return Prediction(time_s=time_s, efficiency=flops / (time_s * peak), ctas=ctas, ctas_per_sm=1,
                      limiter="persistent grid", registers=80, waves=tiles / walkers,
                      edge_waste=1 - flops / computed if computed else 0.0, dram_bytes=int(dram), l2_bytes=int(l2),
                      bound=bound, terms=terms)
