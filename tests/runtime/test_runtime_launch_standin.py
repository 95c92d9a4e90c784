"""launch_kernel / launch_ptx through the simulator-backed stand-in driver (the `standin` fixture,
tests/runtime/conftest.py): the real cuda.bindings, ptxgen's real kernels run on ptxgen.sim.

Moved here from the fake-driver tests (fake_driver.py lists what stays there): where the stand-in can check a thing,
it checks it against the driver's own rules (device pointers, the shared-memory opt-in, the
device's limits) with real kernels, not against a Python "kernel" written next to the test.
"""
from __future__ import annotations

import numpy as np
import pytest

import ptx_samples as S
import ptxgen
from ptxgen.check import compare, random_operands, reference
from ptxgen.runtime import driver as drv
from ptxgen.runtime.launch import launch_kernel, launch_ptx

SCHED = ptxgen.Schedule(block=(64, 64, 32), warps=(2, 2), stages=1)


def compile_for_standin(g: ptxgen.Gemm, s: ptxgen.Schedule = SCHED) -> ptxgen.Kernel:
    return ptxgen.compile(g, s, arch="sm_90")


def test_kernel_call_runs_the_real_kernel(standin):
    g = ptxgen.Gemm(64, 64, 64, dtype="f16", out_dtype="f32")
    k = compile_for_standin(g)
    a, b = random_operands(g)
    before = standin.launches
    assert compare(k(a, b), reference(a, b), g.out_dtype).ok
    assert compare(k.run(a, b), reference(a, b), g.out_dtype).ok
    assert standin.launches == before + 2


def test_padded_output_ldc_and_into_c(standin):
    g = ptxgen.Gemm(64, 64, 32, dtype="f16", out_dtype="f32")
    k = compile_for_standin(g)
    a, b = random_operands(g)
    store = np.full((64, 72), -7.0, np.float32)
    out = launch_kernel(k, a, b, c=store[:, :64])
    assert compare(store[:, :64], reference(a, b), g.out_dtype).ok
    assert (store[:, 64:] == -7.0).all()  # the kernel used ldc = 72, not 64
    assert out.base is store or out.base is store.base


def test_device_arrays_return_device_c(standin):
    g = ptxgen.Gemm(64, 128, 64, dtype="bf16", out_dtype="f32")
    k = compile_for_standin(g)
    a, b = random_operands(g)
    da = drv.DeviceArray.from_host(a)
    db_store = drv.DeviceArray.from_host(np.ascontiguousarray(b.T))  # (N, K) row-major
    db = drv.DeviceArray(b.shape, b.dtype, buffer=db_store.buffer, strides=(2, 64 * 2))
    c = launch_kernel(k, da, db)
    assert isinstance(c, drv.DeviceArray) and c.shape == (64, 128)
    assert compare(c.to_host(), reference(a, b), g.out_dtype).ok


def test_mixed_host_and_device_and_bad_operands_fail_before_launch(standin):
    g = ptxgen.Gemm(64, 64, 64, dtype="f16", out_dtype="f32")
    k = compile_for_standin(g)
    a, b = random_operands(g)
    before = standin.launches
    with pytest.raises(TypeError, match="A is a host numpy array but B is a device array"):
        launch_kernel(k, a, drv.DeviceArray(b.shape, b.dtype, strides=(2, 128)))
    with pytest.raises(TypeError, match="C is a device array"):
        launch_kernel(k, a, b, c=drv.DeviceArray((64, 64), np.float32))
    with pytest.raises(ValueError, match="B must be stored column-major"):
        launch_kernel(k, a, np.ascontiguousarray(b))
    with pytest.raises(TypeError, match="C must have dtype f32"):
        launch_kernel(k, a, b, c=np.empty((64, 64), np.float16))
    assert standin.launches == before


def test_memory_the_driver_does_not_know_is_rejected(standin):
    """The stand-in's cuPointerGetAttribute, like the driver's, knows only its allocations."""
    g = ptxgen.Gemm(64, 64, 64, dtype="f16", out_dtype="f32")
    k = compile_for_standin(g)

    class Foreign:
        def __init__(self, shape, strides):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f2", "data": (0x10000, False),
                                             "strides": strides, "version": 3}

    with pytest.raises(ValueError, match="not CUDA device memory"):
        launch_kernel(k, Foreign((64, 64), None), Foreign((64, 64), (2, 128)))


