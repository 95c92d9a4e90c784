"""Block scaling for tcgen05.mma .kind::mxf8f6f4 / mxf4 / mxf4nvf4 (docs/ptx_facts/tcgen05.md §12h).

D (+)= sum_k (A[m][k] * SFA[m][k / V]) * (B[k][n] * SFB[n][k / V]), V = 32 (.block32, MX) or 16
(.block16, NVFP4) (PTX ISA §9.7.16.10.7). One MMA covers K = 32 (mxf8f6f4, 1 scale per row, "1X")
or K = 64 (mxf4*, 2 scales "2X" with V = 32, or 4 "4X" with V = 16).

Scale factors live in TMEM. For rows r of A (or B) the simulator reads lane r & 127 (the factors
are duplicated to all four lane quarters, so that is the copy row r's own quarter holds), column
C + (r >> 5) of the operand's address, and byte SF_ID + g of that 32-bit column for the g-th
scale of the row (SF_ID from the instruction descriptor picks a byte (1X), half-word (2X) or the
word (4X)). This is the layout Triton and CUTLASS write (tcgen05.md §12h); the ISA gives it as
images only.

Formats (PTX ISA §5.2.3): e2m1 (two per byte in shared memory under mxf4*, the lower K index in
bits 3:0, §9.7.16.10.4.6), ue8m0 = 2^(E-127), ue4m3 = e4m3 without the sign bit; decoded with
ml_dtypes' OCP types.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import tmem as tm
from .errors import Fault

#: (.kind, qualifier) -> scale factors per row per MMA
VECTORS = {("mxf8f6f4", "block32"): 1, ("mxf8f6f4", "scale_vec::1X"): 1,
           ("mxf4", "block32"): 2, ("mxf4", "scale_vec::2X"): 2,
           ("mxf4nvf4", "block32"): 2, ("mxf4nvf4", "scale_vec::2X"): 2,
           ("mxf4nvf4", "block16"): 4, ("mxf4nvf4", "scale_vec::4X"): 4}
DEFAULT = {"mxf8f6f4": 1, "mxf4": 2}       # a bare .block_scale (mxf4nvf4 must state one)


def scale_vector(kind: str, mods: list, ctx) -> int:
    """The scale-vector size from the .block_scale qualifiers; removes them from mods."""
    if "block_scale" not in mods:
        raise ctx.fail(f"tcgen05.mma .kind::{kind} needs .block_scale")
    mods.remove("block_scale")
    quals = [m for m in mods if m in ("block16", "block32") or m.startswith("scale_vec::")]
    for q in quals:
        mods.remove(q)
    if len(quals) > 1:
        raise ctx.fail(f"tcgen05.mma .kind::{kind}: give one of .block16/.block32/.scale_vec::NX")
    if not quals:
        if kind not in DEFAULT:
            raise ctx.fail(f"tcgen05.mma .kind::{kind}.block_scale must state .block16, .block32 or .scale_vec::NX")
        return DEFAULT[kind]
    vec = VECTORS.get((kind, quals[0]))
    if vec is None:
        raise ctx.fail(f"tcgen05.mma .kind::{kind} does not take .{quals[0]}")
    return vec


def decode_fp4_packed(raw: np.ndarray, rows: int) -> np.ndarray:
    """(rows, 2 * bytes) float64 from rows x bytes of packed e2m1 (low nibble = lower k)."""
    raw = np.ascontiguousarray(raw).reshape(rows, -1)
    codes = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(rows, -1).astype(np.uint8)
    return codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def decode_scale(codes: np.ndarray, scale_type: str) -> np.ndarray:
    if scale_type == "ue8m0":
        return codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    if (codes & 0x80).any():
        raise Fault("unsupported", "a ue4m3 scale factor has its top bit set; ue4m3 has no sign bit")
    return codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def read_scales(st: tm.TmemState, addr: int, rows: int, vec: int, sf_id: int, scale_type: str,
                which: str) -> tuple[np.ndarray, tm.Region]:
    """(rows, vec) scale values of an operand and the TMEM region they come from."""
    lane0, col0 = tm.split_address(addr)
    if lane0 != 0:
        raise Fault("tmem", f"tcgen05.mma scale factors of {which} at lane {lane0}: they start at lane 0 "
                    "(duplicated to all four quarters)")
    r = np.arange(rows)
    lanes, cols = r & 127, col0 + (r >> 5)
    region = tm.Region(0, min(rows, 128), col0, int(cols.max()) + 1)
    tm.check_allocated(st, region, f"tcgen05.mma scale factors of {which}")
    tm.check_not_mma_target(st, region, f"tcgen05.mma reads the scale factors of {which} from", by_mma=True)
    tm.check_not_pending(st.stores, region, f"tcgen05.mma reads the scale factors of {which} from", "st")
    words = st.cells[lanes, cols]
    codes = np.stack([(words >> (8 * (sf_id + g))) & 0xFF for g in range(vec)], axis=1).astype(np.uint8)
    return decode_scale(codes, scale_type), region


def apply(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Multiply each of the `vec` equal K blocks of every row by its scale."""
    rows, k = values.shape
    vec = scales.shape[1]
    return (values.reshape(rows, vec, k // vec) * scales[:, :, None]).reshape(rows, k)
