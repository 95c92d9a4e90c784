"""Run scenarios against the stand-in driver through the real cuda.bindings, in a fresh process.

Why a subprocess: loading a libcuda.so.1 is for the life of a process, and the runtime tests
around this one expect no driver. Prints one JSON object: scenario -> observed value.
Usage: python simdriver_worker.py  (with PTXGEN_DRIVER=sim and the model/version env set)
"""
import ctypes
import json
import os
import threading

import numpy as np

from ptxgen.runtime import driver as rt
from ptxgen.runtime.assemble import assemble
from ptxgen.runtime.simdriver import registry

PTX = """
.version {version}
.target {target}
.address_size 64
.extern .shared .align 16 .b8 dsm[];
.visible .entry fill(.param .u64 out, .param .u32 n, .param .f32 x)
{{
    .reg .pred %p;
    .reg .b32 %r<5>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [x];
    mov.u32 %r2, %tid.x;
    setp.lt.u32 %p, %r2, %r1;
    mov.u32 %r4, %ctaid.x;
    setp.eq.and.u32 %p, %r4, 0, %p;   // CTA 0 writes (the cluster launch has two CTAs)
    cvt.rn.f32.u32 %f2, %r2;
    add.f32 %f2, %f2, %f1;
    mov.u32 %r3, dsm;
    mad.lo.u32 %r3, %r2, 4, %r3;
    st.shared.f32 [%r3], %f1;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    @%p st.global.f32 [%rd3], %f2;
    ret;
}}
"""


def code(result) -> int:
    return int(result[0] if isinstance(result, tuple) else result)


def launch_ex(d, fn, cluster: bool):
    """cuLaunchKernelEx of `fill` (n=16, x=0.5): (status, values right), optionally with a 2x1x1
    cluster attribute."""
    err, buf = d.cuMemAlloc(64)
    vals = [np.array([int(buf)], np.uint64), np.array([16], np.uint32), np.array([0.5], np.float32)]
    ptrs = np.array([v.ctypes.data for v in vals], np.uint64)
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (2 if cluster else 1), 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
    cfg.sharedMemBytes, cfg.hStream = 1024, 0
    if cluster:
        attr = d.CUlaunchAttribute()
        attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = 2, 1, 1
        cfg.attrs, cfg.numAttrs = [attr], 1
    else:
        cfg.numAttrs = 0
    status = code(d.cuLaunchKernelEx(cfg, fn, int(ptrs.ctypes.data), 0))
    res = np.full(16, np.nan, np.float32)
    d.cuMemcpyDtoH(res.ctypes.data, buf, 64)
    d.cuMemFree(buf)
    return status, bool(np.array_equal(res, np.arange(16, dtype=np.float32) + 0.5))


