"""Batched GEMM launches against the fake driver, running the real kernels on the simulator.

The fake "kernel" is ptxgen's own PTX executed by `ptxgen.sim` over the fake device memory the
launch's pointers name (tests/runtime/fake_driver.py: sim_impl), so a wrong pointer, a batch
stride in bytes instead of elements, a missing parameter or a wrong grid shows as wrong values
or an out-of-bounds fault, not only as a different argument list.
"""
from __future__ import annotations

import numpy as np
import pytest

import ptx_samples as S
import ptxgen
from fake_driver import FakeDriver, sim_impl
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import compare, random_epilogue_operands, random_operands, reference
from ptxgen.runtime import driver as drv
from ptxgen.runtime.launch import launch_kernel, prepare_launch
from ptxgen.runtime.params import parse_params
from test_runtime_operands import FakeCAI, FakeDLPackCUDA

SCHED = Schedule(block=(64, 64, 32), stages=2)


def compile_on_fake(g: Gemm, fake: FakeDriver, s: Schedule = SCHED) -> ptxgen.Kernel:
    """Compile for the fake's sm_90 and register the simulator as the kernel's implementation."""
    k = ptxgen.compile(g, s, arch="sm_90")
    types = ["u8" if d.type == "u64" else "u4" for d in parse_params(k.ptx, k.entry)]
    fake.register(k.entry, types, sim_impl(k.ptx, k.entry))
    return k


def device_view(fake: FakeDriver, host: np.ndarray, shape, strides_el, offset_el: int = 0) -> FakeCAI:
    """`host`'s bytes in fake device memory, seen as an array `offset_el` elements in with the given
    element strides (how a cupy/torch slice or broadcast looks through the CUDA array interface)."""
    buf = drv.DeviceBuffer(host.nbytes)
    buf.upload(host, 0)
    isz = host.itemsize
    x = FakeCAI(tuple(shape), host.dtype.str, ptr=buf.ptr + offset_el * isz,
                strides=tuple(s * isz for s in strides_el))
    x.buffer = buf  # keep the allocation alive
    return x


def device_copy(fake: FakeDriver, x: np.ndarray) -> FakeCAI:
    """A dense numpy array's values in fake device memory, with the same element strides."""
    order = sorted(range(x.ndim), key=lambda ax: -x.strides[ax])  # outermost axis first
    store = np.ascontiguousarray(x.transpose(order))
    strides = [0] * x.ndim
    for i, ax in enumerate(order):
        strides[ax] = store.strides[i] // x.itemsize
    return device_view(fake, store, x.shape, strides)


def elements(x: FakeCAI, fake: FakeDriver, count: int, dtype) -> np.ndarray:
    return fake.view(x.__cuda_array_interface__["data"][0], count * np.dtype(dtype).itemsize, dtype)


def test_numpy_round_trip_into_strided_c(fake):
    g = Gemm(40, 48, 64, batch=3, a_layout="col")
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    a_store = np.zeros((5, 64, 48), a.dtype)  # col-major A: per batch (K, M) rows padded to 48
    a_store[::2, :, :40] = np.swapaxes(a, 1, 2)
    a_view = np.swapaxes(a_store[::2, :, :40], 1, 2)  # batch stride 2*64*48, lda 48
    c_store = np.full((3, 41, 56), -7.0, np.float32)  # ldc 56 and a spare row between batches
    c = c_store[:, :40, :48]
    out = k(a_view, b, c=c)
    assert out is c
    assert compare(c, reference(a, b), g).ok
    assert (c_store[:, 40:] == -7.0).all() and (c_store[:, :, 48:] == -7.0).all()
    (L,) = fake.launches
    assert L.grid == (1, 1, 3) and L.grid == k.grid
    # M, N, K, lda, ldb, ldc, then the batch strides in elements: the caller's, kept in the copies
    assert L.args[3:12] == [40, 48, 64, 48, 64, 56, 2 * 64 * 48, 64 * 48, 41 * 56]
    assert fake.allocs == {}  # staging buffers freed


def test_numpy_fresh_c_and_broadcast_operands(fake):
    g = Gemm(64, 64, 64, batch=3)
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    shared_b = np.broadcast_to(b[:1], b.shape)
    c = k(a, shared_b)
    assert isinstance(c, np.ndarray) and c.shape == (3, 64, 64) and c.dtype == np.float32
    assert compare(c, reference(a, shared_b), g).ok
    assert fake.launches[-1].args[9:12] == [64 * 64, 0, 64 * 64]
    shared_a = np.broadcast_to(a[1:2], a.shape)
    c = k(shared_a, b)
    assert compare(c, reference(shared_a, b), g).ok
    assert fake.launches[-1].args[9:12] == [0, 64 * 64, 64 * 64]


