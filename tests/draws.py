"""Labelled hypothesis draws shared by the property tests: a Gemm over odd sizes and both layouts,
and a small-tile Schedule (64x64 blocks) whose extra fields each test adds."""
from __future__ import annotations

from hypothesis import strategies as st

from ptxgen import Gemm, Schedule


def draw_gemm(data, sizes: list[int], **extra) -> Gemm:
    """M, N, K from `sizes`; f16/bf16 inputs, a float output, any layouts; `extra` Gemm fields as given."""
    return Gemm(data.draw(st.sampled_from(sizes), label="M"), data.draw(st.sampled_from(sizes), label="N"),
                data.draw(st.sampled_from(sizes), label="K"),
                dtype=data.draw(st.sampled_from(["f16", "bf16"]), label="dtype"),
                out_dtype=data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
                a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
                b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"), **extra)


def draw_small_schedule(data, **extra) -> Schedule:
    """A 64x64 block with BK 32 or 64, 1-4 warps, 1-4 stages, any shared layout and raster."""
    return Schedule(block=(64, 64, data.draw(st.sampled_from([32, 64]), label="BK")),
                    warps=data.draw(st.sampled_from([(1, 1), (2, 2), (2, 1)]), label="warps"),
                    stages=data.draw(st.integers(1, 4), label="stages"),
                    smem_layout=data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                    raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"), group_m=2, **extra)
