"""tests/gpu runs on a real GPU when NVIDIA's driver is installed, and otherwise (CI, laptops)
through the simulator-backed stand-in driver under the same cuda-python bindings
(PTXGEN_DRIVER=sim). PTXGEN_DRIVER set by the caller always wins. Every test records the driver
it ran on (the `driver` user property, the report header and the summary line)."""
from __future__ import annotations

import ctypes.util
import os

import pytest


def _choose_driver() -> None:
    """Load the stand-in now when no NVIDIA driver exists. The environment is left as it was
    (the tests outside tests/gpu that one session also runs keep their own defaults), unless
    loading fails: then PTXGEN_DRIVER=sim stays set so every skip gives that reason."""
    if os.environ.get("PTXGEN_DRIVER"):
        return
    if ctypes.util.find_library("cuda") is None:  # no NVIDIA driver on this machine
        from ptxgen.runtime import simdriver

        if simdriver.compiler_unavailable_reason():
            return  # require_gpu skips with "no NVIDIA driver"; test_simdriver names the compiler
        os.environ["PTXGEN_DRIVER"] = "sim"
        try:
            simdriver.activate()
        except Exception:
            return
        # PTXGEN_DRIVER=sim stays set for tests/gpu (module-level code too); tests/conftest.py
        # unsets it around every other test, which then runs on the CPU simulator as it would alone.
        os.environ["PTXGEN_TESTS_AUTO_SIM"] = "1"
        _AUTO_SIM.append(True)


_AUTO_SIM: list[bool] = []  # non-empty when this conftest chose the stand-in for tests/gpu


_choose_driver()


def _driver_description() -> str:
    from ptxgen.runtime import gpu_available, gpu_unavailable_reason, simdriver

    if _AUTO_SIM:
        return simdriver.driver_description()
    if not gpu_available():
        return f"none ({gpu_unavailable_reason()})"
    return simdriver.driver_description()


def pytest_report_header(config) -> str:
    return f"ptxgen GPU tests run on driver: {_driver_description()}"


@pytest.fixture(autouse=True)
def _record_driver(record_property):
    record_property("driver", _driver_description())


def pytest_terminal_summary(terminalreporter) -> None:
    ran = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])
           if "tests/gpu/" in r.nodeid.replace("\\", "/") or r.nodeid.startswith("test_gpu")]
    terminalreporter.write_line(f"ptxgen GPU tests: {len(ran)} ran on driver {_driver_description()}")