def test_fresh_numpy_c_is_poisoned_in_every_batch(fake):
    g = Gemm(64, 64, 32, batch=2)
    k = ptxgen.compile(g, SCHED, arch="sm_90")
    fake.register(k.entry, ["u8"] * 3 + ["u4"] * 6 + ["u8"] * 3, lambda f, args: None)
    c = k(*random_operands(g))
    assert c.shape == (2, 64, 64) and np.isnan(c).all()


def test_device_arrays_pointers_and_strides(fake):
    g = Gemm(64, 64, 64, batch=3, out_dtype="f16")
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    # A: the last 3 of 4 contiguous matrices (pointer one matrix in); B: one col-major matrix
    # broadcast to every batch (batch stride 0); C: fresh, from A's "framework".
    da = device_view(fake, np.concatenate([a[:1], a]), a.shape, (64 * 64, 64, 1), offset_el=64 * 64)
    db = device_view(fake, np.ascontiguousarray(b[0].T), b.shape, (0, 1, 64))
    n_sync = fake.calls.count("cuStreamSynchronize")
    c = k(da, db, stream=5)
    assert fake.calls.count("cuStreamSynchronize") == n_sync  # device path stays asynchronous
    assert isinstance(c, drv.DeviceArray) and c.shape == (3, 64, 64) and c.dtype == np.float16
    L = fake.launches[-1]
    assert L.args[:3] == [da.buffer.ptr + 64 * 64 * 2, db.buffer.ptr, c.ptr] and L.stream == 5
    assert L.args[9:12] == [64 * 64, 0, 64 * 64]
    shared_b = np.broadcast_to(b[:1], b.shape)
    assert compare(c.to_host(), reference(a, shared_b), g).ok


def test_device_c_given_with_beta_is_read_and_updated_in_place(fake):
    g = Gemm(64, 64, 64, batch=2, epilogue=Epilogue(alpha=0.5, beta=-1.0, activation="relu"))
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    c0, _ = random_epilogue_operands(g)
    da, db = device_copy(fake, a), device_copy(fake, b)
    store = np.zeros((2, 64, 72), np.float32)
    store[:, :, :64] = c0
    dc = device_view(fake, store, c0.shape, (64 * 72, 72, 1))
    assert k(da, db, c=dc) is dc
    assert fake.launches[-1].args[8:12] == [72, 64 * 64, 64 * 64, 64 * 72]
    got = elements(dc, fake, store.size, np.float32).reshape(store.shape)
    assert compare(got[:, :, :64], reference(a, b, g.epilogue, c0), g).ok
    assert (got[:, :, 64:] == 0).all()


def test_dlpack_device_arrays(fake):
    g = Gemm(64, 64, 64, batch=2)
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    da = device_copy(fake, a)
    mem = elements(da, fake, a.size, a.dtype).reshape(a.shape)  # numpy over the fake memory
    bt = device_copy(fake, b)
    bmem = np.swapaxes(elements(bt, fake, b.size, b.dtype).reshape(2, 64, 64), 1, 2)
    dc = drv.DeviceArray((2, 64, 64), np.float32)
    k(FakeDLPackCUDA(mem), FakeDLPackCUDA(bmem), c=dc)
    assert fake.launches[-1].args[:2] == [mem.ctypes.data, bmem.ctypes.data]
    assert compare(dc.to_host(), reference(a, b), g).ok


@pytest.mark.parametrize("mode", ["workspace", "atomic"])
def test_split_k_with_batches(fake, mode):
    epi = Epilogue(beta=0.5, bias="col") if mode == "workspace" else None  # C read (numpy, batched)
    g = Gemm(64, 64, 128, batch=3, epilogue=epi)
    s = Schedule(block=(64, 64, 32), stages=2, split_k=2, split_k_mode=mode)
    k = compile_on_fake(g, fake, s)
    a, b = random_operands(g)
    c0, bias = random_epilogue_operands(g)
    c = np.full((3, 64, 64), np.nan, np.float32) if c0 is None else c0.copy()
    k(a, b, c=c, bias=bias)
    L = fake.launches[-1]
    assert L.grid == (1, 1, 6)  # ctaid.z = batch * split_k + split
    assert compare(c, reference(a, b, g.epilogue, c0, bias), g).ok
    if mode == "workspace":  # bias, then workspace and counters sized for every batch
        (ws, counters), = k._split_k_scratch.values()  # one grid, one workspace
        assert L.args[12:] == [L.args[12], ws.ptr, counters.ptr]
        assert (ws.nbytes, counters.nbytes) == (k.workspace_elements * 4, k.counter_count * 4)
        assert k.workspace_elements == 2 * 3 * 64 * 64 and k.counter_count == 3
        c = c0.copy()
        k(a, b, c=c, bias=bias)  # the kernel left its counters at zero: a second launch works
        assert compare(c, reference(a, b, g.epilogue, c0, bias), g).ok


