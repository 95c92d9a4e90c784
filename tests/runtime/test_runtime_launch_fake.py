"""launch_kernel / launch_ptx plumbing against a fake driver (tests/runtime/fake_driver.py).

The fake's "device memory" is host memory and its GEMM "kernel" computes C = A @ B from the
pointers and leading dimensions it is passed, so these tests check what reaches the kernel:
pointers, lda/ldb/ldc from real strides, grid/block/smem, streams, copies and poisoning.
What the stand-in driver can check with real kernels is in test_runtime_launch_standin.py.
"""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver as real

import ptx_samples as S
from fake_driver import FakeDriver, gemm_impl
from ptxgen.kernel import Kernel
from ptxgen.runtime import driver as drv
from ptxgen.runtime.launch import launch_kernel, launch_ptx, prepare_launch
from ptxgen.schedule.geometry import grid_for
from ptxgen.schedule.problem import Gemm, numpy_dtype
from ptxgen.schedule.schedule import Schedule

GEMM_TYPES = ["u8"] * 3 + ["u4"] * 6


def make_kernel(g: Gemm, fake: FakeDriver, smem: int = 16384, arch: str = "sm_90",
                impl=None) -> Kernel:
    fake.register("gemm", GEMM_TYPES, impl or gemm_impl(numpy_dtype(g.dtype), numpy_dtype(g.out_dtype),
                                                        g.a_layout, g.b_layout))
    return Kernel(gemm=g, schedule=Schedule(block=(64, 64, 32)), arch=arch, ptx=S.gemm_stub(),
                  entry="gemm", grid=(max(g.n // 64, 1), max(g.m // 64, 1), 1), block=(128, 1, 1),
                  smem_bytes=smem, function=None, allocation=None, smem_plan=None)


def operands(g: Gemm, pad: int = 0, seed: int = 0):
    """Random A, B in the Gemm's layouts, each stored with `pad` extra elements per line."""
    rng = np.random.default_rng(seed)
    dt = numpy_dtype(g.dtype)

    def store(rows, cols, layout):
        if layout == "row":
            return rng.integers(-3, 4, (rows, cols + pad)).astype(dt)[:, :cols]
        return rng.integers(-3, 4, (cols, rows + pad)).astype(dt)[:, :rows].T

    return store(g.m, g.k, g.a_layout), store(g.k, g.n, g.b_layout)


def expected(a, b, out_dtype):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(numpy_dtype(out_dtype))


@pytest.mark.parametrize("a_layout", ["row", "col"])
@pytest.mark.parametrize("b_layout", ["row", "col"])
@pytest.mark.parametrize("dtype,out", [("f16", "f32"), ("bf16", "bf16"), ("f16", "f16")])
@pytest.mark.parametrize("pad", [0, 8])
def test_numpy_inputs_layouts_and_leading_dims(fake, a_layout, b_layout, dtype, out, pad):
    g = Gemm(128, 64, 96, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout)
    k = make_kernel(g, fake)
    a, b = operands(g, pad)
    c = launch_kernel(k, a, b)
    assert isinstance(c, np.ndarray) and c.dtype == numpy_dtype(out) and c.shape == (128, 64)
    np.testing.assert_array_equal(c, expected(a, b, out))
    (L,) = fake.launches
    assert L.args[3:] == [128, 64, 96, (96 if a_layout == "row" else 128) + pad,
                          (64 if b_layout == "row" else 96) + pad, 64]
    assert (L.grid, L.block, L.smem) == ((1, 2, 1), (128, 1, 1), 16384)
    assert fake.allocs == {}  # temporaries freed


def half_writer(fake, args):
    """A buggy kernel that writes only the first half of C's rows (with 1.0)."""
    pc, m, n, ldc = args[2], args[3], args[4], args[8]
    view = fake.view(pc, ((m - 1) * ldc + n) * 4, np.float32)
    for r in range(m // 2):
        view[r * ldc: r * ldc + n] = 1.0


def test_given_c_keeps_poison_where_kernel_does_not_write(fake):
    g = Gemm(64, 64, 32)
    k = make_kernel(g, fake, impl=half_writer)
    a, b = operands(g)
    c = np.full((64, 64), np.nan, np.float32)
    launch_kernel(k, a, b, c=c)
    assert (c[:32] == 1.0).all() and np.isnan(c[32:]).all()


@pytest.mark.parametrize("out", ["f32", "f16", "bf16"])
def test_fresh_c_is_poisoned_with_nan(fake, out):
    g = Gemm(64, 64, 32, out_dtype=out)
    k = make_kernel(g, fake, impl=lambda f, args: None)
    a, b = operands(g)
    c = launch_kernel(k, a, b)
    assert np.isnan(c.astype(np.float32)).all()


def test_bias_and_scale_vectors_follow_ldc_in_order(fake):
    """A quantised int8 GEMM: the f32 bias and f32 scale pointers come after ldc, bias first, and
    the "kernel" sees their contents; a missing or unexpected scale fails before any launch."""
    from ptxgen import Epilogue

    g = Gemm(64, 64, 32, dtype="s8", out_dtype="s8", epilogue=Epilogue(bias="row", scale="col"))
    seen = {}

    def impl(f, args):
        seen["bias"] = f.view(args[9], 64 * 4, np.float32).copy()
        seen["scale"] = f.view(args[10], 64 * 4, np.float32).copy()

    fake.register("gemm", GEMM_TYPES + ["u8", "u8"], impl)
    ptx = S.gemm_stub().replace(".param .u32 ldc\n", ".param .u32 ldc, .param .u64 bias, .param .u64 scale\n")
    k = Kernel(gemm=g, schedule=Schedule(block=(64, 64, 32)), arch="sm_90", ptx=ptx, entry="gemm", grid=(1, 1, 1),
               block=(128, 1, 1), smem_bytes=16384, function=None, allocation=None, smem_plan=None)
    a, b = operands(g)
    bias, scale = np.arange(64, dtype=np.float32) - 7.5, np.linspace(0.01, 0.5, 64, dtype=np.float32)
    k(a, b, bias=bias, scale=scale)
    assert np.array_equal(seen["bias"], bias) and np.array_equal(seen["scale"], scale)
    (L,) = fake.launches
    assert L.args[3:9] == [64, 64, 32, 32, 32, 64]
    with pytest.raises(ValueError, match="pass scale="):
        k(a, b, bias=bias)
    with pytest.raises(ValueError, match="scale must be a 1-D array of length 64"):
        k(a, b, bias=bias, scale=scale[:63])
    db_store = drv.DeviceArray.from_host(np.ascontiguousarray(b.T))  # (N, K) row-major s8
    da, db = drv.DeviceArray.from_host(a), drv.DeviceArray(b.shape, b.dtype, buffer=db_store.buffer, strides=(1, 32))
    with pytest.raises(TypeError, match="bias is a host numpy array but A and B are device arrays"):
        k(da, db, bias=bias, scale=drv.DeviceArray.from_host(scale))  # its pointer would be null there
    with pytest.raises(TypeError, match="scale is a device array but A and B are host numpy arrays"):
        k(a, b, bias=bias, scale=drv.DeviceArray.from_host(scale))
    assert len(fake.launches) == 1
    seen.clear()  # device vectors without reshape (bare __cuda_array_interface__) are taken as they are
    k(da, db, bias=drv.DeviceArray.from_host(bias), scale=drv.DeviceArray.from_host(scale))
    assert np.array_equal(seen["bias"], bias) and np.array_equal(seen["scale"], scale)


def test_device_arrays_return_device_c(fake):
    g = Gemm(64, 128, 64, dtype="bf16", out_dtype="f32")
    k = make_kernel(g, fake)
    a, b = operands(g)
    da = drv.DeviceArray.from_host(a)
    db_store = drv.DeviceArray.from_host(np.ascontiguousarray(b.T))  # (N, K) row-major
    db = drv.DeviceArray(b.shape, b.dtype, buffer=db_store.buffer, strides=(2, 64 * 2))
    n_sync = fake.calls.count("cuStreamSynchronize")
    c = launch_kernel(k, da, db, stream=0x55)
    assert isinstance(c, drv.DeviceArray) and c.shape == (64, 128)
    assert fake.calls.count("cuStreamSynchronize") == n_sync  # device path: asynchronous
    assert fake.launches[-1].stream == 0x55
    assert fake.launches[-1].args[:2] == [da.ptr, db.ptr]
    np.testing.assert_array_equal(c.to_host(), expected(a, b, "f32"))


def test_producer_stream_is_waited_on(fake):
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake)
    a, b = operands(g)
    da = drv.DeviceArray.from_host(a)
    db = drv.DeviceArray.from_host(np.ascontiguousarray(b.T))
    db_view = drv.DeviceArray(b.shape, b.dtype, buffer=db.buffer, strides=(2, 128))

    class WithStream:
        def __init__(self, arr, stream):
            self.arr = arr
            self.__cuda_array_interface__ = dict(arr.__cuda_array_interface__, stream=stream)

    launch_kernel(k, WithStream(da, 9), db_view, c=drv.DeviceArray((64, 64), np.float32), stream=3)
    i = fake.calls.index("cuEventRecord")
    assert fake.calls[i + 1] == "cuStreamWaitEvent" and i < fake.calls.index("cuLaunchKernel")


def test_large_smem_opt_in_once_per_function(fake):
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake, smem=100 * 1024)
    a, b = operands(g)
    launch_kernel(k, a, b)
    launch_kernel(k, a, b)
    attr = int(real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    assert list(fake.func_attrs.items()) == [(((1000, "gemm"), attr), 100 * 1024)]
    assert fake.calls.count("cuFuncSetAttribute") == 1
    assert fake.calls.count("cuModuleLoadData") == 1  # module cached per context + cubin


def test_small_smem_needs_no_opt_in(fake):
    g = Gemm(64, 64, 64)
    launch_kernel(make_kernel(g, fake, smem=48 * 1024), *operands(g))
    assert fake.func_attrs == {}


def test_cubin_failure_falls_back_to_ptx_jit(fake):
    fake.fail["cuModuleLoadData"] = real.CUresult.CUDA_ERROR_INVALID_IMAGE
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake, smem=64 * 1024)
    a, b = operands(g)
    with pytest.warns(RuntimeWarning, match="falling back to the driver's PTX JIT"):
        c = launch_kernel(k, a, b)
    np.testing.assert_array_equal(c, expected(a, b, "f32"))
    assert "cuModuleLoadDataEx" in fake.calls
    assert list(fake.func_attrs.values()) == [64 * 1024]  # opt-in set on the JIT'd handle too
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launch_kernel(k, a, b)
    assert fake.calls.count("cuModuleLoadDataEx") == 1


def test_arch_mismatch_reassembles_for_device(fake):
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake, arch="sm_80")  # device is sm_90: sm_80 SASS cannot run there
    a, b = operands(g)
    with pytest.warns(RuntimeWarning, match="compiled for sm_80 cannot run natively.*sm_90.*arch='sm_90a'"):
        launch_kernel(k, a, b)
    assert fake.calls.count("cuModuleLoadData") == 1 and "cuModuleLoadDataEx" not in fake.calls


