"""Basic blocks and successor edges of a flat PTX item list.

Liveness needs the control-flow graph; the IR keeps control flow implicit (labels, `bra`,
`ret`/`exit`), so this module recovers it once. Blocks are contiguous item ranges, numbered
in program order, which keeps every later pass deterministic.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Instr, Item, Label


@dataclass(frozen=True, slots=True)
class Block:
    """Items `start .. end-1`; `succs` are block numbers (taken target first, then fall-through)."""

    start: int
    end: int
    succs: tuple[int, ...]


def _leaders(items: list[Item]) -> tuple[list[int], dict[str, int]]:
    """Block start indices (ascending, unique) and the item index of every label."""
    starts: list[int] = [0] if items else []
    labels: dict[str, int] = {}
    for i, item in enumerate(items):
        if isinstance(item, Label):
            if item.name in labels:
                raise ValueError(f"label {item.name!r} is placed twice (items {labels[item.name]} and {i})")
            labels[item.name] = i
            if i != starts[-1]:
                starts.append(i)
        elif isinstance(item, Instr) and (item.is_branch or item.is_return) and i + 1 < len(items):
            starts.append(i + 1)
    return starts, labels


def build_cfg(items: list[Item]) -> list[Block]:
    """Split `items` into basic blocks and link them.

    A branch ends its block; a guarded branch also falls through. An unguarded `ret`/`exit`
    has no successor. Any other last item falls through to the next block (if there is one).
    """
    starts, labels = _leaders(items)
    block_at = {s: b for b, s in enumerate(starts)}
    ends = starts[1:] + [len(items)]
    blocks: list[Block] = []
    for b, (start, end) in enumerate(zip(starts, ends)):
        last = items[end - 1]
        fall = (b + 1,) if b + 1 < len(starts) else ()
        if isinstance(last, Instr) and last.is_branch:
            target = last.branch_target
            if target not in labels:
                raise ValueError(f"branch `{last.op} {target}` at item {end - 1} targets an unplaced label")
            taken = block_at[labels[target]]
            succs = (taken,) + tuple(f for f in fall if f != taken) if last.guard is not None else (taken,)
        elif isinstance(last, Instr) and last.is_return:
            succs = ()
        else:
            succs = fall
        blocks.append(Block(start, end, succs))
    return blocks
