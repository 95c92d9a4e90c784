"""The warp-specialised sm_90a kernel (ptxgen/targets/sm90/warp_specialized.py): a producer warpgroup's
elected thread fills a full/empty mbarrier ring with TMA, one or two consumer warpgroups run wgmma
and release each stage after the wgmma reading it retired. Proven on the simulator against float64
numpy with never-zero inputs and a NaN-poisoned C; planted bugs (a stage released before its wgmma
retired, accumulators read before wait_group 0, a missing expect_tx, a missing phase flip, an
arrival count the init does not match) must be reported by the simulator, not hang or pass."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, sim
from ptxgen.check import Comparison, random_operands
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.targets.sm90.plan import WGMMA_N
from ptxgen.schedule.verify import verify

from tests import harness

from .test_sm90_gemm import tn

ARCH = "sm_90a"


def ws(block, stages=3, consumers=1, persistent=False, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, consumers=consumers, persistent=persistent,
                    **kw)


GELU = Epilogue(alpha=0.5, beta=1.0, bias="col", scale="row", activation="gelu")


@pytest.mark.parametrize("g, s", [
    (tn(100, 72, 200), ws((64, 64, 64), 3)),                                   # edges in M, N, K
    (tn(130, 136, 72, "bf16", "bf16"), ws((128, 128, 64), 2)),                 # two m64 blocks per consumer
    (tn(200, 136, 200), ws((128, 128, 64), 4, consumers=2)),                   # two consumers
    (tn(70, 40, 96, "f16", "f16"), ws((64, 40, 32), 1)),                       # one stage: wait_group 0
    (tn(33, 17, 24, "bf16"), ws((64, 16, 16), 2, raster="grouped", group_m=2)),
    (Gemm(104, 72, 200, a_layout="row", b_layout="row"), ws((64, 64, 64), 3)),         # B MN-major
    (Gemm(136, 136, 72, dtype="bf16", a_layout="col", b_layout="col"), ws((128, 128, 64), 2, consumers=2)),
    (Gemm(72, 80, 264, a_layout="col", b_layout="row", out_dtype="f16"), ws((64, 64, 32), 5)),
    (tn(264, 136, 72), ws((256, 128, 64), 2, consumers=2)),
], ids=["edges-s3", "bm128-bf16", "2c-s4", "s1", "swz32-grouped", "nn", "tt-2c", "nt-s5", "256x128-2c"])
def test_warp_specialized_gemm_matches_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.m + g.k)


@pytest.mark.parametrize("epi, out, consumers", [
    (Epilogue(alpha=0.5, beta=1.5, bias="col", activation="relu"), "f32", 1),
    (Epilogue(bias="row", scale="col", activation="gelu"), "bf16", 2),
    (Epilogue(alpha=2.0, scale="row", activation="silu", beta=-1.0), "f16", 2),
], ids=["alpha-beta-colbias-relu", "rowbias-colscale-gelu-2c", "rowscale-silu-beta-2c"])
def test_warp_specialized_fused_epilogues_match_numpy(epi, out, consumers):
    g = Gemm(136, 72, 136, dtype="f16", out_dtype=out, a_layout="row", b_layout="col", epilogue=epi)
    harness.check(g, ws((128, 64, 32), 3, consumers), ARCH, seed=5)


def test_kernel_has_roles_and_no_bar_sync_in_the_loops():
    k = ptxgen.compile(tn(256, 256, 256), ws((128, 128, 64), 4, consumers=2), arch=ARCH)
    assert ".maxnreg 168" in k.ptx and k.block == (384, 1, 1)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in k.ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in k.ptx
    # the only CTA-wide bar.sync is the one after the barriers' initialisation, before the roles
    # split; the rest are the TMA-store epilogue's named barrier among the 256 consumer threads
    syncs = [line.split(";")[0].strip() for line in k.ptx.splitlines() if line.strip().startswith("bar.sync")]
    assert syncs[0] == "bar.sync 0" and set(syncs[1:]) == {"bar.sync 8, 256"}
    assert k.ptx.index("    bar.sync 0") < k.ptx.index("    setmaxnreg.dec")
    assert k.ptx.index("bar.sync 8, 256") > k.ptx.index("Epilogue")
    assert "mbarrier.init.shared::cta.b64 [%r" in k.ptx and ", 8;" in k.ptx   # empty: one arrival per consumer warp
    # the header and banners say who does what
    assert "warpgroups 0..1 consume" in k.ptx and "warpgroup 2 produces (one elected thread" in k.ptx
    assert "on full/empty mbarriers" in k.ptx and "grid: one CTA per output tile" in k.ptx
    assert "// Producer warpgroup 2: registers down to 40" in k.ptx
    assert "// Consumer warpgroups 0..1: registers up to 232" in k.ptx
    persistent = ptxgen.compile(tn(256, 256, 256), Schedule(block=(128, 128, 64), instruction="wgmma"), arch=ARCH)
    assert "grid: persistent, min(tiles, SMs) CTAs" in persistent.ptx


def test_explicit_register_split_is_emitted_and_runs():
    g = tn(136, 72, 136)
    s = ws((128, 64, 64), 3, consumers=2, persistent=True, sms=1, producer_regs=24, consumer_regs=200)
    k = ptxgen.compile(g, s, arch=ARCH)
    assert ".maxnreg 168" in k.ptx and k.block == (384, 1, 1)
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in k.ptx and "setmaxnreg.inc.sync.aligned.u32 200;" in k.ptx
    harness.check(g, s, ARCH, seed=3)


# -- planted bugs the simulator must catch ------------------------------------------------------------
G_PLANT = tn(128, 128, 512)


def _plant_kernel(stages: int = 2):
    return ptxgen.compile(G_PLANT, ws((128, 128, 64), stages, consumers=2), arch=ARCH)


def _run(ptx: str, k) -> Comparison:
    """Launch `ptx` (k's, or a planted variant) through sim.launch; C against float64 numpy."""
    g = k.gemm
    a, b = random_operands(g)
    c = np.full((g.m, g.n), np.nan, np.float32)
    maps = [sim.TensorMap(v, t.box, swizzle=t.swizzle) for v, t in zip((a, b.T, c), k.tensor_maps)]  # C's: TMA store
    sim.launch(ptx, k.entry, grid=k.grid, block=k.block, args=[*maps, c, g.m, g.n, g.k, g.n],
               dynamic_smem=k.smem_bytes)
    return harness.judge(g, c, harness.Operands(a, b))[1]


def _without(ptx: str, marker: str) -> str:
    bad = "\n".join(line for line in ptx.split("\n") if marker not in line)
    assert bad != ptx, marker
    return bad


def test_the_unplanted_kernel_runs_through_sim_launch():
    k = _plant_kernel()
    assert _run(k.ptx, k).ok


def test_stage_released_before_its_wgmma_retired_is_caught():
    """No wait_group 1 before the release: the producer's TMA overwrites a stage a wgmma still reads."""
    k = _plant_kernel()
    with pytest.raises(sim.HazardError) as e:
        _run(_without(k.ptx, "k-tile kt-1's wgmma group has retired"), k)
    assert e.value.kind == "async-pending" and "wgmma still in flight" in e.value.detail


def test_accumulators_read_before_wait_group_0_are_caught():
    k = _plant_kernel()
    with pytest.raises(sim.HazardError) as e:
        _run(_without(k.ptx, "the accumulators may be read"), k)
    assert e.value.kind == "async-pending"


def test_missing_expect_tx_is_caught():
    """A plain arrival completes the full barrier's phase before the bytes land."""
    k = _plant_kernel()
    bad = re.sub(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, (\[[^\]]*\]), \d+;",
                 r"mbarrier.arrive.shared::cta.b64 _, \1;", k.ptx)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind == "async-pending"


