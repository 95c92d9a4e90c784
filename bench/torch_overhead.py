"""Python overhead per call of ptxgen.torch's operators against torch.matmul (issue 23).

On a GPU (`--device cuda`): host time per call of `ptxgen.torch.gemm`, `torch.ops.ptxgen.gemm` and
`torch.matmul` on small CUDA tensors, issued back to back (the GPU queues the launches), best of
`--repeats`; the difference is what ptxgen adds per call.

Without a GPU (the default, `--device cpu`) CPU tensors would run on the simulator, whose run
would swamp everything, so the host-side parts are timed separately, each on its own:
  * torch.matmul and torch.mm on tiny CPU tensors (their own overhead plus a ~1 us product);
  * an empty `torch.library.custom_op` (what PyTorch's dispatcher costs any Python operator);
  * `ptxgen.torch.gemm` with the kernel run replaced by nothing: argument checks, the kernel
    lookup (a dictionary hit), the output allocation and the custom-op dispatch;
  * `Rebindable.launch` (the CUDA path's per-call work: the new addresses into the packed
    parameters, making the context current) through the simulator-backed stand-in driver, with
    cuLaunchKernel itself replaced by nothing (the real driver's launch, ~2-4 us, is paid by
    torch.matmul's kernels too).
The estimate of ptxgen's extra host time per CUDA call is (ptxgen.torch.gemm without the run +
Rebindable.launch without cuLaunchKernel) - torch.matmul.

Usage: python bench/torch_overhead.py [--device cpu|cuda] [--calls 20000] [-o bench/results/FILE.txt]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def per_call_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Best of `repeats` of the mean host time per call over `calls` calls, in microseconds."""
    return interleaved({"": fn}, calls, repeats)[""]


def interleaved(fns: dict[str, Callable[[], object]], calls: int, repeats: int) -> dict[str, float]:
    """`per_call_us` of several functions, their rounds alternating, so that a busy machine's load
    (this one's 2 cores are shared) weighs on each alike; the best round of each, in microseconds."""
    for fn in fns.values():
        for _ in range(min(calls, 200)):  # warm caches and lazy initialisation
            fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


def rebindable_launch_us(calls: int, repeats: int) -> float:
    """Rebindable.launch's host work through the stand-in driver, cuLaunchKernel replaced by nothing."""
    os.environ["PTXGEN_DRIVER"] = "sim"
    import numpy as np

    import ptxgen
    from ptxgen.runtime import DeviceArray
    from ptxgen.runtime.rebind import Rebindable

    g = ptxgen.Gemm(64, 64, 64, dtype="f16", out_dtype="f16", b_layout="col")
    k = ptxgen.compile(g, ptxgen.Schedule(block=(32, 32, 32), warps=(2, 2), stages=2), arch="sm_90")
    a = DeviceArray.from_host(np.ones((64, 64), np.float16))
    bt = DeviceArray.from_host(np.ones((64, 64), np.float16))
    b = DeviceArray((64, 64), np.float16, buffer=bt.buffer, strides=(2, 128))
    c = DeviceArray((64, 64), np.float16)
    launch = Rebindable(k, a, b, c)
    launch._launch = lambda *args: (0,)  # cuLaunchKernel's own time is not ptxgen's overhead
    return per_call_us(lambda: launch.launch(a.ptr, b.ptr, c.ptr, 0, 0, 0), calls, repeats)


def cpu_rows(calls: int, repeats: int) -> list[tuple[str, float]]:
    import torch

    import ptxgen.torch as pt
    from ptxgen.torch import ops

    a = torch.randn(16, 16, dtype=torch.float32)
    w = torch.randn(16, 16, dtype=torch.float32)
    wt = w.t()

    def empty_impl(x, y):
        return torch.empty((x.shape[0], y.shape[1]), dtype=x.dtype)

    empty = torch.library.custom_op("ptxgen_bench::empty", empty_impl, mutates_args=(),
                                    schema="(Tensor x, Tensor y) -> Tensor")
    a16, w16 = a.half(), w.half().t()
    pt.gemm(a16, w16)  # compile once (the simulator runs it once)
    real_run = ops.run
    ops.run = lambda *args: None
    try:
        times = interleaved({
            "torch.matmul(a, w.t()), 16x16 f32 CPU": lambda: torch.matmul(a, wt),
            "torch.mm(a, w.t()), 16x16 f32 CPU": lambda: torch.mm(a, wt),
            "torch.empty(16, 16) (the output allocation alone)": lambda: torch.empty((16, 16), dtype=torch.float16),
            "empty torch.library.custom_op (dispatch only)": lambda: empty(a, wt),
            "ptxgen.torch.gemm, 16x16x16 f16, kernel run skipped": lambda: pt.gemm(a16, w16),
            "torch.ops.ptxgen.gemm, same": lambda: torch.ops.ptxgen.gemm(a16, w16),
        }, calls, repeats)
    finally:
        ops.run = real_run
    rows = list(times.items())
    rows.append(("Rebindable.launch, sm_90 mma.sync kernel, cuLaunchKernel skipped (stand-in driver)",
                 rebindable_launch_us(calls, repeats)))
    return rows


def cuda_rows(calls: int, repeats: int) -> list[tuple[str, float]]:
    import torch

    import ptxgen.torch as pt

    a = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    wt = torch.randn(64, 64, dtype=torch.float16, device="cuda").t()
    pt.gemm(a, wt)
    torch.cuda.synchronize()
    times = interleaved({"torch.matmul, 64x64x64 f16": lambda: torch.matmul(a, wt),
                         "ptxgen.torch.gemm, same": lambda: pt.gemm(a, wt),
                         "torch.ops.ptxgen.gemm, same": lambda: torch.ops.ptxgen.gemm(a, wt)}, calls, repeats)
    torch.cuda.synchronize()
    return list(times.items())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("-o", "--output")
    args = p.parse_args()
    import torch

    rows = (cuda_rows if args.device == "cuda" else cpu_rows)(args.calls, args.repeats)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{platform.processor() or 'cpu'}, {os.cpu_count()} cores"
    lines = [f"# bench/torch_overhead.py --device {args.device} --calls {args.calls} --repeats {args.repeats}",
             f"# ptxgen {commit}, torch {torch.__version__}, Python {platform.python_version()}, {where}",
             f"# host time per call, best of {args.repeats} means over {args.calls} calls (rounds interleaved); "
             f"load average {os.getloadavg()[0]:.1f} at the end", ""]
    lines += [f"{us:9.2f} us  {name}" for name, us in rows]
    if args.device == "cpu":
        extra = (rows[4][1] + rows[6][1]) - rows[0][1]
        lines += ["", f"estimated extra host time of ptxgen.torch.gemm over torch.matmul per CUDA call: {extra:.2f} us",
                  "(ptxgen.torch.gemm without the run + Rebindable.launch without cuLaunchKernel - torch.matmul)"]
    else:
        lines += ["", f"extra host time of ptxgen.torch.gemm over torch.matmul per call: {rows[1][1] - rows[0][1]:.2f} us"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output:
        Path(args.output).write_text(text)


if __name__ == "__main__":
    main()
