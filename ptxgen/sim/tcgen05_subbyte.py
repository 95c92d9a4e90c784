"""fp4 / fp6 operands of tcgen05.mma .kind::f8f6f4 / .kind::mxf8f6f4 in shared memory, in the padded
forms the ISA names `.b4x16_p64` (16 e2m1 in 8 bytes, then 8 bytes of padding) and `.b6x16_p32`
(16 fp6 in 12 bytes, then 4) (PTX ISA §5.5.1.1.1; docs/ptx_facts/sm100_formats.md §2a, §2b).

Each aligned 16-byte unit of shared memory holds 16 values; the operand is addressed like a 1-byte
type (one byte of address space per value), so the value at address a is value p = a & 15 of the
unit at a - p: K-major, the unit holds 16 consecutive K of a row; MN-major, 16 consecutive M (N) of
one k. A swizzle moves whole 16-byte units and never the low 4 address bits. Value p sits in bits
b*p .. b*p+b-1 (b = 4 or 6) of the unit's data bytes read as one little-endian number: the packing
CUTLASS stores in global memory and its 16U4/16U6_ALIGN16B TMA lands in those bytes unchanged
(tma_fp4.py), which the corpus's mxfp8 x mxfp4 Gluon kernel (fp4) and CUTLASS's sm100 f8f6f4 GEMMs
(fp6, sm100_formats.md §2b) read with tcgen05.mma.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .state import CtaState

#: element format -> (bits per value, ml_dtypes type)
PADDED = {"e2m1": (4, ml_dtypes.float4_e2m1fn), "e2m3": (6, ml_dtypes.float6_e2m3fn),
          "e3m2": (6, ml_dtypes.float6_e3m2fn)}


def decode_padded(cta: CtaState, addrs: np.ndarray, reader: np.ndarray, typ: str, which: str) -> np.ndarray:
    """float64 of the `typ` values at shared addresses `addrs` (one per value), read by thread `reader`."""
    bits, dtype = PADDED[typ]
    data_bytes = 16 * bits // 8
    pos = addrs & 15
    bases, inverse = np.unique(addrs - pos, return_inverse=True)
    unit_addrs = (bases[:, None] + np.arange(data_bytes)).reshape(-1)
    data = cta.smem.read(np.repeat(reader, unit_addrs.size), unit_addrs, 1, cta.epoch,
                         f"tcgen05.mma reads {which} from").reshape(-1, data_bytes).astype(np.uint32)
    data = np.concatenate([data, np.zeros((len(bases), 1), np.uint32)], axis=1)[inverse]
    bit = bits * pos
    lo = np.take_along_axis(data, (bit // 8)[:, None], 1)[:, 0]
    hi = np.take_along_axis(data, (bit // 8 + 1)[:, None], 1)[:, 0]
    codes = (((lo | hi << 8) >> (bit % 8)) & ((1 << bits) - 1)).astype(np.uint8)
    return codes.view(dtype).astype(np.float64)
