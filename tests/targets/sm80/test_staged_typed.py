"""The staged epilogue in the output dtype: f16/bf16/s8/u8 outputs are staged after the epilogue
math as the exact bytes of C, then copied out in 16-byte chunks (`emit/sm80/epilogue_typed.py`).

Every kernel runs on the simulator (bounds, alignment, races and bank conflicts checked) against
the float64 reference, with C poisoned where it is not read.
"""
from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_epilogue_operands, random_operands
from ptxgen.schedule.geometry import staging_layout
from ptxgen.simulate import run_simulation
from tests import harness


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_typed_staging_matches_float64(data):
    out = data.draw(st.sampled_from(["f16", "bf16", "s8", "u8"]), label="out")
    dtype = data.draw(st.sampled_from(["s8", "u8"] if out in ("s8", "u8") else ["f16", "bf16", "s8"]), label="dtype")
    m = data.draw(st.sampled_from([1, 37, 64, 100]), label="M")
    n = data.draw(st.sampled_from([16, 40, 72, 130, 128]), label="N")
    k = data.draw(st.sampled_from([32, 64, 96]), label="K")
    ldc = data.draw(st.sampled_from([None, -(-n // 16) * 16 + 16, n + 4 if out in ("f16", "bf16") else n + 8]),
                    label="ldc")  # dense (any alignment), 16-byte, or 8-byte aligned rows of C
    epi = Epilogue(alpha=data.draw(st.sampled_from([1.0, 0.5]), label="alpha"),
                   beta=data.draw(st.sampled_from([0.0, 0.5, -1.0]), label="beta"),
                   bias=data.draw(st.sampled_from([None, "row", "col"]), label="bias"),
                   activation=data.draw(st.sampled_from([None, "relu", "silu"]), label="act"),
                   scale=data.draw(st.sampled_from([None, "col"]), label="scale"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, ldc=ldc, epilogue=epi,
             a_layout=data.draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=data.draw(st.sampled_from(["row", "col"]), label="b_layout"),
             batch=data.draw(st.sampled_from([1, 1, 2]), label="batch"))
    s = Schedule(block=data.draw(st.sampled_from([(64, 64, 32), (32, 64, 64), (64, 128, 32), (16, 32, 64)]),
                                 label="block"),
                 warps=data.draw(st.sampled_from([(1, 1), (2, 2), (2, 1)]), label="warps"),
                 stages=data.draw(st.integers(1, 3), label="stages"),
                 split_k=data.draw(st.sampled_from([1, 1, 2]), label="split_k"),
                 decomposition=data.draw(st.sampled_from(["tiles", "tiles", "stream-k"]), label="decomposition"),
                 sms=3, epilogue_via_smem=True)
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        assume(False)
    kern = ptxgen.compile(g, s)
    assert staging_layout(g, s).typed and f"staged in {out} after the math" in kern.ptx
    seed = data.draw(st.integers(0, 1000), label="seed")
    harness.check(kern, seed=seed)   # C with the gemm's ldc, 8-bit outputs once per poison


def test_typed_staging_is_bank_conflict_free_and_reads_c_coalesced():
    """128x128 f16 -> f16 with beta: the packed-pair writes (8 rows 16 x odd bytes apart), the pair
    reads of the staged C and the 16-byte drain all run at the ideal wavefront count."""
    g = Gemm(128, 128, 64, out_dtype="f16", epilogue=Epilogue(beta=0.5, bias="col", activation="relu"))
    k = ptxgen.compile(g, Schedule(block=(128, 128, 32)))
    st = staging_layout(g, k.schedule)
    assert st.typed and (st.pitch, st.bytes) == (272, 128 * 272)
    a, b = random_operands(g)
    c0, bias = random_epilogue_operands(g)
    _, res = run_simulation(k, a, b, c=c0.copy(), bias=bias)
    lines = k.ptx.splitlines()
    epilogue = {i + 1 for i, line in enumerate(lines) if "Epilogue" in line}
    start = min(epilogue)
    extra = {lines[n - 1].split()[0]: w - ideal for n, (w, ideal) in res.smem_wavefronts.items()
             if n > start and re.search(r"(ld|st)\.shared", lines[n - 1]) and w > ideal}
    assert not extra, extra
    epi_text = k.ptx[k.ptx.index("Epilogue"):]
    assert epi_text.count("ld.global.v4.b32") == epi_text.count("st.global.v4.b32") == 128 * 128 * 2 // 16 // 128
    assert "ld.global.b32" not in epi_text, "C is read only in coalesced 16-byte chunks"
