"""The GEMM main loop: the cp.async pipeline over k-tiles; each k-tile's math (fragment loads +
mma.sync, or wmma) is the pipeline's `compute_tile`.

  prologue   k-tiles 0..S-2 -> stages 0..S-2, one commit_group each (guarded by k-tile < KT)
  main loop  issue k-tile i+S-1 into the stage read last iteration; commit; fragment loads +
             mma.sync over k-tile i from stage i % S. The wait_group S-2 + bar.sync that make a
             k-tile visible open the loop, or, with the cross-tile fragment prefetch, come before
             k-tile i's last k-step, whose mma then hide k-tile i+1's first fragment loads.
With stages == 1 there is one buffer: copy, wait, barrier, compute, barrier.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from ...schedule.geometry import prefetches_across_k_tiles
from ...ir import Imm, VReg, ops as ptx, Sym
from ...ir.ops import U32
from ...emit.memory import bar_sync
from .isa import commit_group, wait_group
from ...emit.tiles import KRange, TileOperands
from .load_edges import EdgeChecks

if TYPE_CHECKING:
    from .lowering import GemmLowering
    from .pipeline import Sm80Pipeline
    from .wmma.pipeline import WmmaPipeline


class MainLoop:
    """Emits the K loop of one GemmLowering (its copies, fragment plans and accumulators)."""

    def __init__(self, lw: "GemmLowering", ops: TileOperands, k: KRange, math: "Sm80Pipeline | WmmaPipeline"):
        self.lw, self.b, self.s, self.g = lw, lw.b, lw.s, lw.g
        self.ops, self.k, self.math = ops, k, math
        assert isinstance(ops.edge, EdgeChecks), "cp.async copies need the load edge checks"
        self.edge: EdgeChecks = ops.edge
        self.copies = math.copies

    @property
    def sm80(self) -> "Sm80Pipeline":
        """The mma.sync math, whose fragments the cross-tile prefetch carries (never wmma's)."""
        assert self.s.instruction == "m16n8k16", "the cross-tile prefetch needs mma.sync fragments"
        return cast("Sm80Pipeline", self.math)

    @property
    def prefetch_across_tiles(self) -> bool:
        """CUTLASS's multistage order: hides the barrier and the ldmatrix latency at every k-tile
        boundary (when it applies: geometry.prefetches_across_k_tiles)."""
        return prefetches_across_k_tiles(self.g, self.s)

    def emit(self, acc) -> None:
        """The K loop over the range's k-tiles (at least one), from the operands' pointers."""
        i = ptx.mov(self.lw.b, U32, 0, comment="i: k-tile computed by this iteration")
        if self.s.stages == 1:
            self.single_buffer_loop(i, acc)
        else:
            self.pipelined_loop(i, acc, {"A": self.lw.tile_a.stage_bytes, "B": self.lw.tile_b.stage_bytes})

    def pipelined_loop(self, i: VReg, acc, stage_bytes: dict[str, int]) -> None:
        b, S = self.b, self.s.stages
        prefetch = self.prefetch_across_tiles
        b.banner(f"Prologue: k-tiles 0..{S - 2} -> stages 0..{S - 2}, one cp.async group each")
        for st in range(S - 1):
            guard = None if st == 0 else ptx.setp(self.lw.b, "lt", U32, Imm(str(st)), self.k.count)
            rem = self.edge.k_remaining(st, self.k)
            for name in ("A", "B"):
                self.copies.issue_tile(self.ops, name, st * stage_bytes[name], guard, f"k-tile {st} -> stage {st}", rem)
            commit_group(b, comment=f"group of k-tile {st}")
        rd = ptx.mov(self.lw.b, U32, 0, comment="stage read this iteration: i % S")
        # With two stages the written stage is the other one: derived, not carried (a register less)
        wr = None if S == 2 else ptx.mov(self.lw.b, U32, Imm(str(S - 1)),
                                         comment="stage written this iteration: (i + S - 1) % S")
        first = None
        if prefetch:
            wait_group(b, S - 2, comment=f"k-tile 0 has landed (at most {S - 2} newer groups in flight)")
            bar_sync(b, comment="k-tile 0 visible to all threads")
            b.comment("k-tile 0, k-step 0 fragments: the loop carries them in these registers")
            first = self.sm80.fragments.load(0, self.sm80.fragment_addresses({"A": 0, "B": 0}))
        loop = b.label("main_loop")
        b.banner(f"Main loop: compute k-tile i from stage i % {S} while k-tile i+{S - 1} streams in")
        b.place(loop)
        if not prefetch:
            wait_group(b, S - 2, comment=f"k-tile i has landed (at most {S - 2} newer groups in flight)")
            bar_sync(b, comment="k-tile i visible to all threads; stage (i-1) % S is free")
        nxt = ptx.add(self.lw.b, U32, i, Imm(str(S - 1)))
        more = ptx.setp(self.lw.b, "lt", U32, nxt, self.k.count)
        wr_off = self.stage_offsets(ptx.xor(self.lw.b, U32, rd, 1) if wr is None else wr, stage_bytes)
        rem = self.edge.k_remaining(nxt, self.k)
        if prefetch:
            b.comment(f"stage (i+{S - 1}) % {S} held k-tile i-1, which every warp read before the last barrier")
        for name in ("A", "B"):
            self.copies.issue_tile(self.ops, name, wr_off[name], more, f"k-tile i+{S - 1} -> stage (i+{S - 1}) % {S}",
                                   rem)
        commit_group(b, comment=f"group of k-tile i+{S - 1} (empty past the last k-tile)")
        if prefetch:
            self.prefetched_tile(rd, wr, stage_bytes, first, acc)
        else:
            self.math.compute_tile(self.stage_offsets(rd, stage_bytes), acc)
            b.comment("advance: i += 1, stages rotate")
            self.rotate(rd, wr)
        ptx.add(b, U32, i, 1, into=i)
        again = ptx.setp(self.lw.b, "lt", U32, i, self.k.count)
        ptx.bra(b, loop, guard=again)
        b.banner("Epilogue: drain the copy pipeline, store the accumulators")
        wait_group(b, 0, comment="drain: every remaining group is empty")

    def prefetched_tile(self, rd: VReg, wr: VReg | None, stage_bytes: dict[str, int], first: tuple[list, list],
                        acc) -> None:
        """k-tile i's mma, with its first fragments already in `first`; loads k-tile i+1's into
        `first` again before the last k-step's mma (after the barrier that makes k-tile i+1 visible).

        Past the last k-tile that load reads a stage no copy is writing, and its values go unused.
        """
        b, S, sm80 = self.b, self.s.stages, self.sm80
        steps = sm80.k_steps
        addr = sm80.fragment_addresses(self.stage_offsets(rd, stage_bytes))
        frags = first
        for ks in range(steps):
            if ks + 1 < steps:
                nxt = sm80.fragments.load(ks + 1, addr)
            else:
                wait_group(b, S - 2, comment=f"k-tile i+1 has landed (at most {S - 2} newer groups in flight)")
                bar_sync(b, comment="k-tile i+1 visible to all threads; every warp has read all of k-tile i")
                b.comment("advance: stages rotate; k-tile i+1, k-step 0 fragments under k-tile i's last mma")
                self.rotate(rd, wr)
                nxt = sm80.fragments.load(0, sm80.fragment_addresses(self.stage_offsets(rd, stage_bytes)),
                                          into=first)
            sm80.mma_step(ks, frags, acc)
            frags = nxt

    def rotate(self, rd: VReg, wr: VReg | None) -> None:
        """Move the read and write stage indices on by one, modulo the stage count (two stages:
        the read index flips, and the write index is derived from it)."""
        if wr is None:
            ptx.xor(self.b, U32, rd, 1, into=rd)
            return
        for reg in (rd, wr):
            ptx.add(self.b, U32, reg, 1, into=reg)
            wrap = ptx.setp(self.lw.b, "eq", U32, reg, Imm(str(self.s.stages)))
            ptx.mov(self.b, U32, 0, into=reg, guard=wrap)

    def stage_offsets(self, stage: VReg, stage_bytes: dict[str, int]) -> dict[str, VReg]:
        """Byte offset of stage `stage` in each operand's buffer (one multiply per distinct size)."""
        by_size: dict[int, VReg] = {}
        for size in sorted(set(stage_bytes.values())):
            by_size[size] = ptx.mul(self.lw.b, U32, stage, Imm(str(size)))
        return {n: by_size[stage_bytes[n]] for n in stage_bytes}

    def single_buffer_loop(self, i: VReg, acc) -> None:
        b = self.b
        loop = b.label("main_loop")
        b.banner("Main loop (stages=1): copy k-tile i, wait, compute; no overlap")
        b.place(loop)
        rem = self.edge.k_remaining(i, self.k)
        for name in ("A", "B"):
            self.copies.issue_tile(self.ops, name, 0, None, "k-tile i -> stage 0", rem)
        commit_group(b)
        wait_group(b, 0, comment="k-tile i has landed")
        bar_sync(b, comment="k-tile i visible to all threads")
        self.math.compute_tile({"A": 0, "B": 0}, acc)
        bar_sync(b, comment="every thread is done reading stage 0 before it is overwritten")
        ptx.add(b, U32, i, 1, into=i)
        again = ptx.setp(self.lw.b, "lt", U32, i, self.k.count)
        ptx.bra(b, loop, guard=again)
        b.banner("Epilogue: store the accumulators")


class StageBases(Sequence):
    """An operand's fragment address bases moved to one stage, as (register, extra immediate).

    Each moved base is computed when a load first needs it, so a k-step that uses some of the
    bases (swizzled tiles have one per k-step phase) emits no dead address arithmetic.
    """

    def __init__(self, lw: "GemmLowering", bases: list[VReg], offset: VReg | int):
        self.lw, self.bases, self.offset = lw, bases, offset
        self.moved: dict[int, VReg] = {}

    def __getitem__(self, i: int) -> tuple[VReg, int]:
        if isinstance(self.offset, int):
            return self.bases[i], self.offset
        if i not in self.moved:
            self.moved[i] = ptx.add(self.lw.b, U32, self.bases[i], self.offset)
        return self.moved[i], 0

    def __len__(self) -> int:
        return len(self.bases)
