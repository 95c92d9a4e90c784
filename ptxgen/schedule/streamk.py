"""The Stream-K decomposition (Osama et al., PPoPP 2023) as plain Python.

The kernel computes the same integers in PTX from its grid size and problem parameters; this
model is what `ptxgen info` prints, what the tests check the kernel against, and what sizes the
workspace. Terms:

* T tiles (batch x tiles_m x tiles_n, in raster order), KT = ceil(K / BK) MAC iterations each;
* G persistent CTAs. "stream-k" (the hybrid): with T = full * G + R and R > 0, the first
  (full - 1) * G tiles go round in data-parallel waves (CTA c takes tiles c, c + G, ...) and the
  last R + G tiles (all T when full == 0) form the Stream-K region, between one and two tiles
  per CTA, so no CTA idles in a partial last wave. With R == 0 every tile is data-parallel.
  "stream-k-pure" puts all T tiles in the Stream-K region;
* the region's I = sk_tiles x KT iterations are dealt out in contiguous ranges to
  Gs = min(G, I) CTAs, as evenly as integers allow: rank r gets [r*q + min(r, rem), ...) with
  q, rem = divmod(I, Gs). CTA c has rank Gs - 1 - c, so the CTA that starts a tile (its
  "owner", which adds the other CTAs' partials) has the highest index among those sharing it
  and waits only for CTAs launched before it: no deadlock even when the grid exceeds the SMs;
* a rank whose range starts inside a tile computes that tile's tail first and publishes it as
  its partial (workspace slot = rank, then flag[rank] = 1, released); the owner, after its own
  segment, acquires flag[rank + 1], flag[rank + 2], ... in K order, adds the partials, resets
  the flags for the next launch and runs the epilogue. Fixed order: deterministic results.
"""
from __future__ import annotations

from dataclasses import dataclass

from .problem import Gemm
from .schedule import Schedule


@dataclass(frozen=True)
class Unit:
    """One stretch of MAC iterations a CTA runs: k-tiles [k_first, k_first + k_count) of `tile`."""

    tile: int
    k_first: int
    k_count: int
    iters_per_tile: int

    @property
    def starts_tile(self) -> bool:
        """The owner's unit: it holds k-tile 0 and adds the others' partials."""
        return self.k_first == 0

    @property
    def whole(self) -> bool:
        return self.k_first == 0 and self.k_count == self.iters_per_tile


@dataclass(frozen=True)
class StreamKPlan:
    ctas: int
    tiles: int
    iters_per_tile: int
    dp_tiles: int

    @property
    def sk_tiles(self) -> int:
        return self.tiles - self.dp_tiles

    @property
    def sk_iters(self) -> int:
        return self.sk_tiles * self.iters_per_tile

    @property
    def sk_ctas(self) -> int:
        """CTAs with Stream-K work (every rank gets at least one iteration)."""
        return min(self.ctas, self.sk_iters)

    def sk_range(self, rank: int) -> tuple[int, int]:
        """[start, end) of rank's iterations in the Stream-K region."""
        if not 0 <= rank < self.sk_ctas:
            return 0, 0
        q, rem = divmod(self.sk_iters, self.sk_ctas)
        start = rank * q + min(rank, rem)
        return start, start + q + (1 if rank < rem else 0)

    def units(self, cta: int) -> list[Unit]:
        """What CTA `cta` runs, in order: its data-parallel tiles, then its Stream-K range."""
        kt = self.iters_per_tile
        out = [Unit(t, 0, kt, kt) for t in range(cta, self.dp_tiles, self.ctas)]
        it, end = self.sk_range(self.sk_ctas - 1 - cta)
        while it < end:
            t, k0 = divmod(it, kt)
            count = min(kt - k0, end - it)
            out.append(Unit(self.dp_tiles + t, k0, count, kt))
            it += count
        return out

    def contributors(self, cta: int, unit: Unit) -> list[int]:
        """CTAs whose partials the owner `cta` of `unit`'s tile adds, in K order."""
        if not unit.starts_tile or unit.tile < self.dp_tiles:
            return []
        tile_end = (unit.tile - self.dp_tiles + 1) * self.iters_per_tile
        rank = self.sk_ctas - 1 - cta
        out = []
        r = rank + 1
        while r < self.sk_ctas and self.sk_range(r)[0] < tile_end:
            out.append(self.sk_ctas - 1 - r)
            r += 1
        return out


def tile_count(g: Gemm, s: Schedule) -> int:
    return g.batch * -(-g.m // s.bm) * -(-g.n // s.bn)


def stream_k_plan(g: Gemm, s: Schedule, ctas: int) -> StreamKPlan:
    """The decomposition of (g, s) over `ctas` persistent CTAs (the kernel's %nctaid.x)."""
    tiles, kt = tile_count(g, s), -(-g.k // s.bk)
    full, rem = divmod(tiles, ctas)
    if s.decomposition == "stream-k-pure" or full == 0:
        sk = tiles
    else:
        sk = 0 if rem == 0 else rem + ctas
    return StreamKPlan(ctas, tiles, kt, tiles - sk)


def stream_k_grid(g: Gemm, s: Schedule, sms: int) -> int:
    """Persistent CTAs to launch: `sms` (the schedule's, or the SM count), but no more than there
    are MAC iterations, so every CTA has work."""
    tiles, kt = tile_count(g, s), -(-g.k // s.bk)
    return max(1, min(s.sms or sms, tiles * kt))


def stream_k_workspace(g: Gemm, s: Schedule, ctas: int) -> tuple[int, int]:
    """(f32 workspace elements, u32 flags) for `ctas` CTAs: one partial tile and one flag each."""
    return ctas * s.bm * s.bn, ctas
