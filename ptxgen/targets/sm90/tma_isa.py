"""TMA instructions: cp.async.bulk.tensor load / multicast load / store, prefetch.tensormap, and the
bulk-group protocol (docs/ptx_facts/tma.md; PTX ISA "cp.async.bulk.tensor",
"cp.async.bulk.commit_group", "cp.async.bulk.wait_group", "prefetch", "Tensor-map").

The tensor operand `[tmap, {c0, c1, ...}]` is one bracketed operand holding a register list: the IR
(ptxgen/ir/nodes.py) has no operand of that shape yet, so the copies are spelled here as text from
operand spellings (the "raw instruction" layer); prefetch and the bulk-group protocol, whose
operands the IR can express, also go through the Builder.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import Builder
from ...ir import Addr, Imm, Instr, TensorRef, VReg
from ...schedule.swizzle import SWIZZLE_128B, Swizzle

#: Tensor ranks a tile-mode tensor map may have.
RANKS = (1, 2, 3, 4, 5)
#: Largest box extent per dimension (cuTensorMapEncodeTiled boxDim[i] in 1..256).
MAX_BOX = 256
#: Load destination space per PTX version: `.shared::cta` as a TMA destination needs PTX 8.6.
LOAD_DST = {(8, 0): "shared::cluster", (8, 6): "shared::cta"}


@dataclass(frozen=True)
class TensorTile:
    """A box of a tensor map as TMA moves it: `box` extents innermost first, element bytes."""

    box: tuple[int, ...]
    esize: int
    swizzle: Swizzle = SWIZZLE_128B

    def __post_init__(self) -> None:
        if len(self.box) not in RANKS:
            raise ValueError(f"a TMA box has rank 1..5, got {len(self.box)}")
        if any(not 1 <= b <= MAX_BOX for b in self.box):
            raise ValueError(f"TMA box extents must be 1..{MAX_BOX} per dimension, got {self.box}: split the tile")
        inner = self.box[0] * self.esize
        if inner % 16:
            raise ValueError(f"the inner box extent is {inner} bytes; it must be a multiple of 16")
        if self.swizzle.bits and inner > self.swizzle.width:
            raise ValueError(f"with {self.swizzle.name} swizzle the inner box extent ({inner} B) must be at most "
                             f"{self.swizzle.width} B: narrow box[0] or widen the swizzle")

    @property
    def nbytes(self) -> int:
        """Bytes one copy delivers, the complete-tx count its mbarrier must expect (also when part of
        the box is out of bounds: the fill bytes count)."""
        n = self.esize
        for b in self.box:
            n *= b
        return n


def _coords(coords: tuple[str, ...]) -> str:
    if len(coords) not in RANKS:
        raise ValueError(f"TMA takes 1..5 coordinates (innermost first), got {len(coords)}")
    return "{" + ", ".join(coords) + "}"


def load_text(dst: str, tmap: str, coords: tuple[str, ...], mbar: str, ptx: tuple[int, int] = (8, 0),
              multicast_mask: str | None = None) -> str:
    """A tile-mode TMA load global -> shared completing complete-tx(bytes) on `mbar`:
    `cp.async.bulk.tensor.Nd.<dst>.global.tile.mbarrier::complete_tx::bytes[.multicast::cluster]
    [dst], [tmap, {c...}], [mbar][, ctaMask];` coordinates are .s32 and innermost first; `tmap` is the
    generic address of the 64-byte-aligned CUtensorMap. Multicast writes the box at the same offset
    in every CTA of the 16-bit `ctaMask` and signals each one's mbarrier at the same offset."""
    space = "shared::cluster" if multicast_mask is not None or ptx < (8, 6) else "shared::cta"
    mc = ".multicast::cluster" if multicast_mask is not None else ""
    tail = f", {multicast_mask}" if multicast_mask is not None else ""
    return (f"cp.async.bulk.tensor.{len(coords)}d.{space}.global.tile.mbarrier::complete_tx::bytes{mc} "
            f"[{dst}], [{tmap}, {_coords(coords)}], [{mbar}]{tail};")


