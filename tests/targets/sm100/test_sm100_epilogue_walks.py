"""The sm_100a kernel's TMA-store epilogue (targets/sm100/epilogue_tma.py), batched GEMMs and its
tile schedulers (targets/sm100/tile_scheduler.py: the static persistent stride, and cluster
launch control). Proven on the simulator against float64 numpy (never-zero inputs, poisoned C)
with persistent walks of several tiles per CTA, edges in M, N and K, every fused epilogue, 2-3
batches; planted bugs the simulator must catch: the accumulator read before its commit was waited
for, TMEM freed while the epilogue may still read it, a staging buffer rewritten before the TMA
store reading it was waited for, and a cancel response read before it landed."""
from __future__ import annotations

import re

import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, sim
from ptxgen.sim import ops_clc

from tests import harness
from tests.targets.sm100.common import tc, tn

ARCH = "sm_100a"


def clc(block, stages=2, **kw) -> Schedule:
    return Schedule(block=block, instruction="tcgen05", stages=stages, tile_scheduler="clc", **kw)


def tma_store(k: ptxgen.Kernel) -> bool:
    return "cp.async.bulk.tensor" in k.ptx and "global.shared::cta.tile.bulk_group" in k.ptx


# -- the TMA-store epilogue: every fused epilogue, edges, output dtypes ----------------------------------
EPILOGUES = {
    "plain": Epilogue(),
    "alpha": Epilogue(alpha=-1.5),
    "beta-c": Epilogue(alpha=0.5, beta=-2.0),
    "bias-col-relu": Epilogue(bias="col", activation="relu"),
    "bias-row-bf16": Epilogue(bias="row", activation="silu"),
    "scale-col-gelu": Epilogue(alpha=2.0, scale="col", activation="gelu"),
    "all-row": Epilogue(alpha=0.75, beta=0.5, bias="row", scale="row", activation="gelu"),
    "all-col": Epilogue(alpha=0.5, beta=1.0, bias="col", scale="col", activation="silu"),
}


@pytest.mark.parametrize("name", list(EPILOGUES))
@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_tma_store_epilogues_match_numpy(name, out):
    """136 x 72 x 40 in 64 x 32 tiles over 2 CTAs: edges in M, N and K, 3 tiles per CTA."""
    bias_dtype = "bf16" if name.endswith("bf16") and out == "bf16" else "f32"   # a f32 output takes f32 bias
    g = tn(136, 72, 40, "bf16" if out == "bf16" else "f16", out, epilogue=EPILOGUES[name], bias_dtype=bias_dtype)
    k = ptxgen.compile(g, tc((64, 32, 32)), arch=ARCH)
    assert tma_store(k)
    harness.check(k, seed=len(name))


@pytest.mark.parametrize("g, s", [
    (tn(130, 70 + 2, 40, out="f16"), tc((128, 64, 32), sms=1)),                   # M = 128, 2 chunks of 64 f16
    (tn(200, 100, 104, "bf16", "f32"), tc((128, 32, 64), 3, sms=2)),              # f32: 1 chunk per tile (odd)
    (tn(72, 200, 48, "f16", "bf16"), tc((64, 96, 16), 4, sms=2)),                 # 192-B rows: 64-B swizzle, 3 chunks
    (tn(80, 96, 32, "f16", "bf16"), tc((64, 40, 32), sms=1)),                     # 80-B rows: unswizzled boxes
    (tn(140, 72, 40, "tf32", "f32"), tc((128, 16, 32), 4, sms=3, raster="grouped", group_m=2)),
    (Gemm(136, 72, 40, a_layout="col", b_layout="row", out_dtype="bf16"), tc((128, 64, 64), sms=1)),
], ids=["m128-f16", "f32-odd-chunks", "swizzle64", "unswizzled", "tf32-grouped", "mn-major"])
def test_tma_store_shapes_match_numpy(g, s):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert tma_store(k)
    harness.check(k, seed=g.m + g.n)


def test_direct_stores_where_tma_cannot_write_c():
    """ldc of 70 f32 (280 B) is no multiple of 16 B: direct stores, with the whole epilogue."""
    g = tn(130, 70, 40, epilogue=EPILOGUES["all-col"])
    k = ptxgen.compile(g, tc((128, 32, 32)), arch=ARCH)
    assert not tma_store(k)
    harness.check(k, seed=7)


