"""What bench/gemm.py measures: the problems, in order of importance, and ptxgen's fixed
candidate schedules per problem (the best of them is ptxgen's number).

Every problem gets the data-parallel tile schedules plus a Stream-K variant; problems with few
output tiles (small M, the decode-like LLM rows) also get split-K and Stream-K candidates with
narrow tiles, which is where tile-per-CTA schedules leave SMs idle.
"""
from __future__ import annotations

from dataclasses import dataclass

from llm_cases import DECODE_SHAPES

#: Data-parallel candidates for every problem: (block, warps, stages); swizzle, fragment double
#: buffering, and the grouped raster (group_m = 8 m-tiles walk n together, as Triton's GROUP_M;
#: counting each resident wave's A and B panels, about 40% less DRAM traffic than row order at
#: 8192^3 with 264 resident CTAs, unmeasured). One row-raster control candidate ("row-raster" in
#: its name) measures what the raster is worth.
SCHEDULES = [
    ((128, 128, 32), (2, 2), 3),
    ((128, 128, 32), (2, 2), 4),
    ((128, 256, 32), (2, 4), 3),
    ((256, 128, 32), (4, 2), 3),
    ((128, 128, 64), (2, 2), 3),
    ((64, 128, 32), (2, 2), 4),  # for M = 64 (LLM decode-ish shapes)
]
DTYPES = ("f16", "bf16")
LLM_NK = [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)]
#: (m, n, k, group) in order of importance: what runs first survives a tight budget.
SHAPES = ([(4096, 4096, 4096, "square"), (8192, 8192, 8192, "square")]
          + [(2048, n, k, "llm") for n, k in LLM_NK]
          + [(2048, 2048, 2048, "square"), (4096, 4096, 16384, "deep-k"), (4096, 4096, 1024, "deep-k")]
          + [(256, n, k, "llm") for n, k in LLM_NK]
          + [(1024, 1024, 1024, "square")]
          + [(64, n, k, "llm") for n, k in LLM_NK]
          + [(16, n, k, "llm") for n, k in LLM_NK]
          + [s for s in DECODE_SHAPES if s[0] not in (16, 64)]  # M = 64 is in the "llm" rows above
          + [(4095, 4095, 4095, "odd"), (2047, 11008, 4095, "odd"), (1000, 1000, 1000, "odd")]
          + [(16384, 16384, 16384, "square")])
#: Hopper (sm_90a) candidates, the designs the sm_90a lowering builds (README, "Hopper (sm_90a): what
#: is built"): (block, consumer warpgroups, stages, warp-specialised + persistent, input dtype or None
#: for every dtype). The warp-specialised persistent kernel (producer warpgroup, full/empty mbarrier
#: ring, TMA-store epilogue where C allows) is the default; the non-specialised one-CTA-per-tile
#: kernel is the baseline. BK is one 128-byte swizzle row: 64 f16/bf16, 128 fp8 elements. The
#: chooser's pick for each problem is added by `chosen_spec`.
HOPPER_SCHEDULES = [
    ((128, 128, 64), 2, 4, True, None),
    ((128, 128, 64), 2, 3, True, None),
    ((128, 256, 64), 2, 4, True, None),
    ((128, 256, 64), 2, 3, True, None),
    ((128, 128, 64), 2, 4, False, None),   # baseline: not specialised, one CTA per tile
    ((64, 128, 64), 1, 4, True, None),     # for small M (the LLM decode-ish shapes)
    # fp8: twice the 16-bit wgmma rate; BN 192, the widest whose promoted accumulators (2 x 96 registers,
    # targets/sm90/promotion.py) fit a consumer's 232 (128x256 needs Gemm(fast_accum=True))
    ((128, 192, 128), 2, 3, True, "e4m3"),
    ((128, 192, 128), 2, 4, True, "e4m3"),
]
#: Input dtypes of the sm_90a run (fp8 e4m3 gives bf16 out: wgmma's fp8 path accumulates in f32).
HOPPER_DTYPES = ("f16", "bf16", "e4m3")
#: Blackwell (sm_100a) candidates, the warp-specialised persistent tcgen05 kernel (targets/sm100):
#: (block, stages, input dtype or None for the 16-bit dtypes). BK is one 128-byte swizzle row (64
#: f16/bf16, 32 tf32, 128 fp8 elements); 2 x BN TMEM columns hold the two accumulator buffers. The
#: chooser's pick for each problem is added by `chosen_spec`.
BLACKWELL_SCHEDULES = [
    ((128, 256, 64), 4, None),
    ((128, 256, 64), 3, None),
    ((128, 192, 64), 5, None),
    ((128, 128, 64), 6, None),
    ((64, 256, 64), 4, None),      # for small M (the LLM decode-ish shapes)
    ((128, 256, 32), 4, "tf32"),
    ((128, 256, 128), 4, "mxfp8"),
    ((128, 256, 128), 3, "mxfp8"),
    ((128, 256, 256), 3, "nvfp4"),  # 256 e2m1 elements: 128 bytes of K (two per byte)
]
#: Input "dtypes" of the sm_100a run: 16-bit, and the block-scaled formats, each a Gemm recipe
#: (`blackwell_gemm`): MXFP8 (e4m3 with one ue8m0 scale per 32 of K, kind::mxf8f6f4) and NVFP4
#: (e2m1 with one ue4m3 scale per 16 of K and a per-tensor f32 scale, kind::mxf4nvf4). The verifier
#: refuses those until their lowering lands; the plan shows its verdict.
BLACKWELL_DTYPES = ("bf16", "f16", "mxfp8", "nvfp4")
BLOCK_SCALED = {"mxfp8": ("e4m3", (1, 32), (32, 1), "ue8m0"), "nvfp4": ("e2m1", (1, 16), (16, 1), "ue4m3")}
#: Output dtype by input dtype: the input's own (as torch.matmul), bf16 for fp8/fp4 (no such output).
OUT_DTYPE = {"f16": "f16", "bf16": "bf16", "tf32": "f32", "e4m3": "bf16", "mxfp8": "bf16", "nvfp4": "bf16"}


