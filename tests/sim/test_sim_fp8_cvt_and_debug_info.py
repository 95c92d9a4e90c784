"""cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} (every fp8 byte, both halves) and PTX debug information
(.file, .loc, DWARF .section blocks), which the simulator skips as ptxas accepts it."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen import sim
from ptxgen.sim import HazardError

from sim_util import kernel

CVT = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pIn];
    mul.wide.u32 %rd1, %r0, 2;
    add.u64 %rd0, %rd0, %rd1;
    ld.global.b16 %h0, [%rd0];
    cvt.rn.MODS.f16x2.FMT %r1, %h0;
    ld.param.u64 %rd2, [pOut];
    mul.wide.u32 %rd3, %r0, 4;
    add.u64 %rd2, %rd2, %rd3;
    st.global.b32 [%rd2], %r1;
    ret;"""


def convert(fmt: str, pairs: np.ndarray, relu: bool = False) -> np.ndarray:
    ptx = kernel(CVT.replace("MODS.", "relu." if relu else "").replace("FMT", fmt),
                 params=".param .u64 pOut, .param .u64 pIn").replace(".target sm_80", ".target sm_90")
    out = np.zeros(len(pairs), dtype=np.uint32)
    sim.launch(ptx, "k", block=(len(pairs),), args=[out, pairs.astype(np.uint16)])
    return out


@pytest.mark.parametrize("fmt,dtype", [("e4m3x2", ml_dtypes.float8_e4m3fn), ("e5m2x2", ml_dtypes.float8_e5m2)])
def test_every_fp8_byte_converts_exactly_in_both_halves(fmt, dtype):
    lo = np.arange(256, dtype=np.uint16)
    hi = (lo * 37 + 11) % 256  # a different byte in the upper half of each pair
    got = convert(fmt, (hi << 8) | lo)
    for half, src in ((got & 0xFFFF, lo), (got >> 16, hi)):
        want = src.astype(np.uint8).view(dtype).astype(np.float32)
        value = half.astype(np.uint16).view(np.float16).astype(np.float32)
        nan = np.isnan(want)
        np.testing.assert_array_equal(value[~nan], want[~nan])  # exact: every fp8 value is an f16
        assert (half[nan] == 0x7FFF).all()


def test_upper_byte_goes_to_the_upper_half():
    # e4m3 0x38 = 1.0 and 0x40 = 2.0: a = 0x3840 gives d = {f16 1.0 (upper), f16 2.0 (lower)}
    assert convert("e4m3x2", np.array([0x3840]))[0] == 0x3C004000


def test_relu_clamps_negatives_but_not_nan():
    # e4m3 0xB8 = -1.0, 0x7F = NaN
    got = convert("e4m3x2", np.array([0xB838, 0x7FB8]), relu=True)
    assert list(got) == [0x00003C00, 0x7FFF0000]


DEBUG = """//
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pOut)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<4>;
	.loc	1 13 0                          // kernels.py:13:0
	mov.u32 %r0, %tid.x;
	.loc	1 14 2
	ld.param.u64 %rd0, [pOut];
	mul.wide.u32 %rd1, %r0, 4;
	add.u64 %rd0, %rd0, %rd1;
	st.global.u32 [%rd0], %r0;
	BAD
	ret;
}
	.file	1 "/src/kernels.py"
	.section	.debug_abbrev
	{
.b8 1                                   // Abbreviation Code
.b8 17
	}
	.section	.debug_macinfo	{	}
"""


def test_debug_information_is_skipped_and_line_numbers_kept():
    out = np.zeros(32, dtype=np.uint32)
    sim.launch(DEBUG.replace("\tBAD\n", ""), "k", block=(32,), args=[out])
    np.testing.assert_array_equal(out, np.arange(32))
    with pytest.raises(HazardError, match="line 16"):  # the stray token is still found, on its own line
        sim.launch(DEBUG.replace("BAD", "bogus.op %r1;"), "k", block=(32,), args=[out])