# -- batches --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch, via_smem, sched", [
    (2, None, "static"), (3, False, "static"), (3, None, "clc"), (2, False, "clc"),
], ids=["tma-static", "direct-static", "tma-clc", "direct-clc"])
def test_batched_gemms_match_numpy(batch, via_smem, sched):
    """The walk covers batch x tiles, the batch outermost: a CTA crosses from one matrix into the
    next (3-D tensor maps for A, B and the TMA store's C)."""
    g = tn(72, 40, 40, "bf16", "bf16", batch=batch, epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col"))
    s = (tc((64, 32, 32), sms=2, epilogue_via_smem=via_smem) if sched == "static"
         else clc((64, 32, 32), epilogue_via_smem=via_smem))
    k = ptxgen.compile(g, s, arch=ARCH)
    assert tma_store(k) == (via_smem is None)
    assert all(len(m.box) == 3 for m in k.tensor_maps)
    harness.check(k, seed=batch)


# -- cluster launch control -------------------------------------------------------------------------
@pytest.fixture
def cancels(monkeypatch):
    """The cancels the simulator granted during the test (a spy on its launch queue)."""
    granted: list[tuple[int, int, int]] = []
    original = ops_clc.LaunchQueue.cancel_next

    def spy(self):
        taken = original(self)
        if taken is not None:
            granted.append(taken)
        return taken
    monkeypatch.setattr(ops_clc.LaunchQueue, "cancel_next", spy)
    return granted


@pytest.mark.parametrize("g, s", [
    (tn(200, 100, 72), clc((64, 32, 32))),                                          # 16 tiles, edges
    (tn(136, 72, 40, "bf16", "bf16", epilogue=EPILOGUES["all-row"]), clc((128, 32, 32), 3, raster="grouped",
                                                                          group_m=2)),
    (tn(130, 70, 48, epilogue=EPILOGUES["beta-c"]), clc((64, 64, 16), 4)),           # direct stores
], ids=["tma", "grouped-epilogue", "direct"])
def test_clc_walks_match_numpy(g, s, cancels):
    """One CTA per tile; the CTAs running take the tiles of the ones not launched yet. The
    simulator runs this kernel's CTAs one at a time, so CTA 0 cancels every other CTA and walks
    all the tiles: the results prove each cancelled CTA's tile was computed, in the raster."""
    k = ptxgen.compile(g, s, arch=ARCH)
    tiles = -(-g.m // s.bm) * -(-g.n // s.bn)
    assert k.grid == (tiles, 1, 1) and "clusterlaunchcontrol.try_cancel" in k.ptx
    harness.check(k, seed=tiles)
    assert len(cancels) == tiles - 1 and sorted(c[0] for c in cancels) == list(range(1, tiles))


def test_clc_on_a_sample_of_ctas(cancels):
    """Sampled CTAs 0 and 5 of 8: CTA 0 cancels CTA 5 and computes its tile; the tiles of the
    others stay unwritten (the harness fails on any write outside tiles 0 and 5)."""
    k = ptxgen.compile(tn(128, 128, 32), clc((64, 32, 32)), arch=ARCH)
    assert k.grid == (8, 1, 1)
    harness.check(k, seed=1, ctas=[(0, 0, 0), (5, 0, 0)])
    assert cancels == [(5, 0, 0)]


# -- planted bugs -----------------------------------------------------------------------------------
def _skip_wait(ptx: str, comment: str) -> str:
    """The try_wait carrying `comment` replaced by a predicate that is always true."""
    pattern = re.compile(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), [^;]*; // " + re.escape(comment))
    bad, n = pattern.subn(r"setp.eq.u32 \1, %r0, %r0; // planted: no wait", ptx)
    assert n >= 1, comment
    return bad


PLANT = [(tn(130, 72, 72, out="bf16"), tc((128, 64, 32), 2, sms=1)),
         (tn(130, 72, 72, out="bf16"), clc((128, 64, 32), 2))]


@pytest.mark.parametrize("g, s", PLANT, ids=["static", "clc"])
def test_the_unplanted_kernels_are_right(g, s):
    k = ptxgen.compile(g, s, arch=ARCH)
    assert tma_store(k)
    harness.check(k, seed=3)


@pytest.mark.parametrize("g, s", PLANT, ids=["static", "clc"])
def test_accumulator_read_before_its_commit_wait_is_caught(g, s):
    k = ptxgen.compile(g, s, arch=ARCH)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=_skip_wait(k.ptx, "the tile's MMAs completed"))
    assert e.value.kind == "async-pending" and "tcgen05.ld" in e.value.detail


@pytest.mark.parametrize("g, s", PLANT, ids=["static", "clc"])
def test_tmem_freed_while_the_epilogue_may_read_it_is_caught(g, s):
    """The MMA warp skips the teardown barrier: it frees TMEM while the epilogue still reads it."""
    k = ptxgen.compile(g, s, arch=ARCH)
    lines = k.ptx.split("\n")
    teardown = [i for i, line in enumerate(lines) if "bar.sync 1, 160" in line]
    assert len(teardown) == 2
    mma_side = max(teardown, key=lambda i: "dealloc" in "".join(lines[i:i + 3]))
    del lines[mma_side]
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx="\n".join(lines))
    assert e.value.kind == "async-pending" and "tcgen05.dealloc" in e.value.detail


