"""Run by test_simdriver_b200.py in a process of its own under the stand-in's B200 model
(PTXGEN_DRIVER=sim PTXGEN_SIM_DEVICE=b200): a `Rebindable` (how ptxgen.torch launches CUDA tensors)
made for an sm_100a tcgen05 kernel and relaunched on operands at new addresses must re-encode its
tensor maps and compute from the new operands, never touching the first C. Prints one line per
relaunch and exits 1 on a wrong result."""
from __future__ import annotations

import sys

import numpy as np

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import compare, poisoned, random_operands, reference
from ptxgen.runtime import DeviceArray
from ptxgen.runtime.rebind import Rebindable


def device(x: np.ndarray) -> DeviceArray:
    """A device copy keeping x's layout: a transposed (column-major) array stays column-major."""
    if x.flags.c_contiguous:
        return DeviceArray.from_host(x)
    store = DeviceArray.from_host(np.ascontiguousarray(x.T))
    return DeviceArray(x.shape, x.dtype, buffer=store.buffer, strides=(x.itemsize, x.shape[0] * x.itemsize))


def main() -> int:
    g = Gemm(200, 136, 72, dtype="bf16", out_dtype="bf16", b_layout="col", epilogue=Epilogue(bias="col"))
    k = ptxgen.compile(g, Schedule(block=(128, 64, 64), instruction="tcgen05", stages=2), arch="sm_100a")

    def operands(seed: int):
        a, b = random_operands(g, seed)
        bias = np.random.default_rng(seed).uniform(-1, 1, g.n).astype(np.float32)
        c = DeviceArray.from_host(poisoned((g.m, g.n), g.out_dtype))
        return (device(a), device(b), c, DeviceArray.from_host(bias)), (a, b, bias)

    first, _ = operands(1)
    launch = Rebindable(k, *first)
    ok = True
    for seed in (2, 3):
        (a, b, c, bias), (ha, hb, hbias) = operands(seed)
        launch.launch(a.ptr, b.ptr, c.ptr, bias.ptr, 0, stream=0)
        result = compare(c.to_host(), reference(ha, hb, g.epi, bias=hbias), g)
        print(f"relaunch {seed}: {launch.n_maps} tensor maps, {result}")
        ok = ok and result.ok
    untouched = bool(np.isnan(first[2].to_host().astype(np.float32)).all())
    print(f"first C untouched: {untouched}")
    return 0 if ok and untouched else 1


if __name__ == "__main__":
    sys.exit(main())
