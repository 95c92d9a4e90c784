"""tcgen05.ld / tcgen05.st data-path layouts per shape, alloc/dealloc and the tensor-memory hazards
(docs/ptx_facts/tcgen05.md §12b, §12f, §12j, §12l). Expected cells are the ISA table's formulas,
written out here."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import HEADER, gemm_kernel, idesc, image_kmajor, run_gemm, smem_desc


def expected_cell(shape: str, t: int, i: int, split: int = 0) -> tuple[int, int]:
    """(lane, column) of register i of thread t relative to taddr (docs/ptx_facts/tcgen05.md §12f)."""
    if shape == "32x32b":
        return t, i
    if shape == "16x64b":
        return (t >> 2) + 8 * (t & 1), ((t >> 1) & 1) + 2 * i
    if shape == "16x128b":
        return (t >> 2) + 8 * (i & 1), (t & 3) + 4 * (i >> 1)
    if shape == "16x256b":
        return (t >> 2) + 8 * ((i >> 1) & 1), 2 * (t & 3) + (i & 1) + 8 * (i >> 2)
    return t & 15, i + (split if t >= 16 else 0)


def module(body: str, nregs: int, ncols: int = 64) -> str:
    return (HEADER + ".shared .align 4 .b32 tptr;\n.visible .entry k(.param .u64 pOut)\n{\n"
            "    .reg .pred %p<8>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<16>;\n"
            f"    .reg .b32 %d<{nregs}>;\n    .reg .b32 %e<{nregs}>;\n" + f"""
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p3, %r0, 32;
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr], {ncols};
    bar.sync 0;
    ld.shared.b32 %r10, [tptr];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    shr.u32 %r12, %r0, 5;
    and.b32 %r12, %r12, 3;
    shl.b32 %r13, %r12, 21;
    add.u32 %r11, %r10, %r13;
    and.b32 %r14, %r0, 31;
    shl.b32 %r15, %r12, 5;
    add.u32 %r15, %r15, %r14;
    shl.b32 %r15, %r15, 16;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r0, {4 * nregs};
    add.u64 %rd2, %rd0, %rd1;