@pytest.mark.parametrize("role, kind", [("consumer", "deadlock"), ("producer", "race")])
def test_missing_phase_flip_is_caught(role, kind):
    """Without its parity flip at the ring's wrap, a consumer waits for a phase that never comes
    (deadlock, reported, not hung); a producer refills a stage nobody released (extra arrival)."""
    k = _plant_kernel()
    lines = k.ptx.split("\n")
    consumer_at = next(i for i, line in enumerate(lines) if "consumer_start:" in line)
    # the ring's flips (MbarrierRing.advance): the producer's one, the consumer's in its peeled
    # first k-tile and in its loop; the role's flips all go
    flips = [i for i, line in enumerate(lines) if line.strip().startswith("xor.b32")
             and any("next k-tile: stage + 1" in x for x in lines[max(0, i - 5):i])]
    drop = {i for i in flips if (i > consumer_at) == (role == "consumer")}
    assert drop
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(line for i, line in enumerate(lines) if i not in drop), k)
    assert e.value.kind == kind, e.value


SEVERAL_TILES = (tn(136, 72, 136), ws((128, 64, 64), 3, consumers=2, persistent=True, sms=1))   # 1 CTA, 4 tiles


def test_the_store_wait_runs_before_the_staging_is_reused_not_at_the_end_of_each_tile():
    """Issue 21: the leader's wait for the previous tile's stores (and the barrier after it) opens
    the next tile's epilogue, after the main loop, so nothing sits between a tile's last store and
    the next tile's first wgmma; the kernel still waits once before the consumers exit."""
    k = ptxgen.compile(*SEVERAL_TILES, arch=ARCH)
    lines = k.ptx.split("\n")
    reuse = next(i for i, line in enumerate(lines) if "previous tile's stores have read" in line)
    assert "cp.async.bulk.wait_group.read 0" in lines[reuse] and "bar.sync 8, 256" in lines[reuse + 1]
    assert lines.index(next(line for line in lines if "Epilogue:" in line)) < reuse
    store = max(i for i, line in enumerate(lines) if "cp.async.bulk.tensor" in line and "global.shared" in line)
    after = lines[store:next(i for i, line in enumerate(lines) if "consumer_tiles_done" in line and ":" in line)]
    assert not any("wait_group.read" in line or "bar.sync" in line for line in after), "no wait at the tile's end"
    drain = [i for i, line in enumerate(lines) if "before the CTA exits" in line]
    assert len(drain) == 1 and "cp.async.bulk.wait_group.read 0" in lines[drain[0]]


