"""The epilogue in words, for every target's PTX header and `ptxgen info`; and the parts of an
entry name that every target spells alike."""
from __future__ import annotations

from ..schedule.problem import QUANTIZED_DTYPES, Gemm


def describe_epilogue(g: Gemm) -> str:
    e = g.epi
    cast = (f"rounded to {g.out_dtype} (nearest even, saturated)" if g.out_dtype in QUANTIZED_DTYPES
            else f"cast to {g.out_dtype}")
    if e.is_identity:
        return f"C = acc, {cast}"
    x = "acc" if e.alpha == 1.0 else f"{e.alpha:g} * acc"
    if e.scale:
        x = f"scale[{'n' if e.scale == 'col' else 'm'}] * {x}"
    if e.beta:
        x += f" + {e.beta:g} * C"
    if e.bias:
        x += f" + bias[{'n' if e.bias == 'col' else 'm'}]"
    if e.activation:
        x = f"{e.activation}({x})"
    return f"C = {x} in f32, {cast}"


def entry_variant(g: Gemm, s: object) -> str:
    """The entry-name suffix for the kernel variants a profiler must tell apart from the same tile
    (the launch shape and work walk): `_c2x1` a cluster, `_streamk` Stream-K, `_g8c` / `_g8m` /
    `_g8k` a contiguous, masked or k-contiguous grouped GEMM of 8 groups, `_bs` block scales. Split-K, the CTA pair and
    the tile scheduler are each target's own words."""
    cluster = getattr(s, "cluster", None)
    parts = [f"_c{cluster[0]}x{cluster[1]}" if cluster and tuple(cluster) != (1, 1) else "",
             "_streamk" if getattr(s, "stream_k", False) else "",
             f"_g{g.groups}{g.grouping[0]}" if g.grouped else "",
             "_bs" if g.block_scale is not None else ""]
    return "".join(parts)
