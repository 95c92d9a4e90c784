"""Batched GEMMs in the warp-specialised persistent sm_90a kernel (targets/sm90/persistent.py): the walk
covers batch x tiles (the batch outermost, the raster within a batch), the producer's TMA copies name
the tile's batch as their third coordinate, the consumers move C by batch_stride_c. Proven on the
simulator against float64 numpy per batch with a poisoned C, over a hypothesis space with small grids
(so CTAs cross batch boundaries), with and without clusters; a planted bug (the producer's batch
coordinate dropped) must be caught; ptxas assembles the kernel without spills."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.targets.sm90 import persistent as sm90_persistent
from ptxgen.check import tolerance
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.ir import Imm
from ptxgen.targets.sm90.plan import WGMMA_N
from ptxgen.schedule.verify import verify
from ptxgen.simulate import cta_batch_tiles
from tests import harness

ARCH = "sm_90a"


def ws_batch(block, stages=2, consumers=1, sms=2, **kw) -> Schedule:
    """The default kernel (warp-specialised, persistent) on a small grid: CTAs walk several tiles."""
    return Schedule(block=block, instruction="wgmma", stages=stages, consumers=consumers, sms=sms, **kw)


def test_the_walk_covers_every_batch_tile_once_and_ctas_cross_batches():
    g = Gemm(130, 72, 64, batch=3, a_layout="row", b_layout="col")    # 3 x 2 tiles per batch
    k = ptxgen.compile(g, ws_batch((64, 64, 64), sms=4), arch=ARCH)
    assert k.grid == (4, 1, 1) and k.schedule.warp_specialized and k.schedule.persistent
    walked = [t for x in range(4) for t in cta_batch_tiles(k, (x, 0, 0))]
    assert sorted(walked) == [(b, tm, tn) for b in range(3) for tm in range(3) for tn in range(2)]
    assert any(len({b for b, _, _ in cta_batch_tiles(k, (x, 0, 0))}) > 1 for x in range(4))
    assert "cp.async.bulk.tensor.3d" in k.ptx and "cp.async.bulk.tensor.2d" not in k.ptx
    assert ".param .u64 batch_stride_c" in k.ptx and "%ctaid.z" not in k.ptx   # the walk, not the grid, has the batch
    grid = ptxgen.compile(g, ws_batch((64, 64, 64), sms=None), arch=ARCH).launch_grid(132)
    assert grid == (18, 1, 1)   # min(batch x tiles, SMs)


@pytest.mark.parametrize("g, s", [
    (Gemm(130, 72, 200, batch=4, a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0, bias="col")),
     ws_batch((128, 64, 64), 3, consumers=2, sms=3)),
    (Gemm(72, 104, 40, batch=2, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row",
          epilogue=Epilogue(alpha=0.5, bias="row")), ws_batch((64, 64, 32), 2, sms=2, raster="grouped", group_m=2)),
    (Gemm(130, 72, 64, batch=3, a_layout="row", b_layout="col"), ws_batch((64, 64, 64), cluster=(2, 1), sms=2)),
    (Gemm(64, 136, 72, batch=2, a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0)),
     ws_batch((64, 64, 64), cluster=(1, 2), sms=4)),
    (Gemm(136, 72, 104, batch=3, a_layout="col", b_layout="col", epilogue=Epilogue(beta=1.0, bias="row")),
     Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=True, persistent=False)),
], ids=["4-batches-2wg-beta-bias", "mn-major-bf16-grouped", "cluster-2x1", "cluster-1x2-beta", "ws-one-cta-per-tile"])
def test_batched_ws_gemms_match_numpy(g, s):
    harness.check(g, s, ARCH, seed=5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batched_ws_schedules_match_numpy(data):
    batch = data.draw(st.integers(2, 4), label="batch")
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "f16", "bf16")), label="out_dtype")
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    m, n = (data.draw(st.integers(1, 160), label=x) for x in ("M", "N"))
    k = data.draw(st.integers(1, 20), label="K/8") * 8                 # 16-byte aligned rows (TMA)
    if a_layout == "col":
        m = -(-m // 8) * 8
    if b_layout == "row":
        n = -(-n // 8) * 8
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, batch=batch, epilogue=epi)
    bm = data.draw(st.sampled_from((64, 128)), label="BM")
    consumers = data.draw(st.sampled_from((1, 2) if bm == 128 else (1,)), label="consumers")
    bn = data.draw(st.sampled_from([x for x in (16, 32, 64) if x in WGMMA_N[dtype]]), label="BN")
    s = ws_batch((bm, bn, data.draw(st.sampled_from((32, 64)), label="BK")),
                 data.draw(st.integers(1, 3), label="stages"), consumers,
                 sms=data.draw(st.sampled_from((1, 2, 3)), label="sms"),
                 cluster=data.draw(st.sampled_from(((1, 1), (1, 1), (2, 1), (1, 2))), label="cluster"),
                 raster=data.draw(st.sampled_from(("row", "grouped")), label="raster"), group_m=2)
    try:
        verify(g, s, ARCH)
    except ScheduleError as e:
        assert not isinstance(e, LoweringNotBuilt), e   # the drawn space is built
        event("rejected by the verifier")
        return
    kern = ptxgen.compile(g, s, arch=ARCH)
    cm, cn = s.cluster
    walked = -(-g.m // s.bm // cm) * cm * -(-g.n // s.bn // cn) * cn * batch   # whole clusters
    event("CTAs cross batches" if any(len({b for b, _, _ in cta_batch_tiles(kern, (x, 0, 0))}) > 1
                                      for x in range(kern.grid[0])) else "each CTA within one batch")
    assert kern.grid[1:] == (1, 1) and kern.grid[0] <= walked
    harness.check(kern, seed=m + n + k)


def test_producer_dropping_the_batch_coordinate_is_caught(monkeypatch):
    """Planted bug: the producer's copies all read batch 0 (its coordinate a zero register), while the
    consumers still store to the tile's batch: batches 1.. get batch 0's product."""
    g = Gemm(130, 72, 64, batch=3, a_layout="row", b_layout="col")
    s = ws_batch((64, 64, 64), sms=2)
    harness.check(g, s, ARCH, seed=1)
    real = sm90_persistent.TileWalk.begin

    def producer_batch_zero(self):
        ops, step = real(self)
        if self.role == "producer":
            ops = replace(ops, batch=tuple(self.ctx.u32("mov.u32", Imm("0")) for _ in ops.batch))
        return ops, step

    monkeypatch.setattr(sm90_persistent.TileWalk, "begin", producer_batch_zero)
    bad = ptxgen.compile(g, s, arch=ARCH)
    assert not harness.run(bad, seed=1).ok


def test_split_k_stays_refused_in_the_ws_kernel_with_the_fix():
    g = Gemm(128, 128, 1024, batch=2, a_layout="row", b_layout="col")
    with pytest.raises(LoweringNotBuilt, match="split-K in the warp-specialised kernel.*warp_specialized=False"):
        ptxgen.compile(g, ws_batch((64, 64, 64), split_k=2, warp_specialized=True), arch=ARCH)


def test_ptxas_assembles_the_batched_ws_kernel_without_spills(monkeypatch):
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    g = Gemm(4096, 4096, 4096, batch=8, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col",
             epilogue=Epilogue(beta=1.0, bias="col"))
    for s in (Schedule(block=(128, 128, 64), instruction="wgmma", stages=4, consumers=2),
              Schedule(block=(128, 256, 64), instruction="wgmma", stages=3, consumers=2, cluster=(2, 1))):
        k = ptxgen.compile(g, s, arch=ARCH)
        r = asm.assemble(k.ptx, ARCH, k.entry)
        assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
        assert "c7508" not in r.log.lower() and "c7515" not in r.log.lower(), r.log
        assert k.resources.spill_bytes == 0, k.resources


def test_sampled_ctas_of_a_batched_persistent_grid_exist():
    """The 1-D persistent grid has no z dimension: the sampled CTAs are its own (z = 0), each walking
    every batch, and the mask of what they computed spans several batches."""
    from ptxgen.simulate import covered, sample_ctas

    g = Gemm(2048, 2048, 64, batch=4, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, ws_batch((128, 128, 64), 3, consumers=2, sms=None), arch=ARCH)
    ctas = sample_ctas(k)
    assert ctas is not None and all(z == 0 and 0 <= x < k.grid[0] for x, _, z in ctas), ctas
    mask = covered(k, ctas)
    assert mask.shape == (4, 2048, 2048) and all(mask[b].any() for b in range(4))
