"""Session-wide test setup.

tests/gpu/conftest.py may load ptxgen's simulator-backed stand-in driver for tests/gpu
(PTXGEN_DRIVER=sim, marked by PTXGEN_TESTS_AUTO_SIM). The stand-in stays loaded in the process, and
ptxgen's runtime takes it for a GPU only while PTXGEN_DRIVER=sim, so every test outside tests/gpu
runs with the variable unset: it sees no GPU and behaves as in a session without tests/gpu.

The Ray tests' fixtures and child-process hooks live in tests/ray_child.py and are imported here,
so a Ray test runs in the child wherever it lives.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ray_child import (bounded, local_ray, pytest_collection_modifyitems,  # noqa: F401 (fixtures, hooks)
                             pytest_configure, pytest_pyfunc_call, pytest_runtest_logreport)

_GPU_DIR = Path(__file__).resolve().parent / "gpu"


@pytest.fixture(autouse=True)
def _wide_cli_reports(monkeypatch):
    """CLI report lines whole (PTXGEN_WIDE=1), so tests find a phrase on one line;
    tests/cli/test_cli_output.py checks the wrapping itself."""
    monkeypatch.setenv("PTXGEN_WIDE", "1")


@pytest.fixture(autouse=True)
def _driver_for_this_test(request, monkeypatch):
    if os.environ.get("PTXGEN_TESTS_AUTO_SIM") and _GPU_DIR not in Path(str(request.node.path)).resolve().parents:
        monkeypatch.delenv("PTXGEN_DRIVER", raising=False)
        monkeypatch.delenv("PTXGEN_TESTS_AUTO_SIM", raising=False)
