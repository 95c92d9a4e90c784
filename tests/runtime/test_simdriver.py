"""The simulator-backed stand-in driver, driven through the real cuda.bindings in a subprocess.

Each scenario checks a rule the real driver enforces (simdriver_worker.py runs them); the
expected CUresult codes are NVIDIA's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxgen.runtime.simdriver import compiler_unavailable_reason
from ptxgen.runtime.simdriver.build import library_path
from ptxgen.runtime.simdriver.cubin import CubinError, parse_cubin

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
needs_cc = pytest.mark.skipif(bool(compiler_unavailable_reason()), reason=compiler_unavailable_reason())


def _run(cache_root: Path, **env: str) -> dict:
    full = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_CACHE_DIR": str(cache_root),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    proc = subprocess.run([sys.executable, str(HERE / "simdriver_worker.py")], capture_output=True,
                          text=True, timeout=600, env=full)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def h100(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("h100"))


@pytest.fixture(scope="module")
def a100(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("a100"), PTXGEN_SIM_DEVICE="a100")


@pytest.fixture(scope="module")
def old(tmp_path_factory) -> dict:
    """A CUDA 12.4 driver, and nvJitLink (13.x) as the only assembler."""
    return _run(tmp_path_factory.mktemp("old"), PTXGEN_SIM_DRIVER_VERSION="12040", PTXGEN_ASSEMBLER="nvjitlink")


@needs_cc
def test_real_bindings_load_the_standin(h100):
    assert h100["is_standin"] and h100["version"] == 13000
    assert (h100["name"], h100["arch"], h100["sms"]) == ("NVIDIA H100 80GB HBM3 (ptxgen simulated)", "sm_90", 132)
    assert h100["optin"] == 227 * 1024


@needs_cc
def test_a_thread_without_a_current_context_is_refused(h100):
    assert h100["other_thread_alloc"] == 201  # CUDA_ERROR_INVALID_CONTEXT


@needs_cc
def test_device_memory_is_not_host_memory_and_is_bounds_checked(h100):
    assert h100["device_ptr_high"] and h100["htod_ok"] == 0 and h100["roundtrip"]
    assert h100["htod_past_end"] == 1 and h100["htod_to_host_ptr"] == 1  # INVALID_VALUE
    assert h100["free_twice"] == [0, 1]


@needs_cc
def test_module_loads_follow_the_driver(h100):
    assert h100["load_cubin"] == 0
    assert h100["load_other_arch"] == 209     # sm_80 SASS on sm_90: NO_BINARY_FOR_GPU
    assert h100["load_unknown_cubin"] == 200  # not a cubin ptxgen assembled: INVALID_IMAGE
    assert h100["load_new_ptx"] == 222        # .version 9.9 on a 13.0 driver
    assert h100["get_missing"] == 500
    assert h100["unload"] == 0 and h100["launch_after_unload"] == 400


@needs_cc
def test_launch_decodes_params_from_the_cubin_and_runs_on_the_simulator(h100):
    assert h100["launch"] == 0 and h100["launch_values"]
    assert h100["launch_extra"] == 1          # `extra` must be NULL
    assert h100["launch_oob"] == 700          # ILLEGAL_ADDRESS from the simulator's bounds check
    assert h100["num_regs"] > 0 and h100["elapsed"] == 801  # no invented timings


@needs_cc
def test_dynamic_shared_memory_needs_the_opt_in(h100, a100):
    assert h100["launch_64k_no_optin"] == 1
    assert h100["optin_64k"] == 0 and h100["launch_64k_optin"] == 0
    assert h100["optin_over_limit"] == 1
    assert a100["arch"] == "sm_80" and a100["optin"] == 163 * 1024 and a100["sms"] == 108
    assert a100["load_other_arch"] == 209 and a100["optin_over_limit"] == 1 and a100["launch_values"]


@needs_cc
def test_an_old_driver_refuses_cuda13_cubins_but_jits_ptx(old):
    assert (old["version"], old["load_cubin"], old["load_ptx"], old["load_ptx_85"]) == (12040, 200, 0, 222)


@needs_cc
def test_refused_cubin_falls_back_once_and_kernels_pick_the_jit_on_old_drivers(old):
    assert old["fallback_source"] == "ptx-jit" and old["fallback_reused"]  # not retried per launch
    assert old["kernel_ok"] and old["kernel_cubin_loads"] == 0  # chosen by cuDriverGetVersion
    assert old["kernel_binary"].startswith("PTX JIT by the driver (driver 12.4 cannot read cubins from nvJitLink")
    assert "PTX JIT" in old["kernel_warning"]


@needs_cc
def test_library_is_built_once_per_source(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    first = library_path()
    mtime = first.stat().st_mtime_ns
    assert library_path() == first and first.stat().st_mtime_ns == mtime
    assert first.parent == tmp_path / "simdriver"


def test_no_compiler_gives_the_reason(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert "needs a C compiler" in compiler_unavailable_reason()


def test_bad_driver_choice_names_the_fix(monkeypatch):
    from ptxgen.runtime import driver as drv

    monkeypatch.setenv("PTXGEN_DRIVER", "simulator")
    drv._probe.cache_clear()
    try:
        assert "use 'sim'" in drv.gpu_unavailable_reason()
    finally:
        drv._probe.cache_clear()


def test_cubin_parameter_records(tmp_path, monkeypatch):
    """EIATTR_KPARAM_INFO gives each parameter's offset and size, as PTX declared them."""
    import ptxgen

    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    k = ptxgen.compile(ptxgen.Gemm(64, 64, 32, dtype="f16", out_dtype="f32"),
                       ptxgen.Schedule(block=(64, 64, 32), warps=(1, 1), stages=1), arch="sm_80")
    info = parse_cubin(k.cubin)
    params = info.kernels[k.entry].params
    assert info.arch == "sm_80"
    assert [(p.offset, p.size) for p in params] == [(0, 8), (8, 8), (16, 8)] + [(24 + 4 * i, 4) for i in range(6)]
    with pytest.raises(CubinError, match="not an ELF"):
        parse_cubin(b"//PTX" + bytes(100))


