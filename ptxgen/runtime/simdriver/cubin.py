"""Read what a driver needs from an NVIDIA cubin: target arch, kernels, parameter layout.

Why: the stand-in driver must decode `kernelParams` the way the real driver does, from the
parameter records the assembler wrote into the cubin (`.nv.info.<kernel>`, EIATTR_KPARAM_INFO),
not from the PTX; a cubin and a PTX that disagree are then caught instead of trusted.
Both ELF flavours are read: CUDA 12's (EI_ABIVERSION 7, arch in e_flags bits 0-7) and CUDA 13's
(EI_ABIVERSION 8, arch in e_flags bits 8-15).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

EM_CUDA = 190
EIATTR_PARAM_CBANK = 0x0A
EIATTR_KPARAM_INFO = 0x17
EIATTR_REGCOUNT = 0x2F
EIATTR_MAX_THREADS = 0x05
# EIFMT_NVAL, BVAL, HVAL records carry 2 value bytes (records stay 4-aligned); SVAL (4) a u16 size
_FMT_SIZE = {1: 2, 2: 2, 3: 2}


class CubinError(ValueError):
    """Not a usable NVIDIA cubin (the driver's CUDA_ERROR_INVALID_IMAGE)."""


@dataclass(frozen=True)
class KernelParam:
    ordinal: int
    offset: int
    size: int


@dataclass
class CubinKernel:
    name: str
    params: list[KernelParam] = field(default_factory=list)
    registers: int = 0
    static_smem: int = 0
    max_threads: int = 0  # from .maxntid / .reqntid (0: none)


@dataclass
class Cubin:
    arch: str         # "sm_90", "sm_86", ... (see _arch)
    abi_version: int  # 7 (CUDA 12 ELF) or 8 (CUDA 13 ELF)
    kernels: dict[str, CubinKernel]


def _sections(data: bytes) -> list[tuple[str, int, int, int, int, int]]:
    """(name, type, offset, size, link, info) of every section."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info = struct.unpack_from(
            "<IIQQQQII", data, shoff + i * shentsize)
        raw.append((name, typ, off, size, link, info))
    str_off = raw[shstrndx][2]

    def cstr(at: int) -> str:
        return data[at:data.index(b"\0", at)].decode()
    return [(cstr(str_off + n), t, o, s, lk, inf) for n, t, o, s, lk, inf in raw]


def _attributes(blob: bytes):
    """(attribute, payload) records of an .nv.info section."""
    i = 0
    while i + 2 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == 4:
            n, = struct.unpack_from("<H", blob, i + 2)
            yield attr, blob[i + 4:i + 4 + n]
            i += 4 + n
        elif fmt in _FMT_SIZE:
            n = _FMT_SIZE[fmt]
            yield attr, blob[i + 2:i + 2 + n]
            i += 2 + n
        else:
            raise CubinError(f".nv.info record format {fmt} at byte {i} is unknown")


def _arch(flags: int, abi: int) -> str:
    """The SM version in e_flags. Arch-specific targets are read as their base arch: nvJitLink
    13.5 writes the same e_flags for sm_90a as for sm_90 (checked), so e_flags cannot tell them
    apart, and the base arch's compatibility rule is the looser one."""
    sm = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    return f"sm_{sm}"


def parse_cubin(data: bytes) -> Cubin:
    """The arch and kernels of an NVIDIA ELF cubin; CubinError for anything else."""
    if len(data) < 0x40 or data[:4] != b"\x7fELF":
        raise CubinError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise CubinError("not a 64-bit little-endian ELF")
    machine, = struct.unpack_from("<H", data, 0x12)
    if machine != EM_CUDA:
        raise CubinError(f"ELF machine {machine} is not NVIDIA CUDA ({EM_CUDA})")
    flags, = struct.unpack_from("<I", data, 0x30)
    abi = data[8]
    try:
        sections = _sections(data)
        symtab = next((s for s in sections if s[1] == 2), None)  # SHT_SYMTAB
        strtab = sections[symtab[4]] if symtab else None
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        raise CubinError(f"section headers unreadable: {e}") from None

    def symbol(index: int) -> str:
        if symtab is None:
            return ""
        name_off, = struct.unpack_from("<I", data, symtab[2] + index * 24)
        at = strtab[2] + name_off
        return data[at:data.index(b"\0", at)].decode()

    kernels: dict[str, CubinKernel] = {}
    for name, _t, off, size, _lk, _inf in sections:
        if name.startswith(".text."):
            kernels[name[6:]] = CubinKernel(name[6:])
    for name, typ, off, size, _lk, _inf in sections:
        if name.startswith(".nv.shared.") and name[11:] in kernels:
            kernels[name[11:]].static_smem = size  # NOBITS: the size is the allocation
        if name.startswith(".nv.info.") and name[9:] in kernels:
            k = kernels[name[9:]]
            for attr, payload in _attributes(data[off:off + size]):
                if attr == EIATTR_KPARAM_INFO:
                    _index, ordinal, offset, word = struct.unpack_from("<IHHI", payload)
                    k.params.append(KernelParam(ordinal, offset, (word >> 18) & 0x3FFF))
                elif attr == EIATTR_MAX_THREADS:
                    x, y, z = struct.unpack_from("<III", payload)
                    k.max_threads = x * y * z
            k.params.sort(key=lambda p: p.ordinal)
        if name == ".nv.info":
            for attr, payload in _attributes(data[off:off + size]):
                if attr == EIATTR_REGCOUNT:
                    sym, regs = struct.unpack_from("<II", payload)
                    if symbol(sym) in kernels:
                        kernels[symbol(sym)].registers = regs
    if not kernels:
        raise CubinError("the cubin holds no kernels (.text.* sections)")
    return Cubin(_arch(flags, abi), abi, kernels)
