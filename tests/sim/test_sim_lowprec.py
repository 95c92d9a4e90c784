"""sm_100a low-precision formats (ptxgen.sim.lowprec) and the packed cvt forms, against values
worked out by hand from the PTX ISA's format definitions (docs/ptx_facts/sm100_formats.md) and,
where ml_dtypes has the type, against ml_dtypes for every code."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen import sim
from ptxgen.sim import HazardError
from ptxgen.sim import lowprec as lp

from sim_util import kernel

ML = {"e2m1": "float4_e2m1fn", "e2m3": "float6_e2m3fn", "e3m2": "float6_e3m2fn", "e4m3": "float8_e4m3fn",
      "e5m2": "float8_e5m2", "ue8m0": "float8_e8m0fnu"}


def test_e2m1_values_by_hand():
    # S.EE.M, bias 1: E=0 is subnormal 0.5*M; else (1 + M/2) * 2^(E-1). Codes 8..15 are negatives.
    assert list(lp.decode("e2m1", range(8))) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert list(lp.decode("e2m1", range(8, 16))) == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


def test_fp6_and_scale_values_by_hand():
    assert lp.decode("e2m3", [0b000001, 0b001000, 0b011111, 0b100001]).tolist() == [0.125, 1.0, 7.5, -0.125]
    assert lp.decode("e3m2", [0b000001, 0b001100, 0b011111]).tolist() == [0.0625, 1.0, 28.0]
    assert lp.decode("ue8m0", [0, 127, 128, 254]).tolist() == [2.0 ** -127, 1.0, 2.0, 2.0 ** 127]
    assert np.isnan(lp.decode("ue8m0", [255])[0])
    assert lp.decode("ue4m3", [0x38, 0x7E, 0x01]).tolist() == [1.0, 448.0, 2.0 ** -9]
    assert np.isnan(lp.decode("ue4m3", [0x7F])[0])
    assert lp.max_finite("e4m3") == 448 and lp.max_finite("e5m2") == 57344


@pytest.mark.parametrize("name", sorted(ML))
def test_every_code_matches_ml_dtypes(name):
    bits = lp.format_of(name).bits
    codes = np.arange(1 << bits, dtype=np.uint8)
    want = codes.view(getattr(ml_dtypes, ML[name])).astype(np.float64)
    np.testing.assert_array_equal(lp.decode(name, codes), want)


@pytest.mark.parametrize("name", sorted(ML))
def test_encode_rounds_like_ml_dtypes_within_range(name):
    rng = np.random.default_rng(1)
    if name == "ue8m0":
        x = np.exp2(rng.uniform(-120, 120, 4000))
    else:
        x = rng.uniform(-1, 1, 4000) * lp.max_finite(name)
    want = x.astype(getattr(ml_dtypes, ML[name])).astype(np.float64)
    np.testing.assert_array_equal(lp.decode(name, lp.encode(name, x)), want)


def test_encode_ties_to_even_and_saturates():
    assert lp.encode("e2m1", [2.5, 5.0, 0.25, 100.0, -100.0, np.inf]).tolist() == [4, 6, 0, 7, 15, 7]
    assert lp.encode("e4m3", [1e6, np.nan]).tolist() == [0x7E, 0x7F]
    assert lp.encode("e4m3", [1e6], satfinite=False).tolist() == [0x7F]       # overflow -> NaN
    assert lp.encode("e5m2", [1e6], satfinite=False).tolist() == [0x7C]       # overflow -> inf
    assert lp.encode("ue8m0", [3.0], rounding="rz").tolist() == [128]         # 2^1
    assert lp.encode("ue8m0", [3.0], rounding="rp").tolist() == [129]         # 2^2
    with pytest.raises(ValueError, match="unsigned"):
        lp.encode("ue8m0", [-1.0], rounding="rz")
    with pytest.raises(ValueError, match="unknown low-precision format"):
        lp.decode("e9m9", [0])


def test_fp4_packing_puts_the_lower_index_in_the_low_nibble():
    # 1.0 = code 2, 6.0 = code 7: elements [1.0, 6.0] pack to 0x72.
    assert lp.pack_fp4([[2, 7]]).tolist() == [[0x72]]
    assert lp.unpack_fp4([[0x72, 0x9F]]).tolist() == [[2, 7, 0xF, 0x9]]


PAIR = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pIn];
    mul.wide.u32 %rd1, %r0, 8;
    add.u64 %rd0, %rd0, %rd1;
    ld.global.f32 %f0, [%rd0];
    ld.global.f32 %f1, [%rd0+4];
    CVT
    mov.b32 %r3, %r1;             // a copy by the register's own type: storage must match it
    mov.b32 %r1, %r3;
    ld.param.u64 %rd2, [pOut];
    mul.wide.u32 %rd3, %r0, 4;
    add.u64 %rd2, %rd2, %rd3;
    st.global.b32 [%rd2], %r1;
    ret;"""


#: the 16-bit result copied by its own type (a wrong storage type shows), then widened to %r1
TO_U32 = "\n    mov.b16 %h5, %h0;\n    cvt.u32.u16 %r1, %h5;"


