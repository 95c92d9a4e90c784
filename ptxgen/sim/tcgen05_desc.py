"""The two descriptors a tcgen05.mma takes, decoded field by field (docs/ptx_facts/tcgen05.md §12d, §12e).

Shared-memory descriptor (64 bits, sm100 layout, PTX ISA §9.7.16.4.1 Table 40): start address >> 4
in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, the fixed constant 0b001 in 46-48, base offset
in 49-51, LBO mode in 52, swizzle in 61-63 (0 none, 1 128B with 32B atomicity, 2 128B, 4 64B,
6 32B). Only the swizzle field moved compared with Hopper's descriptor, so the canonical layouts
(element -> byte address) are those of wgmma_layouts.operand_addresses, plus sm100's MN-major
128B-with-32B-atomicity atom (mn_major_base32b_addresses).

Instruction descriptor (32 bits, §9.7.16.4.2 Table 42) for kind::f16 / tf32 / f8f6f4 / i8.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import wgmma_layouts as wl
from .errors import Fault

#: sm100 swizzle code -> (name, the Hopper descriptor code with the same canonical layout)
SWIZZLES = {0: ("none", 0), 2: ("128B", 1), 4: ("64B", 2), 6: ("32B", 3)}
BASE32B = 1   # "128B with 32B atomicity", MN-major only (§9.7.16.10.6 Table 55)


@dataclass(frozen=True)
class SmemDescriptor:
    start: int          # byte address in the shared window
    lbo: int            # bytes
    sbo: int            # bytes
    base_offset: int
    lbo_mode: int
    swizzle: int        # sm100 code

    @property
    def swizzle_name(self) -> str:
        return SWIZZLES[self.swizzle][0] if self.swizzle in SWIZZLES else "128B_base32B"


def decode_smem_descriptor(value: int, which: str) -> SmemDescriptor:
    """Split a tcgen05 shared-memory descriptor; the fixed and reserved fields must hold their
    constants (a Hopper wgmma descriptor has 0 in bits 46-48 and its swizzle in bits 62-63)."""
    value = int(value) & (2**64 - 1)
    fixed = (value >> 46) & 7
    swizzle = (value >> 61) & 7
    if fixed != 1:
        raise Fault("unsupported", f"tcgen05 {which} descriptor {value:#018x} has {fixed:#05b} in bits 46-48; the "
                    "sm100 descriptor needs the constant 0b001 there (bit 46 set; a Hopper wgmma descriptor "
                    "lacks it): docs/ptx_facts/tcgen05.md §12d")
    if swizzle not in SWIZZLES and swizzle != BASE32B:
        raise Fault("unsupported", f"tcgen05 {which} descriptor {value:#018x} has swizzle code {swizzle} in bits "
                    "61-63; valid codes are 0 none, 1 128B-with-32B-atomicity, 2 128B, 4 64B, 6 32B")
    if (value >> 14) & 3 or (value >> 30) & 3 or (value >> 53) & 0xFF:
        raise Fault("unsupported", f"tcgen05 {which} descriptor {value:#018x} sets reserved bits "
                    "(14-15, 30-31 or 53-60 must be 0)")
    return SmemDescriptor(start=(value & 0x3FFF) << 4, lbo=((value >> 16) & 0x3FFF) << 4,
                          sbo=((value >> 32) & 0x3FFF) << 4, base_offset=(value >> 49) & 7,
                          lbo_mode=(value >> 52) & 1, swizzle=swizzle)


def encode_smem_descriptor(start: int, lbo: int, sbo: int, swizzle: int, base_offset: int = 0) -> int:
    """The inverse of decode_smem_descriptor (tests build descriptors with it)."""
    enc = lambda x: (x & 0x3FFFF) >> 4     # noqa: E731 - 16-byte units of an 18-bit address
    return (enc(start) | enc(lbo) << 16 | enc(sbo) << 32 | 1 << 46 | (base_offset & 7) << 49
            | (swizzle & 7) << 61)


def operand_addresses(desc: SmemDescriptor, mn: int, k: int, esize: int, mn_major: bool,
                      which: str) -> np.ndarray:
    """(mn, k) byte addresses of an operand tile (A: M x K, B stored as N x K)."""
    if desc.lbo_mode:
        raise Fault("unsupported", f"tcgen05 {which} descriptor sets the LBO mode bit 52 (absolute LBO, "
                    "sm_103a only); sm_100a uses relative LBO (bit 52 = 0)")
    if desc.swizzle == BASE32B:
        if not mn_major:
            raise Fault("unsupported", f"tcgen05 {which} descriptor uses 128B-with-32B-atomicity swizzle with a "
                        "K-major operand; the ISA allows that atom for MN-major operands only (Table 55)")
        if desc.base_offset:
            raise Fault("unsupported", f"tcgen05 {which} descriptor has base offset {desc.base_offset}; the simulator "
                        "models base offset 0 only (align 128B-with-32B-atomicity tiles to 512 B)")
        return mn_major_base32b_addresses(desc, mn, k, esize)
    if desc.base_offset and desc.swizzle != 0:
        raise Fault("unsupported", f"tcgen05 {which} descriptor has base offset {desc.base_offset}; the simulator "
                    "models base offset 0 only (align swizzled tiles to the pattern: 1024 B for 128B)")
    hopper = wl.Descriptor(desc.start, desc.lbo, desc.sbo, 0, SWIZZLES[desc.swizzle][1])
    return wl.operand_addresses(hopper, mn, k, esize, mn_major)


def mn_major_base32b_addresses(desc: SmemDescriptor, mn: int, k: int, esize: int) -> np.ndarray:
    """(mn, k) byte addresses of an MN-major operand in the 128B swizzle with 32B atomicity
    (docs/ptx_facts/tcgen05.md §12d2): atoms of 8 x 4 16-byte units (PTX ISA Table 55: 128 bytes along
    MN times 4 K rows of 128 bytes), the next 128 bytes of MN LBO apart, the next 4 K rows SBO apart;
    then Swizzle<2,5,2> on the byte address, the 32-byte chunk (bits 5-6) XORed with the K row in the
    atom (bits 7-8) (CuTe's Layout_MN_SW128_32B_Atom and make_umma_desc)."""
    per_chunk = 16 // esize
    rows, cols = np.arange(mn)[:, None], np.arange(k)[None, :]
    t, rest = rows % per_chunk, rows // per_chunk
    chunk = rest % 8 + (rest // 8) * (desc.lbo // 16) + (cols % 4) * 8 + (cols // 4) * (desc.sbo // 16)
    addr = (desc.start + 16 * chunk + t * esize).astype(np.int64)
    return addr ^ (((addr >> 7) & 3) << 5)


# ------------------------------------------------------------------ instruction descriptor
D_TYPES = {0: "f16", 1: "f32", 2: "s32"}
#: per .kind: A/B type code -> element format name (Table 42)
AB_TYPES = {
    "f16": {0: "f16", 1: "bf16"},
    "tf32": {2: "tf32"},
    "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
    "i8": {0: "u8", 1: "s8"},
}
D_ALLOWED = {"f16": ("f16", "f32"), "tf32": ("f32",), "f8f6f4": ("f16", "f32"), "i8": ("s32",)}
K_OF_KIND = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}     # 256 bits of K per row (§9.7.16.2.1)


@dataclass(frozen=True)
class InstrDescriptor:
    kind: str
    dtype: str
    atype: str
    btype: str
    saturate: bool
    negate_a: bool
    negate_b: bool
    a_mn_major: bool
    b_mn_major: bool
    n: int
    m: int
    k: int
    scale_type: str = ""      # block-scaled kinds: "ue8m0" or "ue4m3"
    sfa_id: int = 0
    sfb_id: int = 0


def decode_instr_descriptor(value: int, kind: str, cta_group: int, ws: bool = False) -> InstrDescriptor:
    """Decode and validate a 32-bit instruction descriptor against .kind and the shape table
    (§9.7.16.2.1 Table 39): dense; M and N of cta_group::2 are the pair's; `ws`: tcgen05.mma.ws
    (cta_group::1, M 32/64/128, N 64/128/256; bits 30-31 the B-reuse max shift, a hint)."""
    value = int(value) & 0xFFFFFFFF
    text = f"tcgen05.mma .kind::{kind} instruction descriptor {value:#010x}"
    if value & 0b111:
        raise Fault("unsupported", f"{text} selects sparsity (bits 0-2); sparse MMA is not simulated")
    if value & (1 << 6) or value & (1 << 23) or value & (1 << 29):
        raise Fault("unsupported", f"{text} sets a reserved bit (6, 23 or 29 must be 0)")
    if value >> 30 and not ws:
        raise Fault("unsupported", f"{text} sets the .ws max-shift field (bits 30-31); it must be 0 without .ws")
    saturate = bool(value >> 3 & 1)
    dtype = D_TYPES.get(value >> 4 & 3)
    table = AB_TYPES[kind]
    atype, btype = table.get(value >> 7 & 7), table.get(value >> 10 & 7)
    if dtype not in D_ALLOWED[kind] or atype is None or btype is None:
        raise Fault("unsupported", f"{text}: D type code {value >> 4 & 3}, A type code {value >> 7 & 7}, B type "
                    f"code {value >> 10 & 7} are not a .kind::{kind} combination (D {D_ALLOWED[kind]}, A/B "
                    f"{sorted(table.items())})")
    if kind == "f16" and (atype != btype or (dtype == "f16" and atype != "f16")):
        raise Fault("unsupported", f"{text}: kind::f16 needs A and B of one type, and an f16 D only with f16 inputs")
    if saturate and kind != "i8":
        raise Fault("unsupported", f"{text} sets saturate (bit 3), which only .kind::i8 has")
    neg_a, neg_b = bool(value >> 13 & 1), bool(value >> 14 & 1)
    if kind == "i8" and (neg_a or neg_b):
        raise Fault("unsupported", f"{text} negates an operand; .kind::i8 has no negate (bits 13-14 must be 0)")
    n, m = (value >> 17 & 0x3F) << 3, (value >> 24 & 0x1F) << 4
    if ws:
        if m not in (32, 64, 128) or n not in (64, 128, 256):
            raise Fault("unsupported", f"{text}: M = {m}, N = {n}; tcgen05.mma.ws takes M = 32, 64 or 128 and "
                        "N = 64, 128 or 256 (Table 39)")
    elif cta_group == 1:
        if m not in (64, 128):
            raise Fault("unsupported", f"{text}: M = {m}; cta_group::1 takes M = 64 or 128 (bits 24-28 = M >> 4)")
        n_ok = n in (8, 16, 24) or (n % 16 == 0 and 32 <= n <= 256) if kind == "i8" else 8 <= n <= 256
        shapes = "(8, 16, 24, then multiples of 16 to 256)" if kind == "i8" else "(8..256 step 8)"
    else:
        if m not in (128, 256):
            raise Fault("unsupported", f"{text}: M = {m}; cta_group::2 takes M = 128 or 256 (the pair's M)")
        n_ok = 32 <= n <= 256 and n % 32 == 0 if kind == "i8" else 16 <= n <= 256 and n % 16 == 0
        shapes = "(32..256 step 32)" if kind == "i8" else "(16..256 step 16)"
    if not ws and not n_ok:
        raise Fault("unsupported", f"{text}: N = {n} is not in the ISA's cta_group::{cta_group} shape table for "
                    f".kind::{kind} {shapes}")
    return InstrDescriptor(kind, dtype, atype, btype, saturate, neg_a, neg_b, bool(value >> 15 & 1),
                           bool(value >> 16 & 1), n, m, K_OF_KIND[kind])


def encode_instr_descriptor(kind: str, dtype: str, atype: str, btype: str, m: int, n: int,
                            a_mn_major: bool = False, b_mn_major: bool = False,
                            negate_a: bool = False, negate_b: bool = False, saturate: bool = False) -> int:
    """The inverse of decode_instr_descriptor (tests build descriptors with it)."""
    code = {name: c for c, name in AB_TYPES[kind].items()}
    dcode = {name: c for c, name in D_TYPES.items()}[dtype]
    return (int(saturate) << 3 | dcode << 4 | code[atype] << 7 | code[btype] << 10 | int(negate_a) << 13
            | int(negate_b) << 14 | int(a_mn_major) << 15 | int(b_mn_major) << 16 | (n >> 3) << 17
            | (m >> 4) << 24)


# ------------------------------------------------------------------ block-scaled kinds (Tables 43, 44)
SCALED_AB_TYPES = {"mxf8f6f4": AB_TYPES["f8f6f4"], "mxf4": {1: "e2m1"}, "mxf4nvf4": {1: "e2m1"}}
#: scale vector size -> the SF_ID values it allows (the ID picks a byte, half-word or word of a column)
SF_IDS = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}


