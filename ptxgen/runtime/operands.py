"""Check GEMM operands (numpy, or any CUDA array) against what a compiled kernel assumes.

Why one framework-agnostic checker: the GPU launcher and the CPU simulator must accept and
reject exactly the same inputs, and each rejection must say what was found, what is required
and how to fix it. Device arrays are read through `__cuda_array_interface__` (CuPy, Numba,
PyTorch) or DLPack (`__dlpack__`/`__dlpack_device__`, e.g. JAX) without importing those
frameworks.

Conventions: A is the logical M×K matrix, B the logical K×N, C the M×N output. Layout "row"
means the last index is contiguous (element strides (ld, 1)); "col" means the first index is
(element strides (1, ld)). A size-1 dimension's stride is irrelevant.
"""
from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..schedule.problem import DTYPE_BYTES, numpy_dtype

__all__ = ["OperandView", "RawArray", "check_matrix", "check_no_aliasing", "check_operand", "normalize_dtype",
           "read_array"]

#: ptxgen dtype -> (CUDA-array-interface typestrs, DLPack (code, bits), torch dtype name)
_DTYPE_INFO: dict[str, tuple[tuple[str, ...], tuple[int, int], str]] = {
    "f16": (("<f2",), (2, 16), "float16"),
    "bf16": (("<V2", "|V2", "<bf16"), (4, 16), "bfloat16"),  # V2 accepted only if .dtype says bf16
    "f32": (("<f4",), (2, 32), "float32"),
    "tf32": (("<f4",), (2, 32), "float32"),
    "s8": (("|i1", "<i1"), (0, 8), "int8"),
    "u8": (("|u1", "<u1"), (1, 8), "uint8"),
    "s32": (("<i4",), (0, 32), "int32"),
    # fp8: no array-interface typestr (torch's refuses them); DLPack 1.1's kDLFloat8_e4m3fn / _e5m2
    "e4m3": ((), (10, 8), "float8_e4m3fn"),
    "e5m2": ((), (12, 8), "float8_e5m2"),
}
_ALIASES = {"float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "float": "f32",
            "int8": "s8", "uint8": "u8", "int32": "s32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
#: The logical dimensions of each operand, for messages.
DIMS = {"a": ("M", "K"), "b": ("K", "N"), "c": ("M", "N")}
_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13


def normalize_dtype(dtype: Any) -> str:
    """A ptxgen dtype name from a name, numpy dtype, torch dtype or cupy dtype."""
    if isinstance(dtype, str) and dtype in DTYPE_BYTES:
        return dtype
    text = str(dtype).rsplit(".", 1)[-1].lower()  # "torch.float16" -> "float16"
    if text in _ALIASES:
        return _ALIASES[text]
    try:
        np_name = np.dtype(dtype).name
    except TypeError:
        np_name = ""
    if np_name in _ALIASES:
        return _ALIASES[np_name]
    raise TypeError(f"dtype={dtype!r} is not a ptxgen dtype: use one of {sorted(DTYPE_BYTES)}")


def as_strided(x: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """numpy's as_strided (writeable), also for ml_dtypes' float8_e5m2, whose typestr ('<f1') the
    array interface as_strided goes through cannot read back: such arrays are strided as raw
    unsigned words of the same size and viewed back."""
    try:
        np.dtype(x.dtype.str)
    except TypeError:
        raw = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        return np.lib.stride_tricks.as_strided(raw, shape, strides, writeable=True).view(x.dtype)
    return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=True)


@dataclass(frozen=True, eq=False)  # eq=False: views hold numpy arrays; compare by identity
class OperandView:
    """A checked operand: where it lives and how it is laid out (strides/ld in elements)."""

    name: str
    shape: tuple[int, int]
    dtype: str
    layout: str
    ld: int
    strides: tuple[int, int]
    itemsize: int
    nbytes: int  # bytes from the base pointer to one past the last element
    device_ptr: int | None
    host: np.ndarray | None
    device: int | None
    kind: str  # "numpy", "cuda_array_interface" or "dlpack"
    source: Any = field(default=None, repr=False, compare=False)
    stream: int | None = None  # producer stream from the CUDA array interface, if it gave one
    keepalive: Any = field(default=None, repr=False, compare=False)
    #: Batched operands (ptxgen.runtime.batch): `shape`, `ld` and `strides` describe one matrix,
    #: `host`/`source` are the (batch, rows, cols) array and `nbytes` spans every matrix.
    batch: int = 1
    batch_stride: int = 0  # elements between consecutive matrices; 0 broadcasts one matrix

    @property
    def is_host(self) -> bool:
        return self.host is not None

    @property
    def span(self) -> int:
        """Elements from the base to one past the last element (what a device copy needs)."""
        return self.nbytes // self.itemsize

    @property
    def full_shape(self) -> tuple[int, ...]:
        """The array's shape: (rows, cols), or (batch, rows, cols) for a batched operand."""
        return ((self.batch,) if self.batch > 1 else ()) + self.shape

    @property
    def dense(self) -> bool:
        """Whether the elements fill the span without gaps, so clearing the span clears only them."""
        return self.span == self.batch * self.shape[0] * self.shape[1]

    def _byte_strides(self) -> tuple[int, ...]:
        s = ((self.batch_stride,) if self.batch > 1 else ()) + \
            ((self.ld, 1) if self.layout == "row" else (1, self.ld))
        return tuple(x * self.itemsize for x in s)

    def pack_host(self) -> np.ndarray:
        """A flat copy of the host operand in this view's layout, leading dimension and batch stride."""
        assert self.host is not None
        flat = np.zeros(max(self.span, 1), dtype=self.host.dtype)
        self.strided(flat)[...] = self.host  # a broadcast (stride 0) rewrites the same values
        return flat

    def strided(self, flat: np.ndarray) -> np.ndarray:
        """The logical matrix (or batch of matrices) inside a flat buffer laid out like this operand."""
        return as_strided(flat, self.full_shape, self._byte_strides())

    def unpack_to_host(self, flat: np.ndarray) -> None:
        """Copy the logical matrices out of a flat buffer into the original host array."""
        assert self.host is not None
        self.host[...] = self.strided(flat)

    def host_span(self) -> np.ndarray:
        """A 1-D view of the host memory the operand spans, sharing the caller's buffer: how the
        simulator, whose memory is flat, reads and writes the caller's array in place."""
        assert self.host is not None
        return as_strided(self.host, (self.span,), (self.itemsize,))


# -- reading the various array protocols -------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


@dataclass
class RawArray:
    """What any protocol tells us, before the checks."""

    kind: str
    shape: tuple[int, ...]
    byte_strides: tuple[int, ...] | None  # None: C-contiguous
    itemsize: int
    dtype_ok: bool
    dtype_found: str
    ptr: int | None
    host: np.ndarray | None
    device: int | None
    readonly: bool
    stream: int | None = None
    keepalive: Any = None


def _capsule_pointer(capsule: Any) -> tuple[int, bool]:
    """(address of the DLManagedTensor[Versioned], versioned?) inside a DLPack capsule."""
    api = ctypes.pythonapi
    api.PyCapsule_IsValid.restype = ctypes.c_int
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for name, versioned in ((b"dltensor", False), (b"dltensor_versioned", True)):
        if api.PyCapsule_IsValid(capsule, name):
            return api.PyCapsule_GetPointer(capsule, name), versioned
    raise TypeError("__dlpack__() did not return an unconsumed DLPack capsule")


def _from_dlpack(x: Any, want: str) -> RawArray:
    dev_type, dev_id = (int(v) for v in x.__dlpack_device__())
    if dev_type == _KDL_CPU:
        return _from_numpy(np.from_dlpack(x), want, kind="dlpack")
    if dev_type not in (_KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED):
        raise TypeError(f"array lives on DLPack device type {dev_type}, not a CUDA device")
    capsule = x.__dlpack__()
    addr, versioned = _capsule_pointer(capsule)
    readonly = False
    if versioned:
        mt = _DLManagedTensorVersioned.from_address(addr)
        t = mt.dl_tensor
        readonly = bool(mt.flags & 1)
    else:
        t = _DLManagedTensor.from_address(addr).dl_tensor
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    dt = t.dtype
    itemsize = max(dt.bits // 8, 1)
    strides = None if not t.strides else tuple(int(t.strides[i]) * itemsize for i in range(t.ndim))
    want_code_bits = _DTYPE_INFO[want][1]
    found = f"{_DL_CODES.get(dt.code, f'code{dt.code}')}{dt.bits}" + \
        (f"x{dt.lanes}" if dt.lanes != 1 else "")
    return RawArray("dlpack", shape, strides, itemsize,
                    (dt.code, dt.bits) == want_code_bits and dt.lanes == 1, found,
                    int(t.data or 0) + int(t.byte_offset), None,
                    dev_id if dev_type != _KDL_CUDA_HOST else None, readonly, keepalive=capsule)


def _device_of(x: Any) -> int | None:
    dev = getattr(x, "device", None)
    for attr in ("index", "id"):  # torch.device.index, cupy.cuda.Device.id
        v = getattr(dev, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _from_cai(x: Any, cai: dict, want: str) -> RawArray:
    if cai.get("mask") is not None:
        raise TypeError("masked CUDA arrays are not supported")
    typestr = str(cai["typestr"])
    itemsize = int(np.dtype(typestr).itemsize) if not typestr.endswith("bf16") else 2
    found = str(getattr(x, "dtype", typestr))
    ok = typestr in _DTYPE_INFO[want][0]
    if ok and want == "bf16" and "V" in typestr:
        ok = "bfloat16" in found  # a raw 2-byte void is bf16 only if the array says so
    ptr, readonly = cai["data"]
    strides = cai.get("strides")
    return RawArray("cuda_array_interface", tuple(int(s) for s in cai["shape"]),
                    None if strides is None else tuple(int(s) for s in strides), itemsize, ok,
                    found, int(ptr or 0), None, _device_of(x), bool(readonly),
                    stream=cai.get("stream"))


def _from_numpy(x: np.ndarray, want: str, kind: str = "numpy") -> RawArray:
    return RawArray(kind, tuple(x.shape), tuple(x.strides), x.itemsize,
                    x.dtype == numpy_dtype(want), str(x.dtype), None, x, None, not x.flags.writeable)


def read_array(x: Any, name: str, want: str) -> RawArray:
    """What `x` says about itself (any shape), through numpy, the CUDA array interface or DLPack;
    `want` (a ptxgen dtype) only decides whether its dtype matches."""
    if isinstance(x, np.ndarray):
        return _from_numpy(x, want)
    errors = []
    try:
        cai = x.__cuda_array_interface__
    except AttributeError:
        cai = None
    except Exception as e:  # e.g. torch refuses bf16 through this protocol: try DLPack
        cai = None
        errors.append(f"__cuda_array_interface__: {e}")
    if cai is not None:
        try:
            return _from_cai(x, cai, want)
        except Exception as e:
            errors.append(f"__cuda_array_interface__: {e}")
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            return _from_dlpack(x, want)
        except Exception as e:
            errors.append(f"DLPack: {e}")
    if isinstance(x, (list, tuple)) or np.isscalar(x):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}: pass np.asarray({name.lower()}, "
                        f"dtype=...) with the right dtype")
    detail = f" ({'; '.join(errors)})" if errors else ""
    raise TypeError(f"{name} must be a numpy array or a CUDA device array exposing "
                    f"__cuda_array_interface__ or DLPack: got {type(x).__module__}.{type(x).__name__}"
                    f"{detail}")


# -- the checks --------------------------------------------------------------------------------
def _layout_hint(name: str, layout: str, dims: tuple[str, str]) -> str:
    low = name.lower()
    other = "col" if layout == "row" else "row"
    if layout == "row":
        fix = f"pass a C-contiguous ({dims[0]}, {dims[1]}) array (np.ascontiguousarray / .contiguous())"
    else:
        fix = f"pass {low}.T of a C-contiguous ({dims[1]}, {dims[0]}) array"
    if low in ("a", "b"):
        fix += f" or compile with {low}_layout='{other}'"
    return fix


def check_operand(x: Any, *, name: str, shape: tuple[int, int], dtype: Any, layout: str,
                  align: int = 16, writable: bool = False, device: int | None = None) -> OperandView:
    """Validate one GEMM operand and describe it; raises TypeError/ValueError saying how to fix it.

    `writable` demands a writable array (for C); `device` demands that a device array lives on
    that CUDA device. Host (numpy) arrays are copied into fresh aligned device memory, so only
    their leading dimension (kept in the copy) is alignment-checked, not their base address.
    Batched (3-D) operands: `ptxgen.runtime.batch.check_batched_operand`.
    """
    want = normalize_dtype(dtype)
    return check_matrix(read_array(x, name, want), x, name=name, shape=shape, dtype=want,
                        layout=layout, align=align, writable=writable, device=device)


def check_matrix(raw: RawArray, x: Any, *, name: str, shape: tuple[int, int], dtype: str,
                 layout: str, align: int, writable: bool, device: int | None) -> OperandView:
    """check_operand's rules on an array already read, so a batched operand's single-matrix
    description (built from its 3-D one) is held to exactly the same rules."""
    want = dtype
    if layout not in ("row", "col"):
        raise ValueError(f"layout={layout!r} for {name}: must be 'row' or 'col'")
    rows, cols = (int(shape[0]), int(shape[1]))
    dims = DIMS.get(name.lower(), ("rows", "cols"))

    if len(raw.shape) != 2 or raw.shape != (rows, cols):
        hint = ""
        if raw.shape == (cols, rows) and rows != cols:
            hint = f"; it looks transposed: pass {name.lower()}.T"
        raise ValueError(f"{name} must be the logical {dims[0]}×{dims[1]} matrix with shape "
                         f"({rows}, {cols}): got shape {raw.shape}{hint}")
    if not raw.dtype_ok:
        np_name = numpy_dtype(want).name if want in DTYPE_BYTES else want
        raise TypeError(f"{name} must have dtype {want} ({np_name}): got {raw.dtype_found}; "
                        f"convert it first (numpy: x.astype(ptxgen.schedule.problem.numpy_dtype"
                        f"({want!r})); torch: x.to(torch.{_DTYPE_INFO[want][2]}))")
    if writable and raw.readonly:
        raise ValueError(f"{name} is read-only but the kernel writes it: pass a writable array "
                         f"(e.g. np.empty(({rows}, {cols}), ...))")
    isz = raw.itemsize
    if raw.byte_strides is None:
        el = (cols, 1)
    else:
        if any(s % isz for s in raw.byte_strides):
            raise ValueError(f"{name} has byte strides {raw.byte_strides} that are not multiples "
                             f"of its {isz}-byte element: pass a contiguous copy")
        el = (raw.byte_strides[0] // isz, raw.byte_strides[1] // isz)
    if (rows > 1 and el[0] < 0) or (cols > 1 and el[1] < 0):
        raise ValueError(f"{name} has negative strides {el} (a flipped view): pass a contiguous "
                         f"copy (np.ascontiguousarray / .contiguous())")

    # contiguous dimension and leading dimension
    inner, outer, width = (1, 0, cols) if layout == "row" else (0, 1, rows)
    n_inner, n_outer = (cols, rows) if layout == "row" else (rows, cols)
    layout_word = "row-major" if layout == "row" else "column-major"
    arg = f" ({name.lower()}_layout='{layout}')" if name.lower() in ("a", "b") else ""
    if n_inner > 1 and el[inner] != 1:
        raise ValueError(f"{name} must be stored {layout_word}{arg}: got strides {el} elements; "
                         f"{_layout_hint(name, layout, dims)}")
    if n_outer > 1:
        ld = el[outer]
        if ld < width:
            want_dim = dims[1] if layout == "row" else dims[0]
            raise ValueError(f"{name} must be stored {layout_word}{arg} with leading dimension >= "
                             f"{want_dim}={width}: got strides {el} elements (leading dimension "
                             f"{ld}); {_layout_hint(name, layout, dims)}")
    else:
        ld = el[outer] if el[outer] >= width else width  # irrelevant to addressing: one line only

    if align > 1:
        if n_outer > 1 and (ld * isz) % align:
            step = align // np.gcd(align, isz)
            raise ValueError(f"{name}'s leading dimension is {ld} elements ({ld * isz} bytes), not "
                             f"a multiple of {align} bytes, the alignment the kernel was compiled for: "
                             f"pad it to a multiple of {step} elements (allocate a wider buffer and "
                             f"pass a slice of it), or compile with Gemm(align=...) no larger than "
                             f"the operands guarantee")
        if raw.ptr is not None and raw.ptr % align:
            raise ValueError(f"{name}'s base address {raw.ptr:#x} is not {align}-byte aligned "
                             f"(off by {raw.ptr % align} bytes): pass a freshly allocated copy "
                             f"(x.clone() / cupy.ascontiguousarray) or a view starting on a "
                             f"{align}-byte boundary")
    if device is not None and raw.device is not None and raw.device != device:
        raise ValueError(f"{name} is on CUDA device {raw.device} but ptxgen runs on device "
                         f"{device}: move it there (torch: x.to('cuda:{device}')) or set "
                         f"PTXGEN_DEVICE={raw.device}")

    span = (n_outer - 1) * ld + n_inner if rows and cols else 0
    return OperandView(name=name, shape=(rows, cols), dtype=want, layout=layout, ld=int(ld),
                       strides=(int(el[0]), int(el[1])), itemsize=isz, nbytes=int(span * isz),
                       device_ptr=raw.ptr, host=raw.host, device=raw.device, kind=raw.kind,
                       source=x, stream=raw.stream, keepalive=raw.keepalive)


# -- aliasing between the output and the inputs ------------------------------------------------
_TOO_HARD = getattr(getattr(np, "exceptions", np), "TooHardError")


def _address(v: OperandView) -> int:
    """The address of the view's first element: the device pointer, or the host array's data."""
    if v.device_ptr is not None:
        return int(v.device_ptr)
    assert v.host is not None
    return int(v.host.__array_interface__["data"][0])


def _ghost(v: OperandView) -> np.ndarray:
    """A numpy array with the view's address, shape and byte strides whose memory is never touched:
    np.shares_memory only does arithmetic on addresses and strides, for device pointers too."""
    shape = v.full_shape
    strides = v._byte_strides()
    holder = type("_Ghost", (), {})()
    holder.__array_interface__ = {"shape": shape, "typestr": f"|V{v.itemsize}", "version": 3,
                                  "data": (_address(v), True), "strides": strides}
    return np.asarray(holder)


def _overlap(x: OperandView, y: OperandView) -> bool:
    """Whether two operands share a byte: exactly (element by element, so interleaved strided views
    of one buffer that never touch the same element are fine), or by their spans where the exact
    question is too hard."""
    if not (x.nbytes and y.nbytes) or (x.is_host != y.is_host):
        return False
    if x.is_host and y.is_host and not np.may_share_memory(x.host, y.host):
        return False
    if x.device_ptr is not None and y.device_ptr is not None and (x.device is not None and
                                                               y.device is not None and x.device != y.device):
        return False
    try:
        return bool(np.shares_memory(_ghost(x), _ghost(y), max_work=1 << 20))
    except _TOO_HARD:
        xa, ya = _address(x), _address(y)
        return xa < ya + y.nbytes and ya < xa + x.nbytes


def check_no_aliasing(output: OperandView, inputs: list[OperandView]) -> None:
    """Refuse an output that shares memory with an input it is computed from.

    Why: CTAs write their C tiles while other CTAs are still reading A, B (or the bias and scale
    vectors), so an overlapping output gives a wrong result on the GPU and on the simulator alike,
    with nothing to show for it. C as both the beta input and the output is fine: each element is
    read and then written by the same thread (`output` itself is not in `inputs`).
    """
    for v in inputs:
        if v is not output and _overlap(output, v):
            oa, va = _address(output), _address(v)
            raise ValueError(
                f"{output.name} overlaps {v.name} in memory ({output.name} spans bytes "
                f"[{oa:#x}, {oa + output.nbytes:#x}), {v.name} [{va:#x}, {va + v.nbytes:#x})): the "
                f"kernel writes {output.name} while other CTAs still read {v.name}, so the result "
                f"would be wrong. Pass a separate array for {output.name} (a fresh np.empty / "
                f"torch.empty), or pass a copy of {v.name} ({v.name.lower()}.copy() / .clone())")


def cuda_array_interface(x: Any) -> dict | None:
    """x's `__cuda_array_interface__`, or None (also where the property fails, e.g. a CPU tensor)."""
    try:
        return getattr(x, "__cuda_array_interface__", None)
    except Exception:  # a property that fails is no interface
        return None


class _RowOf:
    """A 1-D CUDA-array-interface vector seen as a 1 x L matrix (for arrays without reshape)."""

    def __init__(self, cai: dict):
        strides = cai.get("strides")
        self.__cuda_array_interface__ = {**cai, "shape": (1, *cai["shape"]),
                                         "strides": None if strides is None else (0, *strides)}


def as_row(x: Any) -> Any:
    """A 1-D vector (numpy, a framework tensor, or any CUDA-array-interface array such as a
    ptxgen DeviceArray) as a 1 x L matrix, for `check_operand`."""
    if hasattr(x, "reshape"):
        return x.reshape(1, -1)
    cai = cuda_array_interface(x)
    return x if cai is None else _RowOf(cai)  # not an array: check_operand names what it got


def transposed_view(v: OperandView) -> OperandView:
    """The same bytes seen as the transposed logical matrix: shape and strides exchanged, the
    layout flipped, the leading dimension and batch stride kept (how a swap-AB kernel, which
    computes Cᵀ = Bᵀ·Aᵀ, sees the caller's A and B: schedule/swap_ab.py)."""
    host = None if v.host is None else np.swapaxes(v.host, -1, -2)
    return dataclasses.replace(v, shape=(v.shape[1], v.shape[0]), layout="col" if v.layout == "row" else "row",
                               strides=(v.strides[1], v.strides[0]), host=host)
