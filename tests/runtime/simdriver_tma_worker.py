"""Tensor maps and cluster launches on the stand-in driver, through the real cuda.bindings, in a
fresh process (a loaded libcuda.so.1 stays for the life of the process).

Runs Triton-written sm_90a TMA kernels from tests/sim/hopper_corpus: assembled with nvJitLink,
loaded as cubins, their CUtensorMaps encoded by cuTensorMapEncodeTiled and passed by value as
128-byte kernel parameters, launched with cuLaunchKernel (or cuLaunchKernelEx). Prints one JSON
object: scenario -> observed value.
"""
import ctypes
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "sim" / "hopper_corpus"))

import harness  # noqa: E402  (the corpus's operands and reference)

from ptxgen import check  # noqa: E402
from ptxgen.runtime import driver as rt  # noqa: E402
from ptxgen.runtime.assemble import assemble  # noqa: E402

MAP_TYPES = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32"}
SWIZZLES = {"none": "NONE", "32B": "32B", "64B": "64B", "128B": "128B"}


def code(result) -> int:
    return int(result[0] if isinstance(result, tuple) else result)


def entry(name: str) -> "harness.Entry":
    return next(e for e in harness.load_entries() if e.name == name)


def encode(d, ptr: int, array: np.ndarray, tile, swizzle: str = "128B", **over):
    """cuTensorMapEncodeTiled for a row-major `array` at device address `ptr` (box outermost
    first, as Triton's metadata gives it); keyword overrides replace any argument."""
    args = dict(
        dtype=getattr(d.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{MAP_TYPES[str(array.dtype)]}"),
        rank=array.ndim, address=ptr, dims=list(array.shape[::-1]), strides=list(array.strides[-2::-1]),
        box=list(tile[::-1]), estrides=[1] * array.ndim,
        interleave=d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle=getattr(d.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{SWIZZLES[swizzle]}"),
        l2=d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        oob=d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    args.update(over)
    u64, u32 = (lambda xs: [d.cuuint64_t(int(x)) for x in xs]), (lambda xs: [d.cuuint32_t(int(x)) for x in xs])
    return d.cuTensorMapEncodeTiled(args["dtype"], args["rank"], args["address"], u64(args["dims"]),
                                    u64(args["strides"]), u32(args["box"]), u32(args["estrides"]), args["interleave"],
                                    args["swizzle"], args["l2"], args["oob"])


class Params:
    """kernelParams for the corpus's parameter roles; tensor maps by value, 64-byte aligned."""

    def __init__(self):
        self.storage: list[np.ndarray] = []

    def add(self, raw: bytes, align: int = 8) -> None:
        buf = np.zeros(len(raw) + align, np.uint8)
        start = (-buf.ctypes.data) % align
        view = buf[start:start + len(raw)]
        view[:] = np.frombuffer(raw, np.uint8)
        self.storage.append((buf, view))

    @property
    def pointers(self) -> np.ndarray:
        self._ptrs = np.array([v.ctypes.data for _, v in self.storage], np.uint64)
        return self._ptrs


def run_corpus(d, name: str, seed: int = 0, shrink_alloc: bool = False, launch_ex_cluster=None) -> dict:
    """Run corpus entry `name` through the driver API; returns statuses and the comparison."""
    e = entry(name)
    meta = e.meta
    arrays, out_name, ref, scalars = harness.build_operands(meta, np.random.default_rng(seed))
    cubin = assemble(e.ptx, "sm_90a", meta["entry"]).cubin
    err, mod = d.cuModuleLoadData(cubin)
    assert code(err) == 0, err
    err, fn = d.cuModuleGetFunction(mod, meta["entry"].encode())
    attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert code(d.cuFuncSetAttribute(fn, attr, meta["shared"])) == 0
    device = {}
    for arg, host in arrays.items():
        nbytes = host.nbytes - (64 if shrink_alloc and arg == out_name else 0)
        err, ptr = d.cuMemAlloc(nbytes)
        d.cuMemcpyHtoD(ptr, np.ascontiguousarray(host).ctypes.data, nbytes)
        device[arg] = int(ptr)
    params, maps = Params(), {}
    descs = meta["tensor_descriptors"]
    for param in meta["params"]:
        role = param["role"].split(":")
        if role[0] == "tensormap":
            err, tmap = encode(d, device[role[1]], arrays[role[1]], descs[role[1]]["block_size"],
                               descs[role[1]]["swizzle"])
            assert code(err) == 0, err
            maps[role[1]] = tmap
            params.add(ctypes.string_at(tmap.getPtr(), 128), 64)
        elif role[0] == "shape":
            params.add(np.uint32(arrays[role[1]].shape[int(role[2])]).tobytes())
        elif role[0] == "stride":
            arr = arrays[role[1]]
            params.add(np.uint64(arr.strides[int(role[2])] // arr.itemsize).tobytes())
        elif role[0] == "scalar":
            params.add(np.uint32(scalars[role[1]]).tobytes())
        elif role[0] == "scratch":
            params.add(np.uint64(0).tobytes())
        else:
            raise ValueError(param["role"])
    ptrs = params.pointers
    grid, block = meta["grid"], meta["block"]
    if launch_ex_cluster is None:
        status = code(d.cuLaunchKernel(fn, *grid, *block, meta["shared"], 0, int(ptrs.ctypes.data), 0))
    else:
        cfg = d.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes, cfg.hStream = meta["shared"], 0
        attr = d.CUlaunchAttribute()
        attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = launch_ex_cluster
        cfg.attrs, cfg.numAttrs = [attr], 1
        status = code(d.cuLaunchKernelEx(cfg, fn, int(ptrs.ctypes.data), 0))
    out = np.empty_like(arrays[out_name])
    if not shrink_alloc:
        d.cuMemcpyDtoH(out.ctypes.data, device[out_name], out.nbytes)
    for ptr in device.values():
        d.cuMemFree(ptr)
    d.cuModuleUnload(mod)
    result = {"status": status}
    if status == 0 and not shrink_alloc:
        cmp = check.compare(out.astype(np.float64), ref, harness.CHECK_DTYPE[str(out.dtype)])
        result.update(ok=bool(cmp.ok), max_err=float(np.max(np.abs(out.astype(np.float64) - ref))))
    return result


def invalid_encodings(d) -> dict:
    """cuTensorMapEncodeTiled's documented rules: each case breaks one."""
    err, ptr = d.cuMemAlloc(64 * 128 * 2)
    ptr = int(ptr)
    a = np.zeros((64, 128), np.float16)
    t = d.CUtensorMapDataType
    cases = {
        "valid": {},
        "rank_0": dict(rank=0), "rank_6": dict(rank=6, dims=[2] * 5, strides=[16] * 4, box=[8] * 5,
                                              estrides=[1] * 5),
        "address_8": dict(address=ptr + 8),
        "dim_0": dict(dims=[128, 0]),
        "stride_unaligned": dict(strides=[200]),
        "stride_2_40": dict(strides=[1 << 40]),
        "box_0": dict(box=[64, 0]), "box_257": dict(box=[64, 257]),
        "inner_box_8_bytes": dict(box=[4, 64], swizzle="none"),
        "estride_0": dict(estrides=[1, 0]), "estride_9": dict(estrides=[1, 9]),
        "swizzle_narrower_than_box": dict(swizzle="64B"),
        "nan_fill_integer": dict(dtype=t.CU_TENSOR_MAP_DATA_TYPE_UINT16,
                                 oob=d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
        "interleave_rank_2": dict(interleave=d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B),
        "interleave_rank_3": dict(interleave=d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B, rank=3,
                                  dims=[8, 4, 4], strides=[16, 64], box=[8, 2, 2], estrides=[1, 1, 1]),
        "nan_fill_float": dict(oob=d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
    }
    out = {}
    for name, over in cases.items():
        try:
            out[name] = code(encode(d, ptr, a, (64, 64), **over))
        except (TypeError, ValueError) as e:  # cuda-python refused before calling the driver
            out[name] = f"bindings: {e}"
    d.cuMemFree(ptr)
    return out


CLUSTER_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry where(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    mov.u32 %r5, %tid.x;
    setp.eq.u32 %p1, %r5, 0;        // lane 0 writes the CTA's row (32 writers would race)
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    mov.u32 %r4, %clusterid.x;
    mul.wide.u32 %rd2, %r1, 12;
    add.s64 %rd3, %rd1, %rd2;
    @%p1 st.global.u32 [%rd3], %r2;
    @%p1 st.global.u32 [%rd3+4], %r3;
    @%p1 st.global.u32 [%rd3+8], %r4;
    ret;
}
"""


def cluster_launch(d, cluster, grid=(4, 1, 1), non_portable: bool = False):
    """cuLaunchKernelEx of `where` (each CTA writes its cluster rank, cluster size, cluster id):
    (status, rows per CTA or None)."""
    cubin = assemble(CLUSTER_PTX, "sm_90", "where").cubin
    err, mod = d.cuModuleLoadData(cubin)
    err, fn = d.cuModuleGetFunction(mod, b"where")
    if non_portable:
        attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
        assert code(d.cuFuncSetAttribute(fn, attr, 1)) == 0
    n = grid[0] * grid[1] * grid[2]
    err, buf = d.cuMemAlloc(12 * n)
    val = np.array([int(buf)], np.uint64)
    ptrs = np.array([val.ctypes.data], np.uint64)
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
    cfg.sharedMemBytes, cfg.hStream = 0, 0
    attr = d.CUlaunchAttribute()
    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    hint = d.CUlaunchAttribute()
    hint.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PRIORITY  # a hint: accepted, no effect
    cfg.attrs, cfg.numAttrs = [attr, hint], 2
    status = code(d.cuLaunchKernelEx(cfg, fn, int(ptrs.ctypes.data), 0))
    rows = np.zeros((n, 3), np.uint32)
    d.cuMemcpyDtoH(rows.ctypes.data, buf, rows.nbytes)
    d.cuMemFree(buf)
    d.cuModuleUnload(mod)
    return status, rows.tolist() if status == 0 else None


def required_cluster_attributes(d) -> dict:
    """cuFuncGetAttribute's cluster attributes of `where` as written, and with .reqnctapercluster 2,1,1;
    and a classic cuLaunchKernel of the latter (the cluster comes from the directive)."""
    out = {}
    names = ("REQUIRED_CLUSTER_WIDTH", "REQUIRED_CLUSTER_HEIGHT", "REQUIRED_CLUSTER_DEPTH",
             "CLUSTER_SIZE_MUST_BE_SET")
    for label, ptx in (("plain", CLUSTER_PTX),
                       ("required", CLUSTER_PTX.replace("(.param .u64 out)", "(.param .u64 out)\n.reqnctapercluster 2, 1, 1"))):
        err, mod = d.cuModuleLoadData(assemble(ptx, "sm_90", "where").cubin)
        err, fn = d.cuModuleGetFunction(mod, b"where")
        out[label] = [int(d.cuFuncGetAttribute(getattr(d.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + n), fn)[1])
                      for n in names]
        if label == "required":
            err, buf = d.cuMemAlloc(48)
            val = np.array([int(buf)], np.uint64)
            ptrs = np.array([val.ctypes.data], np.uint64)
            out["classic_launch"] = code(d.cuLaunchKernel(fn, 4, 1, 1, 32, 1, 1, 0, 0, int(ptrs.ctypes.data), 0))
            rows = np.zeros((4, 3), np.uint32)
            d.cuMemcpyDtoH(rows.ctypes.data, buf, rows.nbytes)
            out["classic_rows"] = rows.tolist()
            d.cuMemFree(buf)
        d.cuModuleUnload(mod)
    return out


def refused_attribute(d, attribute: str) -> int:
    """cuLaunchKernelEx of `where` with one launch attribute of id `attribute` set to 1."""
    cubin = assemble(CLUSTER_PTX, "sm_90", "where").cubin
    err, mod = d.cuModuleLoadData(cubin)
    err, fn = d.cuModuleGetFunction(mod, b"where")
    err, buf = d.cuMemAlloc(64)
    val = np.array([int(buf)], np.uint64)
    ptrs = np.array([val.ctypes.data], np.uint64)
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 1, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
    attr = d.CUlaunchAttribute()
    attr.id = getattr(d.CUlaunchAttributeID, f"CU_LAUNCH_ATTRIBUTE_{attribute}")
    attr.value.cooperative = 1
    cfg.attrs, cfg.numAttrs = [attr], 1
    status = code(d.cuLaunchKernelEx(cfg, fn, int(ptrs.ctypes.data), 0))
    d.cuMemFree(buf)
    d.cuModuleUnload(mod)
    return status


def main() -> None:
    from cuda.bindings import driver as d

    rt.context()
    out = {"encode": invalid_encodings(d)}
    out["copy"] = run_corpus(d, "tma_copy_fp16_64x64_w4")
    out["dot_f16"] = run_corpus(d, "dot_tma_fp16_128x64x64_w4_s3")
    out["dot_bf16"] = run_corpus(d, "dot_tma_bf16_64x64x32_w4_s2", seed=1)
    out["past_allocation"] = run_corpus(d, "tma_copy_fp16_64x64_w4", shrink_alloc=True)
    out["launch_ex_no_cluster"] = run_corpus(d, "tma_copy_fp16_64x64_w4", launch_ex_cluster=(1, 1, 1))
    out["launch_ex_cluster"] = run_corpus(d, "tma_copy_fp16_64x64_w4", launch_ex_cluster=(2, 1, 1))
    out["launch_ex_cluster_3"] = run_corpus(d, "tma_copy_fp16_64x64_w4", launch_ex_cluster=(3, 1, 1))
    out["cluster_2"] = cluster_launch(d, (2, 1, 1))
    out["cluster_grid_not_divisible"] = cluster_launch(d, (2, 1, 1), grid=(3, 1, 1))[0]
    out["cluster_16_portable"] = cluster_launch(d, (16, 1, 1), grid=(16, 1, 1))[0]
    out["cluster_16_non_portable"] = cluster_launch(d, (16, 1, 1), grid=(16, 1, 1), non_portable=True)[0]
    out["cluster_32_non_portable"] = cluster_launch(d, (32, 1, 1), grid=(32, 1, 1), non_portable=True)[0]
    out["cluster_zero"] = cluster_launch(d, (0, 1, 1))[0]
    out["attribute_cooperative"] = refused_attribute(d, "COOPERATIVE")
    out["cluster_attributes"] = required_cluster_attributes(d)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