def run_pair(cvt: str, a: list[float], b: list[float], target: str = "sm_100a", regs: str = "") -> np.ndarray:
    ptx = kernel(PAIR.replace("CVT", cvt), params=".param .u64 pOut, .param .u64 pIn", regs=regs)
    ptx = ptx.replace(".version 7.8\n.target sm_80", f".version 8.7\n.target {target}")
    pairs = np.stack([np.asarray(a, np.float32), np.asarray(b, np.float32)], axis=1).reshape(-1)
    out = np.zeros(len(a), dtype=np.uint32)
    sim.launch(ptx, "k", block=(len(a),), args=[out, pairs])
    return out


def test_cvt_e2m1x2_puts_a_in_the_upper_nibble():
    # a = 1.0 (code 2) -> bits 7:4, b = -6.0 (code 15) -> bits 3:0; 2.5 ties to even 2.0 (code 4).
    got = run_pair("cvt.rn.satfinite.e2m1x2.f32 %rc0, %f0, %f1;\n    cvt.u32.u8 %r1, %rc0;",
                   [1.0, 2.5, 99.0], [-6.0, 0.5, -0.0], regs="    .reg .b8 %rc<4>;\n")
    assert got.tolist() == [0x2F, 0x41, 0x78]


def test_cvt_fp6_pairs_and_relu():
    got = run_pair("cvt.rn.satfinite.e2m3x2.f32 %h0, %f0, %f1;" + TO_U32, [1.0, 7.5], [-0.125, 100.0])
    assert got.tolist() == [0x0821, 0x1F1F]
    got = run_pair("cvt.rn.satfinite.relu.e3m2x2.f32 %h0, %f0, %f1;" + TO_U32, [-3.0], [28.0])
    assert got.tolist() == [0x001F]


def test_cvt_ue8m0x2_rounding_and_back_to_bf16x2():
    got = run_pair("cvt.rp.satfinite.ue8m0x2.f32 %h0, %f0, %f1;" + TO_U32, [3.0], [0.5])
    assert got.tolist() == [(129 << 8) | 126]
    got = run_pair("cvt.rz.satfinite.ue8m0x2.f32 %h0, %f0, %f1;\n    cvt.rn.bf16x2.ue8m0x2 %r1, %h0;", [3.0], [1.0])
    assert got.tolist() == [0x40000000 | 0x3F80]          # bf16 2.0 upper, 1.0 lower


def test_cvt_f16x2_from_e2m1x2():
    got = run_pair("cvt.rn.satfinite.e2m1x2.f32 %rc0, %f0, %f1;\n    cvt.rn.f16x2.e2m1x2 %r1, %rc0;",
                   [6.0], [-0.5], regs="    .reg .b8 %rc<4>;\n")
    assert got.tolist() == [(0x4600 << 16) | 0xB800]       # f16 6.0 upper, -0.5 lower


def test_cvt_lowprec_is_refused_before_sm_100a():
    with pytest.raises(HazardError, match="needs `.target sm_100a`"):
        run_pair("cvt.rn.satfinite.e2m1x2.f32 %rc0, %f0, %f1;\n    cvt.u32.u8 %r1, %rc0;", [1.0], [1.0],
                 target="sm_90a", regs="    .reg .b8 %rc<4>;\n")


def test_cvt_ue8m0x2_needs_a_directed_rounding():
    with pytest.raises(HazardError, match="needs exactly one of .rz/.rp"):
        run_pair("cvt.rn.satfinite.ue8m0x2.f32 %h0, %f0, %f1;" + TO_U32, [1.0], [1.0])


def test_cvt_f32_pairs_to_fp8_saturate():
    # e4m3: 1.0 = 0x38, -896 saturates to -448 = 0xFE; e5m2: inf saturates to 57344 = 0x7B, 0.5 = 0x38
    got = run_pair("cvt.rn.satfinite.e4m3x2.f32 %h0, %f0, %f1;" + TO_U32, [1.0, np.nan], [-896.0, 0.0])
    assert got.tolist() == [0x38FE, 0x7F00]
    got = run_pair("cvt.rn.satfinite.e5m2x2.f32 %h0, %f0, %f1;" + TO_U32, [np.inf], [0.5])
    assert got.tolist() == [0x7B38]
    got = run_pair("cvt.rn.satfinite.relu.e4m3x2.f32 %h0, %f0, %f1;" + TO_U32, [-1.0], [-0.0],
                   target="sm_90a")
    assert got.tolist() == [0x0000]


def test_cvt_f16x2_to_e4m3x2_keeps_the_halves_in_order():
    # f16x2 {hi 2.0 = 0x4000, lo -1.0 = 0xBC00} -> e4m3 {0x40, 0xB8}
    got = run_pair("mov.b32 %r2, 0x4000BC00;\n    cvt.rn.satfinite.e4m3x2.f16x2 %h0, %r2;" + TO_U32,
                   [0.0], [0.0])
    assert got.tolist() == [0x40B8]


def test_cvt_to_fp8_needs_sm89_and_satfinite():
    with pytest.raises(HazardError, match="sm_89 or newer"):
        run_pair("cvt.rn.satfinite.e4m3x2.f32 %h0, %f0, %f1;" + TO_U32, [1.0], [1.0], target="sm_80")
    with pytest.raises(HazardError, match="needs .satfinite"):
        run_pair("cvt.rn.e4m3x2.f32 %h0, %f0, %f1;" + TO_U32, [1.0], [1.0])