@pytest.mark.parametrize("planted", ["barrier", "wait"])
def test_a_barrier_after_the_store_wait_is_needed_when_a_cta_walks_several_tiles(planted):
    """Issue 21: with one CTA walking 4 tiles, the next tile's staging writes must be ordered after
    the leader's cp.async.bulk.wait_group.read of the previous tile's stores by a barrier after
    that wait. The fixed kernel runs; without that barrier, or without the wait, the simulator
    names the race (planted bugs)."""
    k = ptxgen.compile(*SEVERAL_TILES, arch=ARCH)
    lines = k.ptx.split("\n")
    wait = next(i for i, line in enumerate(lines) if "previous tile's stores have read" in line)
    assert "bar.sync" in lines[wait + 1], "no barrier right after the leader's wait_group.read"
    assert _run(k.ptx, k).ok
    drop = wait + 1 if planted == "barrier" else wait
    bad = "\n".join(lines[:drop] + lines[drop + 1:])
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    if planted == "barrier":   # the wait returned, but nothing orders the other threads after it
        assert e.value.kind == "race" and f"wait at line {wait + 1}" in e.value.detail, e.value
    else:                      # the leader itself rewrites a buffer its store may still read
        assert e.value.kind == "async-pending" and "st.shared writes shared byte" in str(e.value), e.value


