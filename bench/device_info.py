"""What a hardware run ran on: the device, its driver and clocks, the assemblers, the commit.

Step a of bench/on_device.sh: numbers measured on a GPU mean little without the device's name, its
driver, the clocks it ran at (a throttled or locked clock moves every TFLOP/s figure) and which
assembler built the kernels. The clocks come from `nvidia-smi --query-gpu` when it is installed,
else from the CUDA driver through cuda-python (the SM count, the clock attributes where this CUDA
still has them). Under the stand-in driver (PTXGEN_DRIVER=sim) the device is the simulated model,
and the report says so.

    PYTHONPATH=. python3 bench/device_info.py --out info.json
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import this checkout's ptxgen
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: nvidia-smi fields: the clocks now and at most, power, temperature and the throttle reasons.
SMI_FIELDS = ("name", "driver_version", "pci.bus_id", "memory.total", "clocks.sm", "clocks.max.sm", "clocks.mem",
              "clocks.max.mem", "clocks.applications.graphics", "power.draw", "power.limit", "temperature.gpu",
              "pstate", "clocks_throttle_reasons.active", "mig.mode.current", "compute_mode")


def _run(cmd: list[str], timeout: float = 20) -> tuple[int, str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return -1, f"{type(e).__name__}: {e}"
    return out.returncode, (out.stdout + out.stderr).strip()


def nvidia_smi() -> dict[str, Any]:
    """The SMI_FIELDS of every GPU, or why there are none."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"status": "absent", "reason": "nvidia-smi is not on PATH"}
    rc, text = _run([exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"])
    if rc == 0:
        rows = [line.split(",") for line in text.splitlines() if line.strip()]
        return {"status": "ok", "gpus": [dict(zip(SMI_FIELDS, (v.strip() for v in row))) for row in rows]}
    # One unknown field fails the whole query (drivers rename some: clocks_throttle_reasons became
    # clocks_event_reasons), so ask field by field and keep what this driver knows.
    per_field: dict[str, list[str]] = {}
    for field in SMI_FIELDS:
        rc, text = _run([exe, f"--query-gpu={field}", "--format=csv,noheader"])
        per_field[field] = [v.strip() for v in text.splitlines()] if rc == 0 else [f"unsupported: {text[-120:]}"]
    count = max(len(v) for v in per_field.values())
    gpus = [{f: (v[i] if i < len(v) else v[0]) for f, v in per_field.items()} for i in range(count)]
    if all(v[0].startswith("unsupported") for v in per_field.values()):
        return {"status": "failed", "reason": per_field["name"][0]}
    return {"status": "ok", "gpus": gpus}


def driver_view() -> dict[str, Any]:
    """The device as ptxgen's runtime sees it (NVIDIA's driver or the stand-in), through cuda-python."""
    from ptxgen.runtime import gpu_available, gpu_unavailable_reason, simdriver
    from ptxgen.runtime.driver import _call, _driver, context

    if not gpu_available():
        return {"status": "no device", "reason": gpu_unavailable_reason()}
    ctx = context()
    view: dict[str, Any] = {"status": "ok", "driver": simdriver.driver_description(), "name": ctx.name,
                            "arch": ctx.arch, "sm_count": ctx.sm_count, "max_smem_optin": ctx.max_smem_optin}
    version = int(_call("cuDriverGetVersion"))
    view["cuda_driver_api"] = f"{version // 1000}.{version % 1000 // 10}"
    attr = _driver().CUdevice_attribute
    for key in ("CLOCK_RATE", "MEMORY_CLOCK_RATE", "L2_CACHE_SIZE", "MULTI_GPU_BOARD"):
        name = f"CU_DEVICE_ATTRIBUTE_{key}"
        if not hasattr(attr, name):
            view[key.lower()] = "not in this CUDA's attribute list"
            continue
        field = key.lower() + ("_khz" if "CLOCK" in key else "")
        try:
            view[field] = int(_call("cuDeviceGetAttribute", getattr(attr, name), ctx.device))
        except Exception as e:  # the stand-in answers only what its model holds
            view[key.lower()] = f"{type(e).__name__}: {e}"[:200]
    return view


def assemblers() -> dict[str, str]:
    """nvJitLink (in-process) and the ptxas on PATH, with their versions."""
    from ptxgen.runtime import assembler_version

    found: dict[str, str] = {}
    try:
        found["ptxgen_default"] = assembler_version()
    except Exception as e:
        found["ptxgen_default"] = f"{type(e).__name__}: {e}"[:200]
    exe = shutil.which("ptxas")
    if exe:
        rc, text = _run([exe, "--version"])
        lines = text.splitlines()
        release = next((ln for ln in lines if "release" in ln), lines[-1] if lines else "?")
        found["ptxas"] = f"{release.strip()} ({exe})" if rc == 0 else f"failed: {text[-200:]}"
    else:
        found["ptxas"] = "not on PATH"
    return found


def packages() -> dict[str, str]:
    """Versions of what the benchmarks compare against (absent ones say so)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("numpy", "torch", "triton", "cupy-cuda13x", "cuda-bindings", "nvidia-nvjitlink", "ml_dtypes",
                 "hypothesis", "pytest"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


def commit() -> str:
    rc, text = _run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "HEAD"])
    if rc == 0 and text:
        rc2, dirty = _run(["git", "-C", str(Path(__file__).resolve().parents[1]), "status", "--porcelain",
                           "--untracked-files=no"])
        return text + (" (with uncommitted changes)" if rc2 == 0 and dirty else "")
    import os

    return os.environ.get("PTXGEN_COMMIT", "unknown (no git here; set PTXGEN_COMMIT)")


def collect() -> dict[str, Any]:
    info: dict[str, Any] = {"commit": commit(), "host": platform.node(), "nvidia_smi": nvidia_smi()}
    try:
        info["driver_view"] = driver_view()
    except Exception as e:  # a broken driver is itself the finding: report it, keep the rest
        info["driver_view"] = {"status": "error", "reason": f"{type(e).__name__}: {e}"[:500]}
    info["assemblers"] = assemblers()
    info["packages"] = packages()
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the report as JSON here")
    args = ap.parse_args(argv)
    info = collect()
    text = json.dumps(info, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    view = info["driver_view"]
    smi = info["nvidia_smi"]
    clocks = (f"SM clock {smi['gpus'][0]['clocks.sm']} of max {smi['gpus'][0]['clocks.max.sm']}, driver "
              f"{smi['gpus'][0]['driver_version']}" if smi.get("status") == "ok" else f"nvidia-smi {smi['status']}")
    if view.get("status") == "ok":
        print(f"device: {view['name']} ({view['arch']}, {view['sm_count']} SMs, CUDA driver API "
              f"{view['cuda_driver_api']}); {clocks}; {info['assemblers']['ptxgen_default']}; "
              f"commit {info['commit'][:12]}")
        return 0
    print(f"no usable device: {view.get('reason')}; {clocks}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
