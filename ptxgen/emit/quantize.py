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
from ..ir.ops import B32


@dataclass(frozen=True)
class ByteFamily:
    """The instructions that move one 8-bit dtype between f32 and memory."""

    quantize: str  # f32 -> integer: round to nearest even, saturate to the type's range
    load: str  # one element from memory, extended to 32 bits
    extract: str  # byte i of a 32-bit word (bfe d, w, 8i, 8), extended
    widen: str  # the extended integer -> f32 (exact: |x| <= 255)


BYTE_FAMILIES = {
    "s8": ByteFamily("cvt.rni.sat.s8.f32", "ld.global.s8", "bfe.s32", "cvt.rn.f32.s32"),
    "u8": ByteFamily("cvt.rni.sat.u8.f32", "ld.global.u8", "bfe.u32", "cvt.rn.f32.u32"),
}

#: prmt selectors: nibble i picks byte i of the result from the 8 bytes of {b, a} (a = bytes 0-3).
LOW_BYTES = "0x0040"  # byte 0 of a, byte 0 of b (the upper half is don't-care)
LOW_HALVES = "0x5410"  # bytes 0-1 of a, then bytes 0-1 of b
#: Bytes per access -> (vector suffix, type) moving them as one 16-bit or 1/2/4 32-bit words.
WORD_ACCESS = {2: ("", ".b16"), 4: ("", ".b32"), 8: (".v2", ".b32"), 16: (".v4", ".b32")}


def quantize(b: Builder, dtype: str, value: VReg) -> VReg:
    """`value` rounded to nearest even and saturated to `dtype`, in a .b32 register's low byte."""
    q = b.reg("b32")
    b.emit(BYTE_FAMILIES[dtype].quantize, q, value, ndefs=1)
    return q


def _prmt(b: Builder, lo: VReg, hi: VReg, selector: str) -> VReg:
    d = b.reg("b32")
    ptx.prmt(b, B32, lo, hi, Imm(selector), into=d)
    return d


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
        b.emit("st.global.b8", addr, quantized[0], guard=guard)
        return
    vec, typ = WORD_ACCESS[len(quantized)]
    words = pack(b, quantized)
    b.emit(f"st.global{vec}{typ}", addr, Vec(tuple(words)) if len(words) > 1 else words[0], guard=guard)


def load_bytes(b: Builder, dtype: str, addr: Addr, count: int, guard: VReg | None,
               space: str = "global") -> list[VReg]:
    """`count` adjacent 8-bit elements at `addr` (aligned to the whole width) in the global or shared
    state space, as exact f32 values; zero where the guard is off."""
    fam = BYTE_FAMILIES[dtype]
    if count == 1:
        words = [b.reg("b32")]
        if guard is not None:
            ptx.mov(b, B32, 0, into=words[0])
        b.emit(fam.load.replace(".global", f".{space}"), words[0], addr, ndefs=1, guard=guard)
        ints = words
    else:
        vec, typ = WORD_ACCESS[count]
        words = list(b.regs("b32", max(1, count // 4)))
        if guard is not None:
            for w in words:
                ptx.mov(b, B32, 0, into=w)
        b.emit(f"ld.{space}{vec}{typ}", Vec(tuple(words)) if len(words) > 1 else words[0], addr, ndefs=1,
               guard=guard)
        ints = []
        for i in range(count):
            x = b.reg("b32")
            b.emit(fam.extract, x, words[i // 4], Imm(str(8 * (i % 4))), Imm("8"), ndefs=1)
            ints.append(x)
    out = []
    for x in ints:
        f = b.reg("f32")
        b.emit(fam.widen, f, x, ndefs=1)
        out.append(f)
    return out
