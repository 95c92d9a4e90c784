"""Shared-memory planning: give each buffer a byte offset, reusing bytes across disjoint lifetimes.

Shared memory caps occupancy, so buffers that are never live at the same time (the main loop's
A/B stages and the epilogue's staging tile) should share bytes, as TVM's
MergeSharedMemoryAllocations does. Lifetimes are closed intervals of abstract phase numbers that
the lowering supplies (e.g. 0 = main loop, 1 = epilogue). The placement is a deterministic greedy
first fit: larger buffers first (ties by name), each at the lowest offset that respects its
alignment and overlaps no already-placed buffer whose lifetime overlaps its own.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SmemBuffer:
    """One shared buffer: `size` bytes aligned to `align`, live in phases first_use..last_use."""

    name: str
    size: int
    align: int
    first_use: int
    last_use: int

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("shared buffer needs a non-empty name")
        if not isinstance(self.size, int) or self.size <= 0:
            raise ValueError(f"shared buffer {self.name!r}: size={self.size!r} must be a positive int")
        if not isinstance(self.align, int) or self.align <= 0 or self.align & (self.align - 1):
            raise ValueError(f"shared buffer {self.name!r}: align={self.align!r} must be a power of two")
        if self.first_use > self.last_use:
            raise ValueError(
                f"shared buffer {self.name!r}: first_use={self.first_use} is after last_use={self.last_use}"
            )

    def lifetime_overlaps(self, other: SmemBuffer) -> bool:
        """Closed phase intervals meet: the two are live together at some phase."""
        return self.first_use <= other.last_use and other.first_use <= self.last_use


@dataclass(frozen=True)
class SmemPlan:
    """Byte offsets of every buffer and the total bytes the kernel must reserve."""

    buffers: tuple[SmemBuffer, ...]
    offsets: dict[str, int]
    total: int

    def describe(self) -> str:
        """A fixed-width table, by offset then name, for logs and generated-PTX comments."""
        rows = [("buffer", "offset", "size", "end", "align", "phases")]
        for b in sorted(self.buffers, key=lambda b: (self.offsets[b.name], b.name)):
            off = self.offsets[b.name]
            rows.append((b.name, str(off), str(b.size), str(off + b.size), str(b.align),
                         f"{b.first_use}..{b.last_use}"))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                           for c, (cell, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
        naive = sum(b.size for b in self.buffers)
        lines.append(f"total {self.total} bytes (unshared sum {naive})")
        return "\n".join(lines)


def _align_up(x: int, align: int) -> int:
    return (x + align - 1) & -align


def plan_shared(buffers: list[SmemBuffer] | tuple[SmemBuffer, ...]) -> SmemPlan:
    """Place `buffers` so that lifetime-overlapping buffers never share bytes."""
    buffers = tuple(buffers)
    names: set[str] = set()
    for b in buffers:
        if not isinstance(b, SmemBuffer):
            raise ValueError(f"plan_shared expects SmemBuffer items, got {type(b).__name__}")
        if b.name in names:
            raise ValueError(f"shared buffer name {b.name!r} is used twice; names must be unique")
        names.add(b.name)

    placed: list[tuple[int, SmemBuffer]] = []
    offsets: dict[str, int] = {}
    for buf in sorted(buffers, key=lambda b: (-b.size, b.name)):
        conflicts = sorted((off, off + other.size) for off, other in placed if buf.lifetime_overlaps(other))
        offset = 0
        for lo, hi in conflicts:
            if offset + buf.size <= lo:
                break
            if hi > offset:
                offset = _align_up(hi, buf.align)
        placed.append((offset, buf))
        offsets[buf.name] = offset
    total = max((off + b.size for off, b in placed), default=0)
    ordered = {b.name: offsets[b.name] for b in buffers}
    return SmemPlan(buffers=buffers, offsets=ordered, total=total)
