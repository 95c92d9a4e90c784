"""Grouped sm_100a kernels launched through the driver path (`k(a, b, offs=...)`,
`k(a, b, masked_m=...)`) on the simulator-backed stand-in libcuda's B200 model (in a process of
its own: the model is fixed when the stand-in loads): the 3-D tensor maps encoded with the group
stride, masked C's group stride after ldc and the counts last, as the entry declares them
(targets/sm100/grouped.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_grouped_launches_through_the_driver_on_b200(tmp_path):
    from ptxgen.runtime.simdriver import compiler_unavailable_reason

    if compiler_unavailable_reason():
        pytest.skip(compiler_unavailable_reason())
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_SIM_DEVICE": "b200", "PTXGEN_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("sm100_grouped_launch_worker.py"))],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().split("\n")
    assert [line.split(":")[0] for line in lines] == ["contiguous", "masked"], proc.stdout
    assert all(": PASS " in line for line in lines), proc.stdout
