"""Tensor maps (cuTensorMapEncodeTiled) and cluster launches (cuLaunchKernelEx) on the stand-in
driver, through the real cuda.bindings in a subprocess (simdriver_tma_worker.py).

The kernels are Triton-written sm_90a TMA kernels from tests/sim/hopper_corpus, assembled with
nvJitLink, with maps passed by value as 128-byte kernel parameters; the expected CUresult codes
are NVIDIA's (the rules are cuTensorMapEncodeTiled's documented ones).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.runtime.simdriver import compiler_unavailable_reason

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
pytestmark = pytest.mark.skipif(bool(compiler_unavailable_reason()), reason=compiler_unavailable_reason())
INVALID_VALUE, ILLEGAL_ADDRESS, NOT_SUPPORTED, INVALID_CLUSTER_SIZE = 1, 700, 801, 912


@pytest.fixture(scope="module")
def tma(tmp_path_factory) -> dict:
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_CACHE_DIR": str(tmp_path_factory.mktemp("tma")),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(HERE / "simdriver_tma_worker.py")], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_triton_tma_kernels_run_with_maps_the_standin_encoded(tma):
    for name in ("copy", "dot_f16", "dot_bf16", "launch_ex_no_cluster"):
        assert tma[name]["status"] == 0 and tma[name]["ok"], (name, tma[name])


def test_tensor_map_encoding_follows_the_driver_rules(tma):
    enc = tma["encode"]
    assert enc["valid"] == 0 and enc["nan_fill_float"] == 0
    broken = ["rank_0", "rank_6", "address_8", "dim_0", "stride_unaligned", "stride_2_40", "box_0", "box_257",
              "inner_box_8_bytes", "estride_0", "estride_9", "swizzle_narrower_than_box", "nan_fill_integer",
              "interleave_rank_2"]
    assert {name: enc[name] for name in broken} == {name: INVALID_VALUE for name in broken}
    assert enc["interleave_rank_3"] == NOT_SUPPORTED  # valid for the driver, not simulated


def test_a_map_reaching_past_its_allocation_faults(tma):
    assert tma["past_allocation"]["status"] == ILLEGAL_ADDRESS


def test_cluster_size_rules(tma):
    assert tma["launch_ex_cluster_3"]["status"] == INVALID_CLUSTER_SIZE  # grid x=4 is not 3-divisible
    assert tma["cluster_grid_not_divisible"] == INVALID_CLUSTER_SIZE
    assert tma["cluster_16_portable"] == INVALID_CLUSTER_SIZE    # above 8 without the opt-in
    assert tma["cluster_32_non_portable"] == INVALID_CLUSTER_SIZE
    assert tma["cluster_zero"] == INVALID_CLUSTER_SIZE
    assert tma["attribute_cooperative"] == 0  # accepted: one CTA is always co-resident (occupancy.py)


def test_launch_kernel_ex_runs_a_cluster(tma):
    """A 2-CTA cluster launch runs on sim.launch(..., cluster=): each CTA sees its cluster rank and id."""
    assert tma["cluster_2"][0] == 0
    # per CTA: cluster rank, CTAs per cluster, cluster id
    assert tma["cluster_2"][1] == [[0, 2, 0], [1, 2, 0], [0, 2, 1], [1, 2, 1]]
    assert tma["cluster_16_non_portable"] == 0
    assert tma["launch_ex_cluster"]["status"] == 0 and tma["launch_ex_cluster"]["ok"]


def test_function_attributes_report_the_entrys_required_cluster(tma):
    """CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_* and CLUSTER_SIZE_MUST_BE_SET come from .reqnctapercluster,
    and a classic cuLaunchKernel of such an entry runs it in those clusters."""
    attrs = tma["cluster_attributes"]
    assert attrs["plain"] == [0, 0, 0, 0]
    assert attrs["required"] == [2, 1, 1, 1]   # (width, height, depth, must-be-set)
    assert attrs["classic_launch"] == 0
    assert attrs["classic_rows"] == [[0, 2, 0], [1, 2, 0], [0, 2, 1], [1, 2, 1]]
