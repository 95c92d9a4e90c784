"""wgmma data layouts as tables: the shared-memory matrix descriptor, the canonical shared-memory
layouts it describes, and the register fragments of A and D across a warpgroup
(docs/ptx_facts/wgmma.md §9a, §9c).

Descriptor (64 bits, PTX ISA "Matrix Descriptor Format"): start address >> 4 in bits 0-13,
leading byte offset (LBO) >> 4 in bits 16-29, stride byte offset (SBO) >> 4 in bits 32-45, base
offset in bits 49-51, swizzle mode in bits 62-63 (0 none/interleave, 1 128B, 2 64B, 3 32B).

Canonical layouts, in 16-byte chunks (T = elements per 16 bytes, W = swizzle width in chunks:
1 none, 2 32B, 4 64B, 8 128B); CuTe's GMMA layout atoms describe the same:
  K-major   row mn = 8*g + r, k-chunk c (0..1, a wgmma's K is 32 bytes):
              none:     r*1 + g*SBO + c*LBO
              swizzled: r*W + g*SBO + c
  MN-major  mn = t + T*(w + W*i) (t element in the chunk), k = k8 + 8*j:
              none:     i*SBO + k8 + j*LBO       (W = 1; the roles of LBO and SBO swap)
              swizzled: w + i*LBO + k8*W + j*SBO
The byte address (start + 16*chunk + element offset) is then swizzled on its absolute value as
CuTe's Swizzle<B,4,3> (B = log2 W): bits [4, 4+B) ^= bits [7, 7+B); TMA writes the same pattern.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SWIZZLE_NAMES = {0: "none", 1: "128B", 2: "64B", 3: "32B"}
SWIZZLE_CHUNKS = {0: 1, 1: 8, 2: 4, 3: 2}     # W: width of the swizzle pattern in 16-byte chunks


@dataclass(frozen=True)
class Descriptor:
    start: int      # byte address in the shared window
    lbo: int        # bytes
    sbo: int        # bytes
    base_offset: int
    swizzle: int    # descriptor code: 0 none, 1 128B, 2 64B, 3 32B


def decode_descriptor(value: int) -> Descriptor:
    """Split a 64-bit wgmma matrix descriptor into its fields (byte units where the field is >>4)."""
    value = int(value) & (2**64 - 1)
    return Descriptor(start=(value & 0x3FFF) << 4, lbo=((value >> 16) & 0x3FFF) << 4,
                      sbo=((value >> 32) & 0x3FFF) << 4, base_offset=(value >> 49) & 7,
                      swizzle=(value >> 62) & 3)


def encode_descriptor(start: int, lbo: int, sbo: int, swizzle: int, base_offset: int = 0) -> int:
    """The inverse of decode_descriptor (tests and examples build descriptors with it)."""
    enc = lambda x: (x & 0x3FFFF) >> 4     # noqa: E731 - 16-byte units of an 18-bit address
    return (enc(start) | enc(lbo) << 16 | enc(sbo) << 32 | (base_offset & 7) << 49
            | (swizzle & 3) << 62)


def swizzle_address(addr: np.ndarray, swizzle: int) -> np.ndarray:
    """Swizzle<B,4,3> on absolute byte addresses: bits [4,4+B) ^= bits [7,7+B)."""
    bits = {0: 0, 3: 1, 2: 2, 1: 3}[swizzle]
    if bits == 0:
        return addr
    mask = (1 << bits) - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def operand_addresses(desc: Descriptor, mn: int, k: int, esize: int, mn_major: bool) -> np.ndarray:
    """(mn, k) int64 byte addresses of every element of an mn x k operand tile (A: 64 x K,
    B stored as N x K) that the descriptor describes. k * esize must be 32 bytes."""
    per_chunk = 16 // esize                     # T
    w = SWIZZLE_CHUNKS[desc.swizzle]
    rows = np.arange(mn)[:, None]
    cols = np.arange(k)[None, :]
    lbo, sbo = desc.lbo // 16, desc.sbo // 16
    if not mn_major:
        g, r = rows // 8, rows % 8
        c, inner = cols // per_chunk, cols % per_chunk
        if desc.swizzle == 0:
            chunk = r + g * sbo + c * lbo
        else:
            chunk = r * w + g * sbo + c
        byte = inner * esize
    else:
        t, rest = rows % per_chunk, rows // per_chunk
        k8, j = cols % 8, cols // 8
        if desc.swizzle == 0:
            chunk = rest * sbo + k8 + j * lbo
        else:
            chunk = rest % w + (rest // w) * lbo + k8 * w + j * sbo
        byte = t * esize
    addr = desc.start + 16 * chunk + byte
    return swizzle_address(np.broadcast_to(addr, (mn, k)).astype(np.int64), desc.swizzle)


# ------------------------------------------------------------------ register fragments
THREADS = np.arange(128)
WARP, LANE = THREADS // 32, THREADS % 32
GROUP, IN_GROUP = LANE >> 2, LANE & 3


def d_fragment(n: int) -> np.ndarray:
    """(128 threads, n/2 elements, 2) (row, col) of accumulator element d_i
    (docs/ptx_facts/wgmma.md §9a):
    row 16w + g + 8*((i>>1)&1), col 8*(i>>2) + 2t + (i&1). f32/s32 hold one element per register,
    f16 packs d_{2j} (low half) and d_{2j+1} in register j."""
    i = np.arange(n // 2)[None, :]
    rows = 16 * WARP[:, None] + GROUP[:, None] + 8 * ((i >> 1) & 1)
    cols = 8 * (i >> 2) + 2 * IN_GROUP[:, None] + (i & 1)
    return np.stack([rows, cols], axis=-1)


def a_fragment(kind: str) -> np.ndarray:
    """(128 threads, elements, 2) (row, col) of A held in registers, elements in register order
    (low bits first): warp w holds rows 16w..16w+15 in the mma.sync m16n8k{16,8,32} A layout."""
    if kind == "16bit":      # 4 x .f16x2, m16n8k16 A (docs/ptx_facts/mma_sync.md §1)
        i = np.arange(8)[None, :]
        row = GROUP[:, None] + 8 * ((i >> 1) & 1)
        col = 2 * IN_GROUP[:, None] + (i & 1) + 8 * (i >> 2)
    elif kind == "tf32":     # 4 x .b32, m16n8k8 tf32 A (docs/ptx_facts/mma_sync.md §2a)
        i = np.arange(4)[None, :]
        row = GROUP[:, None] + 8 * (i & 1)
        col = IN_GROUP[:, None] + 4 * (i >> 1)
    else:                    # 4 x .b32 of 4 bytes, m16n8k32 8-bit A (docs/ptx_facts/mma_sync.md §2b)
        i = np.arange(16)[None, :]
        row = GROUP[:, None] + 8 * ((i >> 2) & 1)
        col = 4 * IN_GROUP[:, None] + (i & 3) + 16 * (i >> 3)
    return np.stack([16 * WARP[:, None] + row, np.broadcast_to(col, row.shape)], axis=-1)


def flat_index(table: np.ndarray, cols: int) -> np.ndarray:
    """Row-major matrix index of every (thread, element) of a fragment table; checks it is a
    bijection onto the matrix so a wrong formula fails at import, not silently."""
    flat = (table[..., 0] * cols + table[..., 1]).reshape(-1)
    if sorted(flat.tolist()) != list(range(flat.size)):
        raise AssertionError("wgmma fragment table is not a bijection onto its matrix")
    return flat
