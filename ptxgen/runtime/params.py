"""Kernel parameters: read an entry's `.param` list from PTX and pack Python values for it.

Why parse the PTX: `launch_ptx` takes plain Python ints/floats and numpy arrays, exactly like
`ptxgen.sim.launch`, so the byte width and signedness of every scalar must come from the
declaration, not from the Python value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["ParamDecl", "parse_params", "pack_scalar", "ParamBlock"]

_SCALAR = {
    "u8": "<u1", "s8": "<i1", "b8": "<u1", "u16": "<u2", "s16": "<i2", "b16": "<u2",
    "u32": "<u4", "s32": "<i4", "b32": "<u4", "u64": "<u8", "s64": "<i8", "b64": "<u8",
    "f16": "<f2", "f32": "<f4", "f64": "<f8",
}


@dataclass(frozen=True)
class ParamDecl:
    name: str
    type: str  # "u64", "f32", ...
    count: int = 1  # array length for `.param .b8 name[N]`
    align: int = 0

    @property
    def is_array(self) -> bool:
        return self.count != 1

    @property
    def is_pointer_sized(self) -> bool:
        return self.type in ("u64", "s64", "b64") and not self.is_array

    @property
    def nbytes(self) -> int:
        return np.dtype(_SCALAR[self.type]).itemsize * self.count


def _strip_comments(ptx: str) -> str:
    ptx = re.sub(r"/\*.*?\*/", " ", ptx, flags=re.S)
    return re.sub(r"//[^\n]*", "", ptx)


def parse_params(ptx: str, entry: str) -> list[ParamDecl]:
    """The `.param` declarations of `.entry entry(...)`, in order."""
    text = _strip_comments(ptx)
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*(\(|\{{)", text)
    if m is None:
        names = re.findall(r"\.entry\s+([\w$%.]+)", text)
        raise ValueError(f"PTX has no `.entry {entry}`; entries found: {names or 'none'}")
    if m.group(1) == "{":
        return []
    close = text.find(")", m.end())
    body = text[m.end():close]
    out = []
    for decl in (d.strip() for d in body.split(",")):
        if not decl:
            continue
        toks = decl.replace("[", " [").split()
        if not toks or toks[0] != ".param":
            raise ValueError(f"cannot parse parameter declaration {decl!r} of entry {entry}")
        align, typ, name, count = 0, None, None, 1
        i = 1
        while i < len(toks):
            t = toks[i]
            if t == ".align":
                align = int(toks[i + 1])
                i += 2
                continue
            if t.startswith(".ptr"):  # .ptr.global.align 16 etc.: an address, still a u64
                if ".align" in t and i + 1 < len(toks) and toks[i + 1].isdigit():
                    i += 1
                i += 1
                continue
            if t.startswith(".") and typ is None:
                typ = t[1:]
            elif t.startswith("["):
                count = int(t.strip("[] ") or 0)
            else:
                name = t
            i += 1
        if typ not in _SCALAR or name is None:
            raise ValueError(f"unsupported parameter declaration {decl!r} of entry {entry}")
        out.append(ParamDecl(name, typ, count, align))
    return out


def pack_scalar(decl: ParamDecl, value: object) -> np.ndarray:
    """The bytes of one by-value parameter, as a small numpy array (range-checked)."""
    if decl.is_array:
        data = bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else \
            np.ascontiguousarray(value).tobytes()
        if len(data) != decl.nbytes:
            raise ValueError(f"parameter {decl.name} is .{decl.type}[{decl.count}] ({decl.nbytes} "
                             f"bytes): got {len(data)} bytes")
        return np.frombuffer(data, dtype=np.uint8).copy()
    dt = np.dtype(_SCALAR[decl.type])
    if dt.kind == "f":
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            raise TypeError(f"parameter {decl.name} is .{decl.type}: got {type(value).__name__}")
        return np.array([value], dtype=dt)
    if isinstance(value, (float, np.floating)) or isinstance(value, bool) or \
            not isinstance(value, (int, np.integer)):
        raise TypeError(f"parameter {decl.name} is .{decl.type} (an integer): got "
                        f"{type(value).__name__} {value!r}")
    v = int(value)
    bits = dt.itemsize * 8
    lo, hi = (-(1 << (bits - 1)), (1 << bits) - 1) if decl.type[0] == "b" else \
        ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.kind == "i" else (0, (1 << bits) - 1))
    if not lo <= v <= hi:
        raise ValueError(f"parameter {decl.name} is .{decl.type}: {v} does not fit in {bits} bits")
    return np.array([v & ((1 << bits) - 1)], dtype=np.dtype(f"<u{dt.itemsize}"))


class ParamBlock:
    """Storage for every parameter plus the `void*[]` array cuLaunchKernel reads.

    Keep the block alive until cuLaunchKernel returns (the driver copies the values then).
    """

    def __init__(self, decls: list[ParamDecl], values: list[object]):
        if len(values) != len(decls):
            names = ", ".join(f"{d.name}:.{d.type}" for d in decls)
            raise ValueError(f"the entry takes {len(decls)} parameters ({names}): got "
                             f"{len(values)} values")
        self.storage = [pack_scalar(d, v) for d, v in zip(decls, values)]
        self.pointers = np.array([s.ctypes.data for s in self.storage] or [0], dtype=np.uint64)

    @property
    def address(self) -> int:
        """The `void**` to pass as kernelParams."""
        return int(self.pointers.ctypes.data)

    def raw(self) -> bytes:
        """All parameter bytes concatenated (for tests and debugging)."""
        return b"".join(s.tobytes() for s in self.storage)
