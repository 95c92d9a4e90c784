"""tcgen05.cp (shared memory -> tensor memory) per shape, its completion through tcgen05.commit, and
cp -> mma pipelining (docs/ptx_facts/tcgen05.md §12g). Source row r lands in lane L0 + r, byte j in
column j / 4 (byte j % 4); .32x128b.warpx4 fills all four lane quarters."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import HEADER, image_kmajor, smem_desc


def cp_kernel(cp_line: str, ncols: int, wait: bool = True) -> str:
    """Copy pIn (8 KiB) to shared buf; thread 0 issues `cp_line` ([%r10 + ...] is the TMEM base) and a
    commit; everyone waits; each warp reads its quarter's `ncols` columns; out[lane][col]."""
    copy = "".join(f"    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4+{2048 * j}];\n"
                   f"    st.shared.v4.u32 [%r3+{2048 * j}], {{%r4, %r5, %r6, %r7}};\n" for j in range(4))
    regs = ", ".join(f"%d{i}" for i in range(ncols))
    stores = "".join(f"    st.global.b32 [%rd7+{4 * i}], %d{i};\n" for i in range(ncols))
    wait_text = """WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [bar], 0;
    @!%p5 bra WAIT;
    tcgen05.fence::after_thread_sync;
""" if wait else ""
    return HEADER + f""".shared .align 1024 .b8 buf[8192];
.shared .align 8 .b64 bar;
.shared .align 4 .b32 tptr;
.visible .entry k(.param .u64 pOut, .param .u64 pIn)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<64>;
    .reg .b64 %rd<16>;
    .reg .b32 %d<{ncols}>;
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pOut];
    ld.param.u64 %rd1, [pIn];
    mov.u32 %r2, buf;
    shl.b32 %r1, %r0, 4;
    add.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd3, %r0, 16;
    add.u64 %rd4, %rd1, %rd3;
{copy}    fence.proxy.async.shared::cta;
    setp.lt.u32 %p3, %r0, 32;
    setp.eq.u32 %p4, %r0, 0;
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr], 32;
    @%p4 mbarrier.init.shared::cta.b64 [bar], 1;
    bar.sync 0;
    ld.shared.b32 %r10, [tptr];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    @%p4 {cp_line}
    @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
{wait_text}    shr.u32 %r12, %r0, 5;
    shl.b32 %r12, %r12, 21;
    add.u32 %r11, %r10, %r12;
    tcgen05.ld.sync.aligned.32x32b.x{ncols}.b32 {{{regs}}}, [%r11];
    tcgen05.wait::ld.sync.aligned;
    mul.wide.u32 %rd6, %r0, {4 * ncols};
    add.u64 %rd7, %rd0, %rd6;
{stores}    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 32;
    ret;
}}
"""


def _run(ptx: str, image: np.ndarray, ncols: int) -> np.ndarray:
    out = np.zeros((128, ncols), np.uint32)
    sim.launch(ptx, "k", block=(128,), args=[out, np.concatenate([image, np.zeros(8192 - image.size, np.uint8)])])
    return out


def _rows(rows: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (rows, width)).astype(np.uint8)


@pytest.mark.parametrize("shape,width,swizzle", [("128x256b", 32, "none"), ("128x256b", 32, "32B"),
                                                 ("128x128b", 16, "64B")])
