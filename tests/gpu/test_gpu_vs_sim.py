"""Differential tests: the same random schedules on the GPU and in Kernel.simulate. Big grids
simulate only a few CTAs and compare only their tiles; tolerance allows for a different
accumulation order (both accumulate in f32)."""
from __future__ import annotations

import numpy as np

from gpu_helpers import device_compile_arch, draw_kernel, random_operands, record, require_gpu, sim_or

require_gpu()

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ptxgen.check import poisoned, unwritten  # noqa: E402
from ptxgen.simulate import covered, sample_ctas  # noqa: E402

ARCH = device_compile_arch()
#: elementwise tolerance relative to sum_k |a_ik b_kj|: f32 accumulation order + output rounding
#: (tf32 inputs are rounded by the same cvt.rna on both sides); integer results are exact
ELEM_TOL = {"f32": 2.0**-18, "f16": 2.0**-9, "bf16": 2.0**-6, "s32": 0.0}


@settings(max_examples=sim_or(30, 3), deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_gpu_matches_simulator(data):
    g, s, kern = draw_kernel(data, ARCH, max_tiles=sim_or((4, 4, 3), (2, 2, 2)))
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    a, b = random_operands(g, seed)
    ctas = sample_ctas(kern)
    if ctas is not None and len(ctas) > 3:
        ctas = ctas[:3]
    mask = covered(kern, ctas)
    sim_c = kern.simulate(a, b, ctas=ctas)
    gpu_c = kern(a, b, c=poisoned((g.m, g.n), g.out_dtype))
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    diff = np.abs(gpu_c.astype(np.float64) - sim_c.astype(np.float64))
    bad = mask & ~(diff <= ELEM_TOL[g.out_dtype] * scale)
    if bad.any():
        idx = np.argwhere(bad)[:16]
        record("differential::gpu_vs_sim", gemm=str(g), schedule=str(s), ctas=ctas,
               mismatches=idx, gpu=[float(gpu_c[i, j]) for i, j in idx],
               sim=[float(sim_c[i, j]) for i, j in idx])
    assert not bad.any(), f"{int(bad.sum())} elements differ between GPU and simulator"
    assert not unwritten(sim_c[mask]).any()
    assert not unwritten(gpu_c).any()