""" + body + f"""
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, {ncols};
    ret;
}}
""")


def fill_32x32b(ncols: int) -> str:
    """Every thread writes cell (its lane, c) = lane << 16 | c for c < ncols."""
    regs = ", ".join(f"%e{c}" for c in range(ncols))
    return "".join(f"    add.u32 %e{c}, %r15, {c};\n" for c in range(ncols)) + \
        f"    tcgen05.st.sync.aligned.32x32b.x{ncols}.b32 [%r11], {{{regs}}};\n    tcgen05.wait::st.sync.aligned;\n"


LD_CASES = [("32x32b", 4, 4), ("16x64b", 4, 4), ("16x128b", 2, 4), ("16x256b", 1, 4), ("16x32bx2", 4, 4)]


@pytest.mark.parametrize("shape,num,nregs,lane_off", [c + (0,) for c in LD_CASES] + [c + (16,) for c in LD_CASES[1:]])
def test_ld_shape_reads_the_isa_cells(shape, num, nregs, lane_off):
    """16-lane shapes also at lane +16 of the quarter (a 32-lane shape there would leave it)."""
    split = ", 8" if shape == "16x32bx2" else ""
    regs = ", ".join(f"%d{i}" for i in range(nregs))
    body = fill_32x32b(16) + \
        f"    tcgen05.ld.sync.aligned.{shape}.x{num}.b32 {{{regs}}}, [%r11+{lane_off << 16}]{split};\n" + \
        "    tcgen05.wait::ld.sync.aligned;\n" + \
        "".join(f"    st.global.b32 [%rd2+{4 * i}], %d{i};\n" for i in range(nregs))
    out = np.zeros((128, 16), np.uint32)
    sim.launch(module(body, 16), "k", block=(128,), args=[out])
    for tid in range(128):
        w, t = divmod(tid, 32)
        for i in range(nregs):
            lane, col = expected_cell(shape, t, i, 8)
            assert out[tid, i] == (32 * w + lane_off + lane) << 16 | col, (tid, i)


@pytest.mark.parametrize("shape,num,nregs", LD_CASES)
def test_st_shape_writes_the_isa_cells(shape, num, nregs):
    split = " 8," if shape == "16x32bx2" else ""
    regs = ", ".join(f"%e{i}" for i in range(nregs))
    body = "".join(f"    mad.lo.u32 %e{i}, %r0, 100, {i + 1};\n" for i in range(nregs)) + \
        f"    tcgen05.st.sync.aligned.{shape}.x{num}.b32 [%r11],{split} {{{regs}}};\n" + \
        "    tcgen05.wait::st.sync.aligned;\n" + \
        "    tcgen05.ld.sync.aligned.32x32b.x16.b32 {" + ", ".join(f"%d{c}" for c in range(16)) + "}, [%r11];\n" + \
        "    tcgen05.wait::ld.sync.aligned;\n" + \
        "".join(f"    st.global.b32 [%rd2+{4 * c}], %d{c};\n" for c in range(16))
    out = np.zeros((128, 16), np.uint32)
    sim.launch(module(body, 16), "k", block=(128,), args=[out])
    want = np.zeros((128, 16), np.uint32)
    for tid in range(128):
        w, t = divmod(tid, 32)
        for i in range(nregs):
            lane, col = expected_cell(shape, t, i, 8)
            want[32 * w + lane, col] = tid * 100 + i + 1
    np.testing.assert_array_equal(out, want)


def test_pack_16b_joins_two_columns():
    """ld .pack::16b: register c = low halves of columns 2c (bits 15:0) and 2c+1 (bits 31:16)."""
    body = fill_32x32b(8) + "    tcgen05.ld.sync.aligned.32x32b.x4.pack::16b.b32 {%d0, %d1, %d2, %d3}, [%r11];\n" + \
        "    tcgen05.wait::ld.sync.aligned;\n" + \
        "".join(f"    st.global.b32 [%rd2+{4 * i}], %d{i};\n" for i in range(4))
    out = np.zeros((128, 8), np.uint32)
    sim.launch(module(body, 8), "k", block=(128,), args=[out])
    np.testing.assert_array_equal(out[5, :4], [2 * c | (2 * c + 1) << 16 for c in range(4)])


def test_unpack_16b_splits_a_register():
    body = "    mov.u32 %e0, 0xBBBBAAAA;\n    tcgen05.st.sync.aligned.32x32b.x1.unpack::16b.b32 [%r11], {%e0};\n" + \
        "    tcgen05.wait::st.sync.aligned;\n    tcgen05.ld.sync.aligned.32x32b.x2.b32 {%d0, %d1}, [%r11];\n" + \
        "    tcgen05.wait::ld.sync.aligned;\n    st.global.b32 [%rd2], %d0;\n    st.global.b32 [%rd2+4], %d1;\n"
    out = np.zeros((128, 2), np.uint32)
    sim.launch(module(body, 2), "k", block=(128,), args=[out])
    assert list(out[7]) == [0xAAAA, 0xBBBB]


# ------------------------------------------------------------------ allocation
def test_alloc_writes_aligned_addresses_and_blocks_until_free():
    """Two allocations of 128 and 256 columns come back count-aligned; a third of 256 would need
    the first freed (here: it never is -> deadlock)."""
    body = """
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr2], 256;
    bar.sync 0;
    ld.shared.b32 %r20, [tptr2];
    st.global.b32 [%rd2], %r20;
    st.global.b32 [%rd2+4], %r10;
    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 256;
