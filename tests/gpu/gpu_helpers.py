"""Shared helpers for the hardware tests: skipping, recording observations, problem drawing."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ptxgen.runtime import gpu_available, gpu_unavailable_reason


def require_gpu() -> None:
    """Skip the calling test module when no GPU can be used (call at module level)."""
    if not gpu_available():
        pytest.skip(f"needs a CUDA GPU: {gpu_unavailable_reason()}", allow_module_level=True)


def on_simulator() -> bool:
    """True when the "GPU" is ptxgen's simulator behind the stand-in driver (PTXGEN_DRIVER=sim)."""
    from ptxgen.runtime import simdriver

    return simdriver.active() or simdriver.selected()


def sim_or(hardware: Any, simulated: Any) -> Any:
    """`hardware` on a GPU, `simulated` under the stand-in driver: the simulator runs a 128x128x32
    tile step in about 0.2 s on one core, so draw counts and problem sizes shrink there to keep
    tests/gpu within minutes; what is checked stays the same."""
    return simulated if on_simulator() else hardware


def require_hardware(why: str) -> None:
    """Skip the calling test under the stand-in driver, saying what only real hardware shows."""
    if on_simulator():
        pytest.skip(f"needs real hardware, not the simulator-backed driver: {why}")


def cuda_rand(torch: Any, *shape: int, dtype: Any, seed: int) -> Any:
    """A CUDA tensor of never-zero values in [0.5, 1] with random signs, exact in `dtype`, drawn on
    the host so a seed gives the same values on every GPU."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.rand(*shape, generator=g) * 0.5 + 0.5
    return (mag * (torch.randint(0, 2, shape, generator=g) * 2 - 1)).to(dtype).cuda()


def host_f64(t: Any) -> np.ndarray:
    """A torch tensor (any device) as a float64 numpy array, for the reference."""
    return t.detach().double().cpu().numpy()


def torch_on_gpu() -> Any:
    """The torch module, when PyTorch can make CUDA tensors here; else skip saying exactly why.

    Under the stand-in driver PyTorch's CUDA runtime cannot start: libcudart asks the driver for
    cuGetExportTable (NVIDIA's private function tables), which the stand-in does not implement, so
    cudaGetDeviceCount() fails with error 36 ("API call is not supported in the installed CUDA
    driver"). That is checked before torch.cuda is touched, which would leave the error behind."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if torch.version.cuda is None:
        pytest.skip(f"PyTorch {torch.__version__} is a CPU-only build: CUDA-tensor tests need a CUDA build of PyTorch")
    if on_simulator():
        pytest.skip("PyTorch's CUDA runtime cannot run on ptxgen's stand-in driver (PTXGEN_DRIVER=sim): libcudart "
                    "asks the driver for cuGetExportTable's private tables, which the stand-in does not implement, "
                    "so cudaGetDeviceCount() fails with error 36; these tests run on a GPU (tests/torch runs the "
                    "operators on CPU tensors through the simulator)")
    if not torch.cuda.is_available():
        pytest.skip(f"torch.cuda.is_available() is False (PyTorch {torch.__version__}, CUDA {torch.version.cuda})")
    return torch


def report_path() -> Path:
    """Where observations go: $PTXGEN_GPU_REPORT, else $OUT/gpu_report.jsonl, else a temp file."""
    if os.environ.get("PTXGEN_GPU_REPORT"):
        return Path(os.environ["PTXGEN_GPU_REPORT"])
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"]) / "gpu_report.jsonl"
    return Path(tempfile.gettempdir()) / "ptxgen_gpu_report.jsonl"


def _plain(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist() if x.dtype.kind in "iub" else x.astype(np.float64).tolist()
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def record(test: str, **payload: Any) -> None:
    """Append one observation (what hardware returned) as a JSON line, and print a summary, so
    docs/ptx_facts/ and the simulator can be corrected from a GPU session's output."""
    line = {"test": test, **_plain(payload)}
    path = report_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")
    except OSError as e:
        print(f"[gpu-report] could not write {path}: {e}")
    short = {k: v for k, v in line.items() if not isinstance(v, list) or len(str(v)) < 200}
    print(f"[gpu-report] {json.dumps(short)[:2000]}  (full record in {path})")


def device_compile_arch() -> str:
    """The arch to compile for on this GPU (ptxgen targets sm_80..sm_90)."""
    from ptxgen.runtime.driver import context
    from ptxgen.schedule.targets import TARGETS

    arch = context().arch
    return arch if arch in TARGETS else "sm_80"


def rel_fro(c: np.ndarray, ref: np.ndarray) -> float:
    c64, r64 = c.astype(np.float64), ref.astype(np.float64)
    return float(np.linalg.norm(c64 - r64) / max(np.linalg.norm(r64), 1e-300))


#: relative Frobenius tolerance by output dtype (accumulation is always f32)
TOL = {"f32": 1e-3, "f16": 2e-3, "bf16": 1e-2}
#: output dtypes each input dtype is lowered for (tf32 gives f32, int8 exact s32)
OUTPUTS = {"f16": ["f32", "f16", "bf16"], "bf16": ["f32", "f16", "bf16"], "tf32": ["f32"], "s8": ["s32"],
           "u8": ["s32"]}


def random_operands(g, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random non-zero A (M×K) and B (K×N) in g's dtype and layouts, as numpy arrays."""
    from ptxgen.schedule.problem import numpy_dtype

    rng = np.random.default_rng(seed)
    dt = numpy_dtype(g.dtype)

    def nonzero(shape):
        if g.dtype in ("s8", "u8"):  # small non-zero integers (u8 positive): s32 sums stay exact
            return rng.integers(1, 12, shape) * (rng.choice([-1, 1], shape) if g.dtype == "s8" else 1)
        return (rng.uniform(0.25, 1.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)

    a = nonzero((g.m, g.k)).astype(dt)
    if g.a_layout == "col":
        a = np.asfortranarray(a)
    b = nonzero((g.n, g.k)).astype(dt).T if g.b_layout == "col" else nonzero((g.k, g.n)).astype(dt)
    return a, b


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def draw_kernel(data, arch: str, max_tiles: tuple[int, int, int] = (2, 2, 4)):
    """Draw a valid (Gemm, Schedule) with labelled draws and compile it; illegal ones are
    rejected by the verifier (ScheduleError -> hypothesis.assume(False))."""
    from hypothesis import assume
    from hypothesis import strategies as st

    import ptxgen

    bm = data.draw(st.sampled_from([64, 128, 256]), label="BM")
    bn = data.draw(st.sampled_from([64, 128, 256]), label="BN")
    bk = data.draw(st.sampled_from([32, 64]), label="BK")
    wm = data.draw(st.sampled_from([1, 2, 4]), label="WM")
    wn = data.draw(st.sampled_from([1, 2, 4]), label="WN")
    assume(wm * wn <= 8)
    stages = data.draw(st.integers(1, 5), label="stages")
    smem_layout = data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem_layout")
    raster = data.draw(st.sampled_from(["row", "grouped"]), label="raster")
    fdb = data.draw(st.booleans(), label="frag_double_buffer")
    dtype = data.draw(st.sampled_from(["f16", "bf16", "tf32", "s8", "u8"]), label="dtype")
    a_layout = data.draw(st.sampled_from(["row", "col"]), label="a_layout")
    b_layout = data.draw(st.sampled_from(["row", "col"]), label="b_layout")
    out_dtype = data.draw(st.sampled_from(OUTPUTS[dtype]), label="out_dtype")
    m = bm * data.draw(st.integers(1, max_tiles[0]), label="M tiles")
    n = bn * data.draw(st.integers(1, max_tiles[1]), label="N tiles")
    k = bk * data.draw(st.integers(1, max_tiles[2]), label="K tiles")
    g = ptxgen.Gemm(m, n, k, dtype=dtype, out_dtype=out_dtype, a_layout=a_layout, b_layout=b_layout)
    s = ptxgen.Schedule(block=(bm, bn, bk), warps=(wm, wn), stages=stages, smem_layout=smem_layout,
                        raster=raster, frag_double_buffer=fdb)
    return g, s, compile_or_reject(data, g, s, arch)


def compile_or_reject(data, g, s, arch: str):
    """Compile a drawn (Gemm, Schedule); one the verifier rejects is recorded in the draw log and
    dropped (hypothesis.assume), so tests see only legal schedules."""
    from hypothesis import assume
    from hypothesis import strategies as st

    import ptxgen

    try:
        return ptxgen.compile(g, s, arch=arch)
    except ptxgen.ScheduleError as e:
        data.draw(st.just(str(e)), label="rejected by verifier")
        assume(False)
