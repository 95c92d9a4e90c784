"""Choosing an sm_90a (wgmma) schedule: the candidates the built Hopper lowering can emit, and the
cost model's price of one.

Why separate from the mma.sync model: a wgmma CTA is one or two consumer warpgroups fed by TMA
(and, by default, a producer warpgroup walking a persistent grid), so its k-tile costs tensor time
at wgmma's full rate (not mma.sync's share), TMA writes plus descriptor reads of shared memory (no
ldmatrix, no cp.async issue), and its shared memory and registers come from `hopper_plan`, the
same numbers the verifier and the lowering use.

The designs priced, each as the lowering builds it (README, "Hopper (sm_90a): what is built"):

* warp-specialised + persistent (the default): one CTA per SM walks ceil(tiles / grid) tiles, so
  the grid's waves are whole tiles per CTA; the producer keeps loading across a tile boundary, so
  the pipeline fills once per CTA (not once per tile). Optionally in 2x1 or 1x2 clusters with TMA
  multicast (cluster.py): the tile grid rounds up to whole cluster tiles, each CTA reads only its
  slice of the shared operand's box from L2, and a stage is refilled only once the peer's
  consumers released it too;
* non-specialised, one CTA per tile: the consumers issue the next stage's copies themselves after
  a bar.sync every k-tile, every CTA fills and drains its own pipeline, and waves are CTAs / (SMs
  x CTAs per SM) with the tail priced as such. It is the only built kernel for split-K (skinny
  M x N, long K) and Stream-K (batches: both kernels, the persistent one walking batch x tiles);
* the epilogue: direct stores from the accumulator fragments (each thread writes 2 adjacent
  elements per row, so a 16-bit C fills half a 32-byte sector per 4 threads) or the TMA store
  (fragments to swizzled shared memory, one bulk copy per box, whole sectors). The persistent
  kernel's stores drain under the next tile's main loop; a CTA per tile waits for its own.

Both main loops keep S - 1 stages in flight (the stage the wgmmas read is held until they
retire), and a k-tile's latency floor is a stage's round trip over them (`stage_round_trip`,
Little's law), so a deeper ring is priced faster until the floor sinks under the tensor time.

Fitted to an H200's measurements (bench/results/2026-11-26-ablation-sm90-3eb197e, checked by
tests/tune/test_sm90_model_vs_h200.py): the direct epilogue's store stall (DIRECT_STORE_CLOCKS);
checked against them: the cluster's peer release (CLUSTER_RELEASE_CLOCKS). Still estimated: the loaded DRAM latency (devices.py), the per-k-tile
instruction counts, the sector efficiency of direct stores, and that a persistent CTA's epilogue
stalls its consumers fully (they do not overlap it with the next tile's wgmmas, true of the built
kernel: one set of accumulators). L2 and DRAM traffic are priced as for sm_80 (`costmodel`), less
the L2 reads multicast saves.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ...errors import LoweringNotBuilt, ScheduleError
from ...schedule.cost import (BARRIER_CLOCKS, KTileCost, Prediction, ceil_div as _ceil, dram_bytes as _dram_bytes,
                              overlap, unit_terms)
from ...schedule.devices import DeviceModel, device_model
from .plan import CONSUMER_OVERHEAD_REGS, HopperPlan, epilogue_path, hopper_plan, persistent_ctas
from ...schedule.occupancy import occupancy
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...schedule.streamk import stream_k_grid, stream_k_plan
from .promotion import promotion_clocks
from .verify_built import SM80, check_sm90_built

#: (BM, consumers) the built lowering runs: 64 rows per warpgroup at least, 128 at most.
BLOCK_ROWS = ((64, 1), (128, 1), (128, 2), (256, 2))
#: wgmma N the chooser tries (any multiple of 8 is legal; these fill the 128-byte swizzle rows).
BLOCK_COLS = (64, 128, 192, 256)
#: BK in bytes: one 128-byte swizzle row per box (64 f16, 32 tf32, 128 fp8/int8 elements).
BK_BYTES = 128
STAGES = (2, 3, 4, 5, 6)
#: The deepest ring tried when shared memory allows more than STAGES (small tiles).
MAX_STAGES = 8
#: H100's shared memory per CTA (227 KB, the opt-in maximum; targets.py / the verifier).
SMEM_PER_CTA = 227 * 1024
GROUP_M = 8
SPLITS = (2, 3, 4, 6, 8)
#: Base schedules (non-specialised) whose split-K and Stream-K variants are tried.
VARIANT_BASES = 6
#: Warp instructions per k-tile of a consumer warp besides its wgmmas: the full-barrier wait, the
#: fence, commit/wait_group, descriptor and loop updates (estimate, from the emitted loop).
WGMMA_LOOP_INSTRUCTIONS = 16
#: Extra per-k-tile instructions of a non-specialised consumer: it also arrives on the empty
#: barrier's replacement (a CTA barrier), and one thread issues the next stage's copies.
NON_WS_LOOP_INSTRUCTIONS = 10
#: Bytes of one 32-byte sector a direct store of 4 threads' fragment pairs fills per row, over 32.
SECTOR_BYTES = 32
#: Thread-block clusters proposed for the warp-specialised persistent kernel, each with TMA
#: multicast of the operand its CTAs share (targets/sm90/cluster.py): (2, 1) shares B, (1, 2) A.
CLUSTERS = ((2, 1), (1, 2))
#: Clocks a consumer's release of a stage takes to reach a multicast peer's empty barrier
#: (mapa + mbarrier.arrive.shared::cluster over the SM-to-SM network, cluster.py). An estimate: the
#: order of an L2 hit's round trip. It lengthens the stage's round trip (`stage_round_trip`), so a
#: cluster needs a deeper ring to hide the same latency. On an H200 the cluster kernel ran 3-5%
#: above the same tile alone (bench/results/2026-11-26-cluster-probe-0a8998b), as this prices it;
#: before its barriers took CUTLASS's scopes (docs/ptx_facts/clusters.md §9f) it ran at half speed.
CLUSTER_RELEASE_CLOCKS = 300
#: Clocks one warp's store instruction of the direct epilogue stalls its consumers (2 adjacent
#: elements per thread: 8 rows of 4 threads, 8 cache lines per instruction). Measured on an H200
#: (same results): the direct epilogue cost 3900-7000 clocks per tile more than the TMA store
#: (128x256 f16: 737 -> 682 TFLOP/s; fp8 128x128 -> bf16: 1347 -> 1164), 14-15 per warp store.
DIRECT_STORE_CLOCKS = 14


def _up_to_cover(sides: tuple, extent: int, key=lambda x: x) -> list:
    """The sides up to (and every one equal to) the first whose extent covers `extent`."""
    cover = next((key(side) for side in sides if key(side) >= extent), None)
    return [side for side in sides if cover is None or key(side) <= cover]


def _probe(g: Gemm) -> Schedule:
    """A plain schedule for asking whether any built kernel runs `g` (grouped problems: the
    warp-specialised persistent kernel, the one that builds them)."""
    walks = bool(g.grouped)
    return Schedule(block=(128, 128, BK_BYTES // g.in_bytes), instruction="wgmma", warp_specialized=walks,
                    persistent=walks, consumers=1, stages=3, swizzle=128)


def check_problem_built(g: Gemm, arch: str) -> None:
    """LoweringNotBuilt, naming arch='sm_90' as the fix, when no built wgmma schedule can run `g`."""
    check_sm90_built(g, _probe(g), arch)


def _stage_counts(g: Gemm, bm: int, bn: int, bk: int) -> list[int]:
    """STAGES, plus the deepest ring (at most MAX_STAGES) whose operand stages fill shared memory
    (the verifier still checks the epilogue staging and barriers on top)."""
    stage = (bm + bn) * bk * g.in_bytes
    deepest = min(MAX_STAGES, (SMEM_PER_CTA - 2 * 1024) // stage)
    return sorted(set(STAGES) | ({deepest} if deepest > STAGES[-1] else set()))


def hopper_candidates(g: Gemm) -> Iterator[Schedule]:
    """Every base schedule of the built sm_90a kernels worth trying for `g`, legal or not (the
    verifier prunes): block rows and columns up to the first that covers M and N, BK 128 bytes,
    2-6 stages and the deepest ring that fits, 128-byte swizzle; the warp-specialised persistent
    kernel (for a batch, walking batch x tiles), alone and in each of CLUSTERS, and the
    non-specialised one-CTA-per-tile kernel; the TMA-store and the direct epilogue where the TMA
    one applies; row and (with more tile rows than a group) grouped raster. Split-K and
    Stream-K: `hopper_variants`."""
    bk = BK_BYTES // g.in_bytes
    for bm, consumers in _up_to_cover(BLOCK_ROWS, g.m, key=lambda rc: rc[0]):
        for bn in _up_to_cover(BLOCK_COLS, g.n):
            rasters = [{}]
            if _ceil(g.m, bm) > GROUP_M and _ceil(g.n, bn) > 1:
                rasters.append({"raster": "grouped", "group_m": GROUP_M})
            for stages in _stage_counts(g, bm, bn, bk):
                for ws in (True, False):
                    base = Schedule(block=(bm, bn, bk), instruction="wgmma", warp_specialized=ws, persistent=ws,
                                    consumers=consumers, stages=stages, swizzle=128)
                    epilogues = [None] + ([False] if epilogue_path(g, base) == "tma" else [])
                    for via in epilogues:
                        for raster in rasters:
                            yield replace(base, epilogue_via_smem=via, **raster)
                            if ws:
                                yield from _clustered(g, replace(base, epilogue_via_smem=via, **raster))


def _clustered(g: Gemm, s: Schedule) -> Iterator[Schedule]:
    """`s` on each of CLUSTERS with multicast, where the tile grid has two tiles to pair along
    the cluster's long side (a cluster of one real tile only pads the grid)."""
    for cm, cn in CLUSTERS:
        if _ceil(g.m, s.bm) >= cm and _ceil(g.n, s.bn) >= cn:
            yield replace(s, cluster=(cm, cn), multicast=True)