def main() -> None:
    from cuda.bindings import driver as d

    out: dict = {}
    rt.context()  # the runtime's own path: init, primary context, attributes
    lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD)
    out["is_standin"] = hasattr(lib, "simcuda_is_standin")
    out["version"] = d.cuDriverGetVersion()[1]
    ctx = rt.context()
    out["name"], out["arch"], out["optin"], out["sms"] = ctx.name, ctx.arch, ctx.max_smem_optin, ctx.sm_count

    # a context is current per thread: a new thread has none
    seen = {}
    t = threading.Thread(target=lambda: seen.setdefault("alloc", code(d.cuMemAlloc(64))))
    t.start()
    t.join()
    out["other_thread_alloc"] = seen["alloc"]

    # memory: device addresses are not host addresses, and ranges are checked
    err, ptr = d.cuMemAlloc(64)
    out["device_ptr_high"] = int(ptr) >= 0x7FF0000000000000
    host = np.arange(16, dtype=np.float32)
    out["htod_ok"] = code(d.cuMemcpyHtoD(ptr, host.ctypes.data, 64))
    out["htod_past_end"] = code(d.cuMemcpyHtoD(ptr, host.ctypes.data, 65))
    out["htod_to_host_ptr"] = code(d.cuMemcpyHtoD(host.ctypes.data, host.ctypes.data, 4))
    back = np.zeros(16, np.float32)
    d.cuMemcpyDtoH(back.ctypes.data, ptr, 64)
    out["roundtrip"] = bool((back == host).all())
    out["free_twice"] = [code(d.cuMemFree(ptr)), code(d.cuMemFree(ptr))]

    # modules: the device's arch only, cubins ptxgen assembled, PTX within the driver's ISA
    dev_arch = ctx.arch
    ptx = PTX.format(version="8.0", target=dev_arch)
    cubin = assemble(ptx, dev_arch, "fill").cubin
    other = "sm_80" if dev_arch != "sm_80" else "sm_90"
    out["load_other_arch"] = code(d.cuModuleLoadData(assemble(PTX.format(version="8.0", target=other),
                                                                other, "fill").cubin))
    out["load_unknown_cubin"] = code(d.cuModuleLoadData(cubin[:-8] + b"\0" * 8))
    out["load_new_ptx"] = code(d.cuModuleLoadDataEx(PTX.format(version="9.9", target=dev_arch).encode()
                                                    + b"\0", 0, [], []))
    err, mod = d.cuModuleLoadData(cubin)
    out["load_cubin"] = code(err)
    out["get_missing"] = code(d.cuModuleGetFunction(mod, b"nope"))
    err, fn = d.cuModuleGetFunction(mod, b"fill")

    def launch(smem, n=16, buf_bytes=64, extra=0):
        err, buf = d.cuMemAlloc(buf_bytes)
        vals = [np.array([int(buf)], np.uint64), np.array([n], np.uint32), np.array([0.5], np.float32)]
        ptrs = np.array([v.ctypes.data for v in vals], np.uint64)
        status = code(d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, smem, 0, int(ptrs.ctypes.data), extra))
        res = np.full(buf_bytes // 4, np.nan, np.float32)
        d.cuMemcpyDtoH(res.ctypes.data, buf, buf_bytes)
        d.cuMemFree(buf)
        return status, res

    status, res = launch(1024)
    out["launch"] = status
    out["launch_values"] = bool(np.array_equal(res, np.arange(16, dtype=np.float32) + 0.5))
    out["launch_extra"] = launch(1024, extra=int(np.zeros(4, np.uint64).ctypes.data))[0]
    out["launch_oob"] = launch(1024, n=32)[0]  # 32 threads write 128 B into 64 B
    out["launch_64k_no_optin"] = launch(64 * 1024)[0]
    attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    out["optin_64k"] = code(d.cuFuncSetAttribute(fn, attr, 64 * 1024))
    out["launch_64k_optin"] = launch(64 * 1024)[0]
    out["optin_over_limit"] = code(d.cuFuncSetAttribute(fn, attr, ctx.max_smem_optin + 1))
    out["launch_ex"], out["launch_ex_cluster"] = launch_ex(d, fn, cluster=False), launch_ex(d, fn, cluster=True)
    out["num_regs"] = d.cuFuncGetAttribute(d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)[1]
    err, ev0 = d.cuEventCreate(0)
    err, ev1 = d.cuEventCreate(0)
    d.cuEventRecord(ev0, 0)
    d.cuEventRecord(ev1, 0)
    out["elapsed"] = code(d.cuEventElapsedTime(ev0, ev1))
    out["unload"] = code(d.cuModuleUnload(mod))
    out["launch_after_unload"] = launch(0)[0]
    out["registry_has"] = registry.source_of(cubin) is not None
    print(json.dumps(out))


def old_driver() -> None:
    """A driver older than R580: CUDA 13 ELF cubins are refused, PTX within its ISA is JIT-loaded."""
    from cuda.bindings import driver as d

    ctx = rt.context()
    ptx = PTX.format(version="8.0", target=ctx.arch)
    out = {"version": d.cuDriverGetVersion()[1],
           "load_cubin": code(d.cuModuleLoadData(assemble(ptx, ctx.arch, "fill").cubin)),
           "load_ptx": code(d.cuModuleLoadDataEx(ptx.encode() + b"\0", 0, [], [])),
           "load_ptx_85": code(d.cuModuleLoadDataEx(PTX.format(version="8.5", target=ctx.arch).encode()
                                                    + b"\0", 0, [], []))}
    # a refused cubin falls back to the PTX JIT once, and the fallback is remembered
    import warnings

    from ptxgen.runtime import simdriver
    from ptxgen.runtime.launch import load_function

    attempts = simdriver.instance().load_attempts
    cubin = assemble(ptx, ctx.arch, "fill").cubin
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        first = load_function(cubin, "fill", ptx)
        before = dict(attempts)
        second = load_function(cubin, "fill", ptx)
    out["fallback_source"] = first.module.source
    out["fallback_reused"] = first is second and attempts == before
    # a ptxgen kernel: the binary is chosen by the driver version, and k.resources says which
    import ptxgen
    from ptxgen.check import compare, random_operands, reference

    g = ptxgen.Gemm(64, 64, 32, dtype="f16", out_dtype="f32")
    k = ptxgen.compile(g, ptxgen.Schedule(block=(64, 64, 32), warps=(2, 2), stages=1), arch="sm_90")
    a, b = random_operands(g)
    cubin_loads = attempts["cubin"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = compare(k(a, b), reference(a, b), g.out_dtype).ok and compare(k(a, b), reference(a, b),
                                                                          g.out_dtype).ok
    out["kernel_ok"] = ok
    out["kernel_cubin_loads"] = attempts["cubin"] - cubin_loads
    out["kernel_binary"] = k.resources.binary
    out["kernel_warning"] = " ".join(str(w.message) for w in caught)
    print(json.dumps(out))


if __name__ == "__main__":
    old_driver() if os.environ.get("PTXGEN_SIM_DRIVER_VERSION", "13000") < "13000" else main()