def test_exiting_before_the_last_stores_have_read_shared_memory_is_caught():
    """Issue 21: the CTA's shared memory may go to another CTA once its last thread exits, so each
    leader waits (wait_group.read 0, `drain`) for its last TMA stores before exiting. The kernel
    (one CTA walking 4 tiles) runs clean; without that wait the simulator names the last store."""
    k = ptxgen.compile(*SEVERAL_TILES, arch=ARCH)
    lines = k.ptx.split("\n")
    drain = [i for i, line in enumerate(lines) if "before the CTA exits" in line]
    assert len(drain) == 1 and "cp.async.bulk.wait_group.read 0" in lines[drain[0]]
    assert _run(k.ptx, k).ok
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(lines[:drain[0]] + lines[drain[0] + 1:]), k)
    stores = {i + 1 for i, line in enumerate(lines) if "cp.async.bulk.tensor" in line and "global.shared" in line}
    assert e.value.kind == "async-pending" and "exits" in e.value.detail, e.value
    assert e.value.line in stores and "bulk store" in e.value.detail, e.value


def test_empty_barrier_count_not_matching_the_arrivals_is_a_deadlock():
    k = _plant_kernel()
    bad = re.sub(r"(mbarrier\.init\.shared::cta\.b64 \[[^\]]*\]), 8;", r"\1, 16;", k.ptx)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind == "deadlock"


# -- the persistent grid ------------------------------------------------------------------------------
@pytest.mark.parametrize("g, s", [
    (tn(300, 200, 200), Schedule(block=(128, 128, 64), instruction="wgmma", stages=4)),    # the defaults
    (tn(300, 200, 200), ws((64, 64, 64), 2, persistent=True, sms=3)),                      # 20 tiles on 3 CTAs
    (Gemm(304, 200, 136, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row"),
     ws((128, 64, 32), 3, consumers=2, persistent=True, sms=2, raster="grouped", group_m=2)),
    (tn(130, 72, 24, "f16", "f16"), ws((64, 16, 16), 1, persistent=True, sms=4)),         # 1 stage, 20 tiles
    (Gemm(200, 136, 136, a_layout="row", b_layout="col", epilogue=GELU), ws((128, 64, 64), 5, consumers=2, persistent=True, sms=1)),  # one CTA
    pytest.param(tn(300, 600, 136, "bf16", "bf16"), Schedule(block=(128, 256, 64), instruction="wgmma", stages=3, sms=2)),
], ids=["defaults", "3ctas", "grouped-2c-mn", "s1", "one-cta-gelu", "n256-2c"])
def test_persistent_gemm_matches_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.n + g.k)


def test_persistent_grid_is_one_cta_per_sm_and_fills_the_device():
    g = tn(4096, 4096, 512)
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64), instruction="wgmma", stages=4), arch=ARCH)
    assert k.grid == (132, 1, 1)                     # sm_90a's flagship count in the simulator
    assert k.launch_grid(114) == (114, 1, 1)         # the device's SM count on a GPU (H100 PCIe)
    small = ptxgen.compile(tn(200, 200, 64), Schedule(block=(128, 128, 64), instruction="wgmma"), arch=ARCH)
    assert small.grid == (4, 1, 1) and small.launch_grid(132) == (4, 1, 1)   # never more CTAs than tiles
    pinned = ptxgen.compile(g, ws((128, 128, 64), 4, persistent=True, sms=8), arch=ARCH)
    assert pinned.launch_grid(132) == (8, 1, 1)
    assert "%nctaid.x" in k.ptx and "producer_tile_loop" in k.ptx and "consumer_tile_loop" in k.ptx


def test_one_persistent_cta_computes_exactly_its_tiles():
    """CTA 1 of 3 walks tiles 1, 4, 7 (row raster, 3 n-tiles): those are written, the rest stays NaN."""
    g = tn(192, 192, 64)
    c = harness.check(g, ws((64, 64, 64), 2, persistent=True, sms=3), ARCH, ctas=[(1, 0, 0)]).out
    written = ~np.isnan(c)
    want = np.zeros((3, 3), bool)
    want[[0, 1, 2], [1, 1, 1]] = True
    assert (written.reshape(3, 64, 3, 64).all(axis=(1, 3)) == want).all()
    assert (written.reshape(3, 64, 3, 64).any(axis=(1, 3)) == want).all()


