"""sm_100a MXFP8 and NVFP4 kernels, on one CTA and on a CTA pair, launched through the driver path (`k(a, b, scale_a=, scale_b=)`) on
the simulator-backed stand-in libcuda with its B200 model (in a process of its own: the model is
fixed when the stand-in loads): the runtime packs the fp4 operands, lays the logical scales out in
the 128x4 block layout (runtime/scale_layout.py), uploads them and passes their tensor maps after
A's and B's, as the entry declares them; a masked MXFP8 grouped kernel (`k(a, b, masked_m=, bias=,
scale_a=, scale_b=)`) with every group's scale blocks stacked in one tensor map each."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_block_scaled_launches_through_the_driver_on_b200(tmp_path):
    from ptxgen.runtime.simdriver import compiler_unavailable_reason

    if compiler_unavailable_reason():
        pytest.skip(compiler_unavailable_reason())
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_SIM_DEVICE": "b200", "PTXGEN_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("sm100_scale_launch_worker.py"))],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().split("\n")
    assert [line.split(":")[0] for line in lines] == ["mxfp8", "nvfp4", "mxfp8-pair", "nvfp4-pair",
                                                              "mxfp8-masked"], proc.stdout
    assert all(": PASS " in line and line.endswith("without scale_b: refused") for line in lines), proc.stdout
