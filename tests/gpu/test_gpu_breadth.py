"""The whole problem space on hardware: every dtype row, layout, odd shape, leading dimension,
epilogue (bias, scale, beta, activations), batch, split-K mode, Stream-K and both instruction
paths, drawn with labelled hypothesis draws, the verifier deciding what is legal.

Each kernel runs on the GPU through `ptxgen.check.check_kernel`, the very check the simulator
tests use: a poisoned C (twice, with two byte patterns, for 8-bit outputs), compared with the
float64 reference at the dtype's tolerance (exact for s32; within a rounding tie for s8/u8)."""
from __future__ import annotations

import numpy as np

from gpu_helpers import compile_or_reject, device_compile_arch, record, require_gpu, sim_or

require_gpu()

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ptxgen import Epilogue, Gemm, Schedule  # noqa: E402
from ptxgen.check import check_kernel, random_epilogue_operands, random_operands, random_scale  # noqa: E402

ARCH = device_compile_arch()
SIZES = [1, 7, 16, 17, 63, 64, 100, 129, 255, 300]
OUTPUTS = {"f16": ["f32", "f16", "bf16"], "bf16": ["f32", "f16", "bf16"], "tf32": ["f32"],
           "s8": ["s32", "s8", "u8", "f32", "f16"], "u8": ["s32", "s8", "u8", "bf16"]}


def stored(x: np.ndarray, layout: str, ld: int) -> np.ndarray:
    """Logical x ((batch,) rows x cols) as a view of a zero-padded buffer with `ld` elements
    between lines, in the given storage layout (how strided views of bigger matrices look)."""
    lines = x if layout == "row" else np.swapaxes(x, -1, -2)
    buf = np.zeros(lines.shape[:-1] + (ld,), x.dtype)
    buf[..., :lines.shape[-1]] = lines
    view = buf[..., :lines.shape[-1]]
    return view if layout == "row" else np.swapaxes(view, -1, -2)


def draw_problem(data) -> tuple[Gemm, Schedule]:
    dtype = data.draw(st.sampled_from(["f16", "bf16", "tf32", "s8", "u8"]), label="dtype")
    out = data.draw(st.sampled_from(OUTPUTS[dtype]), label="out")
    acc = data.draw(st.sampled_from(["f32", "f32", "f16"]), label="acc") if (dtype, out) == ("f16", "f16") else "f32"
    m, n, k = (data.draw(st.sampled_from(SIZES), label=d) for d in "MNK")
    a_layout = data.draw(st.sampled_from(["row", "col"]), label="a_layout")
    b_layout = data.draw(st.sampled_from(["row", "col"]), label="b_layout")
    pad = data.draw(st.sampled_from([0, 0, 8, 16]), label="ld padding")
    round16 = lambda w: -(-w // 16) * 16 + pad  # noqa: E731 - 16-byte lines keep int8's cp.async copies
    lds = {"lda": round16(k if a_layout == "row" else m), "ldb": round16(n if b_layout == "row" else k),
           "ldc": round16(n)} if pad or dtype in ("s8", "u8") else {}
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from([1.0, 0.5, -2.0]), label="alpha"),
                       beta=data.draw(st.sampled_from([0.0, 0.0, 1.0]), label="beta"),
                       bias=data.draw(st.sampled_from([None, "row", "col"]), label="bias"),
                       scale=data.draw(st.sampled_from([None, None, "row", "col"]), label="scale"),
                       activation=data.draw(st.sampled_from([None, "relu", "gelu", "silu"]), label="act"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, acc_dtype=acc,
             epilogue=epi, batch=data.draw(st.sampled_from([1, 1, 3]), label="batch"), **lds)
    instruction = data.draw(st.sampled_from(["m16n8k16", "m16n8k16", "wmma"]), label="instruction")
    decomposition = data.draw(st.sampled_from(["tiles", "tiles", "stream-k", "stream-k-pure"]), label="decomp")
    s = Schedule(block=data.draw(st.sampled_from([(64, 64, 32), (128, 128, 32), (64, 128, 64), (128, 64, 32)]),
                                 label="block"),
                 warps=data.draw(st.sampled_from([(2, 2), (1, 4), (2, 4), (4, 2)]), label="warps"),
                 stages=data.draw(st.integers(1, 4), label="stages"), instruction=instruction,
                 smem_layout=data.draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                 raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"),
                 epilogue_via_smem=data.draw(st.sampled_from([None, False]), label="epilogue via"),
                 split_k=data.draw(st.sampled_from([1, 1, 2, 3]), label="split_k") if decomposition == "tiles" else 1,
                 split_k_mode=data.draw(st.sampled_from(["workspace", "atomic"]), label="split_k_mode"),
                 decomposition=decomposition,
                 sms=data.draw(st.sampled_from([None, 7, 200]), label="sms"))
    return g, s


@settings(max_examples=sim_or(80, 5), deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(st.data())
def test_whole_space_on_hardware(data):
    g, s = draw_problem(data)
    kern = compile_or_reject(data, g, s, ARCH)
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    a, b = random_operands(g, seed)
    lda, ldb, _ = g.leading_dims()
    a, b = stored(a, g.a_layout, lda), stored(b, g.b_layout, ldb)
    c0, bias = random_epilogue_operands(g, seed + 1)
    scale = random_scale(g, seed + 2)
    result = check_kernel(kern, a, b, c0, bias, scale, run=kern)
    if not result.ok:
        record("breadth::mismatch", gemm=str(g), schedule=str(s), arch=ARCH, result=str(result),
               resources=str(kern.resources))
    assert result.ok, f"{g} {s}: {result}"