def test_last_stage_never_released_deadlocks_a_persistent_cta():
    """The consumers skip releasing each tile's last stage: the producer, already on the next tile,
    waits for it forever; the simulator reports the deadlock instead of hanging."""
    g = tn(256, 128, 192)
    k = ptxgen.compile(g, ws((64, 64, 64), 2, persistent=True, sms=1), arch=ARCH)
    assert _run(k.ptx, k).ok
    with pytest.raises(sim.HazardError) as e:
        _run(_without(k.ptx, "release the tile's last stage"), k)
    assert e.value.kind == "deadlock"


# -- property test over the warp-specialised schedule space -----------------------------------------
def draw_ws_case(data, persistent: bool | None = None) -> tuple[Gemm, Schedule]:
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "f16", "bf16")), label="out_dtype")
    m, n = (data.draw(st.integers(1, 300), label=x) for x in ("M", "N"))
    k = data.draw(st.integers(1, 40), label="K/8") * 8                 # 16-byte aligned rows (TMA)
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"),
                       scale=data.draw(st.sampled_from((None, "col", "row")), label="scale"),
                       activation=data.draw(st.sampled_from((None, "relu", "gelu", "silu")), label="act"))
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    if a_layout == "col":
        m = -(-m // 8) * 8
    if b_layout == "row":
        n = -(-n // 8) * 8
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, epilogue=epi)
    bm = data.draw(st.sampled_from((64, 128)), label="BM")
    bn = data.draw(st.sampled_from([x for x in (8, 16, 24, 40, 64, 128) if x in WGMMA_N[dtype]]), label="BN")
    bk = data.draw(st.sampled_from((16, 32, 64, 128)), label="BK")
    swizzle = data.draw(st.sampled_from((None,) + tuple(w for w in (128, 64, 32) if bk * 2 % w == 0)),
                        label="swizzle")
    consumers = data.draw(st.sampled_from((1, 2) if bm == 128 else (1,)), label="consumers")
    if persistent is None:
        persistent = data.draw(st.sampled_from((True, True, False)), label="persistent")
    extra = {}
    if persistent:
        extra["sms"] = data.draw(st.sampled_from((1, 2, 3, None)), label="sms")   # small grids: CTAs loop
    s = ws((bm, bn, bk), data.draw(st.integers(1, 5), label="stages"), consumers, persistent=persistent,
           swizzle=swizzle, raster=data.draw(st.sampled_from(("row", "grouped")), label="raster"),
           group_m=data.draw(st.sampled_from((1, 2, 8)), label="group_m"), **extra)
    return g, s


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data())
def test_warp_specialized_schedules_match_numpy(data):
    """Persistent or not (persistent draws a small `sms`, so CTAs walk several tiles)."""
    g, s = draw_ws_case(data)
    try:
        verify(g, s, ARCH)
    except ScheduleError as e:
        assert not isinstance(e, LoweringNotBuilt), e   # the drawn space is built
        event("rejected by the verifier")
        return                                           # illegal (smem, box): the verifier's to explain
    tiles = -(-g.m // s.bm) * -(-g.n // s.bn)
    event("not persistent" if not s.persistent else "persistent, CTAs loop" if tiles > (s.sms or 132)
          else "persistent, one tile each")
    harness.check(g, s, ARCH, seed=g.m * g.n + g.k)


# -- ptxas: setmaxnreg honoured, no spills ------------------------------------------------------------
@pytest.mark.parametrize("block, consumers, stages", [((128, 128, 64), 1, 4), ((128, 128, 64), 2, 4),
                                                      ((128, 256, 64), 2, 3)])
def test_ptxas_honours_setmaxnreg_without_spills(block, consumers, stages, monkeypatch):
    """Whole-program ptxas with the kernel's `.maxnreg` cap: no C7508 (no cap), C7504 (relocatable
    compilation, which nvJitLink always does) or C7515 (serialised wgmma), and no spills; the
    reported register count is the cap, the sign that setmaxnreg was kept."""
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, ws(block, stages, consumers), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
    log = r.log.lower()
    assert not any(code in log for code in ("c7508", "c7504", "c7515", "c7509", "warning")), r.log
    assert r.resources.registers == (248 if consumers == 1 else 168), r.resources


@pytest.mark.parametrize("assembler", ["ptxas", "nvjitlink"])
@pytest.mark.parametrize("block, stages", [((128, 128, 64), 4), ((128, 256, 64), 3)])
def test_consumer_loop_is_at_most_40_sass_instructions_per_k_tile(block, stages, assembler, monkeypatch):
    """Issues 13 and 21's static target, with whole-program ptxas (setmaxnreg kept) and with
    nvJitLink's relocatable build, and cuobjdump: the loop issuing the HGMMA (bench/sass_hopper.py
    finds it) is one 64-wide k-tile per pass. Without the warp-uniform warpgroup index (shfl) each
    pass moved the A descriptors with R2UR (53, 55); with add.s64 on every descriptor ptxas 13.5
    and nvJitLink 13.5 took 51 (bench/results/*-sass-assemblers-*)."""
    import sys
    from pathlib import Path

    from ptxgen.runtime import assemble as asm

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from sass import cuobjdump, sass_text
    from sass_hopper import analyse_sass

    tool = cuobjdump()
    if tool is None or (asm._ptxas_path() is None if assembler == "ptxas"
                        else not isinstance(asm._nvjitlink_probe(), tuple)):
        pytest.skip(f"needs {assembler} and cuobjdump")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", assembler)
    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=block, instruction="wgmma", stages=stages), arch=ARCH)
    h = next(x for x in analyse_sass(sass_text(k.cubin, tool)) if x.function == k.entry)
    assert h.warp_specialised and h.consumer is not None
    assert h.consumer.classes["hgmma"] == 4 and h.consumer.classes["bar"] == 0
    assert h.consumer.total <= 40, h.consumer.total
    if assembler == "ptxas":
        assert h.registers_per_role == "producer 40, consumer 232"


