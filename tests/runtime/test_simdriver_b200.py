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


def test_b200_runs_clusters_of_up_to_8_ctas_on_its_gpcs():
    """The B200 model's GPC layout (models.B200_GPC_SMS, 148 SMs) answers cuOccupancyMaxActiveClusters
    (simdriver/occupancy.py): whole clusters per GPC, so 8-CTA clusters fit fewer than 148 / 8."""
    from ptxgen.runtime.simdriver.models import B200_GPC_SMS
    from ptxgen.runtime.simdriver.occupancy import active_clusters

    b200 = MODELS["b200"]
    assert sum(B200_GPC_SMS) == 148 and b200.gpc_sms == B200_GPC_SMS
    assert active_clusters(b200, (2, 1, 1), 1) == 74 and active_clusters(b200, (8, 1, 1), 1) == 16


CLUSTER_RUN = """
import numpy as np, ptxgen
from ptxgen.check import compare
from ptxgen import Gemm, Schedule
g = Gemm(300, 200, 72, dtype="f16", a_layout="row", b_layout="col")
rng = np.random.default_rng(1)
a = (rng.uniform(0.5, 1.5, (g.m, g.k)) * rng.choice([-1, 1], (g.m, g.k))).astype(np.float16)
b = (rng.uniform(0.5, 1.5, (g.k, g.n)) * rng.choice([-1, 1], (g.k, g.n))).astype(np.float16)
want = a.astype(np.float64) @ b.astype(np.float64)
for s in (Schedule(block=(256, 64, 32), instruction="tcgen05", stages=2, cta_group=2),
          Schedule(block=(128, 64, 32), instruction="tcgen05", stages=2, cluster=(1, 2))):
    k = ptxgen.compile(g, s, arch="sm_100a")
    c = np.asarray(k(a, np.asfortranarray(b)), dtype=np.float64)
    print("RESULT", k.cluster_dims, bool(compare(c, want, g).ok), k.grid_source)
"""


def test_cluster_and_pair_kernels_run_through_the_standin_on_b200(tmp_path):
    """A CTA-pair kernel and a multicast-cluster kernel launched by the runtime on the stand-in's
    B200 model: cuLaunchKernelEx with their cluster dimensions, the grid sized by
    cuOccupancyMaxActiveClusters, C checked against numpy."""
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
    proc = subprocess.run([sys.executable, "-c", CLUSTER_RUN], capture_output=True, text=True, timeout=600, env=env,
                          cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert len(results) == 2, proc.stdout
    # the pair: 8 pair tiles of 2 CTAs; the 1x2 cluster: 3 x 2 cluster tiles of 2 CTAs
    assert results[0].startswith("(2, 1, 1) True grid (16, 1, 1)") and results[1].startswith("(2, 1, 1) True grid (12, 1, 1)"), results
    assert all("sized by cuOccupancyMaxActiveClusters" in r for r in results), results


def test_a_rebindable_sm100a_launch_reencodes_its_tensor_maps_on_b200():
    """ptxgen.torch's CUDA path on a B200: one Rebindable per signature, relaunched on new
    addresses (tests/runtime/b200_rebind.py, in its own process under the B200 model)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import pytest

    from ptxgen.runtime.simdriver import compiler_unavailable_reason

    if compiler_unavailable_reason():
        pytest.skip(compiler_unavailable_reason())
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_SIM_DEVICE": "b200",
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(root / "tests" / "runtime" / "b200_rebind.py")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS") == 2 and "3 tensor maps" in proc.stdout, proc.stdout
