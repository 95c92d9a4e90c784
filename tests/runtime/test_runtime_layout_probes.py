"""The GPU layout probes (tests/gpu/layout_cases.py), checked without a GPU: their PTX must
assemble, the facts-sheet encodings must be bijections, and the simulator must produce what
docs/ptx_facts/ predicts. On a GPU session the same cases run on hardware too."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))

import layout_cases as L  # noqa: E402
import layout_facts as F  # noqa: E402
import planted_cases as P  # noqa: E402
import ptx_samples as S  # noqa: E402
from ptxgen.runtime.assemble import assemble  # noqa: E402

CASES = {c.name: c for c in L.all_cases()}


@pytest.mark.parametrize("key", sorted(L.MMA_SPECS))
def test_fragments_cover_each_element_once(key):
    spec = L.MMA_SPECS[key]
    for frag in (spec.a, spec.b, spec.c):
        assert frag.covers_once()
        bits = np.arange(frag.rows * frag.cols).reshape(frag.rows, frag.cols) % (1 << frag.bits)
        assert (frag.unpack(frag.pack(bits)) == bits).all()


def test_ldmatrix_expectation_matches_mma_a_fragment():
    # docs/ptx_facts/shared_memory.md §4: A 16x16 row-major, .x4 no-trans, lane l -> &A[l % 16][8 * (l // 16)] gives Ra0..Ra3
    a = np.arange(256, dtype=np.uint16).reshape(16, 16)
    tile = np.concatenate([a[:, :8], a[:, 8:]])  # tile rows 0-15: A[:, :8], rows 16-31: A[:, 8:]
    rows = np.array([(l % 16) + 16 * (l // 16) for l in range(32)])
    got = F.ldmatrix_expected(tile, rows, 4, trans=False)
    want = L.MMA_SPECS["m16n8k16_f32_f16"].a.pack(a.astype(np.int64))
    assert (got == want).all()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_probe_ptx_assembles(name, arch):
    case = CASES[name]
    assert assemble(case.ptx, arch, case.entry).resources.registers > 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_matches_facts(name):
    sim = pytest.importorskip("ptxgen.sim")
    if not hasattr(sim, "launch"):
        pytest.skip("ptxgen.sim.launch not available yet")
    case = CASES[name]
    for seed in (0, 1):
        args, ctx = L.run(case, sim.launch, seed)
        got, want = args[case.out], case.expected(ctx)
        ok = L.agree(case, ctx, got, want)
        assert ok.all(), (f"{name}: simulator disagrees with docs/ptx_facts/ at {np.argwhere(~ok)[:8].tolist()}"
                          f"\ngot:\n{got}\nwant:\n{want}")


def _sim():
    sim = pytest.importorskip("ptxgen.sim")
    if not hasattr(sim, "launch"):
        pytest.skip("ptxgen.sim.launch not available yet")
    return sim


@pytest.mark.parametrize("wait,barrier", [(True, True), (False, True), (True, False)])
def test_planted_probes_assemble_and_simulate(wait, barrier):
    sim = _sim()
    ptx = P.exchange_ptx(wait, barrier)
    assert assemble(ptx, "sm_90", "xchg").resources.registers > 0
    src = np.random.default_rng(0).integers(1, 2**31, P.THREADS * P.CHUNKS * 4).astype(np.uint32)
    out = np.zeros_like(src)
    if wait and barrier:
        sim.launch(ptx, "xchg", grid=(1, 1, 1), block=(P.THREADS, 1, 1), args=[src, out])
        assert (out == P.exchange_expected(src)).all()
    else:
        with pytest.raises(sim.HazardError):
            sim.launch(ptx, "xchg", grid=(1, 1, 1), block=(P.THREADS, 1, 1), args=[src, out])


def test_dynamic_smem_probe_assembles_and_simulates():
    sim = _sim()
    ptx = S.dyn_smem_touch()
    assert assemble(ptx, "sm_90", "touch").resources.shared_bytes == 0
    out = np.zeros(1, np.float32)
    sim.launch(ptx, "touch", grid=(1, 1, 1), block=(1, 1, 1), args=[out, 100 * 1024],
               dynamic_smem=100 * 1024)
    assert out[0] == np.float32(np.pi)