def test_nvjitlink_drops_setmaxnreg_as_the_readme_says(monkeypatch):
    """nvJitLink compiles PTX as relocatable code, where ptxas ignores setmaxnreg (C7504); the
    kernel still assembles, without spills, under its .maxnreg cap. If a later nvJitLink keeps it,
    this fails: then the README's advice (PTXGEN_ASSEMBLER=ptxas) can go."""
    from ptxgen.runtime import assemble as asm

    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "nvjitlink")
    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(128, 256, 64), instruction="wgmma", stages=3), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert "C7504" in r.log and r.resources.spill_store_bytes == 0 and r.resources.registers <= 168


def test_role_split_is_warp_uniform_so_the_relocatable_build_keeps_uniform_descriptors(monkeypatch):
    """The role branch tests the shfl-broadcast warpgroup index: nvJitLink's relocatable build
    (no setmaxnreg, so no `.aligned` convergence point) then keeps the ring state and descriptors
    in uniform registers. Branching on tid >> 7 instead moved each descriptor with R2UR (16 per
    k-tile at 128x128x64 with two consumers) and took the loop from 51 to 57 SASS."""
    import sys
    from collections import Counter
    from pathlib import Path

    from ptxgen.runtime import assemble as asm

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from sass import cuobjdump, sass_text
    from sass_hopper import analyse_sass

    tool = cuobjdump()
    if not isinstance(asm._nvjitlink_probe(), tuple) or tool is None:
        pytest.skip("needs nvJitLink and cuobjdump")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "nvjitlink")
    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64), instruction="wgmma", stages=4, consumers=2), arch=ARCH)
    assert re.search(r"shfl\.sync\.idx\.b32 (%r\d+), %r\d+, 0, 31, -1;.*\n(?:.*\n)*?\s*setp\.lt\.u32 %p\d+, \1, 2;",
                     k.ptx)
    h = next(x for x in analyse_sass(sass_text(k.cubin, tool)) if x.function == k.entry)
    assert h.consumer is not None and h.consumer.classes["hgmma"] == 4
    assert Counter(i.family for i in h.consumer.hot)["R2UR"] == 0
