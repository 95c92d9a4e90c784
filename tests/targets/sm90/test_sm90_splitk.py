"""Split-K on sm_90a (targets/sm90/splitk.py): each split's CTA runs its k-range through the TMA/wgmma
main loop, stores an f32 partial tile, and the last split sums them in order and runs the epilogue
once. Proven on the simulator against float64 numpy with a poisoned C (beta and bias show an
epilogue applied more than once); a planted bug (a k-range overlapping its neighbour's) must be
caught; atomic split-K, not built, is refused with the field and the fix (Stream-K:
tests/targets/sm90/test_sm90_streamk.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_operands, random_epilogue_operands, random_scale, reference, tolerance
from ptxgen.targets.sm90.splitk import Sm90SplitK
from ptxgen.errors import LoweringNotBuilt
from ptxgen.schedule.verify import verify_rules
from tests import harness

ARCH = "sm_90a"


def split(block, split_k, stages=2, consumers=1, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, warp_specialized=False, persistent=False,
                    consumers=consumers, split_k=split_k, **kw)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_sm90_split_k_matches_numpy(data):
    split_k = data.draw(st.integers(2, 4), label="split_k")
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "f16", "bf16")), label="out_dtype")
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    bk = data.draw(st.sampled_from((32, 64)), label="BK")
    k_tiles = data.draw(st.integers(split_k, 3 * split_k), label="k-tiles")
    k = k_tiles * bk - 8 * data.draw(st.integers(0, bk // 8 - 1), label="K short of whole k-tiles /8")
    m, n = (data.draw(st.integers(1, 140), label=x) for x in ("M", "N"))
    if a_layout == "col":
        m = -(-m // 8) * 8
    if b_layout == "row":
        n = -(-n // 8) * 8
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0, -1.0)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"),
                       activation=data.draw(st.sampled_from((None, "relu")), label="act"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, epilogue=epi,
             batch=data.draw(st.sampled_from((1, 1, 2)), label="batch"))
    s = split((64, data.draw(st.sampled_from((32, 64)), label="BN"), bk), split_k,
              data.draw(st.integers(1, 3), label="stages"))
    try:
        verify_rules(g, s, ARCH)
    except ScheduleError:
        assume(False)  # e.g. the last split left without a k-tile: the verifier's to explain
    kern = ptxgen.compile(g, s, arch=ARCH)
    assert kern.grid[2] == g.batch * split_k and kern.workspace_elements > 0
    harness.check(kern, seed=split_k)


@pytest.mark.parametrize("g, s", [
    (Gemm(130, 72, 200, a_layout="row", b_layout="col", epilogue=Epilogue(beta=1.0, bias="col")),
     split((128, 64, 64), 2, consumers=2)),
    (Gemm(64, 64, 512, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row", batch=2,
          epilogue=Epilogue(alpha=0.5, beta=1.0, bias="row", scale="col")), split((64, 64, 64), 4, 3)),
], ids=["2wg-beta-bias", "mn-major-batched-4-splits"])
def test_the_epilogue_runs_once_on_the_sum(g, s):
    harness.check(g, s, ARCH, seed=4)


def test_the_counters_are_left_at_zero_for_the_next_launch():
    """Two launches on the same workspace and counters (sim.launch directly) give the same, right C,
    and each leaves every counter at zero."""
    from ptxgen import sim

    g = Gemm(64, 128, 192, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, split((64, 64, 64), 3), arch=ARCH)
    assert ".param .u64 workspace" in k.ptx and "atom.acq_rel.gpu.global.add.u32" in k.ptx
    a, b = random_operands(g, 1)
    maps = [sim.TensorMap(v, t.box, swizzle=t.swizzle) for v, t in zip((a, b.T), k.tensor_maps)]
    workspace = np.zeros(k.workspace_elements, np.float32)
    counters = np.zeros(k.counter_count, np.uint32)
    runs = []
    for _ in range(2):
        c = np.full((g.m, g.n), np.nan, np.float32)
        sim.launch(k.ptx, k.entry, grid=k.grid, block=k.block, args=[*maps, c, g.m, g.n, g.k, g.n, workspace, counters],
                   dynamic_smem=k.smem_bytes)
        assert not counters.any()
        _, result = harness.judge(g, c, harness.Operands(a, b))
        assert result.ok, str(result)
        runs.append(c.tobytes())
    assert runs[0] == runs[1]


def test_a_k_range_overlapping_its_neighbour_is_caught(monkeypatch):
    """Planted bug: every split runs one k-tile more, the first of the next split's (the last
    split's extra k-tile lies past K and loads as zeros), so those k-tiles are summed twice."""
    g = Gemm(64, 64, 256, a_layout="row", b_layout="col")
    s = split((64, 64, 64), 2)
    harness.check(g, s, ARCH, seed=2)
    real = Sm90SplitK.k_range

    def overlapping(self, kt, split_index):
        first, count = real(self, kt, split_index)
        return first, self.ctx.u32("add.u32", count, ptxgen.ir.Imm("1"))

    monkeypatch.setattr(Sm90SplitK, "k_range", overlapping)
    assert not harness.run(g, s, ARCH, seed=2).ok


@pytest.mark.parametrize("s, field, fix", [
    (split((64, 64, 64), 2, split_k_mode="atomic"), "schedule.split_k_mode", "split_k_mode='workspace'"),
], ids=["atomic"])
def test_what_is_not_built_is_refused(s, field, fix):
    g = Gemm(128, 128, 512, a_layout="row", b_layout="col")
    verify_rules(g, s, ARCH)  # legal: only the lowering is missing
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, s, arch=ARCH)
    assert e.value.field == field and fix in str(e.value), str(e.value)


@pytest.mark.parametrize("batch, split_k, block, consumers", [(4, 1, (128, 128, 64), 1), (1, 4, (128, 128, 64), 1),
                                                              (3, 2, (128, 256, 64), 2)])
def test_batched_and_split_k_kernels_assemble_without_spills_or_serialised_wgmma(batch, split_k, block, consumers):
    from ptxgen.runtime.assemble import assemble

    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="bf16", a_layout="row", b_layout="col", batch=batch,
             epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col"))
    k = ptxgen.compile(g, split(block, split_k, 3, consumers), arch=ARCH)
    r = assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
    log = r.log.lower()
    assert "warning" not in log and "c7515" not in log and "serializ" not in log, r.log


def test_cli_info_describes_batched_split_k(capsys):
    from ptxgen.cli.app import main

    assert main(["info", "--arch", ARCH, "--instruction", "wgmma", "--block", "64x64x64", "--no-warp-specialized",
                 "--no-persistent", "--shape", "200x136x192", "--split-k", "3", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "box 1x64x64" in out and "3-D: batch outermost" in out and "split-K 3" in out, out
    assert "8 B split-K flag" in out and "grid (3, 4, 6)" in out, out