def decode_scaled_instr_descriptor(value: int, kind: str, vec: int, cta_group: int = 1) -> InstrDescriptor:
    """Decode and validate the instruction descriptor of .kind::mxf8f6f4 / mxf4 / mxf4nvf4
    (§9.7.16.4.2 Tables 43/44): SFB_ID bits 4-5, scale type bit 23 (UE8M0 1, UE4M3 0), M >> 4 in
    bits 24-28 (CUTLASS and Triton write it there; the ISA names bits 27-28 = M >> 7, the same
    bits for M = 128), SFA_ID bits 29-30; dense; M = 128 with cta_group::1, the pair's M = 128 or 256
    with cta_group::2 (N 16..256 step 16; Table 39)."""
    value = int(value) & 0xFFFFFFFF
    text = f"tcgen05.mma .kind::{kind} instruction descriptor {value:#010x}"
    if value & 0b111:
        raise Fault("unsupported", f"{text} selects sparsity (bits 0-2); sparse MMA is not simulated")
    if value & (1 << 3) or value & (1 << 6) or value >> 31:
        raise Fault("unsupported", f"{text} sets a reserved bit (3, 6 and 31 must be 0; bit 31 is the "
                    "sm_103a K = 96 flag)")
    table = SCALED_AB_TYPES[kind]
    fp4 = kind != "mxf8f6f4"
    atype, btype = table.get(value >> 7 & 7), table.get(value >> 10 & (3 if fp4 else 7))
    if atype is None or btype is None or (fp4 and value >> 12 & 1):
        raise Fault("unsupported", f"{text}: A type code {value >> 7 & 7}, B type code {value >> 10 & 7} are not "
                    f".kind::{kind} types ({sorted(table.items())})")
    scale_type = "ue8m0" if value >> 23 & 1 else "ue4m3"
    if scale_type == "ue4m3" and not (kind == "mxf4nvf4" and vec == 4):
        raise Fault("unsupported", f"{text} selects ue4m3 scale factors (bit 23 = 0); only .kind::mxf4nvf4 with "
                    ".block16 / .scale_vec::4X takes them, the others need ue8m0 (bit 23 = 1)")
    sfa, sfb = value >> 29 & 3, value >> 4 & 3
    if sfa not in SF_IDS[vec] or sfb not in SF_IDS[vec]:
        raise Fault("unsupported", f"{text}: SFA_ID {sfa} / SFB_ID {sfb}; with {vec} scale(s) per row the IDs "
                    f"must be in {SF_IDS[vec]}")
    ta, tb = bool(value >> 15 & 1), bool(value >> 16 & 1)
    if fp4 and (ta or tb):
        raise Fault("unsupported", f"{text} transposes an operand; .kind::{kind} operands are K-major only")
    n, m = (value >> 17 & 0x3F) << 3, (value >> 24 & 0x1F) << 4
    if cta_group == 1 and m != 128:
        raise Fault("unsupported", f"{text}: M = {m}; block-scaled kinds take M = 128 with cta_group::1")
    if cta_group == 2 and m not in (128, 256):
        raise Fault("unsupported", f"{text}: M = {m}; block-scaled kinds take the pair's M = 128 or 256 with "
                    "cta_group::2")
    if not (8 <= n <= 256 and n % 8 == 0 if cta_group == 1 else 16 <= n <= 256 and n % 16 == 0):
        raise Fault("unsupported", f"{text}: N = {n} is not in the ISA's cta_group::{cta_group} shape table "
                    + ("(8..256 step 8)" if cta_group == 1 else "(16..256 step 16)"))
    return InstrDescriptor(kind, "f32", atype, btype, False, bool(value >> 13 & 1), bool(value >> 14 & 1),
                           ta, tb, n, m, 64 if fp4 else 32, scale_type, sfa, sfb)