@pytest.mark.parametrize("g, s", PLANT, ids=["static", "clc"])
def test_staging_rewritten_before_the_store_read_it_is_caught(g, s):
    """Without lane 0's wait_group.read the next chunk's generic writes hit a buffer an earlier
    TMA store may still be reading."""
    k = ptxgen.compile(g, s, arch=ARCH)
    waits = [line for line in k.ptx.split("\n") if "is done reading it" in line]
    assert waits and all("cp.async.bulk.wait_group.read" in w for w in waits)
    bad = "\n".join(line for line in k.ptx.split("\n") if "is done reading it" not in line)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=bad)
    # the store's read of the buffer is in flight when a thread writes it again
    assert e.value.kind == "async-pending" and "st.shared writes" in e.value.detail, e.value
    assert "of my row" in str(e.value), e.value   # a staging write


def test_cancel_response_read_before_it_landed_is_caught():
    g, s = PLANT[1]
    k = ptxgen.compile(g, s, arch=ARCH)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=_skip_wait(k.ptx, "the cancel's response landed"))
    assert e.value.kind == "async-pending" and "ld.shared reads" in e.value.detail, e.value
    assert "the 16-byte response" in str(e.value), e.value


# -- through the stand-in driver's B200 model ----------------------------------------------------------
DRIVER_SCRIPT = """
import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from tests import harness

def on_driver(k):
    return lambda a, b, c=None, bias=None, scale=None, ctas=None, workers=1: k(a, b, c=c, bias=bias, scale=scale)

for batch, sched in ((2, "clc"), (3, "static")):
    g = Gemm(72, 40, 40, dtype="bf16", out_dtype="bf16", a_layout="row", b_layout="col", batch=batch,
             epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col", activation="relu"))
    s = Schedule(block=(64, 32, 32), instruction="tcgen05", stages=2, tile_scheduler=sched)
    k = ptxgen.compile(g, s, arch="sm_100a")
    harness.check(k, seed=batch, simulate=on_driver(k))
    print("PASS", batch, sched, [m.param for m in k.tensor_maps])
"""