def test_a_gpu_without_a_target_of_its_own_is_not_told_to_compile_for_one(fake):
    """A 12.0 GPU runs sm_90's PTX assembled for it; the warning names no arch ptxgen lacks."""
    fake.cc = (12, 0)
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake, arch="sm_90")
    with pytest.warns(RuntimeWarning, match="cannot run natively.*sm_120.*no target of this GPU's own") as seen:
        launch_kernel(k, *operands(g))
    assert "Compile with" not in str(seen[0].message)


def test_driver_errors_name_the_call(fake):
    fake.fail["cuLaunchKernel"] = real.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    g = Gemm(64, 64, 64)
    with pytest.raises(drv.DriverError, match=r"cuLaunchKernel failed with "
                                              r"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES \(701\).*fewer warps"):
        launch_kernel(make_kernel(g, fake), *operands(g))


def test_wrong_kernel_signature(fake):
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake)
    k.ptx = S.add_one()
    k.entry = "add1"
    fake.register("add1", ["u8", "u4"], lambda f, a: None)
    with pytest.raises(ValueError, match="must take"):
        launch_kernel(k, *operands(g))


def test_prepare_launch(fake):
    g = Gemm(64, 64, 64)
    k = make_kernel(g, fake)
    a, b = operands(g)
    da = drv.DeviceArray.from_host(a)
    db = drv.DeviceArray(b.shape, b.dtype, buffer=drv.DeviceArray.from_host(
        np.ascontiguousarray(b.T)).buffer, strides=(2, 128))
    dc = drv.DeviceArray((64, 64), np.float32)
    run = prepare_launch(k, da, db, dc, stream=7)
    before = len(fake.calls)
    run()
    run()
    # only the launch, after making the context current (run may be called from any thread)
    assert fake.calls[before:] == ["cuCtxSetCurrent", "cuLaunchKernel"] * 2
    np.testing.assert_array_equal(dc.to_host(), expected(a, b, "f32"))
    with pytest.raises(TypeError, match="device arrays"):
        prepare_launch(k, a, b, np.empty((64, 64), np.float32))