def test_128_lane_shapes(shape, width, swizzle):
    src = _rows(128, width, 1)
    image, lbo, sbo = image_kmajor(src, swizzle, 8192)
    desc = smem_desc(0, lbo, sbo, swizzle)
    out = _run(cp_kernel(f"tcgen05.cp.cta_group::1.{shape} [%r10+8], {desc:#x};", 16), image, 16)
    np.testing.assert_array_equal(out[:, 8:8 + width // 4], src.view(np.uint32))


def test_4x256b_at_lane_4():
    src = _rows(4, 32, 2)
    image, lbo, sbo = image_kmajor(np.concatenate([src, np.zeros((4, 32), np.uint8)]), "none", 8192)
    out = _run(cp_kernel(f"tcgen05.cp.cta_group::1.4x256b [%r10+{4 << 16}], {smem_desc(0, lbo, sbo, 'none'):#x};", 8),
               image, 8)
    np.testing.assert_array_equal(out[4:8], src.view(np.uint32))
    assert not out[:4].any() and not out[8:].any()


def test_32x128b_warpx4_fills_every_quarter_triton_descriptor():
    """Triton's scale-factor copy: no swizzle, SBO = 128 B (hi word 0x00004008), 32 dense 16-byte rows."""
    src = _rows(32, 16, 3)
    desc = 0x00004008 << 32 | (0 >> 4)
    out = _run(cp_kernel(f"tcgen05.cp.cta_group::1.warpx4.32x128b [%r10+0], {desc:#x};", 4),
               src.reshape(-1), 4)
    for q in range(4):
        np.testing.assert_array_equal(out[32 * q:32 * q + 32], src.view(np.uint32))


def test_reading_the_destination_before_the_commit_is_observed_is_a_hazard():
    src = _rows(128, 16, 4)
    image, lbo, sbo = image_kmajor(src, "none", 8192)
    ptx = cp_kernel(f"tcgen05.cp.cta_group::1.128x128b [%r10], {smem_desc(0, lbo, sbo, 'none'):#x};", 4, wait=False)
    with pytest.raises(sim.HazardError, match="tcgen05.cp") as e:
        _run(ptx, image, 4)
    assert e.value.kind == "async-pending"


@pytest.mark.parametrize("cast", ["02_13", "01_23"])
def test_64x128b_warpx2_sends_each_half_to_a_warp_pair(cast):
    """PTX ISA §9.7.16.9.2: ::02_13 pairs warps 0/2 and 1/3, ::01_23 warps 0/1 and 2/3, each pair
    receiving half of the 64 rows (which half: CuTe's UTCCP traits, docs §12g)."""
    src = _rows(64, 16, 5)
    image, lbo, sbo = image_kmajor(src, "none", 8192)
    out = _run(cp_kernel(f"tcgen05.cp.cta_group::1.64x128b.warpx2::{cast} [%r10+4], "
                         f"{smem_desc(0, lbo, sbo, 'none'):#x};", 8), image, 8)
    words = src.view(np.uint32)
    quarters = {"02_13": [0, 1, 0, 1], "01_23": [0, 0, 1, 1]}[cast]     # source half per lane quarter
    for q, half in enumerate(quarters):
        np.testing.assert_array_equal(out[32 * q:32 * q + 32, 4:8], words[32 * half:32 * half + 32])
    assert not out[:, :4].any()


def shift_kernel(first_wait: bool = True) -> str:
    """Fill columns 8..15 of all 128 lanes by a .128x256b copy, wait for it, shift the 32 lanes of
    quarter 1 down (thread 0), wait again, read everything back."""
    ptx = cp_kernel("tcgen05.cp.cta_group::1.128x256b [%r10+8], DESC;", 16)
    shift = """    @%p4 tcgen05.shift.cta_group::1.down [%r13];
    @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
WAIT2:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [bar], 1;
    @!%p5 bra WAIT2;
    tcgen05.fence::after_thread_sync;
"""
    prologue = "    add.u32 %r13, %r10, 2097160;\n"           # lane 32, column 8
    anchor = "    tcgen05.fence::after_thread_sync;\n"
    if first_wait:
        return ptx.replace(anchor, anchor + prologue + shift, 1)
    head, tail = ptx.split("WAIT:", 1)
    return head + prologue + shift.replace("WAIT2", "WAITX").replace("], 1;", "], 0;") + "WAIT:" + tail


def test_shift_moves_lanes_down_by_one_within_32():
    src = _rows(128, 32, 6)
    image, lbo, sbo = image_kmajor(src, "none", 8192)
    out = _run(shift_kernel().replace("DESC", f"{smem_desc(0, lbo, sbo, 'none'):#x}"), image, 16)
    want = src.view(np.uint32).copy()
    want[33:64] = want[32:63].copy()                       # lanes 32..62 -> 33..63; lane 32 kept
    np.testing.assert_array_equal(out[:, 8:16], want)


def test_shift_after_a_cp_without_a_wait_is_a_hazard():
    """cp -> shift is not among the ISA's pipelined pairs (§9.7.16.6.2)."""
    src = _rows(128, 32, 7)
    image, lbo, sbo = image_kmajor(src, "none", 8192)
    with pytest.raises(sim.HazardError, match="tcgen05.shift") as e:
        _run(shift_kernel(first_wait=False).replace("DESC", f"{smem_desc(0, lbo, sbo, 'none'):#x}"), image, 16)
    assert e.value.kind == "async-pending"


def test_reading_shifted_lanes_before_the_commit_is_observed_is_a_hazard():
    """shift -> tcgen05.ld is not pipelined: the load must wait for the shift's commit."""
    src = _rows(128, 32, 9)
    image, lbo, sbo = image_kmajor(src, "none", 8192)
    ptx = shift_kernel().replace("DESC", f"{smem_desc(0, lbo, sbo, 'none'):#x}")
    head, tail = ptx.split("WAIT2:", 1)
    ptx = head + tail.split("@!%p5 bra WAIT2;", 1)[1]
    with pytest.raises(sim.HazardError, match="tcgen05.shift") as e:
        _run(ptx, image, 16)
    assert e.value.kind == "async-pending"


def test_shift_at_a_lane_not_a_multiple_of_32_is_refused():
    src = _rows(128, 32, 8)
    image, lbo, sbo = image_kmajor(src, "none", 8192)
    ptx = shift_kernel().replace("2097160", str((16 << 16) + 8)).replace("DESC", f"{smem_desc(0, lbo, sbo, 'none'):#x}")
    with pytest.raises(sim.HazardError, match="multiple of 32") as e:
        _run(ptx, image, 16)
    assert e.value.kind == "tmem"


@pytest.mark.parametrize("form", ["tcgen05.cp.cta_group::1.64x128b [%r10], 0;",
                                  "tcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64 [%r10], 0;",
                                  "tcgen05.cp.cta_group::1.128x128b.b8x16.b6x16_p32 [%r10], 0;",
                                  "tcgen05.cp.cta_group::1.32x128b [%r10], 0;"])
def test_unsimulated_forms_are_refused(form):
    with pytest.raises(sim.HazardError) as e:
        _run(cp_kernel(form, 4), np.zeros(16, np.uint8), 4)
    assert e.value.kind == "unsupported"
