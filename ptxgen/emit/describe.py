"""The epilogue in words, for every target's PTX header and `ptxgen info`."""
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