def hopper_variants(g: Gemm, s: Schedule) -> Iterator[Schedule]:
    """Split-K and Stream-K of a non-specialised base schedule (the kernel that builds them), when
    K spans at least two k-tiles per split; f32 accumulation only (the partials are f32)."""
    if s.warp_specialized or g.accumulator != "f32":
        return
    kt = _ceil(g.k, s.bk)
    flat = replace(s, epilogue_via_smem=None, raster="row", group_m=8)
    for split in SPLITS:
        if kt >= 2 * split:
            yield replace(flat, split_k=split, persistent=False)
    if kt >= 4 and g.batch == 1:
        yield replace(flat, decomposition="stream-k", persistent=True)


def no_candidate_error(g: Gemm, arch: str, first: ScheduleError | None) -> ScheduleError:
    """What `rank` raises when the verifier turns down every built wgmma candidate (e.g. rows not
    16-byte aligned for TMA): the first candidate's reason, with arch='sm_90' as the way out."""
    why = f"{first.field}={first.value!r}: {first.rule}" if first else "no candidate"
    # a problem field's own fix (store B K-major, pad lda) comes first: it keeps the wgmma kernel
    fix = (first.fix if first is not None and first.field.startswith("gemm.")
           else SM80.replace("or compile", "compile"))
    return LoweringNotBuilt("arch", arch, f"no schedule of the built sm_90a lowering runs this {g.dtype} "
                            f"problem ({why})", fix)


