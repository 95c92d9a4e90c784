"""Runtime TMA tensor maps: CUtensorMaps for device arrays, passed by value to kernels, and the
cluster launch (docs/ptx_facts/tma.md §9d′, clusters.md).

Why a module of its own: a Hopper kernel's TMA copies read a 128-byte CUtensorMap that the host
encodes with `cuTensorMapEncodeTiled` and passes as a `.param .align 64 .b8 map[128]` kernel
parameter; cluster kernels launch through `cuLaunchKernelEx` with the cluster-dimension
attribute. Both go through cuda-python here, so on a CPU they run through the simulator-backed
stand-in driver (PTXGEN_DRIVER=sim) exactly as on a GPU. The checks below come first because the
driver answers a map TMA cannot describe with a bare CUDA_ERROR_INVALID_VALUE; here each problem
is named with its fix.

API (all shapes, strides and boxes in numpy order, outermost dimension first):

    encode_tiled(array, box, *, swizzle="128B", oob_fill="zero", l2_promotion=128) -> TensorMap
        `array`: a device array (anything with __cuda_array_interface__: ptxgen DeviceArray,
        torch, cupy), rank 1..5, innermost dimension contiguous. `box`: the tile one TMA copy
        moves. `swizzle`: "none" | "32B" | "64B" | "128B" (the shared-memory layout of the box;
        the box row, box[-1] * itemsize bytes, must fit in it). `oob_fill`: "zero" | "nan"
        (what out-of-bounds elements load as; "nan" needs a float dtype). Raises TensorMapError.
    TensorMap: .raw (the 128 bytes), .address, .shape, .strides (bytes), .box, .dtype; pass it
        as the argument of a `.b8 [128]` parameter (bytes(map) gives the raw bytes).
    launch(ptx, entry, grid, block, args, *, dynamic_smem=0, cluster=None, stream=0, arch=None)
        Assemble and launch one PTX entry with cuLaunchKernelEx, asynchronously on `stream`.
        `args` follow the entry's `.param` list: a TensorMap for a map parameter, a device array
        (its address) or an int for a pointer, numbers for scalars. `cluster=(x, y, z)` adds the
        cluster-dimension attribute (the grid must be a whole number of clusters).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import driver as drv
from ..schedule.swizzle import TMA_MODES
from .params import ParamBlock, parse_params

__all__ = ["TensorMapError", "TensorMap", "encode_tiled", "launch", "MAP_BYTES"]

MAP_BYTES = 128
#: The swizzle modes by the names `encode_tiled` takes ("none", "32B", "64B", "128B").
_SWIZZLES = {mode.name: mode for mode in TMA_MODES}
_L2_PROMOTION = {0: "NONE", 64: "L2_64B", 128: "L2_128B", 256: "L2_256B"}
#: numpy dtype name -> CUtensorMapDataType suffix (TMA moves bytes: int8 and fp8 are UINT8)
_MAP_TYPES = {"uint8": "UINT8", "int8": "UINT8", "float8_e4m3fn": "UINT8", "float8_e5m2": "UINT8",
              "uint16": "UINT16", "int16": "UINT16", "uint32": "UINT32", "int32": "INT32",
              "uint64": "UINT64", "int64": "INT64", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
              "float32": "FLOAT32", "float64": "FLOAT64"}
_FLOAT_TYPES = {"FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"}


class TensorMapError(ValueError):
    """An array or box TMA cannot describe; the message names the problem and the fix."""


@dataclass(frozen=True)
class TensorMap:
    """An encoded CUtensorMap and what it describes (numpy order, strides in bytes)."""
    raw: bytes
    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    dtype: np.dtype
    swizzle: str
    oob_fill: str

    def __bytes__(self) -> bytes:
        return self.raw


def _describe_array(array: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], np.dtype]:
    """(address, shape, byte strides, dtype) of a device array."""
    try:
        cai = array.__cuda_array_interface__
    except AttributeError:
        raise TensorMapError(f"a tensor map needs a device array (with __cuda_array_interface__), got "
                             f"{type(array).__name__}: copy it to the device first, e.g. "
                             "ptxgen.runtime.DeviceArray.from_host(x)") from None
    try:  # the array's own dtype names bfloat16 and fp8, which typestr ("<V2") does not
        dtype = np.dtype(getattr(array, "dtype", cai["typestr"]))
    except TypeError:  # a framework dtype object (torch.float16): the interface's typestr
        dtype = np.dtype(cai["typestr"])
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        strides, acc = [], dtype.itemsize
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
    return int(cai["data"][0]), shape, tuple(int(s) for s in strides), dtype


def _check(address: int, shape, strides, dtype: np.dtype, box, swizzle: str, oob_fill: str) -> str:
    """The CUtensorMapDataType suffix, after every rule cuTensorMapEncodeTiled applies."""
    rank = len(shape)
    name = dtype.name
    if name not in _MAP_TYPES:
        raise TensorMapError(f"dtype {name} has no TMA data type: use one of {sorted(_MAP_TYPES)}")
    if not 1 <= rank <= 5:
        raise TensorMapError(f"a tensor map has 1 to 5 dimensions, the array has {rank}: reshape it "
                             "(merge contiguous dimensions)")
    if len(box) != rank:
        raise TensorMapError(f"box {tuple(box)} has {len(box)} sizes for a {rank}-D array: give one per "
                             "dimension, outermost first")
    if swizzle not in _SWIZZLES:
        raise TensorMapError(f"swizzle {swizzle!r} is not one of {sorted(_SWIZZLES)}")
    if oob_fill not in ("zero", "nan"):
        raise TensorMapError(f"oob_fill {oob_fill!r} must be 'zero' or 'nan'")
    if oob_fill == "nan" and _MAP_TYPES[name] not in _FLOAT_TYPES:
        raise TensorMapError(f"oob_fill='nan' needs a floating-point array, not {name}: use 'zero'")
    if any(s == 0 for s in shape):
        raise TensorMapError(f"shape {shape} has an empty dimension: TMA cannot describe an empty tensor")
    if any(s > 2**32 for s in shape):
        raise TensorMapError(f"shape {shape}: TMA dimensions are at most 2^32 elements; split the tensor")
    if address % 16:
        raise TensorMapError(f"the array starts at {address:#x}, which is not 16-byte aligned: TMA needs "
                             "a 16-byte aligned start; use a view whose offset is a multiple of 16 bytes, "
                             "or copy it into a fresh allocation")
    size = dtype.itemsize
    if rank and shape[-1] > 1 and strides[-1] != size:
        raise TensorMapError(f"the innermost dimension has a stride of {strides[-1]} bytes, not the "
                             f"element size {size}: TMA needs it contiguous; pass a contiguous copy")
    for axis in range(rank - 1):
        s = strides[axis]
        if s <= 0 or s % 16:
            elems = 16 // np.gcd(16, size)
            raise TensorMapError(f"dimension {axis} has a stride of {s} bytes: TMA needs positive strides "
                                 f"that are multiples of 16 bytes; pad the rows (allocate the inner "
                                 f"dimension rounded up to a multiple of {elems} elements and pass a view)")
        if s >= 2**40:
            raise TensorMapError(f"dimension {axis} has a stride of {s} bytes; TMA strides are below 2^40")
    for axis, b in enumerate(box):
        if not 1 <= int(b) <= 256:
            raise TensorMapError(f"box {tuple(box)}: dimension {axis} is {b}, TMA boxes are 1..256 per "
                                 "dimension; split the tile into several copies")
    row = int(box[-1]) * size
    if row % 16:
        raise TensorMapError(f"the box row is {box[-1]} x {size} = {row} bytes, not a multiple of 16: "
                             f"make box[-1] a multiple of {16 // np.gcd(16, size)}")
    span = _SWIZZLES[swizzle].width
    if _SWIZZLES[swizzle].bits and row > span:
        raise TensorMapError(f"the box row of {row} bytes is wider than the {swizzle} swizzle: use box[-1] "
                             f"<= {span // size}, or a wider swizzle")
    return _MAP_TYPES[name]


def encode_tiled(array: Any, box, *, swizzle: str = "128B", oob_fill: str = "zero",
                 l2_promotion: int = 128) -> TensorMap:
    """Encode the CUtensorMap of device array `array` for TMA copies of `box` (see the module)."""
    address, shape, strides, dtype = _describe_array(array)
    box = tuple(int(b) for b in box)
    type_name = _check(address, shape, strides, dtype, box, swizzle, oob_fill)
    if l2_promotion not in _L2_PROMOTION:
        raise TensorMapError(f"l2_promotion {l2_promotion} is not one of {sorted(_L2_PROMOTION)} (bytes)")
    drv.context()  # the driver initialised, a context current on this thread
    d = drv._driver()
    rank = len(shape)
    fill = "NAN_REQUEST_ZERO_FMA" if oob_fill == "nan" else "NONE"
    tmap = drv._call("cuTensorMapEncodeTiled",
                     getattr(d.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{type_name}"), rank, address,
                     [d.cuuint64_t(s) for s in shape[::-1]], [d.cuuint64_t(s) for s in strides[-2::-1]],
                     [d.cuuint32_t(b) for b in box[::-1]], [d.cuuint32_t(1)] * rank,
                     d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                     getattr(d.CUtensorMapSwizzle, _SWIZZLES[swizzle].tensor_map_name),
                     getattr(d.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2_PROMOTION[l2_promotion]}"),
                     getattr(d.CUtensorMapFloatOOBfill, f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{fill}"))
    raw = ctypes.string_at(int(tmap.getPtr()), MAP_BYTES)
    return TensorMap(raw, address, shape, strides, box, dtype, swizzle, oob_fill)


def _dim3(v: Any, what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
        raise ValueError(f"{what}={v!r}: give 1 to 3 positive sizes")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))  # type: ignore[return-value]


def _argument(decl, value: Any) -> Any:
    """What ParamBlock packs for one argument: map bytes, a device address, or the value."""
    if isinstance(value, TensorMap):
        if not (decl.is_array and decl.nbytes == MAP_BYTES):
            raise TypeError(f"parameter {decl.name} is not a tensor map: a TensorMap needs "
                            f"`.param .align 64 .b8 {decl.name}[128]`")
        return value.raw
    if decl.is_array and decl.nbytes == MAP_BYTES and not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"parameter {decl.name} is a tensor map: pass tensormaps.encode_tiled(array, box)")
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        if not decl.is_pointer_sized:
            raise TypeError(f"parameter {decl.name} is .{decl.type}: a device array needs a .u64 parameter")
        return int(cai["data"][0])
    return value


def launch(ptx: str, entry: str, grid: Any, block: Any, args: list | tuple, *, dynamic_smem: int = 0,
           cluster: tuple[int, ...] | None = None, stream: Any = 0, arch: str | None = None) -> None:
    """Assemble `entry` and launch it with cuLaunchKernelEx (see the module docstring)."""
    from .assemble import assemble
    from .launch import _arch_for_ptx
    from .modules import load_function

    decls = parse_params(ptx, entry)
    if len(args) != len(decls):
        names = ", ".join(f"{d.name}:.{d.type}" for d in decls)
        raise ValueError(f"entry {entry} takes {len(decls)} parameters ({names}): got {len(args)} args")
    grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
    cluster3 = _dim3(cluster, "cluster") if cluster is not None else (1, 1, 1)
    if any(g % c for g, c in zip(grid3, cluster3)):
        raise ValueError(f"grid {grid3} is not a whole number of {cluster3} clusters: round the grid up to "
                         "a multiple of the cluster in every dimension")
    ctx = drv.context()
    target = arch or _arch_for_ptx(ptx, ctx)
    fn = load_function(assemble(ptx, target, entry).cubin, entry, ptx, int(dynamic_smem))
    params = ParamBlock(decls, [_argument(d, v) for d, v in zip(decls, args)])
    d = drv._driver()
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid3
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block3
    cfg.sharedMemBytes, cfg.hStream = int(dynamic_smem), d.CUstream(drv.resolve_stream(stream))
    attrs = []
    if cluster3 != (1, 1, 1):
        attr = d.CUlaunchAttribute()
        attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster3
        attrs.append(attr)
    cfg.attrs, cfg.numAttrs = attrs, len(attrs)
    drv._call("cuLaunchKernelEx", cfg, fn.handle, params.address, 0)
