"""Per input dtype, what the sm_90a lowering multiplies with and accumulates in
(docs/ptx_facts/wgmma.md §9a type table).

Kept apart from the main loop so that the pipeline and its epilogue ask one place:
- f16/bf16: wgmma .f32.f16.f16 / .f32.bf16.bf16, k16, either major (imm-trans-a/b);
- tf32: the f32 words in memory are read as .tf32 (wgmma ignores the low 13 mantissa bits), k8,
  f32 accumulators, K-major only;
- e4m3/e5m2: .f32.e4m3.e4m3 / .f32.e5m2.e5m2, k32, f32 accumulators, K-major only;
- s8/u8: .s32.s8.s8 / .s32.u8.u8, k32, exact s32 accumulators (wrapping, as the sm_80 path's
  mma.sync .s32 does: no .satfinite), K-major only.
Every instruction reads 32 bytes of K (16 f16, 8 tf32, 32 bytes of 8-bit).
"""
from __future__ import annotations

from ...ir import Imm
from ...schedule.problem import Gemm
from . import wgmma_isa as wi

#: The f32 immediate 0.0 and the integer 0, the accumulators' initial value per class.
ZERO = {"f32": ("mov.f32", Imm("0f00000000")), "b32": ("mov.b32", Imm("0"))}


def accumulator_dtype(g: Gemm) -> str:
    """wgmma's D type: s32 for s8/u8 inputs, f32 otherwise (f16 accumulation is not built)."""
    return "s32" if g.accumulator == "s32" else "f32"


def accumulator_class(g: Gemm) -> str:
    """The register class that holds one accumulator: .f32, or .b32 for the s32 bits (as the sm_80
    path keeps its s32 mma.sync accumulators)."""
    return "b32" if accumulator_dtype(g) == "s32" else "f32"


def wgmma_types(g: Gemm) -> tuple[str, str, str]:
    """(dtype, atype, btype) of the kernel's wgmma: A and B share the Gemm's input dtype."""
    return accumulator_dtype(g), g.dtype, g.dtype


def wgmma_shape(g: Gemm, bn: int) -> wi.WgmmaShape:
    """The m64nBNkK instruction of `g` (K: 32 bytes of the input type), checked against the table."""
    return wi.wgmma_shape(*wgmma_types(g), bn)


def zero_accumulator(g: Gemm) -> tuple[str, Imm]:
    """(opcode, immediate) that zeroes one accumulator register."""
    return ZERO[accumulator_class(g)]
