"""The sm_100a tcgen05 kernel (ptxgen/targets/sm100/kernel.py): a TMA warp fills a full/empty ring,
the MMA warp's lane 0 issues tcgen05.mma into double-buffered TMEM accumulators and releases stages
with tcgen05.commit, four epilogue warps read the accumulators with tcgen05.ld. Proven on the
simulator against float64 numpy (never-zero inputs, poisoned C) over edges in M, N and K, both
operand majors, persistent walks of several tiles per CTA; planted bugs (the accumulator read
before its commit was waited for, a stage refilled before the MMAs reading it committed, TMEM freed
before the epilogue read it) must be reported by the simulator."""
from __future__ import annotations

import re

import pytest

import ptxgen
from ptxgen import Gemm, Schedule, sim

from tests import harness
from tests.targets.sm100.common import GELU, tc, tn

ARCH = "sm_100a"


@pytest.mark.parametrize("g, s", [
    (tn(130, 70, 40), tc((128, 64, 32))),                                         # edges in M, N, K; 2 tiles per CTA
    (tn(200, 300, 104, "bf16", "bf16"), tc((128, 128, 64), 3)),                   # 6 tiles over 2 CTAs, bf16 out
    (tn(70, 40, 72, "f16", "f16"), tc((64, 32, 32), sms=1)),                      # M = 64 (layout F), one CTA
    (Gemm(136, 72, 40, a_layout="col", b_layout="row", out_dtype="bf16"), tc((128, 64, 64), sms=1)),  # MN-major
    (Gemm(72, 136, 64, dtype="bf16", a_layout="row", b_layout="row"), tc((64, 64, 32), 3, sms=1)),   # B MN-major
    (tn(66, 40, 36, "tf32"), tc((64, 48, 32), sms=1)),                             # tf32, N step 8 at M = 64
    (tn(140, 72, 40), tc((128, 16, 32), 4, sms=3, raster="grouped", group_m=2)),   # BN 16: chunks of 16 columns
], ids=["edges", "bf16-s3", "m64", "tt-mn-major", "b-mn-major", "tf32", "bn16-grouped"])
def test_tcgen05_gemm_matches_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.m + g.n + g.k)


@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_fused_epilogue_matches_numpy(out):
    harness.check(tn(130, 40, 48, "f16", out, epilogue=GELU), tc((128, 32, 32)), ARCH, seed=3)


