"""check_batched_operand: 3-D operands of a Gemm(batch=B) kernel, on numpy and fake device arrays.

One matrix is held to check_operand's rules; these tests cover what the batch adds: the 3-D
shape, the batch stride read from numpy strides / the CUDA array interface / DLPack (sign,
element multiple, alignment, 0 broadcasting inputs but refused for C) and host packing.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.runtime.batch import check_batched_operand, operand_shape
from ptxgen.runtime.operands import check_operand
from test_runtime_operands import F16, F32, FakeCAI, FakeDLPackCUDA, aligned_empty


def batched(x, name="A", batch=3, shape=(64, 32), dtype="f16", layout="row", **kw):
    return check_batched_operand(x, name=name, batch=batch, shape=shape, dtype=dtype,
                                 layout=layout, **kw)


def test_operand_shape():
    assert operand_shape(1, 4, 5) == (4, 5) and operand_shape(3, 4, 5) == (3, 4, 5)


def test_batch_one_is_the_plain_check():
    a = np.zeros((64, 32), F16)
    v = batched(a, batch=1)
    w = check_operand(a, name="A", shape=(64, 32), dtype="f16", layout="row")
    assert (v.batch, v.batch_stride, v.ld, v.nbytes) == (1, 0, w.ld, w.nbytes) == (1, 0, 32, a.nbytes)
    with pytest.raises(ValueError, match=r"shape \(64, 32\): got shape \(3, 64, 32\)"):
        batched(np.zeros((3, 64, 32), F16), batch=1)


def test_contiguous_numpy():
    a = np.zeros((3, 64, 32), F16)
    v = batched(a)
    assert (v.shape, v.full_shape, v.ld, v.batch, v.batch_stride) == ((64, 32), (3, 64, 32), 32, 3, 2048)
    assert v.nbytes == a.nbytes and v.dense and v.host is a and v.kind == "numpy"


def test_strided_numpy_views_and_pack_roundtrip():
    rng = np.random.default_rng(0)
    store = rng.standard_normal((6, 64, 40)).astype(F32)
    a = store[::2, :, :32]  # every other matrix, rows padded to 40
    v = batched(a, dtype="f32")
    assert (v.ld, v.batch_stride, v.span) == (40, 2 * 64 * 40, 2 * 2 * 64 * 40 + 63 * 40 + 32)
    assert not v.dense
    flat = v.pack_host()
    np.testing.assert_array_equal(v.strided(flat), a)
    assert flat.size == v.span and (flat[32:40] == 0).all()  # padding is not copied
    out_store = np.full((6, 64, 40), np.nan, F32)
    out = batched(out_store[::2, :, :32], name="C", shape=(64, 32), dtype="f32", writable=True)
    out.unpack_to_host(flat)
    np.testing.assert_array_equal(out_store[::2, :, :32], a)
    assert np.isnan(out_store[1::2]).all() and np.isnan(out_store[:, :, 32:]).all()


def test_col_major_matrices_and_interleaved_batches():
    bt = np.zeros((3, 48, 64), F16)  # per batch (N, K) C-contiguous: B is col-major K×N
    v = batched(np.swapaxes(bt, 1, 2), name="B", shape=(64, 48), layout="col")
    assert (v.ld, v.strides, v.batch_stride) == (64, (1, 64), 48 * 64)
    inter = np.zeros((64, 3, 32), F16).transpose(1, 0, 2)  # (3, 64, 32), batches interleaved
    v = batched(inter, name="C", writable=True)
    assert (v.ld, v.batch_stride, v.span) == (96, 32, 3 * 64 * 32) and v.dense


def test_broadcast_input_has_stride_zero():
    rng = np.random.default_rng(1)
    one = rng.standard_normal((1, 64, 32)).astype(F16)
    v = batched(np.broadcast_to(one, (3, 64, 32)))
    assert v.batch_stride == 0 and v.span == 64 * 32
    np.testing.assert_array_equal(v.pack_host(), one.ravel())


def test_cai_3d():
    x = FakeCAI((3, 64, 32), "<f2", device=0)  # strides None: C-contiguous
    v = batched(x, device=0)
    assert (v.device_ptr, v.batch_stride, v.ld, v.host) == (0x7F0000000000, 2048, 32, None)
    y = FakeCAI((3, 32, 64), "<f2", strides=(0, 2, 80 * 2))  # one col-major B (ld 80), broadcast
    v = batched(y, name="B", shape=(32, 64), layout="col")
    assert (v.batch_stride, v.ld, v.nbytes) == (0, 80, (63 * 80 + 32) * 2)


def test_dlpack_3d():
    base = aligned_empty((4, 64, 40), F16)
    arr = base[1:, :, :32]  # starts one matrix in, rows padded to 40
    v = batched(FakeDLPackCUDA(arr, dev=0), device=0)
    assert v.kind == "dlpack" and v.device_ptr == base.ctypes.data + 64 * 40 * 2
    assert (v.ld, v.batch_stride) == (40, 64 * 40)


# -- errors ------------------------------------------------------------------------------------
def test_two_d_array_for_a_batched_gemm():
    with pytest.raises(ValueError, match=r"A of a batched GEMM \(batch=3\) must be a 3-D array of "
                                         r"shape \(3, 64, 32\).*got shape \(64, 32\).*np.broadcast_to"):
        batched(np.zeros((64, 32), F16))
    with pytest.raises(ValueError, match=r"C of a batched GEMM.*give each batch its own matrix"):
        batched(np.zeros((64, 32), F32), name="C", dtype="f32", writable=True)
    with pytest.raises(ValueError, match="must be a 3-D array"):
        batched(FakeCAI((64, 32), "<f2"))


def test_wrong_batch_count_and_matrix_shape():
    with pytest.raises(ValueError, match=r"got 2 matrices.*pass 3, or compile with Gemm\(batch=2\)"):
        batched(np.zeros((2, 64, 32), F16))
    with pytest.raises(ValueError, match=r"got shape \(3, 32, 64\); they look transposed.*swapaxes"):
        batched(np.zeros((3, 32, 64), F16))
    with pytest.raises(ValueError, match=r"got shape \(3, 64, 33\)$"):
        batched(np.zeros((3, 64, 33), F16))


def test_negative_batch_stride():
    with pytest.raises(ValueError, match=r"A's batch stride is negative \(-2048 elements.*contiguous copy"):
        batched(np.zeros((3, 64, 32), F16)[::-1])
    with pytest.raises(ValueError, match="batch stride is negative"):
        batched(FakeCAI((3, 64, 32), "<f2", strides=(-4096, 64, 2)))


def test_batch_stride_not_a_whole_element():
    raw = np.zeros(4 * 64 * 32 * 2 + 16, np.uint8)
    x = np.lib.stride_tricks.as_strided(raw.view(F16), (3, 64, 32), (64 * 32 * 2 + 1, 64, 2))
    with pytest.raises(ValueError, match=r"batch stride is 4097 bytes, not a multiple of its 2-byte element"):
        batched(x)


def test_unaligned_batch_stride():
    flat = np.zeros(3 * (64 * 32 + 4), F16)
    x = np.lib.stride_tricks.as_strided(flat, (3, 64, 32), ((64 * 32 + 4) * 2, 64, 2))
    with pytest.raises(ValueError, match=r"A's batch stride is 2052 elements \(4104 bytes\), not a "
                                         r"multiple of 16 bytes.*multiple of 8 elements apart"):
        batched(x, align=16)
    assert batched(x, align=8).batch_stride == 2052  # 4104 bytes is 8-byte aligned
    with pytest.raises(ValueError, match="batch stride is 2052 elements"):
        batched(FakeCAI((3, 64, 32), "<f2", strides=(4104, 64, 2)), align=16)


def test_output_batch_stride_zero():
    c = np.broadcast_to(np.zeros((1, 64, 32), F32), (3, 64, 32))
    with pytest.raises(ValueError, match=r"C has batch stride 0.*every batch would write the same matrix"):
        batched(c, name="C", dtype="f32", writable=True)
    with pytest.raises(ValueError, match="C has batch stride 0"):
        batched(FakeCAI((3, 64, 32), "<f4", strides=(0, 128, 4)), name="C", dtype="f32", writable=True)


def test_per_matrix_rules_still_apply():
    with pytest.raises(TypeError, match=r"A must have dtype f16 \(float16\): got float32"):
        batched(np.zeros((3, 64, 32), F32))
    with pytest.raises(TypeError, match="A must have dtype f16.*got <f4"):
        batched(FakeCAI((3, 64, 32), "<f4"))
    with pytest.raises(ValueError, match=r"B must be stored column-major \(b_layout='col'\)"):
        batched(np.zeros((3, 32, 64), F16), name="B", shape=(32, 64), layout="col")
    with pytest.raises(ValueError, match="leading dimension is 36 elements"):
        batched(np.zeros((3, 64, 36), F16)[:, :, :32])
    ro = np.zeros((3, 64, 32), F32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="C is read-only"):
        batched(ro, name="C", dtype="f32", writable=True)
    with pytest.raises(ValueError, match="base address 0x7f0000000002 is not 16-byte aligned"):
        batched(FakeCAI((3, 64, 32), "<f2", ptr=0x7F0000000002))
    with pytest.raises(ValueError, match="A is on CUDA device 1 but ptxgen runs on device 0"):
        batched(FakeCAI((3, 64, 32), "<f2", device=1), device=0)
