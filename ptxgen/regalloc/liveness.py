"""Backward dataflow liveness over virtual registers, with Python-int bitsets.

Vregs are numbered densely in order of first occurrence, and a set of live vregs is one int:
union is `|`, counting a class is `(bits & class_mask).bit_count()`. Nothing here iterates a
Python set, so results never depend on the per-process str hash seed.

A guarded (predicated) definition does not kill: when the guard is false the register keeps
its old value, so the old value must stay live. Such an instruction is treated as also using
its destinations.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..ir import REG_CLASSES, Instr, Item, VReg

from .cfg import Block, build_cfg


def _vreg_key(v: VReg) -> tuple[str, int]:
    return (v.cls, v.id)


def iter_bits(bits: int):
    """Indices of the set bits of `bits`, ascending."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


@dataclass(frozen=True)
class Liveness:
    """Per-item live sets of one item list.

    `live_in_bits[i]` / `live_out_bits[i]` hold the vregs live just before / just after item i
    (labels and comments pass their set through unchanged). `def_bits[i]` are the registers item
    i writes; `occupied_bits[i]` is live-in | defs at an instruction (0 at labels and comments),
    the set that must sit in distinct registers there. Bit k stands for `vregs[k]` (numbered by first occurrence). `peak[cls]` is the
    largest number of vregs of that class live at one instruction, counting the instruction's
    own destinations as live there.
    """

    vregs: tuple[VReg, ...]
    blocks: tuple[Block, ...]
    live_in_bits: tuple[int, ...]
    live_out_bits: tuple[int, ...]
    def_bits: tuple[int, ...]
    occupied_bits: tuple[int, ...]
    class_masks: dict[str, int]
    peak: dict[str, int]

    @cached_property
    def index(self) -> dict[VReg, int]:
        """Dense bit number of each vreg (built on demand: hashing VRegs is slow)."""
        return {v: k for k, v in enumerate(self.vregs)}

    def decode(self, bits: int) -> tuple[VReg, ...]:
        """The vregs of a bitset, in (cls, id) order."""
        return tuple(sorted((self.vregs[k] for k in iter_bits(bits)), key=_vreg_key))

    def live_in(self, i: int) -> tuple[VReg, ...]:
        return self.decode(self.live_in_bits[i])

    def live_out(self, i: int) -> tuple[VReg, ...]:
        return self.decode(self.live_out_bits[i])

    def occupied(self, i: int) -> tuple[VReg, ...]:
        """Vregs that need a register at instruction i: live-in plus its destinations."""
        return self.decode(self.occupied_bits[i])


@dataclass(frozen=True, slots=True)
class _Scan:
    """Vreg numbering plus per-item bitsets: read (guarded defs included), killed, written."""

    vregs: tuple[VReg, ...]
    use: list[int]
    kill: list[int]
    defs: list[int]


def _scan(items: list[Item]) -> _Scan:
    """One pass over `items`, calling defs()/uses() once per instruction.

    Vregs are numbered in order of first occurrence, which depends only on the item list, so
    the numbering is deterministic without sorting. Lookups go through per-class dicts keyed by
    the int id because VReg's dataclass __hash__ runs in Python and dominated the profile.
    """
    by_class: dict[str, dict[int, int]] = {}  # cls -> id -> the vreg's bit
    found: list[VReg] = []

    def bits_of(regs: tuple[VReg, ...]) -> int:
        acc = 0
        for v in regs:
            ids = by_class.get(v.cls)
            if ids is None:
                if v.cls not in REG_CLASSES:
                    raise ValueError(f"vreg {v} has unknown register class {v.cls!r}; "
                                     f"expected one of {list(REG_CLASSES)}")
                ids = by_class[v.cls] = {}
            b = ids.get(v.id)
            if b is None:
                b = ids[v.id] = 1 << len(found)
                found.append(v)
            acc |= b
        return acc

    n = len(items)
    use, kill, defs = [0] * n, [0] * n, [0] * n
    for pos, item in enumerate(items):
        if not isinstance(item, Instr):
            continue
        d = bits_of(item.defs())
        u = bits_of(item.uses())
        defs[pos] = d
        if item.guard is None:
            use[pos] = u
            kill[pos] = d
        else:  # a false guard keeps the old value: the write is also a read, and kills nothing
            use[pos] = u | d
    return _Scan(tuple(found), use, kill, defs)


def _class_masks(vregs: tuple[VReg, ...]) -> dict[str, int]:
    """Bit mask of each class present, in REG_CLASSES order."""
    positions: dict[str, list[int]] = {cls: [] for cls in REG_CLASSES}
    for k, v in enumerate(vregs):
        positions[v.cls].append(k)
    return {cls: sum(1 << k for k in ks) for cls, ks in positions.items() if ks}


def _solve_blocks(blocks: list[Block], use: list[int], kill: list[int]) -> list[int]:
    """Fixpoint live-out of every block (round robin in reverse program order)."""
    gen_b: list[int] = []
    kill_b: list[int] = []
    for blk in blocks:
        g = k = 0
        for i in range(blk.end - 1, blk.start - 1, -1):
            g = use[i] | (g & ~kill[i])
            k |= kill[i]
        gen_b.append(g)
        kill_b.append(k)
    nb = len(blocks)
    live_in = [0] * nb
    live_out = [0] * nb
    changed = True
    while changed:
        changed = False
        for b in range(nb - 1, -1, -1):
            out = 0
            for s in blocks[b].succs:
                out |= live_in[s]
            new_in = gen_b[b] | (out & ~kill_b[b])
            live_out[b] = out
            if new_in != live_in[b]:
                live_in[b] = new_in
                changed = True
    return live_out


def compute_liveness(items: list[Item]) -> Liveness:
    """Live-in/live-out sets of every item and the per-class peak register pressure."""
    scan = _scan(items)
    vregs, use, kill, defs = scan.vregs, scan.use, scan.kill, scan.defs
    blocks = build_cfg(items)
    block_out = _solve_blocks(blocks, use, kill)

    n = len(items)
    live_in = [0] * n
    live_out = [0] * n
    for blk, out in zip(blocks, block_out):
        live = out
        for i in range(blk.end - 1, blk.start - 1, -1):
            live_out[i] = live
            live = use[i] | (live & ~kill[i])
            live_in[i] = live

    masks = _class_masks(vregs)
    peak = {cls: 0 for cls in REG_CLASSES}
    mask_items = list(masks.items())
    occupied = [0] * n
    for i, item in enumerate(items):
        if isinstance(item, Instr):
            at = occupied[i] = live_in[i] | defs[i]
            for cls, mask in mask_items:
                c = (at & mask).bit_count()
                if c > peak[cls]:
                    peak[cls] = c
    return Liveness(
        vregs=vregs,
        blocks=tuple(blocks),
        live_in_bits=tuple(live_in),
        live_out_bits=tuple(live_out),
        def_bits=tuple(defs),
        occupied_bits=tuple(occupied),
        class_masks=masks,
        peak=peak,
    )
