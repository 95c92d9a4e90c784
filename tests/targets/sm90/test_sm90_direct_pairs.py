"""Issue 21 point 5: the sm_90a direct epilogue stores each fragment's two adjacent columns with one
vector store (st.global.v2.f32 for f32) where N is even and C's rows keep a pair aligned, and one
by one otherwise; both run correct on the simulator (tests/harness.py, elementwise against float64)."""
from __future__ import annotations

import re
from collections import Counter

import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from tests import harness

ARCH = "sm_90a"


def direct(block=(128, 128, 64), consumers=2, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=2, consumers=consumers, epilogue_via_smem=False, **kw)


def stores(g: Gemm, s: Schedule) -> Counter:
    return Counter(re.findall(r"\bst\.global[\w.:]*", ptxgen.compile(g, s, arch=ARCH).ptx))


def test_f32_pairs_are_one_v2_store_each():
    g = Gemm(512, 512, 256, dtype="bf16", out_dtype="f32", a_layout="row", b_layout="col")
    s = direct((128, 256, 64))
    # 64 rows x 256 columns per consumer warpgroup / 128 threads = 128 elements per thread: 64 pairs
    assert stores(g, s) == Counter({"st.global.v2.f32": 64})


@pytest.mark.parametrize("n, ldc, scalar", [(250, None, False), (251, None, True), (250, 251, True)])
def test_pairs_only_where_n_is_even_and_rows_aligned(n, ldc, scalar):
    g = Gemm(128, n, 64, dtype="f16", out_dtype="f32", ldc=ldc)
    found = stores(g, direct((128, 128, 64)))
    assert ("st.global.f32" in found) == scalar and ("st.global.v2.f32" in found) == (not scalar), found


@pytest.mark.parametrize("g", [
    Gemm(200, 250, 128, dtype="f16", out_dtype="f32",
         epilogue=Epilogue(alpha=0.5, beta=0.75, bias="col", scale="col", activation="relu")),
    Gemm(136, 251, 96, dtype="bf16", out_dtype="f32", epilogue=Epilogue(beta=1.0, bias="row")),
    Gemm(130, 260, 64, dtype="f16", out_dtype="f16", epilogue=Epilogue(beta=0.5, bias="col")),
    Gemm(130, 250, 64, dtype="s8", out_dtype="s32"),
], ids=["f32-beta-col-vectors", "f32-odd-n-scalar", "f16-packed", "s32"])
def test_paired_and_scalar_direct_stores_match_numpy(g):
    assert harness.run(g, direct((128, 128, 64)), ARCH, seed=5).result.ok