@needs_cc
def test_launch_kernel_ex_and_the_cluster_attribute(h100, a100):
    assert h100["launch_ex"] == [0, True]
    assert a100["launch_ex_cluster"][0] == 1    # an A100 has no clusters: INVALID_VALUE


@needs_cc
def test_launch_kernel_ex_on_h100_runs_the_cluster(h100):
    """cuLaunchKernelEx with a 2x1x1 cluster attribute runs the kernel as one cluster on the simulator."""
    assert h100["launch_ex_cluster"] == [0, True]


@needs_cc
def test_cli_run_says_it_ran_through_the_standin(tmp_path):
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "ptxgen", "run", "--shape", "64x64x32", "--dtype", "f16",
                           "--arch", "sm_90"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "executed   through the simulator-backed driver (PTXGEN_DRIVER=sim), every CTA; runs cubin for " \
           "sm_90 from nvJitLink" in proc.stdout
    assert "Traceback" not in proc.stderr


@needs_cc
def test_a_loaded_standin_is_a_gpu_only_while_asked_for(tmp_path):
    """The stand-in cannot be unloaded; code that did not ask for it (PTXGEN_DRIVER unset) must see
    no GPU, so `ptxgen run` in the same process keeps running on the CPU simulator."""
    script = (
        "import os\n"
        "from ptxgen.runtime import gpu_available, gpu_unavailable_reason, simdriver\n"
        "simdriver.activate()\n"
        "asked = gpu_available()\n"
        "del os.environ['PTXGEN_DRIVER']\n"
        "print(asked, gpu_available(), '|', gpu_unavailable_reason())\n")
    env = {**os.environ, "PTXGEN_DRIVER": "sim", "PTXGEN_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    flags, reason = proc.stdout.strip().splitlines()[-1].split(" | ")
    assert flags == "True False" and "PTXGEN_DRIVER is not 'sim'" in reason