def stages_in_flight(s: Schedule) -> int:
    """Stages whose loads are in flight while the tensor core works on one k-tile: S - 1. Both
    built main loops keep one wgmma group in flight and hand back stage kt-1 only once it has
    retired, after issuing k-tile kt (`wait_group 1`: warp_specialized.py, mainloop.py), so the
    stage being read is never refilled; with one stage (S - 1 = 0) load and compute alternate."""
    return s.stages - 1


def loaded_bytes_per_stage(g: Gemm, s: Schedule, plan: HopperPlan) -> int:
    """Bytes one CTA's producer loads from L2 per stage: its A and B boxes, each cut into one
    slice per CTA sharing it when multicast (`ClusterShape.parts`, cluster.py); the peers'
    slices arrive over the SM-to-SM network, not from L2."""
    parts_a = plan.cluster[1] if "A" in plan.multicast else 1
    parts_b = plan.cluster[0] if "B" in plan.multicast else 1
    return (s.bm // parts_a + s.bn // parts_b) * s.bk * g.in_bytes


def stage_round_trip(g: Gemm, s: Schedule, plan: HopperPlan, dev: DeviceModel) -> float:
    """Clocks from a stage's release to its refill landing: the loaded memory latency
    (`dram_latency_clk`), plus the time the stage's bytes take at the SM's share of the L2 read
    bandwidth when every SM streams (`l2_bytes_per_clk / sms`), plus, with multicast, the peers'
    release crossing the cluster (CLUSTER_RELEASE_CLOCKS). Little's law: to sustain a k-tile
    every t clocks, round trip / t stages must be in flight, so `hopper_ktile_cost`'s latency
    floor is this over `stages_in_flight`. The figures (devices.py, H100): 1200 clocks of loaded
    latency (~700 ns at 1830 MHz) and 6258 B/clk of L2 bandwidth are both estimates; e.g. a
    256x192x64 bf16 stage (57 KB, 1220 clocks at 47 B/clk) round-trips in about 2400 clocks
    against 1536 of wgmma, so 2 stages starve the tensor core and 4 (800 clocks each) do not."""
    transfer = loaded_bytes_per_stage(g, s, plan) / (dev.l2_bytes_per_clk / dev.sms)
    release = CLUSTER_RELEASE_CLOCKS if plan.multicast else 0
    return dev.dram_latency_clk + transfer + release


def hopper_ktile_cost(g: Gemm, s: Schedule, dev: DeviceModel) -> KTileCost:
    """Clocks of one k-tile of one wgmma CTA on an idle SM: tensor time at wgmma's full rate for the
    dtype (a warpgroup spans the 4 sub-partitions), shared memory (TMA writes A and B once; each
    consumer's wgmmas read its A rows and all of B), issue (consumer warps, plus one producer warp
    when specialised), and the pipeline's latency floor: a stage's round trip
    (`stage_round_trip`) over the stages in flight (`stages_in_flight`), so every added stage
    lowers the floor while it fits."""
    plan = hopper_plan(g, s)
    mma = 2 * s.bm * s.bn * s.bk / dev.tensor_flops_per_clk_sm[g.dtype]
    writes = (s.bm + s.bn) * s.bk * g.in_bytes
    reads = (s.bm + plan.consumers * s.bn) * s.bk * g.in_bytes
    smem = (reads + writes) / dev.smem_bytes_per_clk_sm
    consumer_warps = 4 * plan.consumers
    per_warp = WGMMA_LOOP_INSTRUCTIONS + (0 if s.warp_specialized else NON_WS_LOOP_INSTRUCTIONS)
    producer = WGMMA_LOOP_INSTRUCTIONS if s.warp_specialized else 0
    issue = (consumer_warps * (plan.wgmmas_per_k_tile + per_warp) + producer) / dev.schedulers_per_sm
    promotion_issue, promotion_stall = promotion_clocks(g, s, plan, dev)  # fp8 promotion: adds, drained wgmma
    issue += promotion_issue
    mma += promotion_stall
    round_trip = stage_round_trip(g, s, plan, dev)
    in_flight = stages_in_flight(s)
    # the non-specialised consumers meet at a bar.sync every k-tile before thread 0 refills the
    # stage (mainloop.py); a specialised consumer only waits on its full barrier, whose phase
    # has completed when the producer runs ahead (its try_wait is in the issue count)
    barrier = 0 if s.warp_specialized else BARRIER_CLOCKS
    if in_flight >= 1:
        return KTileCost(mma, smem, issue, round_trip / in_flight + barrier)
    return KTileCost(mma, smem, issue, round_trip + barrier, serial=True)


def epilogue_clocks(g: Gemm, s: Schedule, plan: HopperPlan, dev: DeviceModel) -> tuple[float, float]:
    """(exposed, drain) clocks of one tile's epilogue. Exposed: what stalls the consumers (the math
    pass over the accumulators, plus the staging writes to shared memory for the TMA store).
    Drain: the tile's bytes leaving at the SM's share of DRAM bandwidth, divided by the sector
    efficiency (direct stores of a 16-bit C write half sectors); the caller charges it only where
    nothing overlaps it."""
    tile = s.bm * s.bn
    sm_bytes_per_clk = dev.dram_bytes_per_s / dev.clock_hz / dev.sms
    consumer_threads = 128 * plan.consumers
    math = tile / consumer_threads * 4                    # a few instructions per element per thread
    out_bytes = tile * g.out_bytes
    if plan.epilogue == "tma":
        staging = out_bytes / dev.smem_bytes_per_clk_sm    # fragments written once (TMA reads them async)
        return math + staging + BARRIER_CLOCKS, out_bytes / sm_bytes_per_clk
    per_row = 4 * 2 * g.out_bytes                          # 4 threads x 2 adjacent elements of one row
    efficiency = min(1.0, per_row / SECTOR_BYTES)
    warp_stores = tile / (32 * 2)                          # each thread stores 2 adjacent elements at a time
    return math + warp_stores * DIRECT_STORE_CLOCKS, out_bytes / sm_bytes_per_clk / efficiency


def _work(g: Gemm, s: Schedule, dev: DeviceModel) -> tuple[int, int, int, float]:
    """(CTAs, k-tiles of the busiest CTA's whole walk, its tiles or units, f32 partial bytes) of
    the grid the schedule launches."""
    kt_total = _ceil(g.k, s.bk)
    tiles = g.batch * _walked_tiles(g, s)
    if s.stream_k:
        grid = stream_k_grid(g, s, dev.sms)
        sk = stream_k_plan(g, s, grid)
        dp = _ceil(sk.dp_tiles, grid)
        sk_iters = _ceil(sk.sk_iters, sk.sk_ctas) if sk.sk_ctas else 0
        units = dp + (_ceil(sk_iters, kt_total) + 1 if sk_iters else 0)
        partial = 2 * 4 * s.bm * s.bn * min(sk.sk_ctas, sk.sk_tiles * 2)
        return grid, dp * kt_total + sk_iters, units, partial
    if s.split_k > 1:
        ctas = tiles * s.split_k
        return ctas, _ceil(kt_total, s.split_k), 1, 2 * 4 * s.bm * s.bn * ctas
    if s.persistent:
        grid = persistent_ctas(g, s, dev.sms)
        per_cta = _ceil(tiles, grid)
        return grid, per_cta * kt_total, per_cta, 0
    return tiles, kt_total, 1, 0


def _walked_tiles(g: Gemm, s: Schedule) -> int:
    """Output tiles of one batch the grid walks: the tile grid rounded up to whole cluster tiles
    (a CTA whose tile lies past M or N still loads its zero-filled boxes and runs its wgmmas:
    cluster.py)."""
    cm, cn = s.cluster if s.cluster is not None else (1, 1)
    return _ceil(_ceil(g.m, s.bm), cm) * cm * _ceil(_ceil(g.n, s.bn), cn) * cn


def hopper_register_need(g: Gemm, s: Schedule) -> int:
    """A consumer thread's registers by the estimate: its accumulators (both, with fp8 promotion)
    plus the fixed overhead."""
    plan = hopper_plan(g, s)
    return plan.held_accumulator_regs + CONSUMER_OVERHEAD_REGS + plan.block_scale_regs


def predict_hopper(g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
    """The model's time for a built wgmma schedule. `registers`: the assembler's count per thread
    (default: accumulators + the consumer overhead estimate, capped at the launch registers).

    Persistent grids (warp-specialised, Stream-K): one CTA per SM walks its tiles one after the
    other, the pipeline filled once; one CTA per tile: waves of CTAs / (SMs x CTAs per SM), the
    CTAs sharing an SM sharing its units, each paying its fill and its epilogue's drain."""
    if g.grouped:  # priced as G equal dense groups (grouped.py)
        from .grouped import priced_problem
        g = priced_problem(g)
    dev = device_model(arch)
    plan = hopper_plan(g, s)
    regs = registers if registers is not None else min(plan.launch_regs, _ceil(hopper_register_need(g, s), 8) * 8)
    occ = occupancy(arch, regs, plan.smem.total, plan.threads, dev.sms)
    per_sm = max(1, occ.ctas_per_sm)
    ctas, kt, units, partial_bytes = _work(g, s, dev)
    cost = hopper_ktile_cost(g, s, dev)
    exposed, drain = epilogue_clocks(g, s, plan, dev)
    sm_bytes_per_clk = dev.dram_bytes_per_s / dev.clock_hz / dev.sms
    if s.split_k > 1 or s.stream_k:  # partials: written f32, read back by the tile's last CTA
        exposed += 2 * 4 * s.bm * s.bn / sm_bytes_per_clk
    fill = dev.dram_latency_clk
    if s.persistent:
        # the last tile's stores drain after the loop; earlier ones under the next tile's loads
        per_ktile = cost.latency + cost.throughput if cost.serial else overlap(cost.throughput, cost.latency)
        clocks = fill + kt * per_ktile + units * exposed + drain
        wave_ctas = min(ctas, dev.sms)
        parts = [(1, cost, 1)]
        fill_s, epilogue_s = fill / dev.clock_hz, (units * exposed + drain) / dev.clock_hz
    else:
        wave_ctas = per_sm * dev.sms
        full, rest = divmod(ctas, wave_ctas)
        clocks = full * _cta_wave(cost, per_sm, kt, exposed + drain, fill)
        parts = [(full, cost, per_sm)]
        if rest:
            clocks += _cta_wave(cost, _ceil(rest, dev.sms), kt, exposed + drain, fill)
            parts.append((1, cost, _ceil(rest, dev.sms)))
        fill_s = sum(w for w, _, _ in parts) * fill / dev.clock_hz
        epilogue_s = sum(w * on_sm for w, _, on_sm in parts) * (exposed + drain) / dev.clock_hz
    compute_s = clocks / dev.clock_hz
    tiles = g.batch * plan.tiles[0] * plan.tiles[1]
    kt_total = _ceil(g.k, s.bk)
    # multicast: a CTA reads only its slice of the shared box from L2 (`loaded_bytes_per_stage`)
    l2 = tiles * loaded_bytes_per_stage(g, s, plan) * kt_total + partial_bytes
    l2_s = l2 / (dev.l2_bytes_per_clk * dev.clock_hz)
    dram = _dram_bytes(g, s, dev, wave_ctas) + partial_bytes
    dram_s = dram / dev.dram_bytes_per_s
    terms = {"waves": compute_s, "L2": l2_s, "DRAM": dram_s, "launch": dev.launch_s,
             **unit_terms(parts, kt, dev.clock_hz, barrier=False),  # the barrier is in the latency floor
             "fill": fill_s, "epilogue": epilogue_s}
    bound, slowest = max(("waves", compute_s), ("L2", l2_s), ("DRAM", dram_s), key=lambda kv: kv[1])
    if bound == "waves":
        bound = "latency" if cost.latency >= cost.throughput else cost.resource
    time_s = overlap(compute_s, l2_s, dram_s) + dev.launch_s
    computed = tiles * s.bm * s.bn * kt_total * s.bk
    useful = g.batch * g.m * g.n * g.k
    waves = tiles / (dev.sms if s.persistent else wave_ctas)
    return Prediction(
        time_s=time_s, efficiency=g.flops * g.batch / (time_s * dev.peak_flops(g.dtype, instruction_share=False)),
        ctas=ctas, ctas_per_sm=occ.ctas_per_sm, limiter=occ.limiter, registers=regs, waves=waves,
        edge_waste=1 - useful / computed, dram_bytes=int(dram), l2_bytes=int(l2), bound=bound, terms=terms)


def _cta_wave(cost: KTileCost, ctas_on_sm: int, kt: int, epilogue: float, fill: float) -> float:
    """Clocks for `ctas_on_sm` one-tile CTAs sharing an SM: each fills its pipeline, runs `kt`
    k-tiles (the SM's units shared), then its epilogue (the CTAs' epilogues do not overlap)."""
    shared = ctas_on_sm * cost.throughput
    per_ktile = cost.latency + shared if cost.serial else overlap(shared, cost.latency)
    return fill + kt * per_ktile + ctas_on_sm * epilogue


def describe_hopper(s: Schedule) -> str:
    """A wgmma schedule as the CLI flags that give it."""
    ws = "--warp-specialized" if s.warp_specialized else "--no-warp-specialized"
    persistent = "--persistent" if s.persistent else "--no-persistent"
    text = (f"--instruction wgmma --block {s.bm}x{s.bn}x{s.bk} --consumers {s.consumers} --stages {s.stages} "
            f"--swizzle {s.swizzle} {ws} {persistent}")
    if s.cluster is not None and tuple(s.cluster) != (1, 1):  # multicast is its default
        text += f" --cluster {s.cluster[0]}x{s.cluster[1]}"
    if s.epilogue_via_smem is not None:
        text += f" --epilogue-via {'smem' if s.epilogue_via_smem else 'registers'}"
    if s.raster == "grouped":
        text += f" --raster grouped --group-m {s.group_m}"
    if s.split_k > 1:
        text += f" --split-k {s.split_k}"
    if s.stream_k:
        text += " --stream-k" + (" pure" if s.decomposition == "stream-k-pure" else "")
    if s.sms is not None:
        text += f" --sms {s.sms}"
    return text
