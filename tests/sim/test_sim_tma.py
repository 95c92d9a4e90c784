"""TMA (cp.async.bulk.tensor), plain bulk copies and sim.TensorMap on the simulator.

Expected shared-memory layouts are computed here from the swizzle rule written out independently
(16-byte chunk index XOR address bits 7.., i.e. CUTLASS Swizzle<3,4,3> for 128B); expected
global results are numpy slices of the tensor with the out-of-bounds part zero/NaN or clipped."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import sim

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"
SPAN_MASK = {"none": 0, "32B": 1, "64B": 3, "128B": 7}


def physical(offset: np.ndarray, swizzle: str) -> np.ndarray:
    """Shared byte where TMA puts logical byte `offset` of a box at a 1024-aligned base."""
    return offset ^ (((offset >> 7) & SPAN_MASK[swizzle]) << 4)


def expected_box(a: np.ndarray, start, box, fill=0) -> np.ndarray:
    """a[start:start+box] with out-of-bounds elements = fill."""
    out = np.full(box, fill, dtype=a.dtype)
    src, dst = [], []
    for s, b, n in zip(start, box, a.shape):
        idx = np.arange(s, s + b)
        ok = (idx >= 0) & (idx < n)
        src.append(idx[ok])
        dst.append(np.flatnonzero(ok))
    out[np.ix_(*dst)] = a[np.ix_(*src)]
    return out


def coords_params(rank: int) -> str:
    return "".join(f", .param .u32 c{i}" for i in range(rank))


def load_kernel(rank: int, box_bytes: int, expect: int | None = None, wait: bool = True) -> str:
    """Thread 0 TMA-loads a box to smem (1024-aligned) completing on an mbarrier; all threads wait
    on parity 0, then copy the shared bytes *linearly* (raw, still swizzled) to out, 16 per thread."""
    expect = box_bytes if expect is None else expect
    loads = "\n".join(f"    ld.param.u32 %r{10 + i}, [c{i}];" for i in range(rank))
    coords = ", ".join(f"%r{10 + i}" for i in range(rank))
    wait_loop = ("WAIT:\n    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;\n    @!%p1 bra WAIT;\n"
                 if wait else "")
    return HEADER + f""".extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 pOut, .param .align 64 .b8 tmap[128]{coords_params(rank)})
{{
    .reg .pred %p<4>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;
    add.u32 %r2, %r1, {(box_bytes + 1023) // 1024 * 1024};
    setp.eq.u32 %p0, %r0, 0;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    bar.sync 0;
    mov.b64 %rd1, tmap;
    cvta.param.u64 %rd1, %rd1;
{loads}
    @%p0 prefetch.param.tensormap [%rd1];
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], {expect};
    @%p0 cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {{{coords}}}], [%r2];
{wait_loop}    shl.b32 %r3, %r0, 4;
    setp.lt.u32 %p2, %r3, {box_bytes};
    add.u32 %r4, %r1, %r3;
    @%p2 ld.shared.v4.b32 {{%r20, %r21, %r22, %r23}}, [%r4];
    ld.param.u64 %rd4, [pOut];
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    @%p2 st.global.v4.b32 [%rd4], {{%r20, %r21, %r22, %r23}};
    ret;
}}
"""


def tma_load(a: np.ndarray, box, start, swizzle="none", oob_fill="zero", **kw) -> np.ndarray:
    """Run load_kernel; returns the raw shared bytes of the box as they landed."""
    tmap = sim.TensorMap(a, box, swizzle=swizzle, oob_fill=oob_fill)
    nbytes = int(np.prod(box)) * a.dtype.itemsize
    raw = np.zeros(nbytes, dtype=np.uint8)
    coords = [int(c) & 0xFFFFFFFF for c in start[::-1]]
    sim.launch(load_kernel(len(box), nbytes, **kw), "k", block=(max(32, nbytes // 16),),
               args=[raw, tmap, *coords], dynamic_smem=(nbytes + 1023) // 1024 * 1024 + 8)
    return raw


def unswizzle(raw: np.ndarray, swizzle: str, dtype, box) -> np.ndarray:
    logical = raw[physical(np.arange(raw.size), swizzle)]
    return logical.view(dtype).reshape(box)


@pytest.mark.parametrize("swizzle, box", [("none", (8, 24)), ("32B", (16, 16)), ("64B", (16, 32)),
                                          ("128B", (16, 64))])
@pytest.mark.parametrize("start", [(0, 0), (5, 8), (-3, -8), (30, 40)])
def test_tile_load_lands_swizzled_with_zero_fill(swizzle, box, start):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((37, 72)) + 4).astype(np.float16)
    raw = tma_load(a, box, start, swizzle)
    want = expected_box(a, start, box)
    assert np.array_equal(unswizzle(raw, swizzle, np.float16, box), want)
    if swizzle != "none" and box[0] > 1:   # the layout really is permuted
        assert not np.array_equal(raw.view(np.float16).reshape(box), want)


def test_nan_fill_and_rank_3():
    a = np.arange(5 * 6 * 8, dtype=np.float32).reshape(5, 6, 8) + 1
    raw = tma_load(a, (2, 4, 4), (4, 3, 6), oob_fill="nan")
    got = raw.view(np.float32).reshape(2, 4, 4)
    want = expected_box(a, (4, 3, 6), (2, 4, 4), fill=np.nan)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(want).any()
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_strided_view_as_the_tensor():
    big = (np.arange(40 * 96, dtype=np.float32).reshape(40, 96) % 251 + 1).astype(np.float16)
    view = big[3:, 8:72]
    raw = tma_load(view, (8, 64), (30, 0), "128B")
    assert np.array_equal(unswizzle(raw, "128B", np.float16, (8, 64)), expected_box(view, (30, 0), (8, 64)))


def test_end_to_end_128B_swizzle_read_back_with_ld_shared_applying_the_swizzle():
    """Read the tile through the swizzle (as a wgmma-less consumer would) and store it row-major."""
    steps = []
    for i in range(2):
        steps += [f"    add.u32 %r10, %r0, {128 * i};", "    shr.u32 %r11, %r10, 3;", "    and.b32 %r12, %r10, 7;",
                  "    and.b32 %r13, %r11, 7;", "    xor.b32 %r14, %r12, %r13;", "    shl.b32 %r14, %r14, 4;",
                  "    shl.b32 %r15, %r11, 7;", "    add.u32 %r16, %r15, %r14;", "    add.u32 %r16, %r16, %r1;",
                  "    ld.shared.v4.b32 {%r30, %r31, %r32, %r33}, [%r16];", "    shl.b32 %r17, %r12, 4;",
                  "    add.u32 %r17, %r17, %r15;", "    cvt.u64.u32 %rd5, %r17;", "    add.u64 %rd6, %rd4, %rd5;",
                  "    st.global.v4.b32 [%rd6], {%r30, %r31, %r32, %r33};"]
    ptx = HEADER + """.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 pOut, .param .align 64 .b8 tmap[128], .param .u32 c0, .param .u32 c1)
{
    .reg .pred %p<4>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;
    add.u32 %r2, %r1, 4096;
    setp.eq.u32 %p0, %r0, 0;
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    bar.sync 0;
    mov.b64 %rd1, tmap;
    ld.param.u32 %r3, [c0];
    ld.param.u32 %r4, [c1];
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 4096;
    @%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r3, %r4}], [%r2];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra WAIT;
    ld.param.u64 %rd4, [pOut];
