import ptxgen
from ptxgen import Gemm, BlockScale
for g in [Gemm(4096, 2048, 7168, dtype="bf16", out_dtype="bf16", groups=16, grouping="contiguous"),
          Gemm(4096, 2048, 7168, dtype="bf16", out_dtype="bf16", groups=16, grouping="masked"),
          Gemm(256, 4096, 7168, dtype="e4m3", out_dtype="bf16", groups=8, grouping="masked", block_scale=BlockScale()),
          Gemm(8192, 4096, 7168, dtype="e4m3", out_dtype="bf16", groups=8, grouping="contiguous", block_scale=BlockScale())]:
    k = ptxgen.compile(g, arch="sm_90a")
    print(k.schedule.block, k.schedule.consumers, k.resources)
    import dataclasses; d = ptxgen.compile(Gemm(g.m, g.n, g.k, dtype=g.dtype, out_dtype=g.out_dtype, block_scale=g.block_scale), dataclasses.replace(k.schedule, epilogue_via_smem=False), arch="sm_90a")
    print("  dense:", d.resources)
