"""ptxgen.runtime.tensormaps through the stand-in driver and the real cuda.bindings, in a fresh
process: Triton-written sm_90a TMA kernels (tests/sim/hopper_corpus) launched with maps that
`encode_tiled` made for ptxgen DeviceArrays. Prints one JSON object: scenario -> observed value.
"""
import json
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "sim" / "hopper_corpus"))

import harness  # noqa: E402

from ptxgen import check  # noqa: E402
from ptxgen.errors import AssembleError  # noqa: E402
from ptxgen.runtime.assemble import assemble  # noqa: E402
from ptxgen.runtime import driver as rt  # noqa: E402
from ptxgen.runtime import tensormaps  # noqa: E402


def for_this_assembler(ptx: str, entry: str, arch: str = "sm_90a") -> str:
    """`ptx` with its `.version` lowered to what the installed assembler takes, when it refuses the
    declared one. Triton 3.9 declares ISA 9.4 (its own ptxas's); the driver/nvJitLink 13.0 of a lent
    H200 takes 9.0 at most (bench/results/2026-11-26-on-device-6080041). The corpus kernels use
    nothing past ISA 8.0 (sm_90a TMA, mbarrier, wgmma), so the lowered text means the same."""
    try:
        assemble(ptx, arch, entry)
        return ptx
    except AssembleError as e:
        m = re.search(r"Unsupported \.version [\d.]+; current version is '([\d.]+)'", str(e))
        if not m:
            raise
        return re.sub(r"^\.version [\d.]+", f".version {m.group(1)}", ptx, count=1, flags=re.MULTILINE)


def run(name: str, seed: int = 0, cluster=None, padded_rows: bool = False) -> dict:
    """Launch corpus entry `name` through tensormaps.launch; the output compared with numpy."""
    e = next(x for x in harness.load_entries() if x.name == name)
    meta = e.meta
    arrays, out_name, ref, scalars = harness.build_operands(meta, np.random.default_rng(seed))
    device = {}
    for arg, host in arrays.items():
        if padded_rows and host.ndim == 2:  # rows padded to 16 bytes more: a strided view
            wide = np.zeros((host.shape[0], host.shape[1] + 16 // host.itemsize), host.dtype)
            wide[:, :host.shape[1]] = host
            buf = rt.DeviceArray.from_host(wide).buffer
            device[arg] = rt.DeviceArray(host.shape, host.dtype, buf, strides=wide.strides)
        else:
            device[arg] = rt.DeviceArray.from_host(host)
    descs = meta["tensor_descriptors"]
    args = []
    for param in meta["params"]:
        role = param["role"].split(":")
        if role[0] == "tensormap":
            d = descs[role[1]]
            args.append(tensormaps.encode_tiled(device[role[1]], d["block_size"], swizzle=d["swizzle"]))
        elif role[0] == "shape":
            args.append(int(arrays[role[1]].shape[int(role[2])]))
        elif role[0] == "stride":
            strides = device[role[1]].strides or arrays[role[1]].strides
            args.append(int(strides[int(role[2])] // arrays[role[1]].itemsize))
        elif role[0] == "scalar":
            args.append(int(scalars[role[1]]))
        else:  # Triton's scratch pointers: unused by the corpus
            args.append(0)
    try:
        tensormaps.launch(for_this_assembler(e.ptx, meta["entry"]), meta["entry"], meta["grid"], meta["block"], args,
                          dynamic_smem=meta["shared"], cluster=cluster)
        rt.context().synchronize()
    except rt.DriverError as err:
        return {"error": str(err)}
    out_dev = device[out_name]
    if out_dev.strides is not None:
        full = np.empty((out_dev.shape[0], out_dev.strides[0] // out_dev.dtype.itemsize), out_dev.dtype)
        out_dev.buffer.download(full)
        rt._call("cuStreamSynchronize", 0)
        out = full[:, :out_dev.shape[1]]
    else:
        out = out_dev.to_host()
    cmp = check.compare(out.astype(np.float64), ref, harness.CHECK_DTYPE[str(out.dtype)])
    return {"ok": bool(cmp.ok)}


def main() -> None:
    rt.context()
    out = {"copy": run("tma_copy_fp16_64x64_w4"),
           "dot_f16": run("dot_tma_fp16_128x64x64_w4_s3"),
           "dot_fp8": run("dot_tma_fp8e4nv_128x64x64_w4_s4"),
           "copy_padded": run("tma_copy_fp16_64x64_w4", padded_rows=True),
           "copy_cluster": run("tma_copy_fp16_64x64_w4", cluster=(2, 1, 1))}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
