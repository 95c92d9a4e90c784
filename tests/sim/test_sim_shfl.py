"""shfl.sync: every mode against the PTX ISA's pseudocode, written out here per lane in plain
Python (not the simulator's vectorised form), plus the membermask hazards."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import sim
from ptxgen.sim import HazardError

from sim_util import kernel

BODY = """
    mov.u32 %r0, %tid.x;
    mul.lo.u32 %r1, %r0, 7;
    add.u32 %r1, %r1, 1000;             // each lane's value: 1000 + 7 * tid
    shfl.sync.MODE.b32 %r2|%p1, %r1, B, C, MASK;
    selp.u32 %r3, 1, 0, %p1;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r0, 8;
    add.u64 %rd0, %rd0, %rd1;
    st.global.v2.u32 [%rd0], {%r2, %r3};
    ret;"""


def run(mode: str, b: int, c: int, mask: int = 0xFFFFFFFF, threads: int = 64) -> np.ndarray:
    ptx = kernel(BODY.replace("MODE", mode).replace("B,", f"{b},").replace("C,", f"{c},")
                 .replace("MASK", str(mask - (1 << 32) if mask >= 1 << 31 else mask)))
    out = np.full((threads, 2), 0xDEAD, dtype=np.uint32)
    sim.launch(ptx, "k", block=(threads,), args=[out])
    return out


def expected(mode: str, b: int, c: int, threads: int = 64) -> np.ndarray:
    """The ISA's pseudocode, lane by lane."""
    out = np.zeros((threads, 2), dtype=np.uint32)
    cval, seg = c & 0x1F, (c >> 8) & 0x1F
    for t in range(threads):
        lane = t % 32
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        bb = b & 0x1F
        if mode == "up":
            j, pval = lane - bb, lane - bb >= max_lane
        elif mode == "down":
            j, pval = lane + bb, lane + bb <= max_lane
        elif mode == "bfly":
            j, pval = lane ^ bb, (lane ^ bb) <= max_lane
        else:
            j = min_lane | (bb & ~seg)
            pval = j <= max_lane
        if not pval:
            j = lane
        out[t] = (1000 + 7 * (t - lane + j), int(pval))
    return out


@pytest.mark.parametrize("mode,b,c", [
    ("idx", 0, 31),          # Triton's broadcast of lane 0: shfl.sync.idx.b32 d, a, 0, 31, -1
    ("idx", 5, 31), ("idx", 37, 31),  # b is taken modulo 32
    ("up", 1, 0), ("up", 4, 0), ("down", 1, 31), ("down", 16, 31),
    ("bfly", 1, 31), ("bfly", 16, 31),
    ("idx", 3, 0x181F),      # segments of 8 lanes (segmask 0x18): lane 3 of each segment
    ("down", 2, 0x1807),     # down within 8-lane segments, clamped at each segment's last lane
])
def test_modes_follow_the_isa(mode, b, c):
    np.testing.assert_array_equal(run(mode, b, c), expected(mode, b, c))


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from(["up", "down", "bfly", "idx"]), b=st.integers(0, 40),
       clamp=st.integers(0, 31), seg=st.sampled_from([0, 0x10, 0x18, 0x1C, 0x1E, 0x1F]))
def test_any_operands_follow_the_isa(mode, b, clamp, seg):
    c = (seg << 8) | clamp
    np.testing.assert_array_equal(run(mode, b, c), expected(mode, b, c))


def test_a_lane_outside_the_membermask_is_a_hazard():
    with pytest.raises(HazardError, match="not in its membermask"):
        run("idx", 0, 31, mask=0x0000FFFF)


GUARDED = """
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p2, %r0, 16;           // lanes 0-15 execute the shfl (a predicated instruction)
    @%p2 shfl.sync.idx.b32 %r2, %r0, SRC, 31, MASK;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r0, 4;
    add.u64 %rd0, %rd0, %rd1;
    @%p2 st.global.u32 [%rd0], %r2;
    ret;"""


def test_half_a_warp_with_its_own_membermask_is_fine_and_reading_outside_it_is_not():
    ok = kernel(GUARDED.replace("SRC", "15").replace("MASK", "65535"))
    out = np.full(32, 7, dtype=np.uint32)
    sim.launch(ok, "k", block=(32,), args=[out])
    np.testing.assert_array_equal(out, [15] * 16 + [7] * 16)
    bad = kernel(GUARDED.replace("SRC", "20").replace("MASK", "65535"))
    with pytest.raises(HazardError, match="reads lane 20"):
        sim.launch(bad, "k", block=(32,), args=[np.zeros(32, np.uint32)])
    missing = kernel(GUARDED.replace("SRC", "0").replace("MASK", "-1"))
    with pytest.raises(HazardError, match="in shfl.sync's membermask .* but does not execute it"):
        sim.launch(missing, "k", block=(32,), args=[np.zeros(32, np.uint32)])
