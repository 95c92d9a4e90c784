"""A fixed, diverse set of (Gemm, Schedule, arch) cases whose emitted PTX is pinned byte for byte.

A restructuring of the code (ptxgen/targets, issue 19) must not change one instruction of the
sm_80, wmma and sm_90a kernels: `make_golden.py` records a SHA-256 of each case's PTX in `golden.txt`,
`test_golden.py` recompiles every case and compares, and `diff_golden.py` shows the first
differing line against any git revision. Every case must verify: a case the verifier refuses is
an error here, never silently dropped.
"""
from __future__ import annotations

from ptxgen import Epilogue, Gemm, Schedule


def _cases() -> list[tuple[str, Gemm, Schedule, str]]:
    out: list[tuple[str, Gemm, Schedule, str]] = []

    def add(name: str, g: Gemm, s: Schedule, arch: str = "sm_80") -> None:
        out.append((name, g, s, arch))

    sq = (512, 512, 256)
    # -- dtypes x layouts (mma.sync) -----------------------------------------------------------
    for dtype, out_dtype in (("f16", "f32"), ("bf16", "bf16"), ("f16", "f16"), ("tf32", "f32"),
                             ("s8", "s32"), ("u8", "s32"), ("s8", "f32"), ("u8", "s8")):
        for a_l, b_l in (("row", "col"), ("col", "row"), ("row", "row"), ("col", "col")):
            add(f"{dtype}_{out_dtype}_{a_l[0]}{b_l[0]}", Gemm(*sq, dtype=dtype, out_dtype=out_dtype, a_layout=a_l,
                                                              b_layout=b_l), Schedule(block=(128, 128, 32)))
    add("f16_acc16", Gemm(*sq, dtype="f16", out_dtype="f16", acc_dtype="f16"), Schedule(block=(128, 128, 32)))
    # -- shared layouts, stages, warps, rasters, fragment double buffering -----------------------
    for smem in ("swizzle", "pad", "plain"):
        for stages in (1, 2, 3, 4):
            add(f"layout_{smem}_s{stages}", Gemm(*sq, a_layout="col" if stages % 2 else "row"),
                Schedule(block=(128, 64, 64), warps=(2, 2), stages=stages, smem_layout=smem))
    add("grouped_raster", Gemm(1024, 768, 256), Schedule(block=(128, 128, 32), raster="grouped", group_m=4))
    add("no_frag_dbuf", Gemm(*sq, dtype="bf16"), Schedule(block=(64, 64, 64), warps=(1, 1), frag_double_buffer=False))
    add("warps_4x2_256", Gemm(*sq, b_layout="row"), Schedule(block=(256, 128, 32), warps=(4, 2), stages=4))
    add("warps_1x4", Gemm(*sq), Schedule(block=(64, 256, 32), warps=(1, 4), stages=3))
    add("tf32_mn_swizzle_bk64", Gemm(*sq, dtype="tf32", a_layout="col", b_layout="row"),
        Schedule(block=(64, 64, 64), warps=(2, 2), stages=2))
    # -- edges, alignment, leading dims -----------------------------------------------------------
    for dtype in ("f16", "tf32", "s8"):
        out_dtype = "s32" if dtype == "s8" else "f32"
        for a_l, b_l in (("row", "col"), ("col", "row")):
            add(f"edge_{dtype}_{a_l[0]}{b_l[0]}", Gemm(301, 157, 203, dtype=dtype, out_dtype=out_dtype, a_layout=a_l,
                                                       b_layout=b_l, align={"f16": 2, "tf32": 4, "s8": 1}[dtype]),
                Schedule(block=(64, 64, 32)))
    add("edge_k_only", Gemm(256, 256, 200), Schedule(block=(128, 128, 32)))
    add("edge_align2", Gemm(129, 130, 66, align=2), Schedule(block=(64, 64, 32), stages=2))
    add("edge_f16_out_odd", Gemm(130, 131, 96, out_dtype="f16"), Schedule(block=(64, 64, 32)))
    add("ld_padded", Gemm(256, 256, 256, lda=264, ldb=272, ldc=260), Schedule(block=(128, 128, 32)))
    # -- epilogues ------------------------------------------------------------------------------
    epis = {
        "alpha": Epilogue(alpha=0.5), "beta": Epilogue(beta=0.25), "bias_col": Epilogue(bias="col"),
        "bias_row": Epilogue(bias="row"), "relu": Epilogue(activation="relu"),
        "gelu": Epilogue(activation="gelu", bias="col"), "silu": Epilogue(activation="silu", alpha=2.0),
        "scale_col": Epilogue(scale="col"), "scale_row_alpha": Epilogue(scale="row", alpha=0.5),
        "all": Epilogue(alpha=1.5, beta=0.5, bias="row", activation="gelu", scale="col"),
    }
    for name, e in epis.items():
        for out_dtype in ("f32", "bf16"):
            add(f"epi_{name}_{out_dtype}", Gemm(*sq, dtype="bf16", out_dtype=out_dtype, epilogue=e),
                Schedule(block=(128, 128, 32)))
    add("epi_direct_f16", Gemm(*sq, out_dtype="f16", epilogue=epis["all"]),
        Schedule(block=(128, 128, 32), epilogue_via_smem=False))
    add("epi_edge_beta_bias", Gemm(200, 190, 128, out_dtype="f16", epilogue=Epilogue(beta=1.0, bias="col")),
        Schedule(block=(64, 64, 32)))
    add("epi_bias_dtype", Gemm(*sq, out_dtype="bf16", dtype="bf16", bias_dtype="bf16", epilogue=Epilogue(bias="col")),
        Schedule(block=(128, 128, 32)))
    add("int8_quant_s8", Gemm(*sq, dtype="s8", out_dtype="s8", epilogue=Epilogue(scale="col", alpha=0.01)),
        Schedule(block=(128, 128, 64)))
    add("int8_quant_u8_edge", Gemm(197, 203, 100, dtype="u8", out_dtype="u8", align=1,
                                   epilogue=Epilogue(scale="row", beta=0.5, bias="col")), Schedule(block=(64, 64, 64)))
    add("int8_f16_out", Gemm(*sq, dtype="s8", out_dtype="f16", epilogue=Epilogue(activation="relu")),
        Schedule(block=(128, 128, 64)))
    # -- wmma ---------------------------------------------------------------------------------------
    add("wmma_f16", Gemm(*sq), Schedule(block=(128, 128, 32), instruction="wmma"))
    add("wmma_bf16_cr", Gemm(*sq, dtype="bf16", a_layout="col", b_layout="row", out_dtype="bf16"),
        Schedule(block=(64, 64, 32), instruction="wmma", warps=(2, 2), stages=2))
    add("wmma_acc16", Gemm(*sq, out_dtype="f16", acc_dtype="f16"), Schedule(block=(128, 128, 32), instruction="wmma"))
    add("wmma_epi_edge", Gemm(200, 190, 96, epilogue=Epilogue(beta=0.5, bias="col", activation="silu")),
        Schedule(block=(64, 64, 32), instruction="wmma", warps=(2, 2), stages=1))
    add("wmma_splitk", Gemm(256, 256, 1024), Schedule(block=(64, 64, 32), instruction="wmma", warps=(2, 2), split_k=4))
    add("wmma_streamk", Gemm(384, 384, 512), Schedule(block=(128, 128, 32), instruction="wmma",
                                                     decomposition="stream-k", sms=7))
    # -- split-K ------------------------------------------------------------------------------------
    add("splitk_ws", Gemm(256, 256, 2048), Schedule(block=(128, 128, 32), split_k=4))
    add("splitk_ws_edge_epi", Gemm(200, 190, 1000, out_dtype="bf16", epilogue=Epilogue(beta=0.5, bias="row")),
        Schedule(block=(64, 64, 32), split_k=3))
    add("splitk_atomic", Gemm(256, 256, 2048, epilogue=Epilogue(alpha=2.0)),
        Schedule(block=(128, 128, 32), split_k=2, split_k_mode="atomic"))
    add("splitk_batched", Gemm(256, 256, 1024, batch=3), Schedule(block=(128, 64, 32), split_k=2))
    add("splitk_tf32_s2", Gemm(256, 256, 2048, dtype="tf32", a_layout="col"), Schedule(block=(64, 64, 32), split_k=2,
                                                                                       stages=2))
    # -- Stream-K -----------------------------------------------------------------------------------
    add("streamk", Gemm(512, 384, 1024), Schedule(block=(128, 128, 32), decomposition="stream-k", sms=5))
    add("streamk_pure_edge", Gemm(300, 200, 700, epilogue=Epilogue(bias="col", activation="relu")),
        Schedule(block=(64, 64, 32), decomposition="stream-k-pure", sms=4))
    add("streamk_batched_grouped", Gemm(256, 256, 512, batch=2, out_dtype="f16"),
        Schedule(block=(64, 64, 32), decomposition="stream-k", raster="grouped", group_m=2, sms=6))
    add("streamk_tf32_s1", Gemm(256, 256, 512, dtype="tf32"),
        Schedule(block=(64, 64, 32), decomposition="stream-k", stages=1, sms=3))
    # -- batched ------------------------------------------------------------------------------------
    add("batched", Gemm(256, 256, 256, batch=4, epilogue=Epilogue(scale="col")), Schedule(block=(128, 128, 32)))
    add("batched_edge_int8", Gemm(100, 120, 80, batch=2, dtype="u8", out_dtype="s32", align=4),
        Schedule(block=(64, 64, 32)))
    # -- other targets ------------------------------------------------------------------------------
    add("sm90_f16", Gemm(*sq), Schedule(block=(128, 128, 32)), "sm_90")
    add("sm90_streamk", Gemm(512, 512, 512), Schedule(block=(128, 128, 64), decomposition="stream-k"), "sm_90")
    add("sm86_wmma", Gemm(*sq), Schedule(block=(64, 64, 32), instruction="wmma", warps=(2, 2)), "sm_86")
    add("sm89_bf16", Gemm(*sq, dtype="bf16"), Schedule(block=(128, 256, 32), warps=(2, 4), stages=4), "sm_89")
    # -- sm_90a (wgmma + TMA + mbarrier): every built design and dtype --------------------------
    def wg(block, **kw) -> Schedule:
        return Schedule(block=block, instruction="wgmma", **kw)

    h = "sm_90a"
    add("h_ws_128x128_s4", Gemm(1024, 1024, 512), wg((128, 128, 64), stages=4), h)
    add("h_ws_128x256_s3_bf16", Gemm(1024, 1024, 512, dtype="bf16", out_dtype="bf16"), wg((128, 256, 64), stages=3), h)
    add("h_ws_1consumer", Gemm(512, 512, 256, out_dtype="f16"), wg((64, 128, 64), stages=3), h)
    add("h_ws_sms_grouped", Gemm(1000, 904, 320), wg((128, 128, 64), raster="grouped", group_m=4, sms=7), h)
    add("h_ws_direct_epi", Gemm(512, 512, 256, epilogue=Epilogue(alpha=0.5, beta=0.5, bias="col",
                                                                  activation="gelu")),
        wg((128, 128, 64), epilogue_via_smem=False), h)
    add("h_ws_tma_store_beta", Gemm(512, 512, 256, out_dtype="bf16", dtype="bf16", epilogue=Epilogue(beta=0.5)),
        wg((128, 128, 64)), h)
    add("h_ws_mn_major", Gemm(512, 512, 256, a_layout="col", b_layout="row"), wg((128, 128, 64)), h)
    add("h_ws_regs", Gemm(512, 512, 256), wg((128, 128, 64), producer_regs=24, consumer_regs=240), h)
    add("h_ws_swizzle64", Gemm(512, 512, 256), wg((128, 128, 32), swizzle=64), h)
    add("h_ws_edges", Gemm(301, 157, 200, out_dtype="f16"), wg((128, 64, 64), stages=2), h)
    add("h_cluster_2x1", Gemm(1024, 1024, 512), wg((128, 256, 64), stages=3, cluster=(2, 1)), h)
    add("h_cluster_1x2", Gemm(480, 264, 120, out_dtype="f16"), wg((128, 64, 64), stages=2, cluster=(1, 2)), h)
    add("h_cluster_2x2_nomc", Gemm(1024, 1024, 256), wg((128, 128, 64), cluster=(2, 2), multicast=False), h)
    add("h_nonws_tile", Gemm(512, 512, 256), wg((128, 128, 64), warp_specialized=False, persistent=False), h)
    add("h_batch_ws", Gemm(257, 176, 48, dtype="bf16", out_dtype="bf16", batch=2), wg((128, 64, 64), stages=5), h)
    add("h_batch_nonws", Gemm(256, 256, 128, batch=3), wg((128, 128, 64), warp_specialized=False, persistent=False), h)
    add("h_splitk", Gemm(256, 256, 2048), wg((128, 128, 64), split_k=4), h)
    add("h_splitk_epi", Gemm(200, 190, 1000, out_dtype="bf16", epilogue=Epilogue(beta=0.5, bias="row")),
        wg((128, 64, 64), split_k=3), h)
    add("h_streamk", Gemm(512, 384, 1024), wg((128, 128, 64), decomposition="stream-k", sms=5), h)
    add("h_streamk_pure", Gemm(300, 200, 704), wg((128, 64, 64), decomposition="stream-k-pure", sms=4), h)
    for dt, out_dt, blk in (("tf32", "f32", (128, 128, 32)), ("e4m3", "bf16", (128, 256, 128)),
                            ("e5m2", "f16", (128, 128, 128)), ("s8", "s32", (128, 128, 128)),
                            ("u8", "s8", (128, 128, 128))):
        epi = Epilogue(scale="col", alpha=0.01) if out_dt == "s8" else Epilogue(alpha=1.0)
        # fp8 128x256: two promoted accumulators (2 x 128 registers) exceed a consumer's 232, so
        # this case is the single-level kernel (fast_accum); e5m2 and h_e4m3_scale_col promote
        fast = {"fast_accum": True} if blk[1] == 256 else {}
        add(f"h_{dt}_{out_dt}", Gemm(512, 512, 512, dtype=dt, out_dtype=out_dt, epilogue=epi, **fast), wg(blk), h)
    add("h_e4m3_scale_col", Gemm(512, 512, 512, dtype="e4m3", out_dtype="f32", epilogue=Epilogue(scale="col")),
        wg((128, 128, 128)), h)
    add("h_int8_nonws_tile", Gemm(256, 256, 512, dtype="s8", out_dtype="s32"),
        wg((128, 128, 128), warp_specialized=False, persistent=False), h)
    add("h_bf16_streamk_tf", Gemm(256, 256, 512, dtype="bf16", out_dtype="f32", epilogue=Epilogue(bias="col")),
        wg((128, 128, 64), decomposition="stream-k", sms=3), h)
    b = "sm_100a"  # tcgen05 (targets/sm100): appended, so every earlier case keeps its name and digest
    add("b_tcgen05_default", Gemm(512, 512, 256), Schedule(block=(128, 256, 64), instruction="tcgen05"), b)
    add("b_tcgen05_edges_epi", Gemm(304, 152, 200, dtype="bf16", out_dtype="bf16", a_layout="col", b_layout="row",
                                    epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col", activation="relu")),
        Schedule(block=(64, 64, 64), instruction="tcgen05", stages=4, raster="grouped", group_m=4), b)
    return out


CASES = _cases()
assert len({c[0] for c in CASES}) == len(CASES), "duplicate case names"