"""
    ptx = module(body, 2, ncols=128).replace(".shared .align 4 .b32 tptr;", ".shared .align 4 .b32 tptr;\n"
                                             ".shared .align 4 .b32 tptr2;")
    ptx = ptx.replace("@%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", "")
    with pytest.raises(sim.HazardError, match="256 columns after one of 128"):
        sim.launch(ptx, "k", block=(128,), args=[np.zeros((128, 2), np.uint32)])
    ok = ptx.replace("[tptr], 128", "[tptr], 256").replace("%r10, 128", "%r10, 256")
    out = np.zeros((128, 2), np.uint32)
    sim.launch(ok, "k", block=(128,), args=[out])
    assert sorted(out[0]) == [0, 256]
    blocked = ok.replace("@%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 256;\n", "", 1).replace(
        "[tptr2], 256", "[tptr2], 256;\n    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr2], 256")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(blocked, "k", block=(128,), args=[np.zeros((128, 2), np.uint32)])
    assert e.value.kind == "deadlock"


def test_alloc_count_must_be_power_of_two():
    with pytest.raises(sim.HazardError, match="power of two"):
        sim.launch(module("", 1, ncols=96), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])


def test_alloc_after_relinquish_is_a_hazard():
    body = "    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr], 32;\n"
    with pytest.raises(sim.HazardError, match="relinquish") as e:
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])
    assert e.value.kind == "tmem"


def test_exit_without_dealloc_is_a_hazard():
    ptx = module("", 1).replace("@%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 64;", "")
    with pytest.raises(sim.HazardError, match="still allocated") as e:
        sim.launch(ptx, "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])
    assert e.value.kind == "tmem"


def test_dealloc_of_columns_not_owned_is_a_hazard():
    ptx = module("", 1).replace("dealloc.cta_group::1.sync.aligned.b32 %r10, 64",
                                "dealloc.cta_group::1.sync.aligned.b32 %r10, 32")
    with pytest.raises(sim.HazardError, match="not an allocation"):
        sim.launch(ptx, "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])


def test_warp_reading_another_quarter_is_a_hazard():
    body = "    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%d0}, [%r10];\n    tcgen05.wait::ld.sync.aligned;\n"
    with pytest.raises(sim.HazardError, match="quarter") as e:
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])
    assert e.value.kind == "tmem" and "warp 1" in e.value.detail


def test_unallocated_columns_are_a_hazard():
    body = "    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%d0}, [%r11+64];\n    tcgen05.wait::ld.sync.aligned;\n"
    with pytest.raises(sim.HazardError, match="column 64 is not allocated"):
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])


def test_overwriting_cells_of_an_unwaited_ld_is_a_hazard():
    """tcgen05.wait::ld orders the TMEM read before later writes (ISA §9.7.16.6.4.5: only the register
    dependency is kept without it)."""
    body = "    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%d0}, [%r11];\n" + \
        "    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r11], {%r0};\n    tcgen05.wait::st.sync.aligned;\n"
    with pytest.raises(sim.HazardError, match="wait::ld") as e:
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])
    assert e.value.kind == "async-pending"


def test_dealloc_before_wait_ld_is_a_hazard():
    body = "    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%d0}, [%r11];\n"
    with pytest.raises(sim.HazardError, match="wait::ld"):
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])


# ------------------------------------------------------------------ MMA in flight
def _mma_case(**kw):
    rng = np.random.default_rng(1)
    a = rng.integers(1, 3, (128, 16)).astype(np.float16)
    b = rng.integers(1, 3, (64, 16)).astype(np.float16)
    ia, _, sbo = image_kmajor(a, "32B", 4096)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, 128, 64), 32, 4096, 2048, **kw)
    return ptx, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"), smem_desc(4096, 16, sbo, "32B")


def test_reading_d_before_the_commit_is_observed_is_a_hazard():
    ptx, img, da, db = _mma_case(wait=False)
    with pytest.raises(sim.HazardError, match="still in flight") as e:
        run_gemm(ptx, 64, img, da, db)
    assert e.value.kind == "async-pending"


def test_dealloc_while_the_mma_is_in_flight_is_a_hazard():
    ptx, img, da, db = _mma_case(extra_after_mma="    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 256;")
    with pytest.raises(sim.HazardError, match="dealloc.*in flight"):
        run_gemm(ptx, 64, img, da, db)


def test_overwriting_a_shared_operand_before_the_commit_is_observed_is_a_hazard():
    ptx, img, da, db = _mma_case(extra_after_mma="    @%p4 st.shared.u32 [buf+64], %r0;")
    with pytest.raises(sim.HazardError) as e:
        run_gemm(ptx, 64, img, da, db)
    assert e.value.kind == "async-pending"


def test_overwriting_the_stage_after_the_wait_is_fine():
    ptx, img, da, db = _mma_case(extra_before_dealloc="    @%p4 st.shared.u32 [buf+64], %r0;")
    run_gemm(ptx, 64, img, da, db)


def test_taddr_must_be_warp_uniform():
    body = "    add.u32 %r16, %r11, %r14;\n    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%d0}, [%r16];\n" \
           "    tcgen05.wait::ld.sync.aligned;\n"
    with pytest.raises(sim.HazardError, match="same in every thread") as e:
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])
    assert e.value.kind == "divergence"


def test_part_of_a_warp_is_divergence():
    body = "    setp.lt.u32 %p5, %r14, 16;\n    @%p5 tcgen05.ld.sync.aligned.32x32b.x1.b32 {%d0}, [%r11];\n" \
           "    tcgen05.wait::ld.sync.aligned;\n"
    with pytest.raises(sim.HazardError) as e:
        sim.launch(module(body, 1), "k", block=(128,), args=[np.zeros((128, 1), np.uint32)])
    assert e.value.kind == "divergence"


def two_warps_alloc_512(dealloc_first: bool) -> str:
    """Both warps allocate all 512 columns at one instruction: warp 0 gets them, warp 1 blocks until
    warp 0 frees them (or forever). Each warp's lane 0 then stores 1 to out[warp]."""
    free = "    @%p2 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r9, 512;\n" if dealloc_first else ""
    return HEADER + f""".shared .align 4 .b32 tptr[2];
.visible .entry k(.param .u64 pOut)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, tptr;
    add.u32 %r3, %r3, %r2;
    mov.u32 %r9, 0;
    setp.eq.u32 %p2, %r1, 0;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 512;
{free}    and.b32 %r4, %r0, 31;
    setp.eq.u32 %p1, %r4, 0;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd1, %r1, 4;
    add.u64 %rd0, %rd0, %rd1;
    mov.u32 %r5, 1;
    @%p1 st.global.u32 [%rd0], %r5;
    @!%p2 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r9, 512;
    ret;
}}
"""


