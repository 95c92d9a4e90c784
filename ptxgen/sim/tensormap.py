"""sim.TensorMap: what the driver's cuTensorMapEncodeTiled describes, checked as the driver checks it
(docs/ptx_facts/tma.md §9d), and its 128-byte encoding in a `.param .align 64 .b8 name[128]`
kernel parameter.

The encoding is the simulator's own (the real CUtensorMap format is opaque): a magic word, the
global address of the tensor (its array becomes device memory like any array argument), rank,
element size, OOB fill, swizzle, global dims (innermost first), byte strides of dims 1..rank-1,
box dims and element strides. TMA instructions decode it from wherever the kernel points them
(the parameter, or a copy in global memory).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import tma_fp4

MAGIC = 0x50414D54_47585450      # "PTXGTMAP" little endian
MAP_BYTES = 128
PADDED_FLAGS = {"16U4_ALIGN16B": 2, "16U6_ALIGN16B": 4}   # in the nan_fill word: a padded map (tma_fp4.py)
SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
_LAYOUT = np.dtype([("magic", "<u8"), ("address", "<u8"), ("rank", "<u4"), ("esize", "<u4"),
                    ("nan_fill", "<u4"), ("swizzle", "<u4"), ("fill", "<u8"), ("dims", "<u8", 5),
                    ("strides", "<u8", 4), ("box", "<u2", 5), ("estrides", "u1", 5)])


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or (dtype.kind == "V" and "float" in dtype.name)


class TensorMap:
    """A tiled TMA descriptor of `array` with box `box` (both in numpy order, outermost first).

    swizzle: "none" | "32B" | "64B" | "128B" (shared-memory layout of the box);
    oob_fill: "zero" | "nan" (what out-of-bounds box elements load as; "nan" needs a float dtype).
    data_type: None (the array's own element size), "16U4_ALIGN16B" (a uint8 array of packed e2m1
    pairs) or "16U6_ALIGN16B" (a uint8 array of packed fp6, value i at bits 6i): lands padded in
    shared memory, 16 bytes per 16 values; its innermost box counts values (tma_fp4.py).
    """

    def __init__(self, array: np.ndarray, box, *, swizzle: str = "none", oob_fill: str = "zero",
                 element_strides=None, data_type: str | None = None):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"TensorMap needs a numpy array (or a strided view of one), got {type(array).__name__}")
        if data_type is not None and data_type not in tma_fp4.PADDED:
            raise ValueError(f"data_type {data_type!r} is not simulated; use None or one of "
                             f"{', '.join(repr(t) for t in tma_fp4.PADDED)}")
        self.data_type = data_type
        padded = tma_fp4.PADDED.get(data_type)
        if padded:      # modelled as a map of packed words (whole units of 16 values), expanded on landing
            tma_fp4.check_array(padded, array, tuple(int(b) for b in box))
            array = tma_fp4.unit_view(padded, array)
            box = tma_fp4.map_box(padded, tuple(int(b) for b in box))
        rank = array.ndim
        if not 1 <= rank <= 5:
            raise ValueError(f"TensorMap rank {rank} is outside 1..5 (cuTensorMapEncodeTiled's limit)")
        box = tuple(int(b) for b in box)
        if len(box) != rank:
            raise ValueError(f"box {box} has {len(box)} dims but the array has {rank}; give one box size "
                             "per dimension, outermost first (numpy order)")
        esize = array.dtype.itemsize
        row = box[-1] // padded.words_per_unit * 16 if padded else 0
        if padded and row != SWIZZLES.get(swizzle, 0):
            raise ValueError(f"a {padded.name} map's box row ({row} shared bytes) must be as wide as its swizzle "
                             "(Triton uses 128 e2m1 values with 128B)")
        if esize not in (1, 2, 4, 8):
            raise ValueError(f"element size {esize} bytes is not a TMA data type size (1, 2, 4 or 8)")
        if swizzle not in SWIZZLES:
            raise ValueError(f"swizzle {swizzle!r} is not one of {sorted(SWIZZLES)}")
        if oob_fill not in ("zero", "nan"):
            raise ValueError(f"oob_fill {oob_fill!r} must be 'zero' or 'nan'")
        if oob_fill == "nan" and not _is_float(array.dtype):
            raise ValueError(f"oob_fill='nan' needs a floating-point array, not {array.dtype}; use 'zero'")
        if any(b < 1 or b > 256 for b in box):
            raise ValueError(f"box {box}: every box size must be in 1..256; split the tile into several copies")
        if not padded and box[-1] * esize % 16:
            raise ValueError(f"inner box size {box[-1]} x {esize} bytes = {box[-1] * esize} is not a multiple "
                             "of 16 bytes; widen the innermost box dimension")
        span = SWIZZLES[swizzle] * (padded.unit_bytes if padded else 16) // 16   # padded: a unit takes 16 shared bytes
        if span and box[-1] * esize > span:
            raise ValueError(f"inner box of {box[-1] * esize} bytes exceeds the {swizzle} swizzle span; use a "
                             f"box of at most {span // esize} elements innermost or a wider swizzle")
        if span and box[-1] * esize < span:
            raise ValueError(f"inner box of {box[-1] * esize} bytes is narrower than the {swizzle} swizzle span: "
                             "the driver accepts that, but the shared-memory layout TMA gives such rows is "
                             "not verified, so the simulator does not model it; use a box of "
                             f"{span // esize} elements innermost, or the swizzle as wide as the row "
                             "(Triton and CUTLASS always do)")
        if array.shape[-1] > 1 and array.strides[-1] != esize:
            raise ValueError("the innermost axis of a TensorMap array must be contiguous "
                             f"(stride {array.strides[-1]} bytes, element {esize} bytes)")
        for axis in range(rank - 1):
            s = array.strides[axis]
            if s <= 0 or s % 16 or s >= 1 << 40:
                raise ValueError(f"stride of axis {axis} is {s} bytes; TMA needs positive global strides that "
                                 "are multiples of 16 bytes (pad the rows, e.g. allocate a wider array and "
                                 "pass a view)")
        estrides = (1,) * rank if element_strides is None else tuple(int(e) for e in element_strides)
        if len(estrides) != rank or any(not 1 <= e <= 8 for e in estrides):
            raise ValueError(f"element_strides {element_strides} must give 1..8 per dimension")
        if any(e != 1 for e in estrides):
            raise ValueError("element_strides other than 1 are not simulated; pass element_strides=None")
        root = array
        while isinstance(root.base, np.ndarray):
            root = root.base
        offset = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        if offset % 16:
            raise ValueError(f"the tensor starts {offset} bytes into its allocation; TMA needs a 16-byte "
                             "aligned global address")
        self.array, self.root, self.offset = array, root, offset
        self.box, self.swizzle, self.oob_fill, self.element_strides = box, swizzle, oob_fill, estrides

    def encode(self, root_address: int) -> np.ndarray:
        """The 128 parameter bytes for a launch that placed the root array at `root_address`."""
        a = self.array
        rec = np.zeros(1, dtype=_LAYOUT)
        r = rec[0]
        r["magic"], r["address"], r["rank"], r["esize"] = MAGIC, root_address + self.offset, a.ndim, a.dtype.itemsize
        r["nan_fill"] = int(self.oob_fill == "nan") | PADDED_FLAGS.get(self.data_type, 0)
        r["swizzle"] = SWIZZLES[self.swizzle]
        if self.oob_fill == "nan":
            r["fill"] = int(np.array(np.nan).astype(a.dtype).view(f"u{a.dtype.itemsize}"))
        rank = a.ndim
        r["dims"][:rank] = a.shape[::-1]
        r["strides"][:rank - 1] = a.strides[-2::-1]
        r["box"][:rank] = self.box[::-1]
        r["estrides"][:rank] = self.element_strides[::-1]
        out = np.zeros(MAP_BYTES, dtype=np.uint8)
        out[:_LAYOUT.itemsize] = rec.view(np.uint8)
        return out

    def __repr__(self) -> str:
        return (f"TensorMap(shape={self.array.shape}, dtype={self.array.dtype}, box={self.box}, "
                f"swizzle={self.swizzle!r}, oob_fill={self.oob_fill!r})")


@dataclass
class DecodedMap:
    """A map as a TMA instruction sees it; dims, strides and box in numpy order (outermost first)."""
    address: int
    esize: int
    swizzle: int
    fill: int | None          # NaN bit pattern, or None for zero fill
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, numpy order, innermost = esize
    box: tuple[int, ...]
    padded: object = None     # tma_fp4.PaddedType: packed units of 16 values, 16 bytes each in shared memory

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.box)) * self.esize


def decode(raw: np.ndarray) -> DecodedMap | None:
    """The map in 128 bytes, or None if they do not hold one."""
    r = raw[:_LAYOUT.itemsize].copy().view(_LAYOUT)[0]
    if int(r["magic"]) != MAGIC:
        return None
    rank, esize = int(r["rank"]), int(r["esize"])
    dims = tuple(int(d) for d in r["dims"][:rank][::-1])
    strides = tuple(int(s) for s in r["strides"][:rank - 1][::-1]) + (esize,)
    box = tuple(int(b) for b in r["box"][:rank][::-1])
    fill = int(r["fill"]) if r["nan_fill"] & 1 else None
    return DecodedMap(int(r["address"]), esize, int(r["swizzle"]), fill, dims, strides, box,
                      next((tma_fp4.PADDED[name] for name, flag in PADDED_FLAGS.items() if r["nan_fill"] & flag),
                           None))


def swizzle_addresses(addrs: np.ndarray, mode: int) -> np.ndarray:
    """Where TMA puts logical shared byte address `addrs` under swizzle `mode` (32/64/128 bytes):
    the 16-byte chunk index (address bits 4..) is XORed with address bits 7.. (CUTLASS
    Swizzle<1,4,3>, <2,4,3>, <3,4,3>), applied to the absolute shared address
    (docs/ptx_facts/wgmma.md §9c, tma.md §9d)."""
    if mode == 0:
        return addrs
    bits = {32: 1, 64: 3, 128: 7}[mode]
    return addrs ^ (((addrs >> 7) & bits) << 4)
