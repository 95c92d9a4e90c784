"""check_operand: every rule, on numpy arrays and on fake device arrays (no GPU needed)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen.runtime.operands import check_operand, normalize_dtype

F16, BF16, F32 = np.float16, ml_dtypes.bfloat16, np.float32


def aligned_empty(shape, dtype, offset_bytes=0, align=256):
    """A C-contiguous array whose base address is `offset_bytes` past an `align` boundary."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    raw = np.zeros(n + 2 * align, np.uint8)
    start = (-raw.ctypes.data) % align + offset_bytes
    return raw[start:start + n].view(dt).reshape(shape)


class FakeCAI:
    """A device array seen only through __cuda_array_interface__ (like CuPy/Numba/PyTorch)."""

    def __init__(self, shape, typestr, ptr=0x7F0000000000, strides=None, readonly=False,
                 device=None, dtype_name=None, stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": 3}
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream
        if device is not None:
            self.device = type("Dev", (), {"index": device, "type": "cuda"})()
        if dtype_name is not None:
            self.dtype = dtype_name


class FakeDLPackCUDA:
    """Wraps a numpy array but claims (via __dlpack_device__) to live on CUDA device `dev`."""

    def __init__(self, arr, dev=0):
        self.arr, self.dev = arr, dev

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return (2, self.dev)


class TorchBF16Like(FakeDLPackCUDA):
    """Like torch bf16: __cuda_array_interface__ raises, DLPack works."""

    @property
    def __cuda_array_interface__(self):
        raise TypeError("dtype torch.bfloat16 is not supported by __cuda_array_interface__")


# -- numpy: the accepted forms -----------------------------------------------------------------
def test_row_major_a():
    a = np.zeros((128, 64), F16)
    v = check_operand(a, name="A", shape=(128, 64), dtype="f16", layout="row")
    assert (v.ld, v.layout, v.strides, v.itemsize) == (64, "row", (64, 1), 2)
    assert v.host is a and v.device_ptr is None and v.device is None and v.kind == "numpy"
    assert v.nbytes == a.nbytes


def test_col_major_b_as_transpose():
    bt = np.zeros((32, 64), F16)  # (N, K) C-contiguous
    v = check_operand(bt.T, name="B", shape=(64, 32), dtype="f16", layout="col")
    assert (v.ld, v.strides) == (64, (1, 64))


def test_padded_leading_dimension_is_kept():
    big = np.zeros((128, 72), F16)
    v = check_operand(big[:, :64], name="A", shape=(128, 64), dtype="f16", layout="row")
    assert v.ld == 72 and v.nbytes == (127 * 72 + 64) * 2
    flat = v.pack_host()
    assert flat.size == 127 * 72 + 64


def test_pack_unpack_roundtrip_col():
    rng = np.random.default_rng(0)
    store = rng.standard_normal((48, 40)).astype(F32)  # (N, ld) storage of a col-major K×N B
    b = store[:, :32].T  # logical K=32 × N=48, ld = 40
    v = check_operand(b, name="B", shape=(32, 48), dtype="f32", layout="col")
    assert v.ld == 40
    flat = v.pack_host()
    np.testing.assert_array_equal(v.strided(flat), b)
    out = np.full((48, 40), np.nan, F32)
    v2 = check_operand(out[:, :32].T, name="B", shape=(32, 48), dtype="f32", layout="col")
    v2.unpack_to_host(flat)
    np.testing.assert_array_equal(out[:, :32], store[:, :32])
    assert np.isnan(out[:, 32:]).all()  # padding untouched


@pytest.mark.parametrize("dtype,np_dtype", [("f16", F16), ("bf16", BF16), ("f32", F32)])
def test_dtypes(dtype, np_dtype):
    check_operand(np.zeros((8, 8), np_dtype), name="C", shape=(8, 8), dtype=dtype, layout="row")


@pytest.mark.parametrize("given,expect", [("f16", "f16"), (np.float16, "f16"), (np.dtype("float32"), "f32"),
                                          (BF16, "bf16"), ("torch.bfloat16", "bf16"), ("float16", "f16")])
def test_normalize_dtype(given, expect):
    assert normalize_dtype(given) == expect


def test_size_one_dimension_stride_is_irrelevant():
    x = np.zeros((1, 64), F16)
    # a single row stored "column-major" is also a valid row-major row
    v = check_operand(x, name="A", shape=(1, 64), dtype="f16", layout="row")
    assert v.ld == 64
    col = np.zeros((64, 1), F16)  # (K=64, N=1) with strides (1, 1): fine as col-major B
    v = check_operand(col, name="B", shape=(64, 1), dtype="f16", layout="col")
    assert v.ld == 64
    weird = np.lib.stride_tricks.as_strided(np.zeros(64, F16), (1, 64), (0, 2))
    check_operand(weird, name="A", shape=(1, 64), dtype="f16", layout="row")


def test_host_base_alignment_not_required_but_ld_is():
    x = aligned_empty((16, 64), F16, offset_bytes=2)
    check_operand(x, name="A", shape=(16, 64), dtype="f16", layout="row")  # copied to fresh memory


# -- numpy: every rejection, with its message ----------------------------------------------------
def test_wrong_type():
    with pytest.raises(TypeError, match=r"A must be an array.*np.asarray"):
        check_operand([[1.0]], name="A", shape=(1, 1), dtype="f16", layout="row")
    with pytest.raises(TypeError, match=r"numpy array or a CUDA device array"):
        check_operand(object(), name="A", shape=(1, 1), dtype="f16", layout="row")


def test_wrong_shape_and_transposed_hint():
    with pytest.raises(ValueError, match=r"A must be the logical M×K matrix with shape \(128, 64\): "
                                         r"got shape \(64, 128\); it looks transposed: pass a.T"):
        check_operand(np.zeros((64, 128), F16), name="A", shape=(128, 64), dtype="f16", layout="row")
    with pytest.raises(ValueError, match=r"got shape \(128, 64, 1\)"):
        check_operand(np.zeros((128, 64, 1), F16), name="A", shape=(128, 64), dtype="f16", layout="row")


def test_wrong_dtype():
    with pytest.raises(TypeError, match=r"B must have dtype f16 \(float16\): got float32.*astype.*torch.float16"):
        check_operand(np.zeros((8, 8), F32), name="B", shape=(8, 8), dtype="f16", layout="row")
    with pytest.raises(TypeError, match=r"dtype bf16 \(bfloat16\): got float16"):
        check_operand(np.zeros((8, 8), F16), name="A", shape=(8, 8), dtype="bf16", layout="row")


def test_b_expected_col_major_got_row_major():
    b = np.zeros((4096, 64), F16)[:64, :]  # row-major K×N with ld 64... make strides (4096,1)-like
    b = np.zeros((64, 4096), F16)[:, :64]
    with pytest.raises(ValueError) as ei:
        check_operand(b, name="B", shape=(64, 64), dtype="f16", layout="col")
    msg = str(ei.value)
    assert "B must be stored column-major (b_layout='col'): got strides (4096, 1) elements" in msg
    assert "pass b.T of a C-contiguous (N, K) array or compile with b_layout='row'" in msg


def test_a_expected_row_major_got_col_major():
    a = np.zeros((64, 128), F16).T  # (128, 64) with strides (1, 128)
    with pytest.raises(ValueError, match=r"A must be stored row-major \(a_layout='row'\): got strides "
                                         r"\(1, 128\) elements; pass a C-contiguous \(M, K\) array.*"
                                         r"compile with a_layout='col'"):
        check_operand(a, name="A", shape=(128, 64), dtype="f16", layout="row")


def test_c_must_be_row_major_no_layout_option():
    c = np.zeros((32, 16), F32).T
    with pytest.raises(ValueError) as ei:
        check_operand(c, name="C", shape=(16, 32), dtype="f32", layout="row", writable=True)
    assert "C must be stored row-major: got strides (1, 16)" in str(ei.value)
    assert "_layout=" not in str(ei.value)


def test_leading_dimension_too_small():
    base = np.zeros(64 * 64, F16)
    a = np.lib.stride_tricks.as_strided(base, (64, 64), (32 * 2, 2))  # rows overlap
    with pytest.raises(ValueError, match=r"leading dimension >= K=64: got strides \(32, 1\) elements "
                                         r"\(leading dimension 32\)"):
        check_operand(a, name="A", shape=(64, 64), dtype="f16", layout="row")


def test_negative_strides():
    a = np.zeros((16, 16), F16)[::-1]
    with pytest.raises(ValueError, match="negative strides"):
        check_operand(a, name="A", shape=(16, 16), dtype="f16", layout="row")


def test_non_element_strides():
    raw = np.zeros(16 * 33, np.uint8)
    a = np.lib.stride_tricks.as_strided(raw.view(np.uint8), (16, 16), (33, 1))
    a16 = np.lib.stride_tricks.as_strided(np.zeros(16 * 40, F16), (16, 8), (33, 2))
    with pytest.raises(ValueError, match="not multiples of its 2-byte element"):
        check_operand(a16, name="A", shape=(16, 8), dtype="f16", layout="row")
    del a


def test_leading_dimension_alignment():
    a = np.zeros((16, 100), F16)[:, :96]  # ld 100 halves = 200 bytes
    with pytest.raises(ValueError, match=r"A's leading dimension is 100 elements \(200 bytes\), not a "
                                         r"multiple of 16 bytes.*multiple of 8 elements"):
        check_operand(a, name="A", shape=(16, 96), dtype="f16", layout="row")
    check_operand(a, name="A", shape=(16, 96), dtype="f16", layout="row", align=8)
    c = np.zeros((16, 6), F32)  # 24-byte rows
    with pytest.raises(ValueError, match="multiple of 4 elements"):
        check_operand(c, name="C", shape=(16, 6), dtype="f32", layout="row")


def test_readonly_output():
    c = np.zeros((8, 8), F32)
    c.flags.writeable = False
    check_operand(c, name="A", shape=(8, 8), dtype="f32", layout="row")  # inputs may be read-only
    with pytest.raises(ValueError, match="C is read-only"):
        check_operand(c, name="C", shape=(8, 8), dtype="f32", layout="row", writable=True)


def test_bad_layout_name():
    with pytest.raises(ValueError, match="layout='rowmajor'"):
        check_operand(np.zeros((8, 8), F16), name="A", shape=(8, 8), dtype="f16", layout="rowmajor")


# -- device arrays through __cuda_array_interface__ ----------------------------------------------
def test_cai_contiguous():
    x = FakeCAI((128, 64), "<f2", device=0)
    v = check_operand(x, name="A", shape=(128, 64), dtype="f16", layout="row", device=0)
    assert (v.device_ptr, v.host, v.ld, v.device, v.kind) == (0x7F0000000000, None, 64, 0,
                                                              "cuda_array_interface")


def test_cai_strided_col_major_b():
    x = FakeCAI((64, 32), "<f2", strides=(2, 72 * 2))  # K=64 × N=32, col-major, ld 72
    v = check_operand(x, name="B", shape=(64, 32), dtype="f16", layout="col")
    assert v.ld == 72 and v.strides == (1, 72) and v.nbytes == (31 * 72 + 64) * 2


def test_cai_wrong_layout():
    x = FakeCAI((64, 32), "<f2")  # C-contiguous (row-major) but B must be col
    with pytest.raises(ValueError, match=r"B must be stored column-major.*strides \(32, 1\)"):
        check_operand(x, name="B", shape=(64, 32), dtype="f16", layout="col")


def test_cai_base_alignment():
    x = FakeCAI((16, 64), "<f2", ptr=0x7F0000000002)
    with pytest.raises(ValueError, match=r"base address 0x7f0000000002 is not 16-byte aligned \(off by 2"):
        check_operand(x, name="A", shape=(16, 64), dtype="f16", layout="row")


def test_cai_dtype():
    with pytest.raises(TypeError, match="must have dtype f16.*got <f4"):
        check_operand(FakeCAI((8, 8), "<f4"), name="A", shape=(8, 8), dtype="f16", layout="row")
    check_operand(FakeCAI((8, 8), "<f4"), name="C", shape=(8, 8), dtype="f32", layout="row")
    # a raw 2-byte void is bf16 only when the array says so
    with pytest.raises(TypeError):
        check_operand(FakeCAI((8, 8), "<V2"), name="A", shape=(8, 8), dtype="bf16", layout="row")
    check_operand(FakeCAI((8, 8), "<V2", dtype_name="bfloat16"), name="A", shape=(8, 8),
                  dtype="bf16", layout="row")


def test_cai_readonly_and_device_and_stream():
    with pytest.raises(ValueError, match="read-only"):
        check_operand(FakeCAI((8, 8), "<f4", readonly=True), name="C", shape=(8, 8), dtype="f32",
                      layout="row", writable=True)
    with pytest.raises(ValueError, match=r"A is on CUDA device 1 but ptxgen runs on device 0.*cuda:0.*"
                                         r"PTXGEN_DEVICE=1"):
        check_operand(FakeCAI((8, 8), "<f2", device=1), name="A", shape=(8, 8), dtype="f16",
                      layout="row", device=0)
    v = check_operand(FakeCAI((8, 8), "<f2", stream=7), name="A", shape=(8, 8), dtype="f16",
                      layout="row")
    assert v.stream == 7


def test_cai_mask_rejected():
    x = FakeCAI((8, 8), "<f2")
    x.__cuda_array_interface__["mask"] = object()
    with pytest.raises(TypeError, match="masked"):
        check_operand(x, name="A", shape=(8, 8), dtype="f16", layout="row")


# -- DLPack ------------------------------------------------------------------------------------------
def test_dlpack_cuda_path_reads_the_struct():
    base = aligned_empty((64, 40), F16)
    arr = base[:, :32].T  # logical (32, 64), strides (1, 40)
    x = FakeDLPackCUDA(arr, dev=0)
    v = check_operand(x, name="B", shape=(32, 64), dtype="f16", layout="col", device=0)
    assert v.kind == "dlpack" and v.host is None and v.device == 0
    assert v.device_ptr == arr.ctypes.data and v.ld == 40 and v.strides == (1, 40)


def test_dlpack_dtype_and_device_checks():
    x = FakeDLPackCUDA(aligned_empty((8, 8), F32), dev=1)
    with pytest.raises(TypeError, match="dtype f16.*got float32"):
        check_operand(x, name="A", shape=(8, 8), dtype="f16", layout="row")
    with pytest.raises(ValueError, match="device 1"):
        check_operand(x, name="C", shape=(8, 8), dtype="f32", layout="row", device=0)


def test_dlpack_cpu_becomes_host():
    class CPUOnly:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.arange(64, dtype=F32).reshape(8, 8)
    v = check_operand(CPUOnly(a), name="A", shape=(8, 8), dtype="f32", layout="row")
    assert v.host is not None and v.device_ptr is None
    np.testing.assert_array_equal(v.host, a)


def test_cai_failure_falls_back_to_dlpack():
    arr = aligned_empty((8, 8), F32)
    v = check_operand(TorchBF16Like(arr), name="A", shape=(8, 8), dtype="f32", layout="row")
    assert v.kind == "dlpack" and v.device_ptr == arr.ctypes.data


def test_unsupported_dlpack_device():
    class Metal(FakeDLPackCUDA):
        def __dlpack_device__(self):
            return (8, 0)

    with pytest.raises(TypeError, match="DLPack device type 8"):
        check_operand(Metal(np.zeros((8, 8), F32)), name="A", shape=(8, 8), dtype="f32", layout="row")
