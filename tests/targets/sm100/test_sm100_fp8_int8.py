"""The sm_100a kernel's 8-bit dense kinds (ptxgen/targets/sm100/kinds.py): e4m3/e5m2 through
tcgen05.mma.kind::f8f6f4 (f32 accumulators) and s8/u8 through kind::i8 (s32 accumulators, stored
exactly, quantised to s8/u8 or dequantised through the f32 epilogue). Proven on the simulator
against float64 numpy (never-zero inputs, poisoned C) with edges in M, N and K and persistent walks
of several tiles per CTA (docs/ptx_facts/tcgen05.md §12c, §12e); mixed fp8 (Gemm.b_dtype) with B's
own type code in the descriptor."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.errors import ScheduleError
from ptxgen.targets.sm100.kinds import dense_idesc

from tests import harness
from tests.targets.sm100.common import tc, tn

ARCH = "sm_100a"


@pytest.mark.parametrize("g, s", [
    (tn(130, 70, 96, "e4m3", "f32"), tc((128, 64, 64))),                # edges in M, N, K; 4 tiles over 2 CTAs
    (tn(200, 136, 160, "e5m2", "bf16"), tc((128, 128, 128), 3)),        # 4 tiles, BK 128 (4 MMAs per k-tile)
    (tn(70, 40, 80, "e4m3", "f16"), tc((64, 32, 32), sms=1)),           # M = 64, K edge inside a k-tile
    (tn(130, 70, 96, "s8", "s32"), tc((128, 64, 64))),                  # exact s32
    (tn(70, 48, 112, "u8", "f16"), tc((64, 48, 64), sms=1)),            # kind::i8 at M = 64, N = 48, dequantised
    (tn(130, 40, 64, "s8", "s8", epilogue=Epilogue(alpha=0.01, bias="col")), tc((128, 32, 32), 3)),  # quantised
], ids=["e4m3-edges", "e5m2-bf16-bk128", "e4m3-m64", "s8-s32", "u8-f16-m64", "s8-quant"])
def test_8bit_kinds_match_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.m + g.k)


def test_the_kernels_issue_the_8bit_kinds_with_their_descriptors():
    fp8 = ptxgen.compile(tn(256, 256, 256, "e5m2", "f32"), tc((128, 128, 64)), arch=ARCH)
    int8 = ptxgen.compile(tn(256, 256, 256, "u8", "s32"), tc((128, 128, 64)), arch=ARCH)
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in fp8.ptx and "kind::i8" in int8.ptx
    # Triton 3.9's e4m3 128x128 descriptor is 0x08200010 (tcgen05.md §12e); e5m2 sets both type codes to 1,
    # u8 keeps code 0 with an s32 D (2 in bits 5-4)
    assert dense_idesc("e4m3", 128, 128, False, False) == 0x08200010
    assert f"{dense_idesc('e5m2', 128, 128, False, False)}" in fp8.ptx
    assert dense_idesc("u8", 128, 128, False, False) == 0x08200020 and "136314912" in int8.ptx


@pytest.mark.parametrize("g, block, field, words", [
    (tn(256, 256, 256, "s8", "s32"), (64, 40, 64), "schedule.block.BN", "kind::i8"),  # f16 takes N 40 at M 64
    (tn(256, 256, 256, "e4m3", "s32"), (128, 64, 64), "gemm.out_dtype", "float output"),
    (Gemm(256, 256, 256, dtype="s8", out_dtype="s32", a_layout="row", b_layout="row"), (128, 64, 64),
     "gemm.layout", "K-major only"),
    (tn(256, 256, 256, "e4m3", "f32"), (128, 64, 48), "schedule.block.BK", "K = 32"),
])
def test_8bit_rules_name_the_field(g, block, field, words):
    with pytest.raises(ScheduleError) as e:
        ptxgen.compile(g, tc(block), arch=ARCH)
    assert e.value.field == field and words in str(e.value), str(e.value)


# -- mixed fp8: Gemm(dtype=..., b_dtype=...) ----------------------------------------------------------
@pytest.mark.parametrize("a_dtype, b_dtype, out", [("e4m3", "e5m2", "f32"), ("e5m2", "e4m3", "bf16")])
def test_mixed_fp8_matches_numpy(a_dtype, b_dtype, out):
    g = tn(130, 72, 96, a_dtype, out, b_dtype=b_dtype)
    checked = harness.check(g, tc((128, 64, 64)), ARCH, seed=11)
    names = {"e5m2": "float8_e5m2", "e4m3": "float8_e4m3fn"}
    assert (str(checked.ops.a.dtype), str(checked.ops.b.dtype)) == (names[a_dtype], names[b_dtype])


def test_mixed_fp8_descriptor_gives_b_its_own_type():
    """A e4m3 (code 0), B e5m2 (code 1 in bits 12-10): read as e4m3 the B bytes give a wrong product."""
    g, s = tn(130, 72, 96, "e4m3", "f32", b_dtype="e5m2"), tc((128, 64, 64), sms=1)
    k = ptxgen.compile(g, s, arch=ARCH)
    right = dense_idesc("e4m3", 128, 64, False, False, "e5m2")
    assert right == dense_idesc("e4m3", 128, 64, False, False) | 1 << 10 and f" {right};" in k.ptx
    planted = k.ptx.replace(f" {right};", f" {dense_idesc('e4m3', 128, 64, False, False)};")
    assert not harness.run(k, ptx=planted, seed=11).ok


@pytest.mark.parametrize("make, arch, field", [
    (lambda: tn(256, 256, 256, "e4m3", "f32", b_dtype="f16"), ARCH, "gemm.b_dtype"),
    (lambda: Gemm(256, 256, 256, dtype="e4m3", b_dtype="e5m2"), "sm_90a", "gemm.b_dtype"),
])
def test_mixed_dtypes_outside_fp8_on_sm100_are_refused(make, arch, field):
    with pytest.raises(ScheduleError) as e:
        g = make()
        ptxgen.compile(g, Schedule(block=(128, 128, 64), instruction="wgmma") if arch == "sm_90a" else tc((128, 64, 64)),
                       arch=arch)
    assert e.value.field == field, e.value