# -- launch_ptx ---------------------------------------------------------------------------------
def add1_impl(fake, args):
    p, n = args
    v = fake.view(p, n * 4, np.float32)
    v += 1.0


def test_launch_ptx_picks_arch_from_device_and_target(fake, monkeypatch):
    import ptxgen.runtime.assemble as A

    seen = []
    real_assemble = A.assemble
    monkeypatch.setattr(A, "assemble", lambda p, arch, e: (seen.append(arch), real_assemble(p, arch, e))[1])
    fake.register("add1", ["u8", "u4"], add1_impl)
    launch_ptx(S.add_one(), "add1", 1, 1, [np.zeros(1, np.float32), 1])
    launch_ptx(S.add_one(target="sm_90a", version="8.0"), "add1", 1, 1, [np.zeros(1, np.float32), 1])
    launch_ptx(S.add_one(), "add1", 1, 1, [np.zeros(1, np.float32), 1], arch="sm_90a")
    assert seen == ["sm_90", "sm_90a", "sm_90a"]


def test_bf16_dtype_sanity():
    assert numpy_dtype("bf16") == np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("sms,grid", [(None, 132), (40, 40)])
def test_stream_k_grid_follows_the_device_and_sizes_its_scratch(fake, sms, grid):
    """sms=None fills the device's SMs (the fake has 132) whatever grid the kernel was compiled
    with; the workspace (one f32 tile per CTA) and the flags are sized for that grid, zeroed
    once, and reused by later launches."""
    g = Gemm(512, 512, 256)
    s = Schedule(block=(64, 64, 32), decomposition="stream-k", sms=sms)
    seen = []

    def impl(fk, args):
        gemm_impl(np.float16, np.float32, "row", "col")(fk, args[:9])
        ws, flags = args[9:]
        seen.append((len(fk.allocs[fk._owner(ws, 1)]), fk.view(flags, grid * 4, np.uint32).copy()))

    ptx = S.gemm_stub().replace(".param .u32 ldc", ".param .u32 ldc, .param .u64 workspace, .param .u64 counters")
    fake.register("gemm", GEMM_TYPES + ["u8"] * 2, impl)
    kern = Kernel(gemm=g, schedule=s, arch="sm_90", ptx=ptx, entry="gemm", grid=grid_for(g, s, 108), block=(128, 1, 1),
                  smem_bytes=16384, function=None, allocation=None, smem_plan=None)
    a, b = operands(g)
    for _ in range(2):
        c = launch_kernel(kern, a, b)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-6)
    assert [launch.grid for launch in fake.launches] == [(grid, 1, 1)] * 2
    assert all(launch.cooperative for launch in fake.launches)  # every CTA resident: cuLaunchKernelEx
    assert [size for size, _ in seen] == [grid * 64 * 64 * 4] * 2 and not seen[0][1].any()
    assert len(kern._split_k_scratch) == 1  # allocated once, kept for later launches


