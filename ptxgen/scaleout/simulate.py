"""`Kernel.simulate(..., workers=N)`: the CPU simulator's CTAs spread over processes or Ray.

Each task simulates a group of CTAs (`sim.launch(ctas=group)`) on its own copy of C, and returns the
bytes of C it changed; the caller writes them into C. The result is bit-identical to a serial run:

* CTAs that never talk to each other (no atomics, flags or fences: `Program.communicates` false)
  run one by one in a serial run too, each on the inputs alone, so one CTA per task changes nothing.
* CTAs that do talk go in one task together: the split-K CTAs of one output tile (all its splits),
  or each connected chain of Stream-K CTAs that share tiles. A serial run interleaves CTAs round
  robin; restricted to one group that is the same order as running the group alone whenever the
  whole grid is resident at once (`sim.machine.resident_window`), so even order-dependent float
  atomics land in the same order. With a larger grid, workspace split-K and Stream-K (fixed
  reduction order) still give identical C, but atomic split-K with 3 or more splits would not:
  that is refused, naming the fix. A program that communicates in some other way runs whole, in one task.
* Writes of different tasks to the same bytes would be a race a serial run reports
  (`HazardError`); it is reported here too (`OverlappingWrites`), as far as the changed bytes show.
* SimResult's instructions, bank-conflict counts and CTAs are sums over the tasks. For
  communicating kernels `instructions` includes spin-wait iterations, which match the serial run
  under the same condition as above.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import Workers, spread

Cta = tuple[int, int, int]


class OverlappingWrites(RuntimeError):
    """CTAs simulated in different tasks wrote the same bytes of C (a race between CTAs)."""


@dataclass(frozen=True)
class ShippedMap:
    """A `sim.TensorMap` argument (an sm_90a kernel's A or B) as it travels to a worker.

    Why not the TensorMap itself: pickling it would pickle its view apart from its root, and an
    unpickled view is a fresh contiguous array, so a strided view (a leading dimension wider than
    the matrix, a batch stride wider than dense) would lose the strides the map describes. Shipped
    as the root plus the view's offset, shape and strides, it is rebuilt on the same bytes, so the
    encoded map, the buffer layout and the global addresses are the serial run's."""

    root: np.ndarray
    offset: int  # bytes from the root's start to the view's
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: np.dtype
    box: tuple[int, ...]
    swizzle: str
    oob_fill: str
    element_strides: tuple[int, ...]
    writeable: bool  # the root's flag: a serial run reports stores into a read-only root
    #: A map onto C (the TMA-store epilogue's tmapC): its view's byte offset from C's buffer, on
    #: whose private copy the worker rebuilds it, so its stores land where the merge reads them
    c_offset: int | None = None

    @classmethod
    def of(cls, m, c: np.ndarray | None = None) -> "ShippedMap":
        a = m.array
        root, offset = m.root, m.offset
        c_offset = None
        if c is not None and np.shares_memory(m.root, c):
            c_offset = m.offset - (_address(c) - _address(m.root))
            root, offset = np.zeros(0, np.uint8), 0  # C itself travels as its own argument
        return cls(root, offset, a.shape, a.strides, a.dtype, m.box, m.swizzle, m.oob_fill,
                   m.element_strides, bool(m.root.flags.writeable), c_offset)

    def rebuild(self, c: np.ndarray | None = None):
        """The TensorMap on its root's bytes, or, for a map onto C, on `c` (the task's copy of C)."""
        from ..sim import TensorMap

        root, offset = self.root, self.offset
        if self.c_offset is not None:
            assert c is not None and c.flags.c_contiguous
            root, offset = c, self.c_offset
        elif root.flags.writeable and not self.writeable:  # unpickled copies come back writable
            root.flags.writeable = False
        view = np.ndarray(self.shape, self.dtype, buffer=root, offset=offset, strides=self.strides)
        return TensorMap(view, self.box, swizzle=self.swizzle, oob_fill=self.oob_fill,
                         element_strides=self.element_strides)


@dataclass(frozen=True)
class SimJob:
    """What every task needs, sent to each worker once: the launch without its CTA list."""

    ptx: str
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    args: tuple
    c_index: int  # which argument is C (the only buffer tasks write that the caller sees)
    readonly: tuple[int, ...]  # arguments the kernel must not store into (marked read-only again)
    scratch: tuple[int, ...]  # workspace and counters: fresh zeros per task, as a serial launch gets


@dataclass(frozen=True)
class GroupResult:
    """What one task changed in C (runs of bytes) and its SimResult counts."""

    starts: np.ndarray  # int64 byte offsets where runs of changed bytes begin
    lengths: np.ndarray  # int64 run lengths
    data: np.ndarray  # uint8, the new bytes of all runs, concatenated
    instructions: int
    wavefronts: dict[int, tuple[int, int]]
    ctas: int
    addresses: dict[str, int]  # the fake global address of each buffer (the same in every task)


def changed_runs(before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, lengths, new bytes) of the runs of bytes where `after` differs from `before`."""
    idx = np.flatnonzero(before != after)
    if idx.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.uint8)
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = idx[np.concatenate(([0], breaks))]
    ends = idx[np.concatenate((breaks - 1, [idx.size - 1]))] + 1
    return starts.astype(np.int64), (ends - starts).astype(np.int64), after[idx]


def run_indices(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The byte offsets the runs cover, in order."""
    if starts.size == 0:
        return np.zeros(0, np.int64)
    first = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return first + np.arange(int(lengths.sum()), dtype=np.int64)


def run_group(job: SimJob, group: list[Cta]) -> GroupResult:
    """Simulate `group` on private copies of C and the scratch buffers (a task; module level so
    process pools and Ray can pickle it by reference)."""
    from .. import sim

    original = job.args[job.c_index]
    # a view of a private copy: a map onto C (rebuilt on `c`) then has the copy as its root, apart
    # from the C argument, as in a serial run, where the map's root is the caller's array and C
    # its span (the simulator gives each its own global address)
    c = np.array(original, copy=True).view()
    args = [a.rebuild(c) if isinstance(a, ShippedMap) else a for a in job.args]
    args[job.c_index] = c
    for i in job.scratch:
        args[i] = np.zeros_like(job.args[i])
    for i in job.readonly:
        if isinstance(args[i], np.ndarray) and args[i].flags.writeable:  # unpickled copies come back writable
            args[i] = args[i].copy()
            args[i].flags.writeable = False
    res = sim.launch(job.ptx, job.entry, grid=job.grid, block=job.block, args=args,
                     dynamic_smem=job.smem_bytes, ctas=group)
    starts, lengths, data = changed_runs(np.asarray(original).view(np.uint8), c.view(np.uint8))
    return GroupResult(starts, lengths, data, res.instructions, dict(res.smem_wavefronts), res.ctas,
                       dict(res.global_addresses))


class Merger:
    """Writes tasks' changed bytes into C as they arrive; refuses two tasks writing one byte."""

    def __init__(self, c: np.ndarray, groups: list[list[Cta]]):
        self.bytes = c.view(np.uint8)
        self.written = np.zeros(self.bytes.size, bool)
        self.runs: list[tuple[int, np.ndarray, np.ndarray]] = []  # (task, starts, lengths) merged so far
        self.groups = groups

    def owner(self, byte: int) -> int:
        """The merged task that wrote `byte` (only asked after a clash)."""
        for task, starts, lengths in self.runs:
            if np.any((starts <= byte) & (byte < starts + lengths)):
                return task
        return -1

    def add(self, index: int, r: GroupResult) -> None:
        at = run_indices(r.starts, r.lengths)
        clash = at[self.written[at]]
        if clash.size:
            other = self.owner(int(clash[0]))
            raise OverlappingWrites(
                f"CTAs {self.groups[other]} and CTAs {self.groups[index]} both wrote byte {int(clash[0])} of C "
                f"({clash.size} bytes in all) without any order between them: a race; fix the kernel (a serial "
                "run, workers=1, reports the PTX line)")
        self.written[at] = True
        self.runs.append((index, r.starts, r.lengths))
        self.bytes[at] = r.data


def communication_groups(kernel, ctas: list[Cta] | None) -> list[list[Cta]]:
    """The CTAs to simulate, in launch order, cut into groups that need no other group."""
    from ..sim.machine import _cta_list, compile_entry

    names = _cta_list(kernel.grid, ctas)
    dims = kernel.cluster_dims
    if dims != (1, 1, 1):
        # a cluster launches and runs as a unit (sim/cluster.py): each task runs whole clusters only
        from ..sim.cluster import cluster_order
        whole = cluster_order(names, kernel.grid, dims)
        if kernel.schedule.split_k > 1 or kernel.schedule.stream_k:
            return [whole]      # clusters that also share tiles: one task (correct, if not spread)
        return _group_by(whole, lambda cta: tuple(v // c for v, c in zip(cta, dims)))
    if not compile_entry(kernel.ptx, kernel.entry).communicates:
        return [[cta] for cta in names]
    s = kernel.schedule
    if s.stream_k:
        key = _stream_k_chains(kernel)
        return _group_by(names, lambda cta: key[cta[0]])
    if s.split_k > 1:
        return _group_by(names, lambda cta: (cta[0], cta[1], cta[2] // s.split_k))
    return [names]


def _group_by(names: list[Cta], key: Callable[[Cta], Any]) -> list[list[Cta]]:
    groups: dict[Any, list[Cta]] = {}
    for cta in names:
        groups.setdefault(key(cta), []).append(cta)
    return list(groups.values())


def _stream_k_chains(kernel) -> list[int]:
    """For each Stream-K CTA, a representative of the CTAs it shares tiles with (transitively)."""
    from ..schedule.streamk import stream_k_plan

    plan = stream_k_plan(kernel.problem, kernel.schedule, kernel.grid[0])  # swap-AB: the swapped problem
    parent = list(range(plan.ctas))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first_on_tile: dict[int, int] = {}
    for cta in range(plan.ctas):
        for unit in plan.units(cta):
            if not unit.whole:
                other = first_on_tile.setdefault(unit.tile, cta)
                parent[root(cta)] = root(other)
    return [root(c) for c in range(plan.ctas)]


def check_reproducible(kernel, count: int) -> None:
    """Refuse a split run whose C could differ from the serial run's (module docstring)."""
    from ..sim.machine import _shared_size, compile_entry, resident_window

    s = kernel.schedule
    if not (s.split_k >= 3 and s.split_k_mode == "atomic" and not s.stream_k):
        return
    program = compile_entry(kernel.ptx, kernel.entry)
    threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
    window = resident_window(_shared_size(program, kernel.smem_bytes), (threads + 31) // 32 * 32,
                             len(program.slot_bits), count)
    if count > window:
        raise ValueError(
            f"atomic split-K with split_k={s.split_k} adds partials into C in the order the simulator "
            f"interleaves CTAs, and this run of {count} CTAs is more than the {window} it keeps resident at once, "
            "so spreading it over workers cannot reproduce the serial run's rounding; fix: workers=1, fewer "
            "CTAs (ctas=...), or split_k_mode='workspace' (a fixed reduction order)")


def launch_spread(kernel, args: list, c_index: int, readonly: tuple[int, ...], scratch: tuple[int, ...],
                  ctas: list[Cta] | None, workers: Workers, on_cta_done: Callable[[int], None] | None):
    """sim.launch's work spread over `workers`; C (args[c_index]) is updated in place. Returns a SimResult."""
    from ..sim import SimResult

    groups = communication_groups(kernel, ctas)
    check_reproducible(kernel, sum(len(g) for g in groups))
    from ..sim import TensorMap

    shipped = tuple(ShippedMap.of(a, args[c_index]) if isinstance(a, TensorMap) else a for a in args)
    job = SimJob(kernel.ptx, kernel.entry, tuple(kernel.grid), tuple(kernel.block), kernel.smem_bytes,
                 shipped, c_index, readonly, scratch)
    merger = Merger(args[c_index], groups)
    done = [0]

    def arrived(index: int, r: GroupResult) -> None:
        merger.add(index, r)
        done[0] += len(groups[index])
        if on_cta_done is not None:
            on_cta_done(done[0])

    results = spread(run_group, groups, workers, shared=job, on_result=arrived)
    total = SimResult(global_addresses=results[0].addresses if results else {})
    for r in results:
        total.instructions += r.instructions
        total.ctas += r.ctas
        for line, (w, ideal) in r.wavefronts.items():
            w0, i0 = total.smem_wavefronts.get(line, (0, 0))
            total.smem_wavefronts[line] = (w0 + w, i0 + ideal)
    total.smem_wavefronts = dict(sorted(total.smem_wavefronts.items()))
    return total


def _address(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]
