"""Address plans for the GEMM lowering: which thread copies which chunk, which lane reads which row.

Each plan is a list of per-thread index expressions ("sites"), grouped by `share_bases` onto
as few base registers as possible; every other site is a base plus an immediate. The plans
are pure data: `gemm.py` turns them into instructions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...schedule.geometry import CHUNK_BYTES, OperandTile
from ...schedule.problem import Gemm
from ...schedule.schedule import Schedule
from ...emit.index import Expr, SiteBases, Tid, evaluate, share_bases
from .layouts import A_MCONTIG, A_ROWMAJOR, B_KCONTIG, B_KCONTIG_X2, B_NCONTIG, B_NCONTIG_X2, LdmatrixForm, mma_c_coord
from ...emit.swizzle import smem_offset, Swizzle

WARP = Tid() >> 5


@dataclass
class CopyPlan:
    """How the CTA's threads move one operand k-tile: `copies_per_thread` copies of
    `tile.copy_bytes` each (16-byte cp.async unless the operands are less aligned).

    Copy `it` of a thread reads tile row `row0 + rows[it]` at copy unit `col0 + cols[it]`
    (a unit is `tile.copy_bytes` along the contiguous dimension) and writes shared offset
    `dst.bases[dst.site[it][0]] + dst.site[it][1]` within the stage.
    """

    tile: OperandTile
    row0: Expr
    col0: Expr
    rows: list[int]
    cols: list[int]
    dst: SiteBases


def copy_plan(tile: OperandTile) -> CopyPlan:
    upr = tile.units_per_row
    per_chunk = CHUNK_BYTES // tile.copy_bytes
    row_e: list[Expr] = []
    col_e: list[Expr] = []
    for it in range(tile.copies_per_thread):
        c = Tid() + it * tile.threads  # consecutive threads take consecutive units of a row
        row_e.append(c // upr)
        col_e.append(c % upr)
    tid = np.arange(tile.threads)
    r0, c0 = evaluate(row_e[0], tid), evaluate(col_e[0], tid)
    rows, cols = [], []
    for re, ce in zip(row_e, col_e):
        dr, dc = evaluate(re, tid) - r0, evaluate(ce, tid) - c0
        # The verifier guarantees a uniform thread->unit map, so these are per-thread constants.
        assert np.all(dr == dr[0]) and np.all(dc == dc[0]), "non-uniform copy map"
        rows.append(int(dr[0]))
        cols.append(int(dc[0]))
    swizzle = tile.swizzle_pattern
    dst = share_bases([smem_offset(r, c // per_chunk, tile.pitch, swizzle) + (c % per_chunk) * tile.copy_bytes
                       for r, c in zip(row_e, col_e)], tile.threads)
    return CopyPlan(tile, row_e[0], col_e[0], rows, cols, dst)


@dataclass
class FragmentLoad:
    """One ldmatrix of a k-step: which fragment registers it fills and where it reads."""

    k_step: int
    kind: str  # "A" or "B"
    index: int  # m-tile (A) or first n-tile (B)
    count: int  # x4 or x2
    trans: bool
    site: int  # index into FragmentPlan.addr.site


@dataclass
class FragmentPlan:
    tile: OperandTile
    loads: list[FragmentLoad]
    addr: SiteBases


def warp_origin(s: Schedule) -> tuple[Expr, Expr]:
    """Row and column origin of this thread's warp tile within the block tile."""
    tm, tn = s.warp_tile
    wn = s.warps[1]
    return (WARP // wn) * tm, (WARP % wn) * tn


def a_fragment_plan(s: Schedule, tile: OperandTile) -> FragmentPlan:
    wm0, _ = warp_origin(s)
    mi = s.warp_tile[0] // 16
    sites: list[Expr] = []
    loads: list[FragmentLoad] = []
    form = A_MCONTIG if tile.k_along_rows else A_ROWMAJOR
    for ks in range(s.bk * tile.elem_bytes // 32):  # one mma k-step = 32 bytes of K = 2 chunks
        for m in range(mi):
            if tile.k_along_rows:  # rows are k, chunks along m
                row, chunk = 16 * ks + form.row, (wm0 + 16 * m) // 8 + form.chunk
            else:  # rows are m, chunks along k
                row, chunk = wm0 + 16 * m + form.row, 2 * ks + form.chunk
            sites.append(smem_offset(row, chunk, tile.pitch, tile.swizzle_pattern))
            loads.append(FragmentLoad(ks, "A", m, 4, form.trans, len(sites) - 1))
    return FragmentPlan(tile, loads, share_bases(sites, s.threads))


def b_fragment_plan(g: Gemm, s: Schedule, tile: OperandTile) -> FragmentPlan:
    _, wn0 = warp_origin(s)
    ni = s.warp_tile[1] // 8
    sites: list[Expr] = []
    loads: list[FragmentLoad] = []
    for ks in range(s.bk * tile.elem_bytes // 32):
        for n in range(0, ni, 2):
            pair = n + 1 < ni
            form: LdmatrixForm
            if g.b_layout == "col":  # rows are n, chunks along k
                form = B_KCONTIG if pair else B_KCONTIG_X2
                row, chunk = wn0 + 8 * n + form.row, 2 * ks + form.chunk
            else:  # rows are k, chunks along n
                form = B_NCONTIG if pair else B_NCONTIG_X2
                row, chunk = 16 * ks + form.row, (wn0 + 8 * n) // 8 + form.chunk
            sites.append(smem_offset(row, chunk, tile.pitch, tile.swizzle_pattern))
            loads.append(FragmentLoad(ks, "B", n, 4 if pair else 2, form.trans, len(sites) - 1))
    return FragmentPlan(tile, loads, share_bases(sites, s.threads))


@dataclass
class StorePlan:
    """Epilogue stores straight from the accumulator fragments, two columns per store.

    Site (m, n, h) stores accumulators c[2h], c[2h+1] of mma tile (m, n) to C row
    `row0 + rows` and column `col0 + cols`.
    """

    row0: Expr
    col0: Expr
    sites: list[tuple[int, int, int, int, int]]  # (m, n, h, row delta, col delta)


def store_plan(s: Schedule) -> StorePlan:
    wm0, wn0 = warp_origin(s)
    mi, ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8
    r_base, c_base = mma_c_coord(0)
    row0, col0 = wm0 + r_base, wn0 + c_base
    tid = np.arange(s.threads)
    r0v, c0v = evaluate(row0, tid), evaluate(col0, tid)
    sites = []
    for m in range(mi):
        for h in range(2):
            for n in range(ni):
                r, c = mma_c_coord(2 * h)
                dr = evaluate(wm0 + 16 * m + r, tid) - r0v
                dc = evaluate(wn0 + 8 * n + c, tid) - c0v
                assert np.all(dr == dr[0]) and np.all(dc == dc[0])
                sites.append((m, n, h, int(dr[0]), int(dc[0])))
    return StorePlan(row0, col0, sites)


__all__ = ["CopyPlan", "FragmentPlan", "FragmentLoad", "StorePlan", "copy_plan", "a_fragment_plan",
           "b_fragment_plan", "store_plan", "warp_origin"]