class _View:
    """A device matrix at `ptr` with byte `strides` (only the CUDA array interface)."""

    def __init__(self, ptr: int, shape, typestr: str, strides=None):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def test_output_overlapping_an_input_is_refused(fake):
    """C sharing bytes with A, B or the bias would be overwritten while other CTAs still read them:
    refused on the device path (pointer arithmetic) and the host path (np.shares_memory), naming both
    operands and the fix; C exactly in place (beta) and strided views that interleave without
    sharing an element are fine."""
    from ptxgen import Epilogue

    g = Gemm(64, 64, 64, out_dtype="f16", bias_dtype="f16", epilogue=Epilogue(bias="col"))
    k = make_kernel(g, fake)
    fake.register("gemm", GEMM_TYPES + ["u8"], lambda f, args: None)
    k.ptx = S.gemm_stub().replace(".param .u32 ldc\n", ".param .u32 ldc, .param .u64 bias\n")
    store = drv.DeviceBuffer(64 * 256 * 2)
    row = 256 * 2  # a (64, 256) f16 buffer: matrices are 64-column slices of it
    a = _View(store.ptr, (64, 64), "<f2", (row, 2))
    b = _View(store.ptr + 64 * 2, (64, 64), "<f2", (2, row))  # column-major, like the Gemm's B
    bias = _View(store.ptr + 3 * 64 * 2, (64,), "<f2")
    for name, c in (("A", _View(store.ptr + 32 * 2, (64, 64), "<f2", (row, 2))),
                    ("B", _View(store.ptr + 64 * 2 + 5 * row, (64, 64), "<f2", (row, 2))),
                    ("bias", _View(store.ptr + 3 * 64 * 2, (64, 64), "<f2", (row, 2)))):
        with pytest.raises(ValueError, match=rf"C overlaps {name} in memory .* Pass a separate array for C"):
            launch_kernel(k, a, b, c=c, bias=bias)
    c = _View(store.ptr + 2 * 64 * 2, (64, 64), "<f2", (64 * 2, 2))  # dense: runs into A's second row
    with pytest.raises(ValueError, match="C overlaps A"):
        launch_kernel(k, a, b, c=c, bias=bias)
    assert fake.launches == []
    launch_kernel(k, a, b, c=_View(store.ptr + 2 * 64 * 2, (64, 64), "<f2", (row, 2)), bias=bias)
    assert len(fake.launches) == 1  # interleaved with A and B, sharing no element: fine

    host = np.ones((64, 256), np.float16)
    ha, hb, hbias = host[:, :64], host[:, 64:128].T.copy().T, np.ones(64, np.float16)
    with pytest.raises(ValueError, match="C overlaps A"):
        launch_kernel(k, ha, hb, c=host[:, 32:96], bias=hbias)
    with pytest.raises(ValueError, match="C overlaps bias"):
        launch_kernel(k, ha, hb, c=host[:, 128:192], bias=host[3, 150:214])
    launch_kernel(k, ha, hb, c=host[:, 128:192], bias=hbias)
    assert len(fake.launches) == 2


