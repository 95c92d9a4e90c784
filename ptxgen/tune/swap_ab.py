"""The chooser's swap-AB candidates (schedule/swap_ab.py) for decode-sized M, priced by the same
cost model as every other candidate so that swap-AB, split-K and Stream-K compete on one scale.

Why from the swapped problem's own candidates: a swap-AB kernel *is* the backend's kernel for
(N, M, K) with a transposed store, so its backend's candidate list and cost model for that
problem already know its tiles, waves and traffic; what they do not know is the store, which
writes C one element per store (`transposed_store_s` adds it, as a term `ptxgen info` shows).
"""
from __future__ import annotations

import dataclasses

from ..errors import ScheduleError
from ..schedule.cost import Prediction
from ..schedule.devices import device_model
from ..schedule.problem import Gemm
from ..schedule.schedule import Schedule
from ..schedule.swap_ab import SWAP_INSTRUCTIONS, swapped
from ..schedule.verify import verify
from ..targets.registry import backend_for_instruction, default_backend

#: Swap-AB candidates are proposed for M up to this (decode: 1-64 tokens), where a tile's M side
#: (64 rows per wgmma, at least 16 per mma.sync warp) would be mostly idle.
SWAP_MAX_M = 64
#: Tile N sides (the caller's M) tried besides the backend's own: legal wgmma N (multiples of 8)
#: and mma.sync warp-tile multiples, for M = 1-64 tokens.
NARROW_COLS = (8, 16, 32)
#: Term name of the transposed store in a swap-AB prediction.
STORE_TERM = "transposed C stores"
#: Bytes of DRAM traffic one transposed store costs at least: 8 lanes of a warp write 8
#: consecutive elements of C (a fragment column), so a 32-byte sector carries 8 elements.
SECTOR_BYTES = 32
LANES_PER_SECTOR = 8


def transposed_store_s(g: Gemm, arch: str) -> float:
    """Seconds the transposed store's sectors take at DRAM bandwidth: M x N elements in 32-byte
    sectors of 8 elements each (a sector per 8 elements even when 8 elements are under 32 B)."""
    dev = device_model(arch)
    sectors = -(-g.m * g.n * g.batch // LANES_PER_SECTOR)
    return sectors * SECTOR_BYTES / dev.dram_bytes_per_s


def predict_swap(g: Gemm, s: Schedule, arch: str, registers: int | None = None) -> Prediction:
    """The model's time for swap-AB schedule `s` on the caller's problem `g`: its backend's
    prediction for the swapped problem, plus the transposed store (STORE_TERM)."""
    lowered = swapped(g)
    p = backend_for_instruction(s.instruction).predict(lowered, s, arch, registers)
    extra = transposed_store_s(g, arch)
    return dataclasses.replace(p, time_s=p.time_s + extra, terms={**p.terms, STORE_TERM: extra})


def swap_candidates(g: Gemm, arch: str) -> list[tuple[Schedule, Prediction]]:
    """Swap-AB schedules for `g` on `arch`'s default backend, priced (`predict_swap`): the
    backend's whole-tile candidates for the swapped problem with swap_ab set, those the verifier
    accepts for `g`. None when M is not decode-sized (SWAP_MAX_M) or the problem cannot swap."""
    backend = default_backend(arch)
    if (g.m > SWAP_MAX_M or g.m > g.n or g.grouped or g.block_scale is not None
            or not set(backend.instructions) & set(SWAP_INSTRUCTIONS)):
        return []
    try:
        ranked = backend.rank(swapped(g), arch)
    except ScheduleError:
        return []
    out: dict[Schedule, Prediction] = {}
    for s, _ in ranked:
        if s.instruction not in SWAP_INSTRUCTIONS or s.split_k_mode == "atomic":
            continue
        for swap in narrow_variants(g, dataclasses.replace(s, swap_ab=True, epilogue_via_smem=False)):
            if swap in out:
                continue
            try:
                verify(g, swap, arch)
            except ScheduleError:
                continue
            out[swap] = predict_swap(g, swap, arch)
    return list(out.items())


def narrow_variants(g: Gemm, s: Schedule) -> list[Schedule]:
    """`s`, and `s` with each tile N in NARROW_COLS narrower than its own that still covers the
    swapped problem's N (the caller's M) in one tile: the backends' own candidate lists start
    their N side at sizes that waste most of a decode tile (wgmma's at 64 for M = 8). Narrower
    tiles that split M are not added: they would win by being narrow, not by swapping."""
    out = [s]
    for bn in NARROW_COLS:
        if g.m <= bn < s.bn:
            out.append(dataclasses.replace(s, block=(s.bm, bn, s.bk)))
    return out
