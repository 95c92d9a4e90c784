"""ptxgen.runtime.tensormaps on the device: CUtensorMaps encoded by the driver for ptxgen device
arrays drive Triton-written sm_90a TMA kernels (tests/sim/hopper_corpus), passed by value and
launched with cuLaunchKernelEx, checked against float64 numpy. On a CPU this runs through the
stand-in driver, whose cuTensorMapEncodeTiled and cluster rules are the driver's."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpu_helpers import record, require_gpu

require_gpu()

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from ptxgen.runtime.driver import context  # noqa: E402
from tensormaps_worker import run  # noqa: E402  (the launch through tensormaps, shared with tests/runtime)


@pytest.fixture(autouse=True)
def _needs_sm90():
    if context().arch != "sm_90":
        pytest.skip(f"the corpus TMA kernels are sm_90a; this device is {context().arch}")


@pytest.mark.parametrize("name, padded", [("tma_copy_fp16_64x64_w4", False), ("tma_copy_fp16_64x64_w4", True),
                                          ("dot_tma_fp16_128x64x64_w4_s3", False),
                                          ("dot_tma_bf16_64x64x32_w4_s2", False),
                                          ("dot_tma_fp8e4nv_128x64x64_w4_s4", False)])
def test_tma_kernels_with_runtime_tensor_maps(name, padded):
    result = run(name, padded_rows=padded)
    record("tensormaps::corpus", entry=name, padded=padded, **result)
    assert result == {"ok": True}


def test_tma_kernel_launch_with_a_cluster():
    """A TMA kernel launched as 2-CTA clusters (through the stand-in: sim.launch(..., cluster=))."""
    result = run("tma_copy_fp16_64x64_w4", cluster=(2, 1, 1))
    record("tensormaps::cluster", **result)
    assert result == {"ok": True}