@pytest.mark.parametrize("compiled", ["f32", "f16"])
def test_bias_reaches_the_kernel_in_its_compiled_dtype(fake, compiled):
    """f16 output: an f32-bias kernel (the default) takes an f32 bias as it is and a host f16/bf16
    bias widened exactly; an f16-bias kernel takes f16. Anything else fails before any launch,
    naming the fix."""
    from ptxgen import Epilogue

    g = Gemm(64, 64, 32, out_dtype="f16", bias_dtype=compiled, epilogue=Epilogue(bias="col"))
    seen = []
    want = numpy_dtype(compiled)
    fake.register("gemm", GEMM_TYPES + ["u8"], lambda f, args: seen.append(f.view(args[9], 64 * want.itemsize,
                                                                                 want).copy()))
    ptx = S.gemm_stub().replace(".param .u32 ldc\n", ".param .u32 ldc, .param .u64 bias\n")
    k = Kernel(gemm=g, schedule=Schedule(block=(64, 64, 32)), arch="sm_90", ptx=ptx, entry="gemm", grid=(1, 1, 1),
               block=(128, 1, 1), smem_bytes=16384, function=None, allocation=None, smem_plan=None)
    a, b = operands(g)
    exact = np.arange(64, dtype=np.float32) / 4 - 7.5  # exact in f16 and bf16 too
    takes = ["f32", "f16", "bf16"] if compiled == "f32" else ["f16"]
    for dt in takes:
        k(a, b, bias=exact.astype(numpy_dtype(dt)))
        assert seen[-1].dtype == want and np.array_equal(seen[-1].astype(np.float32), exact), dt
    if compiled == "f32":
        with pytest.raises(TypeError, match=r"bias has dtype f16 .*compiled for a f32 bias.*bias\.float\(\)"):
            store = drv.DeviceArray.from_host(np.ascontiguousarray(b.T))  # (N, K) row-major
            db = drv.DeviceArray(b.shape, b.dtype, buffer=store.buffer, strides=(2, 64))
            k(drv.DeviceArray.from_host(a), db, bias=drv.DeviceArray.from_host(exact.astype(np.float16)))
    else:
        with pytest.raises(TypeError, match=r"compile with Gemm\(bias_dtype='f32'\)"):
            k(a, b, bias=exact)
    assert len(fake.launches) == len(takes)