def test_batched_tma_store_and_clc_kernels_run_through_the_standin_driver(tmp_path):
    """Assembled for sm_100a, loaded as cubins, A, B and C's 3-D tensor maps encoded by the
    stand-in's cuTensorMapEncodeTiled, launched (one CTA per tile for CLC) and checked."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from ptxgen.runtime.simdriver import compiler_unavailable_reason

    if compiler_unavailable_reason():
        pytest.skip(compiler_unavailable_reason())
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_SIM_DEVICE": "b200", "PTXGEN_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", DRIVER_SCRIPT], capture_output=True, text=True, timeout=600, env=env,
                          cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split("\n")[:2] == ["PASS 2 clc ['tmapA', 'tmapB', 'tmapC']",
                                           "PASS 3 static ['tmapA', 'tmapB', 'tmapC']"], proc.stdout


@pytest.mark.parametrize("g, s", [
    (Gemm(4096, 4096, 4096, dtype="bf16", out_dtype="bf16", a_layout="row", b_layout="col",
          epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col", activation="gelu")),
     Schedule(block=(128, 256, 64), instruction="tcgen05", stages=3)),
    (Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col", batch=3,
          epilogue=EPILOGUES["all-row"]),
     Schedule(block=(128, 256, 64), instruction="tcgen05", stages=3, tile_scheduler="clc")),
    (Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="col", b_layout="row"),
     Schedule(block=(64, 256, 64), instruction="tcgen05", stages=4, raster="grouped", tile_scheduler="clc")),
], ids=["tma-fused", "clc-batched-fused", "clc-m64-grouped"])
def test_ptxas_assembles_the_new_kernels_without_spills(g, s, monkeypatch):
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    k = ptxgen.compile(g, s, arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources


def test_c_read_before_its_tma_load_landed_is_caught():
    """beta != 0: C's boxes come in by TMA; skipping the C-load wait reads them in flight."""
    g = tn(130, 72, 72, out="bf16", epilogue=Epilogue(beta=1.0))
    k = ptxgen.compile(g, tc((128, 64, 32), 2, sms=1), arch=ARCH)
    assert k.ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global") > 2   # A, B and C loads
    harness.check(k, seed=4)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=_skip_wait(k.ptx, "C box 0 landed"))
    assert e.value.kind == "async-pending" and "ld.shared reads" in e.value.detail, e.value
    assert "C's values (beta)" in str(e.value), e.value


def test_info_says_how_tiles_are_taken_and_c_is_stored():
    g = tn(1024, 1024, 512, "bf16", "bf16", batch=2, epilogue=Epilogue(beta=1.0, bias="col"))
    k = ptxgen.compile(g, clc((128, 128, 64), 3, raster="grouped", group_m=4), arch=ARCH)
    info = "\n".join(k.backend.describe(k))
    assert "clusterlaunchcontrol.try_cancel" in info and "one CTA per tile" in info
    assert "tmapC: C box 1x32x64, 128B swizzle, row-major" in info
    assert "staged per warp in 32x64 128B-swizzled boxes, TMA stores" in info
    assert f"= {k.smem_bytes} B" in info and "staging and C buffers" in info


# -- a property test over epilogues, batches and tile schedulers -----------------------------------------
from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

from ptxgen.errors import ScheduleError  # noqa: E402
from ptxgen.schedule.verify import verify  # noqa: E402


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_epilogues_batches_and_schedulers_match_numpy(data):
    """Edges in M, N, K (rows kept 16-byte aligned for TMA), f16/bf16/tf32, 1-3 batches, every
    fused epilogue, TMA or direct stores, static walks over 1-3 CTAs or cluster launch control."""
    dtype = data.draw(st.sampled_from(["f16", "bf16", "tf32"]), label="dtype")
    esize = 4 if dtype == "tf32" else 2
    m, n, k = (8 * data.draw(st.integers(2, 20), label=d) for d in "mnk")
    out = data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out")
    epi = EPILOGUES[data.draw(st.sampled_from(list(EPILOGUES)), label="epilogue")]
    g = tn(m, n, k, dtype, out, batch=data.draw(st.integers(1, 3), label="batch"), epilogue=epi)
    bm = data.draw(st.sampled_from([64, 128]), label="BM")
    bn = data.draw(st.sampled_from([16, 32, 64] + ([40, 24] if bm == 64 else [48])), label="BN")
    bk = data.draw(st.sampled_from([32, 64]), label="BK") // (esize // 2)
    common = dict(stages=data.draw(st.integers(1, 3), label="stages"),
                  raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"), group_m=2,
                  epilogue_via_smem=data.draw(st.sampled_from([None, False]), label="via_smem"))
    if data.draw(st.booleans(), label="clc"):
        s = clc((bm, bn, bk), **common)
    else:
        s = tc((bm, bn, bk), sms=data.draw(st.integers(1, 3), label="sms"), **common)
    try:
        verify(g, s, ARCH)
    except ScheduleError:
        assume(False)
    harness.check(g, s, ARCH, seed=m * n + k)