def test_atomic_split_k_zeroes_every_batch_of_a_dense_device_c(fake):
    g = Gemm(64, 64, 128, batch=2)
    k = compile_on_fake(g, fake, Schedule(block=(64, 64, 32), stages=2, split_k=2, split_k_mode="atomic"))
    a, b = random_operands(g)
    da, db = device_copy(fake, a), device_copy(fake, b)
    dc = device_copy(fake, np.full((2, 64, 64), 5.0, np.float32))
    k(da, db, c=dc)
    got = elements(dc, fake, 2 * 64 * 64, np.float32).reshape(2, 64, 64)
    assert compare(got, reference(a, b), g).ok  # stale 5.0s were zeroed before accumulating
    gapped = device_view(fake, np.zeros((2, 65, 64), np.float32), (2, 64, 64), (65 * 64, 64, 1))
    with pytest.raises(ValueError, match=r"without gaps: got leading dimension 64 \(dense: 64\), "
                                         r"batch stride 4160 \(dense: 4096\)"):
        k(da, db, c=gapped)


def test_prepare_launch_batched(fake):
    g = Gemm(64, 64, 64, batch=2)
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    da, db = device_copy(fake, a), device_copy(fake, b)
    dc = drv.DeviceArray((2, 64, 64), np.float32)
    run = prepare_launch(k, da, db, dc)
    run()
    assert fake.launches[-1].args[9:12] == [64 * 64] * 3
    assert compare(dc.to_host(), reference(a, b), g).ok


def test_bad_batched_inputs_fail_before_launch(fake):
    g = Gemm(64, 64, 64, batch=2)
    k = compile_on_fake(g, fake)
    a, b = random_operands(g)
    with pytest.raises(ValueError, match=r"A of a batched GEMM \(batch=2\) must be a 3-D array"):
        k(a[0], b)
    with pytest.raises(ValueError, match=r"B of a batched GEMM.*got 3 matrices"):
        k(a, np.concatenate([b, b[:1]]))
    with pytest.raises(ValueError, match="A's batch stride is negative"):
        k(a[::-1], b)
    with pytest.raises(ValueError, match="C has batch stride 0"):
        k(a, b, c=np.broadcast_to(np.zeros((1, 64, 64), np.float32), (2, 64, 64)))
    with pytest.raises(TypeError, match="C must have dtype f32"):
        k(a, b, c=np.zeros((2, 64, 64), np.float16))
    flat = np.zeros(2 * (64 * 64 + 4), a.dtype)
    skewed = np.lib.stride_tricks.as_strided(flat, a.shape, ((64 * 64 + 4) * 2, 128, 2))
    with pytest.raises(ValueError, match="A's batch stride is 4100 elements"):
        k(skewed, b)
    with pytest.raises(TypeError, match="A is a host numpy array but B is a device array"):
        k(a, device_copy(fake, b))
    assert fake.launches == []


def test_batched_kernel_without_batch_parameters_is_refused(fake):
    g = Gemm(64, 64, 64, batch=2)
    k = ptxgen.compile(g, SCHED, arch="sm_90")
    k.ptx, k.entry = S.gemm_stub("stub", target="sm_90"), "stub"
    fake.register("stub", ["u8"] * 3 + ["u4"] * 6, lambda f, args: None)
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="3 × .u64 batch strides when batched"):
        launch_kernel(k, a, b)


def test_stream_k_with_batches_runs_the_real_kernel(fake):
    """A batched Stream-K kernel through the launch path: the persistent grid follows the fake
    device's SM count (capped by the MAC iterations), and the workspace and flags passed last
    let the real PTX, run on the simulator, fix up its split tiles."""
    g = Gemm(100, 72, 300, batch=2, epilogue=Epilogue(bias="col"))
    s = Schedule(block=(64, 64, 32), stages=3, decomposition="stream-k-pure")
    k = compile_on_fake(g, fake, s)
    a, b = random_operands(g)
    _, bias = random_epilogue_operands(g)
    for _ in range(2):  # the kernel resets its flags: the second launch is right too
        c = k(a, b, bias=bias)
        assert compare(c, reference(a, b, g.epilogue, None, bias), g).ok
    assert fake.launches[-1].grid == (2 * 2 * 2 * 10, 1, 1)  # 8 tiles x 10 k-tiles < 132 SMs