def test_smem_beyond_the_device_limit(standin):
    g = ptxgen.Gemm(64, 64, 64, dtype="f16", out_dtype="f32")
    k = compile_for_standin(g)
    k.smem_bytes = 228 * 1024
    with pytest.raises(ValueError, match=r"needs 233472 B of dynamic shared memory but NVIDIA H100 .* allows "
                                         r"at most 232448 B.*fewer stages"):
        launch_kernel(k, *random_operands(g))


def test_launch_ptx_copies_back_into_numpy(standin):
    x = np.arange(32, dtype=np.float32)
    launch_ptx(S.add_one(), "add1", grid=1, block=32, args=[x, 32])
    np.testing.assert_array_equal(x, np.arange(32, dtype=np.float32) + 1)


def test_launch_ptx_readonly_not_written_back_and_errors(standin):
    x = np.zeros(4, np.float32)
    x.flags.writeable = False
    launch_ptx(S.add_one(), "add1", grid=(1,), block=(4, 1), args=[x, np.uint32(4)])
    assert (x == 0).all()
    with pytest.raises(ValueError, match="takes 2 parameters"):
        launch_ptx(S.add_one(), "add1", 1, 4, [x])
    with pytest.raises(TypeError, match="an integer"):
        launch_ptx(S.add_one(), "add1", 1, 4, [np.zeros(4, np.float32), 4.0])
    with pytest.raises(ValueError, match="C-contiguous"):
        launch_ptx(S.add_one(), "add1", 1, 4, [np.zeros((4, 4), np.float32).T, 4])
    with pytest.raises(ValueError, match="positive sizes"):
        launch_ptx(S.add_one(), "add1", (1, 0), 4, [np.zeros(4, np.float32), 4])


def test_launch_ptx_device_array_and_the_smem_opt_in(standin):
    """80 KB of dynamic shared memory launches only after the opt-in (the stand-in refuses a
    launch above 48 KB without it, as the driver does)."""
    d = drv.DeviceArray.from_host(np.zeros(8, np.float32))
    launch_ptx(S.add_one(), "add1", 1, 8, [d, 8], dynamic_smem=80 * 1024)
    np.testing.assert_array_equal(d.to_host(), np.ones(8, np.float32))


def test_a_refused_call_says_which_rule(standin):
    """A bare CUresult hides which rule was broken; the stand-in's reason joins the DriverError."""
    from ptxgen.runtime import simdriver
    from ptxgen.runtime.assemble import assemble
    from ptxgen.runtime.launch import load_function
    from ptxgen.runtime.params import ParamBlock, parse_params

    ctx = drv.context()
    ptx = S.add_one()
    fn = load_function(assemble(ptx, ctx.arch, "add1").cubin, "add1", ptx)
    buf = drv.DeviceBuffer(64)
    params = ParamBlock(parse_params(ptx, "add1"), [buf.ptr, 16])
    with pytest.raises(drv.DriverError, match=r"CUDA_ERROR_INVALID_VALUE.*says: cuLaunchKernel: 65536 B of dynamic "
                                              r"shared memory .* must opt in"):
        drv._call("cuLaunchKernel", fn.handle, 1, 1, 1, 16, 1, 1, 64 * 1024, 0, params.address, 0)
    drv._call("cuLaunchKernel", fn.handle, 1, 1, 1, 16, 1, 1, 0, 0, params.address, 0)
    assert simdriver.reason() == ""  # each call starts without the last one's reason
    with pytest.raises(drv.DriverError, match=r"says: cuTensorMapEncodeTiled: boxDim must be 1..256 \(got 300\)"):
        d = drv._driver()
        drv._call("cuTensorMapEncodeTiled", d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, buf.ptr,
                  [d.cuuint64_t(16)], [], [d.cuuint32_t(300)], [d.cuuint32_t(1)],
                  d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
                  d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


@pytest.mark.parametrize("batch", [1, 2])
def test_from_host_keeps_a_column_major_b_for_the_default_layout(standin, batch):
    """DeviceArray.from_host(b) of a column-major B keeps its order and strides, so the default
    b_layout="col" kernel takes it without strides set by hand (and to_host gives it back)."""
    g = ptxgen.Gemm(64, 64, 64, dtype="f16", out_dtype="f32", batch=batch)
    k = compile_for_standin(g)
    a, b = random_operands(g)
    assert not b.flags.c_contiguous  # random_operands stores B as the layout says: column-major
    da, db = drv.DeviceArray.from_host(a), drv.DeviceArray.from_host(b)
    assert db.strides == b.strides and np.array_equal(db.to_host(), b)
    c = k(da, db)
    assert compare(c.to_host(), reference(a, b), g.out_dtype).ok
