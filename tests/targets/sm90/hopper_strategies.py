"""Labelled hypothesis draws of Hopper (sm_90a, wgmma) problems and schedules, filtered by the
verifier: the schedule space the Hopper lowering's property tests draw from.

`draw_hopper_gemm` draws a problem TMA can describe (16-byte aligned rows, K-major operands
unless 16-bit); `draw_hopper_schedule` draws every Hopper field, built to be legal most of the
time; `draw_legal_hopper` keeps only what `verify_rules` accepts (hypothesis `assume`), so a
test sees legal (Gemm, Schedule) pairs and the rejected draws are the verifier's to explain.
"""
from __future__ import annotations

from hypothesis import assume, strategies as st

from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.targets.sm90.plan import WGMMA_N
from ptxgen.schedule.problem import DTYPE_BYTES
from ptxgen.schedule.verify import verify_rules

ARCH = "sm_90a"
HOPPER_DTYPES = ("f16", "bf16", "tf32", "s8", "u8", "e4m3", "e5m2")
#: Outputs each input dtype gives (the dtype table of verify_dtype_table).
OUTPUTS = {"f16": ("f32", "f16", "bf16"), "bf16": ("f32", "f16", "bf16"), "tf32": ("f32",),
           "s8": ("s32", "s8", "f32", "bf16"), "u8": ("s32", "u8", "f32", "f16"),
           "e4m3": ("f32", "f16", "bf16"), "e5m2": ("f32", "f16", "bf16")}
#: Block tiles drawn: BM (64 per consumer warpgroup), and BN from the dtype's wgmma N table.
BMS = (64, 128, 192, 256)
BN_CHOICES = (8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256)


def draw_hopper_gemm(data, sizes: tuple[int, ...] = (64, 128, 192, 256, 320, 512), dtypes=HOPPER_DTYPES,
                     epilogues: bool = True) -> Gemm:
    """A problem for the Hopper path: M, N, K from `sizes` (each a multiple of 16 elements, so every
    dense row is 16-byte aligned for any dtype), layouts wgmma can read, an output from the dtype
    table, sometimes an epilogue."""
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    sixteen_bit = DTYPE_BYTES[dtype] == 2
    out = data.draw(st.sampled_from(OUTPUTS[dtype]), label="out_dtype")
    a_layout = data.draw(st.sampled_from(("row", "col") if sixteen_bit else ("row",)), label="a_layout")
    b_layout = data.draw(st.sampled_from(("row", "col") if sixteen_bit else ("col",)), label="b_layout")
    epilogue = None
    if epilogues and out != "s32" and data.draw(st.booleans(), label="epilogue?"):
        epilogue = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                            beta=data.draw(st.sampled_from((0.0, 1.0)), label="beta"),
                            bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"),
                            scale=data.draw(st.sampled_from((None, "col", "row")), label="scale"),
                            activation=data.draw(st.sampled_from((None, "relu", "gelu", "silu")), label="act"))
    return Gemm(data.draw(st.sampled_from(sizes), label="M"), data.draw(st.sampled_from(sizes), label="N"),
                data.draw(st.sampled_from(sizes), label="K"), dtype=dtype, out_dtype=out, a_layout=a_layout,
                b_layout=b_layout, epilogue=epilogue,
                batch=data.draw(st.sampled_from((1, 1, 2)), label="batch"))


def draw_hopper_schedule(data, g: Gemm) -> Schedule:
    """Every Hopper field drawn: block (BK one or two 128-byte swizzle rows), consumers, stages,
    warp specialisation and its register split, persistence, cluster and multicast, swizzle,
    epilogue path, raster, split-K / Stream-K. Mostly legal for `g`; the verifier decides."""
    esize = DTYPE_BYTES[g.dtype]
    bm = data.draw(st.sampled_from(BMS), label="BM")
    bn = data.draw(st.sampled_from([n for n in BN_CHOICES if n in WGMMA_N[g.dtype]]), label="BN")
    bk = data.draw(st.sampled_from((32 // esize, 64 // esize, 128 // esize, 256 // esize)), label="BK")
    consumers = data.draw(st.sampled_from((1, 2) if bm % 128 == 0 else (1,)), label="consumers")
    ws = data.draw(st.booleans(), label="warp_specialized")
    regs = {}
    if ws and data.draw(st.booleans(), label="explicit regs?"):
        regs = {"producer_regs": data.draw(st.sampled_from((24, 40, 56)), label="producer_regs"),
                "consumer_regs": data.draw(st.sampled_from((232, 240, 256) if consumers == 1 else (168, 200, 232)),
                                           label="consumer_regs")}
    cluster = data.draw(st.sampled_from(((1, 1), (1, 1), (2, 1), (1, 2))), label="cluster")
    decomposition = data.draw(st.sampled_from(("tiles", "tiles", "stream-k", "stream-k-pure")), label="decomposition")
    split_k = 1 if decomposition != "tiles" else data.draw(st.sampled_from((1, 1, 2)), label="split_k")
    raster = data.draw(st.sampled_from(("row", "grouped")), label="raster")
    return Schedule(
        block=(bm, bn, bk), instruction="wgmma", consumers=consumers,
        stages=data.draw(st.integers(1, 7), label="stages"), warp_specialized=ws, **regs,
        persistent=True if decomposition != "tiles" else data.draw(st.booleans(), label="persistent"),
        cluster=cluster, multicast=None if cluster == (1, 1) else data.draw(st.booleans(), label="multicast"),
        swizzle=data.draw(st.sampled_from((None, None) + tuple(w for w in (128, 64, 32) if bk * esize % w == 0)),
                          label="swizzle"),
        epilogue_via_smem=data.draw(st.sampled_from((None, True, False)), label="epilogue_via_smem"),
        raster=raster, group_m=data.draw(st.sampled_from((2, 4, 8)), label="group_m"),
        split_k=split_k, decomposition=decomposition,
        sms=data.draw(st.sampled_from((None, 8, 132)), label="sms"))


def draw_legal_hopper(data, **gemm_kw) -> tuple[Gemm, Schedule]:
    """A (Gemm, Schedule) pair `verify_rules` accepts for sm_90a (other draws are discarded)."""
    g = draw_hopper_gemm(data, **gemm_kw)
    s = draw_hopper_schedule(data, g)
    try:
        verify_rules(g, s, ARCH)
    except ScheduleError:
        assume(False)
    return g, s