def test_default_schedule_compiles_and_assembles_without_spills(monkeypatch):
    """Only block and instruction given: every other field has its default; ptxas -arch=sm_100a
    assembles the kernel with no spills."""
    from ptxgen.runtime import assemble as asm

    s = Schedule(block=(128, 256, 64), instruction="tcgen05")
    assert s.cta_group == 1 and s.warps == (4, 1) and s.threads == 256
    g = Gemm(4096, 4096, 4096, dtype="bf16", out_dtype="bf16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, s, arch=ARCH)
    assert ".target sm_100a" in k.ptx and "tcgen05.mma.cta_group::1.kind::f16" in k.ptx
    assert k.grid == (148, 1, 1) and k.block == (256, 1, 1)
    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources


@pytest.mark.parametrize("g, block", [
    (Gemm(4096, 4096, 4096, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row", epilogue=GELU),
     (128, 256, 64)),
    (tn(4096, 4096, 4096, "tf32"), (128, 128, 32)),
    (tn(4096, 4096, 4096, "f16", "f16"), (64, 256, 64)),
], ids=["mn-major-gelu", "tf32", "m64"])
def test_ptxas_assembles_other_kernels_without_spills(g, block, monkeypatch):
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    k = ptxgen.compile(g, tc(block, 4, sms=None), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources


# -- planted bugs ------------------------------------------------------------------------------------
PLANT_G, PLANT_S = tn(130, 70, 72), tc((128, 64, 32), 2, sms=1)


def _plant_kernel():
    return ptxgen.compile(PLANT_G, PLANT_S, arch=ARCH)


def _skip_wait(ptx: str, comment: str) -> str:
    """The try_wait carrying `comment` replaced by a predicate that is always true: the wait passes
    at once."""
    pattern = re.compile(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), [^;]*; // " + re.escape(comment))
    bad, n = pattern.subn(r"setp.eq.u32 \1, %r0, %r0; // planted: no wait", ptx)
    assert n >= 1, comment
    return bad


def _run(ptx: str):
    return harness.run(_plant_kernel(), ptx=ptx)


def test_the_unplanted_kernel_is_right():
    assert _run(_plant_kernel().ptx).ok


def test_accumulator_read_before_its_commit_is_caught():
    with pytest.raises(sim.HazardError) as e:
        _run(_skip_wait(_plant_kernel().ptx, "the tile's MMAs completed"))
    assert e.value.kind == "async-pending" and "tcgen05.ld" in e.value.detail


def test_stage_refilled_before_its_mmas_committed_is_caught():
    """The stage's tcgen05.commit moved before the k-tile's MMAs: it covers only the earlier ones,
    so the producer refills the stage while the MMAs reading it are in flight."""
    lines = _plant_kernel().ptx.split("\n")
    j = next(i for i, line in enumerate(lines) if "the stage is free once these MMAs completed" in line)
    release = lines[j - 2:j + 1]   # the barrier's address (shl, add) and the commit
    assert release[0].split()[0] == "shl.b32" and release[1].split()[0] == "add.u32", release
    wait = max(i for i in range(j) if lines[i].startswith("$L_wait_full"))
    fence = next(i for i in range(wait, j) if "tcgen05.fence::after_thread_sync" in lines[i])
    planted = lines[:fence + 1] + release + lines[fence + 1:j - 2] + lines[j + 1:]
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(planted))
    # the simulator names the in-flight tensor-core read with its wgmma wording (one counter serves both)
    assert e.value.kind == "async-pending" and "still in flight reads" in e.value.detail


def test_accumulator_buffer_reused_before_the_epilogue_released_it_is_caught():
    """The MMA warp skips its acc_empty wait: with four tiles per CTA and a 4-stage ring it laps the
    epilogue, whose acc_full waits then miss a phase; the simulator reports the wait that can never
    complete instead of hanging or passing."""
    g, s = tn(512, 64, 32), tc((128, 64, 32), 4, sms=1)
    k = ptxgen.compile(g, s, arch=ARCH)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=_skip_wait(k.ptx, "the epilogue has read this buffer's previous tile"))
    assert e.value.kind in ("deadlock", "async-pending"), e.value


def test_the_kernel_fences_every_tcgen05_operation_after_its_waits(monkeypatch):
    """PTXGEN_SIM_TCGEN05_FENCES=strict: each mbarrier wait before an MMA or a TMEM load is
    followed by tcgen05.fence::after_thread_sync (tcgen05.md §12j)."""
    monkeypatch.setenv("PTXGEN_SIM_TCGEN05_FENCES", "strict")
    harness.check(PLANT_G, PLANT_S, ARCH, seed=5)
    k = _plant_kernel()
    unfenced = "\n".join(line for line in k.ptx.split("\n") if "tcgen05.fence::after_thread_sync" not in line)
    with pytest.raises(sim.HazardError) as e:
        harness.run(k, ptx=unfenced)
    assert e.value.kind == "missing-fence"


def test_tmem_freed_before_the_epilogue_read_it_is_caught():
    """The MMA warp skips the teardown barrier: it frees TMEM while the epilogue still reads it."""
    ptx = _plant_kernel().ptx
    lines = ptx.split("\n")
    teardown = [i for i, line in enumerate(lines) if "bar.sync 1, 160" in line]
    assert len(teardown) == 2
    mma_side = max(teardown, key=lambda i: "dealloc" in "".join(lines[i:i + 3]))
    del lines[mma_side]
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(lines))
    assert e.value.kind == "async-pending" and "tcgen05.dealloc" in e.value.detail


# -- a small property test over the built schedule space ----------------------------------------------
from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

from ptxgen.errors import ScheduleError  # noqa: E402
from ptxgen.schedule.verify import verify  # noqa: E402


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_tcgen05_schedules_match_numpy(data):
    """Shapes with edges (M, N, K not multiples of the block; rows kept 16-byte aligned for TMA),
    either major, f16/bf16/tf32 inputs, 1 to 4 stages, 1 to 3 persistent CTAs (so several tiles
    each), row or grouped raster."""
    dtype = data.draw(st.sampled_from(["f16", "bf16", "tf32"]), label="dtype")
    esize = 4 if dtype == "tf32" else 2
    step = 16 // esize
    m, n, k = (step * data.draw(st.integers(2, 24), label=d) for d in "mnk")
    majors = ("row", "col") if dtype == "tf32" else tuple(data.draw(st.sampled_from(["row", "col"]), label=x)
                                                          for x in ("A", "B"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
             a_layout=majors[0], b_layout=majors[1])
    bm = data.draw(st.sampled_from([64, 128]), label="BM")
    bn = data.draw(st.sampled_from([16, 32, 64, 128] + ([40, 72] if bm == 64 else [48])), label="BN")
    bk = data.draw(st.sampled_from([32, 64]), label="BK") // (esize // 2)
    s = tc((bm, bn, bk), stages=data.draw(st.integers(1, 4), label="stages"),
           sms=data.draw(st.integers(1, 3), label="sms"),
           raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"), group_m=2)
    try:
        verify(g, s, ARCH)
    except ScheduleError:
        assume(False)
    harness.check(g, s, ARCH, seed=m * n + k)