def test_a_blocked_alloc_waits_for_another_warps_dealloc():
    out = np.zeros(2, np.uint32)
    sim.launch(two_warps_alloc_512(True), "k", block=(64,), args=[out])
    assert list(out) == [1, 1]


def test_an_alloc_no_dealloc_can_satisfy_is_a_deadlock():
    with pytest.raises(sim.HazardError) as e:
        sim.launch(two_warps_alloc_512(False), "k", block=(64,), args=[np.zeros(2, np.uint32)])
    assert e.value.kind == "deadlock"


def test_strict_fences_report_a_missing_after_thread_sync(monkeypatch):
    """Off by default (Triton omits the fences); PTXGEN_SIM_TCGEN05_FENCES=strict reports a tcgen05.ld
    after an mbarrier wait with no tcgen05.fence::after_thread_sync between them."""
    ptx, img, da, db = _mma_case()
    unfenced = ptx.replace("    @!%p5 bra WAIT;\n    tcgen05.fence::after_thread_sync;", "    @!%p5 bra WAIT;")
    assert unfenced != ptx
    run_gemm(unfenced, 64, img, da, db)                      # default: accepted
    monkeypatch.setenv("PTXGEN_SIM_TCGEN05_FENCES", "strict")
    sim.machine.compile_entry.cache_clear()
    run_gemm(ptx, 64, img, da, db)                           # with the fence: fine
    with pytest.raises(sim.HazardError, match="after_thread_sync") as e:
        run_gemm(unfenced, 64, img, da, db)
    assert e.value.kind == "missing-fence"
    sim.machine.compile_entry.cache_clear()
