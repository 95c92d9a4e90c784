"""Layout micro-tests on hardware: each hand-written probe (mma.sync shapes, ldmatrix forms,
cp.async zero-fill) runs on the GPU and in ptxgen.sim; both are compared element by element,
and the hardware result is checked against docs/ptx_facts/. Disagreements are recorded
(gpu_helpers.record) with what hardware returned, so the facts sheet can be corrected."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import record, require_gpu

require_gpu()

import layout_cases as L  # noqa: E402
from ptxgen import sim  # noqa: E402
from ptxgen.runtime import launch_ptx  # noqa: E402

CASES = {c.name: c for c in L.all_cases()}
SEEDS = (0, 1, 2)


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_hardware_vs_simulator_vs_facts(name):
    case = CASES[name]
    failures = []
    for seed in SEEDS:
        hw_args, ctx = L.run(case, launch_ptx, seed)
        sim_args, _ = L.run(case, sim.launch, seed)
        hw, sm, want = hw_args[case.out], sim_args[case.out], case.expected(ctx)
        hw_vs_sim = L.agree(case, ctx, hw, sm)
        hw_vs_facts = L.agree(case, ctx, hw, want)
        if not (hw_vs_sim.all() and hw_vs_facts.all()):
            detail = {"seed": seed, "notes": case.notes, "exact": case.exact,
                      "hw_vs_sim_mismatches": np.argwhere(~hw_vs_sim).tolist()[:64],
                      "hw_vs_facts_mismatches": np.argwhere(~hw_vs_facts).tolist()[:64],
                      "hardware": hw, "simulator": sm, "facts": want,
                      "inputs": {k: v for k, v in ctx.items()}}
            if "key" in case.notes:  # an mma probe: also decode D through the facts layout
                detail["hardware_D_per_facts_layout"] = L.decode_mma(case.notes["key"], hw)
            record(f"layout::{name}", **detail)
            failures.append((seed, int((~hw_vs_sim).sum()), int((~hw_vs_facts).sum())))
        elif seed == 0:
            record(f"layout::{name}", seed=seed, agree=True, notes=case.notes)
    assert not failures, (f"{name}: (seed, #hw!=sim, #hw!=facts) = {failures}; see the recorded "
                          f"report for what hardware returned")


def test_ldmatrix_x1_ignores_upper_lane_addresses():
    """docs/ptx_facts/shared_memory.md §4: on sm_80+ only lanes 0-7 supply addresses for .x1; others are ignored."""
    case = CASES["ldmatrix_x1"]
    args, ctx = case.make(5)
    base = [a.copy() for a in args]
    launch_ptx(case.ptx, case.entry, case.grid, case.block, args)
    other = [a.copy() for a in base]
    other[1][8:] = np.roll(other[1][8:], 3)  # different (valid) rows for lanes 8-31
    launch_ptx(case.ptx, case.entry, case.grid, case.block, other)
    same = np.array_equal(args[2], other[2])
    record("layout::ldmatrix_x1_upper_lanes", ignored=same)
    assert same
