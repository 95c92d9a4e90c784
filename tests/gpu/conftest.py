"""tests/gpu runs on a real GPU when NVIDIA's driver is installed, and otherwise (CI, laptops)
through the simulator-backed stand-in driver under the same cuda-python bindings
(PTXGEN_DRIVER=sim). PTXGEN_DRIVER set by the caller always wins. Every test records the driver
it ran on (the `driver` user property, the report header and the summary line)."""
from __future__ import annotations

import ctypes.util
import os

import pytest


def _choose_driver() -> None:
    if os.environ.get("PTXGEN_DRIVER"):
        return
    if ctypes.util.find_library("cuda") is None:  # no NVIDIA driver on this machine
        from ptxgen.runtime.simdriver import compiler_unavailable_reason

        if not compiler_unavailable_reason():
            os.environ["PTXGEN_DRIVER"] = "sim"


_choose_driver()


def _driver_description() -> str:
    from ptxgen.runtime import gpu_available, gpu_unavailable_reason, simdriver

    if not gpu_available():
        return f"none ({gpu_unavailable_reason()})"
    return simdriver.driver_description()


def pytest_report_header(config) -> str:
    return f"ptxgen GPU tests run on driver: {_driver_description()}"


@pytest.fixture(autouse=True)
def _record_driver(record_property):
    record_property("driver", _driver_description())


def pytest_terminal_summary(terminalreporter) -> None:
    ran = len(terminalreporter.stats.get("passed", [])) + len(terminalreporter.stats.get("failed", []))
    terminalreporter.write_line(f"ptxgen GPU tests: {ran} ran on driver {_driver_description()}")
