"""The tcgen05.mma kinds by input dtype, and their 32-bit instruction descriptors
(docs/ptx_facts/tcgen05.md §12c shapes, §12e descriptor fields, §12h block-scaled kinds).

Every kind covers 256 bits of K per row and MMA: the fp4 kinds' packed operands cover K = 64 in 32
bytes (§12h). The descriptor of the dense kinds (§12e, ISA Table 42): D type in bits
5-4 (f32 1, s32 2), A and B type codes in 9-7 and 12-10, transpose (MN-major) bits 15/16, N >> 3 in
22-17, M >> 4 in 28-24. The block-scaled kinds (§12h, Tables 43/44) add SFB_ID in bits 5-4, the
scale type in bit 23 (ue8m0 1, ue4m3 0) and SFA_ID in bits 29-30, and have an f32 D always.
"""
from __future__ import annotations

#: tcgen05.mma kind of each input dtype (the block-scaled kinds: scales.py picks them).
KIND = {"f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4", "s8": "i8", "u8": "i8",
        "e2m1": "mxf4"}   # e2m1: block-scaled only (mxf4 / mxf4nvf4, scales.py)
#: K of one MMA per input dtype: 32 bytes of K per row (§12c).
MMA_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "e2m1": 64}
#: A/B type codes per kind (§12e; f8f6f4 E4M3 0, E5M2 1; i8 U8 0, S8 1).
TYPE_CODE = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 0, "e5m2": 1, "u8": 0, "s8": 1, "e2m1": 1}   # e2m1: mxf4*
#: The D type code: s32 for kind::i8, f32 for every other kind the lowering issues.
D_CODE = {"i8": 2}
F32_D = 1
#: Kinds whose operands the lowering reads K-major only (tf32's MN-major layout needs the 128B swizzle
#: with 32B atomicity; the 8-bit kinds' MN-major layouts are not built).
K_MAJOR_ONLY = ("tf32", "f8f6f4", "i8", "mxf4")


def dense_idesc(dtype: str, bm: int, bn: int, a_mn_major: bool, b_mn_major: bool, b_dtype: str | None = None) -> int:
    """The instruction descriptor of kind::f16 / tf32 / f8f6f4 / i8 for `dtype` inputs (§12e); B's
    type code from `b_dtype` where it differs (mixed fp8 under kind::f8f6f4)."""
    code, b_code = TYPE_CODE[dtype], TYPE_CODE[b_dtype or dtype]
    return (D_CODE.get(KIND[dtype], F32_D) << 4 | code << 7 | b_code << 10 | int(a_mn_major) << 15
            | int(b_mn_major) << 16 | (bn >> 3) << 17 | (bm >> 4) << 24)


def i8_n_ok(bm: int, bn: int, cta_group: int = 1) -> bool:
    """kind::i8's N (ISA Table 39): at cta_group::1 8, 16, 24, then multiples of 16 to 256 (§12c);
    at cta_group::2 the pair's N is a multiple of 32 from 32 to 256 (§12i)."""
    if cta_group == 2:
        return bn % 32 == 0 and 32 <= bn <= 256
    return bn in (8, 16, 24) or (bn % 16 == 0 and 32 <= bn <= 256)