def store_text(tmap: str, coords: tuple[str, ...], src: str) -> str:
    """A tile-mode TMA store shared -> global in the bulk-group scheme: out-of-bounds parts of the
    box are not written. Generic-proxy writes of `src` need fence.proxy.async.shared::cta first."""
    return (f"cp.async.bulk.tensor.{len(coords)}d.global.shared::cta.tile.bulk_group "
            f"[{tmap}, {_coords(coords)}], [{src}];")


def prefetch_tensormap(b: Builder, tmap: Addr, comment: str | None = None) -> Instr:
    """Bring the tensor map (generic address) into the descriptor cache before the first copy."""
    return b.emit("prefetch.tensormap", tmap, comment=comment)


def bulk_commit_group(b: Builder, guard: VReg | None = None, comment: str | None = None) -> Instr:
    """Close this thread's pending bulk (TMA store) copies into one bulk group."""
    return b.emit("cp.async.bulk.commit_group", guard=guard, comment=comment)


def bulk_wait_group(b: Builder, pending: int, read_only: bool = True, guard: VReg | None = None,
                    comment: str | None = None) -> Instr:
    """Wait until at most `pending` bulk groups are in flight. `.read` waits only until their shared
    sources have been read (enough to reuse the staging buffer); without it, until the writes are done."""
    if pending < 0:
        raise ValueError("cp.async.bulk.wait_group takes N >= 0")
    op = "cp.async.bulk.wait_group.read" if read_only else "cp.async.bulk.wait_group"
    return b.emit(op, Imm(str(pending)), guard=guard, comment=comment)


def load(b: Builder, dst: Addr, tmap: VReg, coords: tuple[VReg | Imm, ...], mbar: Addr,
         guard: VReg | None = None, comment: str | None = None, cta_mask: VReg | None = None) -> Instr:
    """`load_text` through the Builder (shared::cluster destination, PTX 8.0): the tensor operand
    is a `TensorRef`, so the register allocator sees the map and coordinates as read. With
    `cta_mask` (a .b16 register) the box is multicast to every CTA of the cluster in the mask, at
    the same offset, completing on each one's mbarrier at `mbar`'s offset (clusters.md)."""
    if len(coords) not in RANKS:
        raise ValueError(f"TMA takes 1..5 coordinates (innermost first), got {len(coords)}")
    if cta_mask is not None and cta_mask.cls != "b16":
        raise ValueError("the multicast ctaMask is a 16-bit operand: pass a .b16 register")
    op = f"cp.async.bulk.tensor.{len(coords)}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    if cta_mask is None:
        return b.emit(op, dst, TensorRef(tmap, tuple(coords)), mbar, guard=guard, comment=comment)
    return b.emit(op + ".multicast::cluster", dst, TensorRef(tmap, tuple(coords)), mbar, cta_mask, guard=guard,
                  comment=comment)


def store(b: Builder, tmap: VReg, coords: tuple[VReg | Imm, ...], src: Addr, guard: VReg | None = None,
          comment: str | None = None) -> Instr:
    """`store_text` through the Builder: the box at `coords` (innermost first) from the swizzled
    shared tile at `src`; out-of-bounds parts of the box are not written (tma.md §9d). Close it
    into a bulk group with `bulk_commit_group` and wait for the group's reads before `src` is
    overwritten (`bulk_wait_group(read_only=True)`)."""
    if len(coords) not in RANKS:
        raise ValueError(f"TMA takes 1..5 coordinates (innermost first), got {len(coords)}")
    op = f"cp.async.bulk.tensor.{len(coords)}d.global.shared::cta.tile.bulk_group"
    return b.emit(op, TensorRef(tmap, tuple(coords)), src, guard=guard, comment=comment)