""" + "\n".join(steps) + "\n    ret;\n}\n"
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((100, 80)) + 3).astype(np.float16)
    for r0, c0 in [(0, 0), (40, 16), (80, 48)]:
        out = np.full((32, 64), np.nan, dtype=np.float16)
        sim.launch(ptx, "k", block=(128,), args=[out, sim.TensorMap(a, (32, 64), swizzle="128B"), c0, r0],
                   dynamic_smem=4096 + 8)
        assert np.array_equal(out, expected_box(a, (r0, c0), (32, 64)))


# ------------------------------------------------------------------ load hazards
def test_reading_the_destination_before_the_wait_is_async_pending():
    a = np.ones((8, 64), dtype=np.float16)
    tma_load(a, (8, 64), (0, 0))             # fixed twin
    with pytest.raises(sim.HazardError) as e:
        tma_load(a, (8, 64), (0, 0), wait=False)
    assert e.value.kind == "async-pending" and "ld.shared" in e.value.line_text


def test_expecting_more_bytes_than_the_copies_bring_is_a_deadlock():
    a = np.ones((8, 64), dtype=np.float16)
    with pytest.raises(sim.HazardError) as e:
        tma_load(a, (8, 64), (0, 0), expect=2048)
    assert e.value.kind == "deadlock" and "tx-count 2048" in e.value.detail and "1024 bytes" in e.value.detail


# ------------------------------------------------------------------ stores
def store_kernel(box_bytes: int, fence: bool = True, wait_before_overwrite: bool = True,
                 overwrite: bool = False) -> str:
    """Threads copy `src` (raw bytes) linearly into smem with st.shared, then thread 0 TMA-stores the
    box at (c0, c1) and waits for the bulk group."""
    tail = ""
    if overwrite:
        tail = (("    @%p0 cp.async.bulk.wait_group.read 0;\n    bar.sync 0;\n" if wait_before_overwrite else "")
                + "    @%p2 st.shared.v4.b32 [%r4], {%r0, %r0, %r0, %r0};\n")
    return HEADER + f""".extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 pSrc, .param .align 64 .b8 tmap[128], .param .u32 c0, .param .u32 c1)
{{
    .reg .pred %p<4>; .reg .b32 %r<40>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;
    setp.eq.u32 %p0, %r0, 0;
    shl.b32 %r3, %r0, 4;
    setp.lt.u32 %p2, %r3, {box_bytes};
    add.u32 %r4, %r1, %r3;
    ld.param.u64 %rd4, [pSrc];
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    @%p2 ld.global.v4.b32 {{%r20, %r21, %r22, %r23}}, [%rd4];
    @%p2 st.shared.v4.b32 [%r4], {{%r20, %r21, %r22, %r23}};
{"    fence.proxy.async.shared::cta;" if fence else ""}
    bar.sync 0;
    ld.param.u32 %r10, [c0];
    ld.param.u32 %r11, [c1];
    @%p0 cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {{%r10, %r11}}], [%r1];
    @%p0 cp.async.bulk.commit_group;
{tail}    @%p0 cp.async.bulk.wait_group 0;
    ret;
}}
"""


@pytest.mark.parametrize("swizzle", ["none", "128B"])
@pytest.mark.parametrize("start", [(0, 0), (10, 24), (-4, -16)])
def test_tile_store_clips_to_the_tensor(swizzle, start):
    box = (16, 64)
    rng = np.random.default_rng(3)
    raw = (rng.standard_normal(box) + 5).astype(np.float16).view(np.uint8).reshape(-1)
    dst = np.full((20, 80), -7, dtype=np.float16)
    sim.launch(store_kernel(raw.size), "k", block=(128,), args=[raw, sim.TensorMap(dst, box, swizzle=swizzle),
                                                               start[1] & 0xFFFFFFFF, start[0] & 0xFFFFFFFF],
               dynamic_smem=raw.size)
    logical = unswizzle(raw, swizzle, np.float16, box)   # what the box holds, element by element
    want = np.full((20, 80), -7, dtype=np.float16)
    rows, cols = np.arange(start[0], start[0] + 16), np.arange(start[1], start[1] + 64)
    rok, cok = (rows >= 0) & (rows < 20), (cols >= 0) & (cols < 80)
    want[np.ix_(rows[rok], cols[cok])] = logical[np.ix_(rok, cok)]
    assert np.array_equal(dst, want)


def test_store_source_written_without_proxy_fence_is_a_hazard():
    raw = np.ones(2048, dtype=np.uint8)
    dst = np.zeros((16, 64), dtype=np.float16)
    with pytest.raises(sim.HazardError) as e:
        sim.launch(store_kernel(2048, fence=False), "k", block=(128,), args=[raw, sim.TensorMap(dst, (16, 64)), 0, 0],
                   dynamic_smem=2048)
    assert e.value.kind == "race" and "fence.proxy.async" in e.value.detail


@pytest.mark.parametrize("wait", [True, False])
def test_overwriting_the_store_source_before_wait_group_read(wait):
    raw = np.ones(2048, dtype=np.uint8)
    dst = np.zeros((16, 64), dtype=np.float16)
    args = [raw, sim.TensorMap(dst, (16, 64)), 0, 0]
    ptx = store_kernel(2048, overwrite=True, wait_before_overwrite=wait)
    if wait:
        sim.launch(ptx, "k", block=(128,), args=args, dynamic_smem=2048)
        assert (dst.view(np.uint8) == 1).all()
        return
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(128,), args=args, dynamic_smem=2048)
    assert e.value.kind == "async-pending"


# ------------------------------------------------------------------ plain bulk copies
def test_plain_bulk_copy_global_to_shared_and_back():
    ptx = HEADER + """.shared .align 128 .b8 buf[256];
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 pIn, .param .u64 pOut)
{
    .reg .pred %p<4>; .reg .b32 %r<8>; .reg .b64 %rd<8>;
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p0, %r0, 0;
    mov.u32 %r1, buf;
    mov.u32 %r2, bar;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 256;
    @%p0 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 256, [%r2];
WAIT:
    @%p0 mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @%p0 bra.uni CHECK;
    bra.uni GO;
CHECK:
    @!%p1 bra WAIT;
GO:
    @%p0 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 256;
    @%p0 cp.async.bulk.commit_group;
    @%p0 cp.async.bulk.wait_group.read 0;
    ret;
}
"""
    src = np.arange(256, dtype=np.uint8)
    out = np.zeros(256, dtype=np.uint8)
    sim.launch(ptx, "k", block=(1,), args=[src, out])
    assert np.array_equal(out, src)


# ------------------------------------------------------------------ tensor maps
@pytest.mark.parametrize("make, words", [
    (lambda: sim.TensorMap(np.zeros((8, 7), np.float16), (8, 8)), "multiples of 16 bytes"),
    (lambda: sim.TensorMap(np.zeros((300, 64), np.float16), (257, 64)), "1..256"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.float16), (8, 4)), "multiple of 16 bytes"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.float16), (8, 64), swizzle="64B"), "exceeds the 64B swizzle"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.float16), (8, 32), swizzle="128B"), "narrower than the 128B"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.int32), (8, 8), oob_fill="nan"), "floating-point"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.float16)[:, ::2], (8, 8)), "innermost axis"),
    (lambda: sim.TensorMap(np.zeros((8, 72), np.float16)[:, 4:], (8, 8)), "16-byte aligned"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.float16), (8, 8), swizzle="16B"), "swizzle"),
    (lambda: sim.TensorMap(np.zeros((8, 64), np.float16), (8,)), "one box size per dimension"),
])
def test_tensor_map_checks_what_the_driver_checks(make, words):
    with pytest.raises(ValueError) as e:
        make()
    assert words in str(e.value)


def test_tensor_map_needs_a_128_byte_param():
    ptx = HEADER + ".visible .entry k(.param .u64 p)\n{\n    ret;\n}\n"
    with pytest.raises(TypeError, match="align 64 .b8 p\\[128\\]"):
        sim.launch(ptx, "k", args=[sim.TensorMap(np.zeros((8, 64), np.float16), (8, 64))])


@pytest.mark.parametrize("mods", ["2d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes",
                                  "2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2"])
def test_unsupported_tma_forms_are_rejected(mods):
    ptx = load_kernel(2, 1024).replace("2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes", mods)
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=[np.zeros(1024, np.uint8), sim.TensorMap(np.zeros((8, 64), np.float16), (8, 64)), 0, 0],
                   dynamic_smem=2048)
    assert e.value.kind == "unsupported"


def test_triton_style_map_address_and_scoped_wait_loop():
    """Triton 3.9 takes the map's address with a 32-bit mov of the .param name, widens it and
    converts it with cvta.param; its wait loop sits in a { .reg .pred ...; } block."""
    ptx = load_kernel(2, 2048).replace(
        "    mov.b64 %rd1, tmap;\n    cvta.param.u64 %rd1, %rd1;\n",
        "    mov.b32 %r9, tmap;\n    cvt.u64.u32 %rd3, %r9;\n    cvta.param.u64 %rd1, %rd3;\n").replace(
        "WAIT:\n    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;\n    @!%p1 bra WAIT;\n",
        "    mov.b32 %r5, 0;\n{\n    .reg .pred complete;\n    waitLoop:\n"
        "    mbarrier.try_wait.parity.shared::cta.b64 complete, [%r2], %r5;\n    @!complete bra.uni waitLoop;\n}\n")
    assert "cvta.param" in ptx and "waitLoop" in ptx
    a = (np.arange(20 * 64) % 113 + 1).astype(np.float16).reshape(20, 64)
    raw = np.zeros(2048, dtype=np.uint8)
    sim.launch(ptx, "k", block=(128,), args=[raw, sim.TensorMap(a, (16, 64), swizzle="128B"), 0, 8],
               dynamic_smem=2048 + 8)
    assert np.array_equal(unswizzle(raw, "128B", np.float16, (16, 64)), expected_box(a, (8, 0), (16, 64)))


@pytest.mark.parametrize("shape, box, start", [((100,), (64,), (-16,)), ((3, 4, 5, 6, 8), (1, 2, 2, 2, 8), (2, 3, 4, 5, 4))])
def test_rank_1_and_rank_5_boxes(shape, box, start):
    a = (np.arange(int(np.prod(shape)), dtype=np.float32) + 1).reshape(shape)
    raw = tma_load(a, box, start)
    assert np.array_equal(raw.view(np.float32).reshape(box), expected_box(a, start, box))


def test_fences_that_order_nothing_here_are_accepted():
    ptx = load_kernel(2, 1024).replace(
        "    @%p0 prefetch.param.tensormap [%rd1];\n",
        "    fence.proxy.tensormap::generic.release.gpu;\n"
        "    fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;\n"
        "    fence.mbarrier_init.release.cluster;\n    prefetch.tensormap [%rd1];\n"
        "    @%p0 cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {%r10, %r11}];\n"
        "    @%p0 cp.async.bulk.prefetch.L2.global [%rd1], 128;\n")
    ptx = ptx.replace(".version 8.0", ".version 8.3")       # fence.proxy.tensormap is PTX 8.3
    a = np.ones((8, 64), dtype=np.float16)
    raw = np.zeros(1024, dtype=np.uint8)
    sim.launch(ptx, "k", block=(64,), args=[raw, sim.TensorMap(a, (8, 64)), 0, 0], dynamic_smem=2048)
    assert (raw.view(np.float16) == 1).all()


@pytest.mark.parametrize("version, target, ok", [("8.0", "sm_90a", True), ("7.8", "sm_90", False),
                                                 ("8.0", "sm_80", False)])
def test_feature_floors_of_the_module_header(version, target, ok):
    ptx = load_kernel(2, 1024).replace(".version 8.0\n.target sm_90a", f".version {version}\n.target {target}")
    args = [np.zeros(1024, np.uint8), sim.TensorMap(np.ones((8, 64), np.float16), (8, 64)), 0, 0]
    if ok:
        sim.launch(ptx, "k", block=(64,), args=args, dynamic_smem=2048)
        return
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=args, dynamic_smem=2048)
    assert e.value.kind == "unsupported" and ("needs PTX ISA 8.0" in e.value.detail or "needs .target sm_90" in e.value.detail)


@pytest.mark.parametrize("version, ok", [("8.6", True), ("8.5", False)])
def test_tma_load_into_shared_cta_needs_ptx_8_6(version, ok):
    ptx = load_kernel(2, 1024).replace(".version 8.0", f".version {version}").replace(
        "bulk.tensor.2d.shared::cluster.global", "bulk.tensor.2d.shared::cta.global")
    args = [np.zeros(1024, np.uint8), sim.TensorMap(np.ones((8, 64), np.float16), (8, 64)), 0, 0]
    if ok:
        sim.launch(ptx, "k", block=(64,), args=args, dynamic_smem=2048)
        return
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=args, dynamic_smem=2048)
    assert "use .shared::cluster before PTX 8.6" in e.value.detail


def test_one_source_stored_twice_before_waiting_is_fine():
    """Two bulk stores reading the same shared bytes are two reads, not a conflict."""
    raw = np.arange(2048, dtype=np.uint32).astype(np.uint8)
    dst = np.zeros((32, 64), dtype=np.float16)
    ptx = store_kernel(2048).replace(
        "    @%p0 cp.async.bulk.commit_group;\n",
        "    add.u32 %r12, %r11, 16;\n"
        "    @%p0 cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.L2::cache_hint [tmap, {%r10, %r12}], [%r1], %rd4;\n"
        "    @%p0 cp.async.bulk.commit_group;\n")
    sim.launch(ptx, "k", block=(128,), args=[raw, sim.TensorMap(dst, (16, 64)), 0, 0], dynamic_smem=2048)
    box = raw.view(np.uint16).reshape(16, 64)
    bits = dst.view(np.uint16)
    assert np.array_equal(bits[:16], box) and np.array_equal(bits[16:], box)


def test_tma_in_interleaved_ctas():
    """With an atomic in the program, CTAs run interleaved (scheduler.py); each keeps its own
    mbarriers and in-flight copies."""
    ptx = load_kernel(2, 1024).replace(
        "    ld.param.u64 %rd4, [pOut];\n",
        "    ld.param.u64 %rd4, [pOut];\n    mov.u32 %r30, %ctaid.x;\n    mul.wide.u32 %rd6, %r30, 1024;\n"
        "    add.u64 %rd4, %rd4, %rd6;\n    @%p0 atom.global.add.u32 %r31, [%rd4], 0;\n")
    a = (np.arange(8 * 64) % 97 + 1).astype(np.float16).reshape(8, 64)
    raw = np.zeros(2048, dtype=np.uint8)
    sim.launch(ptx, "k", grid=(2,), block=(64,), args=[raw, sim.TensorMap(a, (8, 64)), 0, 0], dynamic_smem=2048)
    assert np.array_equal(raw.view(np.float16).reshape(2, 8, 64), np.stack([a, a]))


def test_tensor_map_copied_to_global_memory():
    """A kernel may copy the map to global memory (as CUTLASS does to modify it on the device) and
    point the copy at it."""
    copy = "\n".join(f"    ld.param.b64 %rd10, [tmap+{8 * i}];\n    @%p0 st.global.b64 [%rd20+{8 * i}], %rd10;"
                     for i in range(16))
    ptx = load_kernel(2, 1024).replace(".param .align 64 .b8 tmap[128]",
                                       ".param .align 64 .b8 tmap[128], .param .u64 pMap").replace(
        "    @%p0 prefetch.param.tensormap [%rd1];\n",
        "    .reg .b64 %rd<24>;\n    ld.param.u64 %rd20, [pMap];\n" + copy + "\n"
        "    fence.proxy.tensormap::generic.release.gpu;\n"
        "    fence.proxy.tensormap::generic.acquire.gpu [%rd20], 128;\n    mov.b64 %rd1, %rd20;\n")
    ptx = ptx.replace(".version 8.0", ".version 8.3")
    a = (np.arange(8 * 64) % 89 + 1).astype(np.float16).reshape(8, 64)
    raw, scratch = np.zeros(1024, dtype=np.uint8), np.zeros(128, dtype=np.uint8)
    sim.launch(ptx, "k", block=(64,), args=[raw, sim.TensorMap(a, (8, 64)), scratch, 0, 0], dynamic_smem=2048)
    assert np.array_equal(raw.view(np.float16).reshape(8, 64), a)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_any_legal_box_loads_like_numpy(data):
    """Random tensors, boxes (inside the driver's rules), swizzles and starts, partly out of bounds."""
    dtype = data.draw(st.sampled_from([np.uint8, np.float16, np.float32, np.float64]), label="dtype")
    es = np.dtype(dtype).itemsize
    swizzle = data.draw(st.sampled_from(["none", "32B", "64B", "128B"]), label="swizzle")
    span = {"none": 256, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    inner = data.draw(st.sampled_from([n for n in range(16 // es, 257, 16 // es)
                                       if n * es <= span and (swizzle == "none" or n * es == span)]), label="inner box")
    rank = data.draw(st.integers(1, 3), label="rank")
    outer = [data.draw(st.integers(1, 8), label=f"box dim {d}") for d in range(rank - 1)]
    box = tuple(outer) + (inner,)
    cols = data.draw(st.integers(1, 3 * inner), label="inner extent")
    row_pad = data.draw(st.integers(0, 2), label="row padding (16-byte units)")
    shape = tuple(data.draw(st.integers(1, 12), label=f"dim {d}") for d in range(rank - 1)) + (cols,)
    width = -(-cols * es // 16) * 16 // es + row_pad * 16 // es     # rows padded to 16 bytes
    base = np.random.default_rng(5).integers(1, 250, size=shape[:-1] + (width,)).astype(dtype)
    a = base[..., :cols]
    start = tuple(data.draw(st.integers(-b, n), label=f"start {d}") for d, (b, n) in enumerate(zip(box, shape)))
    raw = tma_load(a, box, start, swizzle)
    assert np.array_equal(unswizzle(raw, swizzle, dtype, box), expected_box(a, start, box))


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_any_legal_2d_box_stores_clipped_like_numpy(data):
    dtype = data.draw(st.sampled_from([np.uint8, np.float16, np.float32]), label="dtype")
    es = np.dtype(dtype).itemsize
    swizzle = data.draw(st.sampled_from(["none", "32B", "64B", "128B"]), label="swizzle")
    span = {"none": 256, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    inner = data.draw(st.sampled_from([n for n in range(16 // es, 257, 16 // es)
                                       if n * es <= span and (swizzle == "none" or n * es == span)]), label="inner box")
    box = (data.draw(st.integers(1, 16), label="box rows"), inner)
    rows = data.draw(st.integers(1, 24), label="rows")
    cols = data.draw(st.integers(1, 2 * inner), label="cols")
    width = -(-cols * es // 16) * 16 // es
    dst_base = np.full((rows, width), 7, dtype=dtype)
    dst = dst_base[:, :cols]
    start = (data.draw(st.integers(-box[0], rows), label="start row"), data.draw(st.integers(-inner, cols), label="start col"))
    nbytes = box[0] * inner * es
    raw = np.random.default_rng(6).integers(1, 250, nbytes).astype(np.uint8)
    sim.launch(store_kernel(nbytes), "k", block=(max(32, -(-nbytes // 16)),),
               args=[raw, sim.TensorMap(dst, box, swizzle=swizzle), start[1] & 0xFFFFFFFF, start[0] & 0xFFFFFFFF],
               dynamic_smem=nbytes)
    logical = unswizzle(raw, swizzle, dtype, box)
    want = np.full((rows, width), 7, dtype=dtype)
    r, c = np.arange(start[0], start[0] + box[0]), np.arange(start[1], start[1] + inner)
    rok, cok = (r >= 0) & (r < rows), (c >= 0) & (c < cols)
    want[np.ix_(r[rok], c[cok])] = logical[np.ix_(rok, cok)]
    assert np.array_equal(dst_base.view(f"u{es}"), want.view(f"u{es}"))     # bits: random bytes hold NaNs
