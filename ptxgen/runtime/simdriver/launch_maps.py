"""Tensor maps and clusters of a stand-in launch, turned into what `ptxgen.sim.launch` takes.

Why a step of its own: the stand-in's cuTensorMapEncodeTiled (simcuda_tensormap.c) writes the
128 bytes in the simulator's layout but with a *stand-in* device address, which means nothing to
the simulator's memory. At launch, a `.b8 [128]` parameter holding such a map becomes a
`sim.TensorMap` over a numpy view of the allocation the address lies in, so the simulator binds
that allocation as device memory and TMA copies read and write it in place.

Checks the launch adds (each a driver status with the reason): the map's tensor must lie inside
one allocation (the stand-in cannot tell a real fault from an unbounded view otherwise, so it is
stricter than the hardware, which faults only when a box touches unmapped memory), and the
simulator must model the map (sim.TensorMap's own rules, e.g. element strides of 1).
"""
from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np

from ptxgen.schedule.swizzle import Swizzle
from ptxgen.sim import tensormap as simmap

SUCCESS, INVALID_VALUE, ILLEGAL_ADDRESS, NOT_SUPPORTED, INVALID_CLUSTER_SIZE = 0, 1, 700, 801, 912

#: CUtensorMapDataType -> numpy dtype of one element (byte 127 of the stand-in's encoding)
MAP_DTYPES = {0: np.uint8, 1: np.uint16, 2: np.uint32, 3: np.int32, 4: np.uint64, 5: np.int64,
              6: np.float16, 7: np.float32, 8: np.float64, 9: ml_dtypes.bfloat16, 10: np.float32,
              11: np.float32, 12: np.float32}
PORTABLE_CLUSTER = 8       # CTAs per cluster every sm_90 launch may use
NON_PORTABLE_CLUSTER = 16  # with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED on an H100


class LaunchRefused(Exception):
    """A tensor map or cluster the launch cannot use: the CUresult and why."""

    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status


def tensor_map_argument(raw: bytes, translate, roots: dict) -> simmap.TensorMap | None:
    """The sim.TensorMap for 128 parameter bytes holding a stand-in map, or None if they do not.

    `translate` is simcuda_translate; `roots` (allocation base -> uint8 view of the whole
    allocation) is shared by the launch's maps so maps of one allocation are one buffer.
    """
    data = np.frombuffer(raw, dtype=np.uint8)
    if len(data) != simmap.MAP_BYTES:
        return None
    decoded = simmap.decode(data)
    if decoded is None:
        return None
    host, base, size = ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_uint64()
    if translate(ctypes.c_uint64(decoded.address), ctypes.byref(host), ctypes.byref(base),
                 ctypes.byref(size)) != SUCCESS:
        raise LaunchRefused(ILLEGAL_ADDRESS, f"a tensor map's global address {decoded.address:#x} is not "
                                          "in any allocation (freed, or never device memory)")
    start = int(base.value)
    root = roots.get(start)
    if root is None:
        offset_in = decoded.address - start
        first = host.value - offset_in
        root = roots[start] = np.ctypeslib.as_array((ctypes.c_uint8 * int(size.value)).from_address(first))
    dtype = np.dtype(MAP_DTYPES[int(data[127])])
    rank = len(decoded.dims)
    try:
        view = np.ndarray(decoded.dims, dtype=dtype, buffer=root, offset=decoded.address - start,
                          strides=decoded.strides)
    except (TypeError, ValueError):
        raise LaunchRefused(ILLEGAL_ADDRESS, f"a tensor map describes a {decoded.dims} tensor with byte "
                                          f"strides {decoded.strides} that reaches past the end of its "
                                          f"{int(size.value)}-byte allocation") from None
    estrides = tuple(int(e) for e in data[122:122 + rank][::-1])
    try:
        return simmap.TensorMap(view, decoded.box, swizzle=Swizzle.of_width(decoded.swizzle).name,
                                oob_fill="nan" if decoded.fill is not None else "zero",
                                element_strides=estrides)
    except ValueError as e:
        raise LaunchRefused(NOT_SUPPORTED, f"the simulator cannot run this tensor map: {e}") from None


def check_cluster(cluster: tuple[int, int, int], grid: tuple[int, int, int], has_clusters: bool,
                  non_portable: bool, device: str) -> None:
    """The driver's cluster rules for a launch; cluster (1, 1, 1) is no cluster."""
    if cluster == (1, 1, 1):
        return
    if not has_clusters:
        raise LaunchRefused(INVALID_VALUE, f"cuLaunchKernelEx: {device} has no thread block clusters")
    if min(cluster) < 1:
        raise LaunchRefused(INVALID_CLUSTER_SIZE, f"cuLaunchKernelEx: cluster {cluster} has a zero dimension")
    size = cluster[0] * cluster[1] * cluster[2]
    limit = NON_PORTABLE_CLUSTER if non_portable else PORTABLE_CLUSTER
    if size > limit:
        hint = "" if non_portable else (" (up to 16 after cuFuncSetAttribute("
                                        "NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))")
        raise LaunchRefused(INVALID_CLUSTER_SIZE, f"cuLaunchKernelEx: cluster {cluster} has {size} CTAs; "
                                               f"the limit is {limit}{hint}")
    if any(g % c for g, c in zip(grid, cluster)):
        raise LaunchRefused(INVALID_CLUSTER_SIZE, f"cuLaunchKernelEx: grid {grid} is not a whole number of "
                                               f"{cluster} clusters in every dimension")
