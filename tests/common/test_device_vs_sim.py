"""bench/device_vs_sim.py judges what the device returned: a flipped bit of an exact (integer)
result, a float element outside check.compare's bound and one never written each make the case FAIL.
"The device" is the simulator here (its `_run_device` swapped for Kernel.simulate plus a fault), so
no driver is needed; the stand-in-driver run of every design is tests/common/test_on_device_script.py."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dvs():
    spec = importlib.util.spec_from_file_location("bench_device_vs_sim", ROOT / "bench" / "device_vs_sim.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def _case(dvs, design: str, dtype: str):
    return next(c for c in dvs.build_cases(tiny=True, only=[design]) if c.design == design and c.gemm.dtype == dtype)


def _device_with(monkeypatch, dvs, fault):
    """The simulator as the device, with `fault(c)` applied to what it returns."""
    def run(kern, a, b):
        c = np.array(kern.simulate(a, b, progress=False))
        fault(c)
        return c
    monkeypatch.setattr(dvs, "_run_device", run)


def test_every_design_has_an_exact_case(dvs):
    cases = dvs.build_cases(tiny=True)
    exact = {c.design for c in cases if c.exact}
    assert exact == {name for name, _, _ in dvs.DESIGNS}
    for c in cases:  # split-K and Stream-K refuse s32 accumulation: integer-valued f16 there
        assert (c.gemm.dtype == "s8") == (c.exact and not c.design.endswith(dvs.F32_PARTIALS))


def test_integer_valued_operands_are_small_nonzero_integers(dvs):
    case = _case(dvs, "split-k", "f16")
    assert case.integer_valued and case.exact
    a, b = dvs.operands(case, 3)
    for x in (a, b):
        v = x.astype(np.float64)
        assert np.array_equal(v, np.round(v)) and (v != 0).all() and np.abs(v).max() <= dvs.INT_RANGE


def test_agreeing_device_passes_and_one_flipped_bit_fails(dvs, monkeypatch):
    case = _case(dvs, "one-tile", "s8")
    _device_with(monkeypatch, dvs, lambda c: None)
    assert dvs.run_case(case, 1, 1)["status"] == "ok"

    def flip(c):
        c[3, 5] ^= 1
    _device_with(monkeypatch, dvs, flip)
    row = dvs.run_case(case, 1, 1)
    assert row["status"] == "FAIL" and row["elements_differing"] == 1 and row["first_differing"] == [[3, 5]]
    assert not row["device_exact"] and row["sim_exact"]


@pytest.mark.parametrize("fault, field", [(lambda c: c.__setitem__((2, 7), c[2, 7] * 1.01 + 1.0), "device_outside"),
                                          (lambda c: c.__setitem__((2, 7), np.nan), "device_unwritten")])
def test_a_float_element_off_or_unwritten_fails(dvs, monkeypatch, fault, field):
    case = _case(dvs, "mma.sync", "f16")
    _device_with(monkeypatch, dvs, fault)
    row = dvs.run_case(case, 1, 1, arch="sm_80")
    assert row["status"] == "FAIL" and row[field] == 1 and row["sim_outside"] == row["sim_unwritten"] == 0
