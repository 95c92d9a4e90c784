"""The issue's sweep of valid schedules: every block size 64-256, BK 32/64, warp grids 1x1-4x2,
stages 1-5, all shared layouts, both B layouts, f16 and bf16, every output dtype."""
from __future__ import annotations

from ptxgen import Gemm, Schedule

# (block, warps, stages, smem_layout, b_layout, dtype, out_dtype, raster, frag_double_buffer);
# every third row stores A column-major.
ROWS = [
    ((64, 64, 32), (1, 1), 1, "swizzle", "col", "f16", "f32", "row", True),
    ((64, 64, 64), (2, 2), 2, "pad", "row", "bf16", "f32", "row", True),
    ((128, 128, 32), (2, 2), 3, "swizzle", "col", "f16", "f32", "row", True),
    ((128, 128, 32), (2, 2), 4, "plain", "row", "bf16", "bf16", "row", True),
    ((128, 128, 64), (2, 2), 3, "swizzle", "row", "f16", "f16", "row", True),
    ((128, 128, 64), (2, 2), 4, "pad", "col", "bf16", "f32", "row", True),
    ((128, 256, 32), (2, 4), 3, "swizzle", "col", "f16", "f32", "row", True),
    ((256, 128, 32), (4, 2), 3, "swizzle", "col", "f16", "f32", "row", True),
    ((256, 128, 32), (4, 2), 4, "pad", "row", "bf16", "f16", "row", True),
    ((128, 64, 32), (2, 1), 2, "plain", "col", "f16", "f32", "row", True),
    ((64, 128, 32), (1, 2), 3, "swizzle", "row", "bf16", "f32", "row", True),
    ((256, 64, 32), (4, 1), 4, "swizzle", "col", "f16", "bf16", "row", True),
    ((64, 256, 64), (1, 4), 2, "pad", "col", "f16", "f32", "row", True),
    ((128, 128, 32), (4, 2), 5, "swizzle", "row", "f16", "f32", "row", True),
    ((64, 64, 32), (2, 1), 5, "plain", "row", "bf16", "f32", "row", True),
    ((128, 64, 64), (2, 2), 3, "pad", "row", "f16", "f16", "row", True),
    ((64, 128, 64), (2, 2), 4, "swizzle", "col", "bf16", "bf16", "row", True),
    ((256, 128, 64), (4, 2), 3, "swizzle", "col", "f16", "f32", "row", True),
    ((128, 256, 64), (2, 4), 2, "swizzle", "row", "bf16", "f32", "row", True),
    ((64, 64, 32), (1, 2), 1, "pad", "col", "f16", "f32", "row", False),
    ((64, 64, 64), (1, 1), 3, "swizzle", "row", "bf16", "f16", "row", True),
    ((128, 128, 32), (2, 2), 2, "pad", "col", "f16", "f32", "grouped", True),
    ((256, 64, 64), (4, 1), 3, "plain", "col", "bf16", "f32", "row", False),
    ((128, 128, 64), (4, 2), 4, "swizzle", "col", "f16", "f32", "grouped", False),
    ((64, 256, 32), (1, 4), 3, "swizzle", "row", "f16", "f32", "row", True),
    ((128, 128, 32), (2, 2), 1, "plain", "col", "bf16", "bf16", "row", False),
]


def sweep(m: int = 512, n: int = 512, k: int = 256) -> list[tuple[Gemm, Schedule]]:
    out = []
    for i, (block, warps, stages, smem, b_layout, dtype, out_dtype, raster, dbuf) in enumerate(ROWS):
        a_layout = "col" if i % 3 == 2 else "row"
        out.append((Gemm(m, n, k, dtype=dtype, out_dtype=out_dtype, a_layout=a_layout, b_layout=b_layout),
                    Schedule(block=block, warps=warps, stages=stages, smem_layout=smem, raster=raster,
                             group_m=2, frag_double_buffer=dbuf)))
    return out


def case_id(case: tuple[Gemm, Schedule]) -> str:
    g, s = case
    return (f"{s.bm}x{s.bn}x{s.bk}-w{s.warps[0]}x{s.warps[1]}-s{s.stages}-{s.smem_layout}-"
            f"{g.a_layout[0]}{g.b_layout[0]}-{g.dtype}-{g.out_dtype}-{s.raster}")