def bench_gemm(dtype: str, m: int, n: int, k: int):
    """The TN Gemm bench/gemm.py runs for `dtype` (a block-scaled label builds its BlockScale):
    raises ScheduleError (or TypeError/ValueError) where ptxgen does not take the format yet."""
    import ptxgen

    if dtype in BLOCK_SCALED:
        elem, a, b, scale = BLOCK_SCALED[dtype]
        return ptxgen.Gemm(m, n, k, dtype=elem, out_dtype=OUT_DTYPE[dtype], a_layout="row", b_layout="col",
                           block_scale=ptxgen.BlockScale(a=a, b=b, dtype=scale))
    return ptxgen.Gemm(m, n, k, dtype=dtype, out_dtype=OUT_DTYPE[dtype], a_layout="row", b_layout="col")


#: Problems with M up to this have few output tiles: they also get split-K and narrow Stream-K candidates.
SMALL_M = 256


@dataclass(frozen=True)
class Spec:
    """One ptxgen candidate schedule."""

    block: tuple
    warps: tuple
    stages: int
    split_k: int = 1
    decomposition: str = "tiles"
    raster: str = "grouped"
    consumers: int = 0  # > 0: a Hopper wgmma schedule with this many consumer warpgroups (warps unused)
    warp_specialized: bool = True  # Hopper: the warp-specialised persistent kernel, else one CTA per tile
    dtype: str | None = None  # only for problems of this input dtype
    instruction: str = ""  # "tcgen05": a Blackwell schedule (block, stages, raster)
    fixed: object = None  # a ptxgen.Schedule given whole (the chooser's pick), named "chosen ..."
    label: str = "chosen"  # the name's first word for a `fixed` schedule

    @property
    def name(self) -> str:
        if self.fixed is not None:
            return f"{self.label} " + self.fixed_name()
        if self.instruction == "tcgen05":
            return f"{self.block[0]}x{self.block[1]}x{self.block[2]} tcgen05 s{self.stages} ws-persistent"
        if self.consumers:
            kind = "ws-persistent" if self.warp_specialized else "one-cta-per-tile"
            return f"{self.block[0]}x{self.block[1]}x{self.block[2]} wgmma c{self.consumers} s{self.stages} {kind}"
        extra = (f" splitk{self.split_k}" if self.split_k > 1 else "") + \
            (f" {self.decomposition}" if self.decomposition != "tiles" else "") + \
            (f" {self.raster}-raster" if self.raster != "grouped" else "")
        return schedule_name(self.block, self.warps, self.stages) + extra

    def schedule(self):
        import ptxgen

        if self.fixed is not None:
            return self.fixed
        if self.instruction == "tcgen05":
            return ptxgen.Schedule(block=self.block, instruction="tcgen05", stages=self.stages, raster=self.raster)
        if self.consumers:  # the built sm_90a designs (ptxgen/schedule/verify_sm90_built.py)
            ws = self.warp_specialized
            return ptxgen.Schedule(block=self.block, instruction="wgmma", consumers=self.consumers, stages=self.stages,
                                   warp_specialized=ws, persistent=ws, raster=self.raster)
        return ptxgen.Schedule(block=self.block, warps=self.warps, stages=self.stages, smem_layout="swizzle",
                               frag_double_buffer=True, split_k=self.split_k, decomposition=self.decomposition,
                               raster=self.raster)


    def fixed_name(self) -> str:
        s = self.fixed
        swap = " swap-ab" if s.swap_ab else ""
        if s.instruction == "tcgen05":
            pair = f" cta_group{s.cta_group}" if (s.cta_group or 1) > 1 else ""
            return f"{s.bm}x{s.bn}x{s.bk} tcgen05 s{s.stages} ws-persistent{pair}" + (
                " grouped-raster" if s.raster == "grouped" else "")
        if s.instruction != "wgmma":
            extra = (f" splitk{s.split_k}" if s.split_k > 1 else "") + (f" {s.decomposition}" if s.stream_k else "")
            return schedule_name(s.block, s.warps, s.stages) + extra + swap
        kind = ("ws-persistent" if s.warp_specialized else "stream-k" if s.stream_k else
                f"splitk{s.split_k}" if s.split_k > 1 else "one-cta-per-tile")
        epi = {None: "", True: " tma-store", False: " direct-store"}[s.epilogue_via_smem]
        cluster = f" cluster{s.cluster[0]}x{s.cluster[1]}" if tuple(s.cluster) != (1, 1) else ""
        return f"{s.bm}x{s.bn}x{s.bk} wgmma c{s.consumers} s{s.stages} {kind}{cluster}{epi}" + (
            " grouped-raster" if s.raster == "grouped" else "") + swap


