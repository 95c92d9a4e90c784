"""The stand-in driver's B200 model (PTXGEN_SIM_DEVICE=b200): the limits it reports match the
sm_100a target the code generator plans for, and sm_100a SASS runs on it (and only there)."""
from __future__ import annotations

from ptxgen.runtime.simdriver.models import MODELS, chosen_model
from ptxgen.runtime.simdriver.standin import _runs_on
from ptxgen.schedule.devices import device_model
from ptxgen.schedule.targets import target


def test_b200_model_matches_the_sm100a_target(monkeypatch):
    monkeypatch.setenv("PTXGEN_SIM_DEVICE", "b200")
    m = chosen_model()
    attrs = m.attributes()
    assert m is MODELS["b200"] and m.cc == (10, 0)
    assert attrs["MULTIPROCESSOR_COUNT"] == 148 == target("sm_100a").sms == device_model("sm_100a").sms
    assert attrs["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"] == target("sm_100a").smem_per_block == 227 * 1024
    assert attrs["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"] == 228 * 1024 and attrs["CLUSTER_LAUNCH"] == 1


def test_sm100a_code_runs_only_on_the_b200_model():
    assert _runs_on("sm_100a", MODELS["b200"].cc) and _runs_on("sm_100", MODELS["b200"].cc)
    assert not _runs_on("sm_100a", MODELS["h100"].cc) and not _runs_on("sm_90a", MODELS["b200"].cc)


def test_cli_runs_an_sm100a_kernel_through_the_standin_on_b200(tmp_path):
    """`ptxgen run --arch sm_100a` on the stand-in with the B200 model: assembled for sm_100a,
    loaded as a cubin, launched with its tensor maps and checked against numpy."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    from ptxgen.runtime.simdriver import compiler_unavailable_reason

    if compiler_unavailable_reason():
        pytest.skip(compiler_unavailable_reason())
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_SIM_DEVICE": "b200", "PTXGEN_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "run", "--shape", "200x136x72", "--layout", "tn",
                           "--arch", "sm_100a", "--instruction", "tcgen05", "--block", "128x64x32", "--stages", "2"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "through the simulator-backed driver (PTXGEN_DRIVER=sim), every CTA; runs cubin for sm_100a" in proc.stdout
    assert "PASS" in proc.stdout and "Traceback" not in proc.stderr
