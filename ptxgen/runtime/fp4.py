"""fp4 (e2m1) operands of the block-scaled sm_100a kernels (MXFP4, NVFP4): packed two per byte
along K, the lower K index in bits 3:0 (docs/ptx_facts/sm100_formats.md §2; PTX ISA
§9.7.16.10.4.6), which is what kind::mxf4 / mxf4nvf4 read from shared memory through a plain
uint8 tensor map.

Shape conventions (A logical M x K row-major, B logical K x N column-major: both K-major):
* numpy `ml_dtypes.float4_e2m1fn` arrays, one value per byte, in the logical shape: A (M, K),
  B (K, N) (B's K contiguous, i.e. `b_nk.T` of an (N, K) array). The runtime packs them.
* packed uint8 arrays (or torch `float4_e2m1fn_x2`, viewed as uint8) with K halved: A (M, K/2)
  row-major, B (K/2, N) column-major (`b_packed_nk.T` of an (N, K/2) array). Taken as they are.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..schedule.problem import Gemm

#: Values per byte.
PER_BYTE = 2


def is_unpacked(x: Any) -> bool:
    """A numpy float4_e2m1fn array (one value per byte)."""
    return isinstance(x, np.ndarray) and x.dtype.name == "float4_e2m1fn"


def pack_rows(x: np.ndarray) -> np.ndarray:
    """(rows, K) float4_e2m1fn -> (rows, K/2) uint8, value 2j in bits 3:0 and 2j + 1 in 7:4 of byte j."""
    if x.shape[-1] % PER_BYTE:
        raise ValueError(f"fp4 operands pack two values per byte along K: K = {x.shape[-1]} must be even")
    codes = np.ascontiguousarray(x).view(np.uint8) & 0xF
    return (codes[..., 0::2] | codes[..., 1::2] << 4).astype(np.uint8)


def unpack_rows(packed: np.ndarray) -> np.ndarray:
    """The inverse of `pack_rows`: (rows, K/2) uint8 -> (rows, K) float4_e2m1fn."""
    import ml_dtypes

    p = np.asarray(packed, dtype=np.uint8)
    codes = np.stack([p & 0xF, p >> 4], axis=-1).reshape(*p.shape[:-1], -1)
    return codes.view(ml_dtypes.float4_e2m1fn)


def as_packed(x: Any, operand: str) -> Any:
    """A (logical M x K) or B (logical K x N) as the packed uint8 array in the logical orientation
    the operand checks take: A (M, K/2), B (K/2, N); packed arrays unchanged (torch's
    float4_e2m1fn_x2 viewed as uint8)."""
    if is_unpacked(x):
        if operand == "A":
            return pack_rows(x)
        return pack_rows(np.asarray(x).T).T       # pack B's K (its rows) through its (N, K) transpose
    if "float4_e2m1fn_x2" in str(getattr(x, "dtype", "")):
        import torch

        return x.view(torch.uint8)
    return x


def packed_shapes(g: Gemm) -> tuple[tuple[int, int], tuple[int, int]]:
    """The packed A and B shapes in the logical orientation."""
    return (g.m, g.k // PER_BYTE), (g.k // PER_BYTE, g.n)
