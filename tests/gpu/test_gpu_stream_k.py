"""Stream-K on hardware: persistent grids of the device's SM count (or fewer), flags that the
kernel resets between launches, and results that do not depend on CTA timing."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import TOL, device_compile_arch, random_operands, record, reference, rel_fro, require_gpu, sim_or

require_gpu()

import ptxgen  # noqa: E402
from ptxgen.runtime import driver  # noqa: E402
from ptxgen.schedule.problem import numpy_dtype  # noqa: E402

ARCH = device_compile_arch()


def _run(g, s, seed: int = 0):
    kern = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, seed)
    c = np.full((g.m, g.n), np.nan, dtype=numpy_dtype(g.out_dtype))
    kern(a, b, c=c)
    err = rel_fro(c, reference(a, b))
    nan = int(np.isnan(c.astype(np.float32)).sum())
    if nan or not err < TOL[g.out_dtype]:
        record("stream_k::mismatch", gemm=str(g), schedule=str(s), unwritten=nan, rel_err=err)
    assert nan == 0 and err < TOL[g.out_dtype], f"{g} {s}: {nan} unwritten, relative error {err:.3g}"
    return kern, a, b, c


@pytest.mark.parametrize("m,n,k,decomposition,sms", sim_or([
    (1024, 1024, 1024, "stream-k", None),        # 64 tiles < SMs: all Stream-K
    (2048, 1536, 512, "stream-k", None),         # whole-tile waves, then the Stream-K wave
    (16, 4096, 4096, "stream-k", None),          # small-M LLM shape
    (777, 513, 1000, "stream-k-pure", 37),       # edges everywhere, an odd grid
    (512, 512, 4096, "stream-k", 200),           # more CTAs than SMs: owners only wait on earlier CTAs
], [  # the same situations, at sizes the simulator runs in seconds
    (256, 256, 256, "stream-k", 6),              # 4 tiles < 6 "SMs": all Stream-K
    (384, 256, 64, "stream-k", 4),               # one whole-tile wave, then the Stream-K wave
    (16, 256, 512, "stream-k", 6),               # small-M shape
    (177, 113, 200, "stream-k-pure", 3),         # edges everywhere, an odd grid
    (128, 128, 512, "stream-k", 9),              # more CTAs than tiles x k-steps shares
]))
def test_stream_k_matches_float64(m, n, k, decomposition, sms):
    g = ptxgen.Gemm(m, n, k, dtype="f16", out_dtype="f32")
    block = (64, 128, 32) if m <= 64 else (128, 128, 32)
    s = ptxgen.Schedule(block=block, warps=(1, 4) if m <= 64 else (2, 2), stages=4,
                        decomposition=decomposition, sms=sms)
    kern, _, _, _ = _run(g, s)
    grid = kern.launch_grid(driver.context().sm_count)
    record("stream_k::grid", gemm=str(g), decomposition=decomposition, sms=sms, grid=grid,
           resources=str(kern.resources))


def test_repeated_launches_are_bit_identical():
    """Flags are reset by the owners, and partials are added in K order whatever the timing."""
    g = ptxgen.Gemm(*sim_or((1000, 1000, 2048), (200, 136, 256)), dtype="bf16", out_dtype="f32")
    s = ptxgen.Schedule(block=(128, 128, 32), stages=4, decomposition="stream-k-pure", sms=sim_or(None, 5))
    kern, a, b, first = _run(g, s, seed=3)
    for _ in range(sim_or(5, 2)):
        again = np.full_like(first, np.nan)
        kern(a, b, c=again)
        assert np.array_equal(first.view(np.uint32), again.view(np.uint32))


def test_stream_k_agrees_with_the_simulator():
    g = ptxgen.Gemm(200, 136, 300, dtype="f16", out_dtype="f32")
    s = ptxgen.Schedule(block=(64, 64, 32), decomposition="stream-k", sms=5)
    kern, a, b, c = _run(g, s, seed=7)
    sim = kern.simulate(a, b)
    assert rel_fro(c, sim.astype(np.float64)) < 1e-5