def chosen_spec(gemm, arch: str) -> Spec | None:
    """The schedule `ptxgen.compile(gemm, arch=arch)` picks (the cost model's, assembled without
    spills), as a candidate; None where the chooser refuses the problem."""
    import ptxgen

    try:
        s = ptxgen.compile(gemm, arch=arch).schedule
    except ptxgen.ScheduleError:
        return None
    return Spec(s.block, (), s.stages, consumers=s.consumers or 0, fixed=s)


def schedule_name(block, warps, stages) -> str:
    return f"{block[0]}x{block[1]}x{block[2]} w{warps[0]}x{warps[1]} s{stages}"


def candidates_for(m: int, n: int, k: int, arch: str | None = None, dtype: str | None = None) -> list[Spec]:
    """The fixed candidate list of one problem (a function of its shape class, arch and input
    dtype only): sm_90a is the wgmma pipeline alone (it refuses mma.sync schedules), every other
    arch the mma.sync list. Specs for one dtype only (fp8's) come only when `dtype` is given."""
    if arch == "sm_100a":
        return [Spec(block, (), stages, dtype=only, instruction="tcgen05") for block, stages, only in BLACKWELL_SCHEDULES
                if only == dtype or (only is None and dtype in (None, "f16", "bf16"))]
    if arch == "sm_90a":
        return [Spec(block, (), stages, consumers=consumers, warp_specialized=ws, dtype=only)
                for block, consumers, stages, ws, only in HOPPER_SCHEDULES
                if (only is None and dtype not in ("e4m3", "e5m2")) or (only is not None and only == dtype)]
    out = [Spec(*s) for s in SCHEDULES]
    out.append(Spec((128, 128, 32), (2, 2), 4, raster="row"))
    out.append(Spec((128, 128, 32), (2, 2), 4, decomposition="stream-k"))
    if m <= SMALL_M:
        narrow = ((64, 128, 64), (1, 4), 4)
        out += [Spec(*narrow, split_k=s) for s in (2, 4, 8)]
        out += [Spec(*narrow, decomposition="stream-k"), Spec((64, 128, 32), (2, 2), 4, decomposition="stream-k")]
    return out
