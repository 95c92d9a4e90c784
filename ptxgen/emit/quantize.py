"""8-bit outputs: f32 values rounded to s8/u8, packed into words for stores, and unpacked again.

Each element travels in the low byte of a 32-bit register: PTX lets cvt, ld and st use registers
wider than their type (cvt and ld sign- or zero-extend into them, st stores the low bits). prmt
gathers the low bytes into 16- and 32-bit words, so a 16-byte chunk leaves in one st.global.v4.b32.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Builder
from ..ir import Addr, Imm, Vec, VReg
from ..ir import ops as ptx
from ..ir.ops import B8, B16, B32, F32, S8, S32, U8, U32, PtxType


@dataclass(frozen=True)
class ByteFamily:
    """The types that move one 8-bit dtype between f32 and memory: `element` (cvt.rni.sat to it
    rounds to nearest even and saturates; ld of it extends to 32 bits) and `word`, the 32-bit
    type of the same signedness (bfe extends a byte to it; cvt.rn.f32 of it is exact, |x| <= 255)."""

    element: PtxType
    word: PtxType


BYTE_FAMILIES = {"s8": ByteFamily(S8, S32), "u8": ByteFamily(U8, U32)}

#: prmt selectors: nibble i picks byte i of the result from the 8 bytes of {b, a} (a = bytes 0-3).
LOW_BYTES = "0x0040"  # byte 0 of a, byte 0 of b (the upper half is don't-care)
LOW_HALVES = "0x5410"  # bytes 0-1 of a, then bytes 0-1 of b
#: Bytes per access -> (vector width, type) moving them as one 16-bit or 1/2/4 32-bit words.
WORD_ACCESS = {2: (1, B16), 4: (1, B32), 8: (2, B32), 16: (4, B32)}


def quantize(b: Builder, dtype: str, value: VReg) -> VReg:
    """`value` rounded to nearest even and saturated to `dtype`, in a .b32 register's low byte."""
    return ptx.cvt(b, BYTE_FAMILIES[dtype].element, F32, value, rounding="rni.sat")


def _prmt(b: Builder, lo: VReg, hi: VReg, selector: str) -> VReg:
    return ptx.prmt(b, B32, lo, hi, Imm(selector))


def pack(b: Builder, quantized: list[VReg]) -> list[VReg]:
    """Low bytes of 2 registers -> one register's low 16 bits; of 4k registers -> k words, in
    memory order (element 0 in byte 0: PTX is little-endian)."""
    pairs = [_prmt(b, lo, hi, LOW_BYTES) for lo, hi in zip(quantized[0::2], quantized[1::2])]
    if len(pairs) == 1:
        return pairs
    return [_prmt(b, lo, hi, LOW_HALVES) for lo, hi in zip(pairs[0::2], pairs[1::2])]


def store_bytes(b: Builder, addr: Addr, quantized: list[VReg], guard: VReg | None) -> None:
    """Store 1, 2, 4, 8 or 16 adjacent 8-bit elements with one instruction (`addr` is aligned to
    the whole width)."""
    if len(quantized) == 1:
        ptx.store(b, "global", B8, addr, quantized[0], guard=guard)
        return
    width, ty = WORD_ACCESS[len(quantized)]
    words = pack(b, quantized)
    ptx.store(b, "global", ty, addr, Vec(tuple(words)) if len(words) > 1 else words[0], width=width, guard=guard)


def load_bytes(b: Builder, dtype: str, addr: Addr, count: int, guard: VReg | None,
               space: str = "global") -> list[VReg]:
    """`count` adjacent 8-bit elements at `addr` (aligned to the whole width) in the global or shared
    state space, as exact f32 values; zero where the guard is off."""
    fam = BYTE_FAMILIES[dtype]
    if count == 1:
        words = [b.reg("b32")]
        if guard is not None:
            ptx.mov(b, B32, 0, into=words[0])
        ptx.load(b, space, fam.element, addr, into=words[0], guard=guard)
        ints = words
    else:
        width, ty = WORD_ACCESS[count]
        words = list(b.regs("b32", max(1, count // 4)))
        if guard is not None:
            for w in words:
                ptx.mov(b, B32, 0, into=w)
        ptx.load(b, space, ty, addr, into=Vec(tuple(words)) if len(words) > 1 else words[0], width=width,
                 guard=guard)
        ints = [ptx.bfe(b, fam.word, words[i // 4], Imm(str(8 * (i % 4))), Imm("8")) for i in range(count)]
    return [ptx.cvt(b, F32, fam.word, x, rounding="rn") for x in ints]
