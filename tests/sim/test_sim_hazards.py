"""Planted bugs must be caught with the right kind and line; bank conflicts must be counted."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_gemm_ptx import gemm_dynamic_smem, gemm_ptx
from sim_util import kernel, line_of

SHARED = ".shared .align 16 .b8 buf[1024];"


def expect_hazard(ptx: str, kind: str, marker: str, args, block=(32,), grid=(1,), **kw) -> sim.HazardError:
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", grid=grid, block=block, args=args, **kw)
    line = line_of(ptx, marker)
    assert (err.value.kind, err.value.line) == (kind, line), str(err.value)
    assert ptx.split("\n")[line - 1].strip() in str(err.value)   # the message quotes the line
    return err.value


EXCHANGE = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 2;
    add.u32 %r4, %r2, %r3;
    st.shared.u32 [%r4], %r1;          // WRITE
    SYNC1
    xor.b32 %r5, %r3, 4;
    add.u32 %r6, %r2, %r5;
    ld.shared.u32 %r7, [%r6];          // READ
    SYNC2
    st.shared.u32 [%r4], %r7;          // REWRITE
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r7;
    ret;"""


def exchange(sync1: str, sync2: str) -> str:
    return kernel(EXCHANGE.replace("SYNC1", sync1).replace("SYNC2", sync2), shared=SHARED)


def test_exchange_through_shared_with_barriers_is_clean():
    out = np.zeros(64, dtype=np.uint32)
    sim.launch(exchange("bar.sync 0;", "barrier.sync.aligned 0;"), "k", block=(64,), args=[out])
    assert out.tolist() == [t ^ 1 for t in range(64)]


def test_missing_barrier_before_reading_is_a_race():
    expect_hazard(exchange("", "bar.sync 0;"), "race", "// READ", [np.zeros(64, np.uint32)], block=(64,))


def test_missing_barrier_before_overwriting_what_others_read_is_a_race():
    expect_hazard(exchange("bar.sync 0, 64;", ""), "race", "// REWRITE", [np.zeros(64, np.uint32)], block=(64,))


def test_two_lanes_storing_the_same_shared_bytes_in_one_instruction_is_a_race():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 1;             // lanes 2i and 2i+1 share a word
    shl.b32 %r2, %r2, 2;
    mov.u32 %r3, buf;
    add.u32 %r3, %r3, %r2;
    st.shared.u32 [%r3], %r1;        // ST
    ret;""", shared=SHARED)
    expect_hazard(ptx, "race", "// ST", [np.zeros(1)])


def test_too_weak_wait_group_in_the_gemm_pipeline_reads_pending_data():
    ptx = gemm_ptx(128, 128, 256, wait_groups=2)
    A, Bt = np.zeros((128, 256), np.float16), np.zeros((128, 256), np.float16)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "gemm_tile", block=(128,), args=[A, Bt, np.zeros((128, 128), np.float32)],
                   dynamic_smem=gemm_dynamic_smem())
    first_ldmatrix = next(i + 1 for i, l in enumerate(ptx.split("\n")) if "ldmatrix" in l)
    assert (err.value.kind, err.value.line) == ("async-pending", first_ldmatrix)


def test_missing_barrier_after_the_wait_in_the_gemm_pipeline_is_a_race():
    ptx = gemm_ptx(128, 128, 256, barrier_after_wait=False)
    A, Bt = np.zeros((128, 256), np.float16), np.zeros((128, 256), np.float16)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "gemm_tile", block=(128,), args=[A, Bt, np.zeros((128, 128), np.float32)],
                   dynamic_smem=gemm_dynamic_smem())
    first_ldmatrix = next(i + 1 for i, l in enumerate(ptx.split("\n")) if "ldmatrix" in l)
    assert (err.value.kind, err.value.line) == ("race", first_ldmatrix)


STORE = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1+OFF], %r1;     // ST
    ret;"""


def test_out_of_bounds_store_names_address_and_nearest_array():
    ptx = kernel(STORE.replace("OFF", "4"))
    err = expect_hazard(ptx, "out-of-bounds", "// ST", [np.zeros(32, np.uint32)])
    assert "pOut" in str(err) and "0x" in str(err) and "4 bytes" in str(err)


def test_misaligned_global_and_shared_accesses():
    expect_hazard(kernel(STORE.replace("OFF", "2")), "misaligned", "// ST", [np.zeros(64, np.uint32)])
    ptx = kernel("""
    mov.u32 %r1, buf;
    ld.shared.v4.u32 {%r2, %r3, %r4, %r5}, [%r1+8];   // LD
    ret;""", shared=SHARED)
    expect_hazard(ptx, "misaligned", "// LD", [np.zeros(1)])
    ptx = kernel("""
    mov.u32 %r1, buf;
    add.u32 %r1, %r1, 8;
    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r2}, [%r1];   // LDM
    ret;""", shared=SHARED)
    expect_hazard(ptx, "misaligned", "// LDM", [np.zeros(1)])


def test_shared_access_outside_the_window():
    ptx = kernel("""
    mov.u32 %r1, buf;
    ld.shared.u32 %r2, [%r1+1024];   // LD
    ret;""", shared=SHARED)
    expect_hazard(ptx, "out-of-bounds", "// LD", [np.zeros(1)])


def test_divergent_branch_reconverges_but_a_divergent_aligned_barrier_is_a_hazard():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra $L_skip;                // BRA
    add.u32 %r2, %r1, 1;
$L_skip:
    ret;""")
    sim.launch(ptx, "k", block=(32,), args=[np.zeros(1)])   # the warp splits at BRA and meets again
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bar.sync 0;                 // BAR
    ret;""")
    expect_hazard(ptx, "divergence", "// BAR", [np.zeros(1)])


def test_uniform_predicated_branch_is_fine():
    ptx = kernel("""
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra $L_skip;
    ret;
$L_skip:
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r2, 9;
    st.global.u32 [%rd1], %r2;
    ret;""")
    out = np.zeros(1, dtype=np.uint32)
    sim.launch(ptx, "k", grid=(3,), block=(1,), args=[out])   # only CTA 0 stores
    assert int(out[0]) == 9


def test_unsupported_instruction_is_reported_before_running():
    ptx = kernel("""
    ret;
    popc.b32 %r1, %r2;               // NEVER REACHED
    ret;""")
    expect_hazard(ptx, "unsupported", "// NEVER REACHED", [np.zeros(1)])
    ptx = kernel("    add.rz.f32 %f1, %f2, %f3;   // RZ\n    ret;")
    expect_hazard(ptx, "unsupported", "// RZ", [np.zeros(1)])
    ptx = kernel("    mov.u32 %r1, %nosuch;   // BADREG\n    ret;")
    expect_hazard(ptx, "unsupported", "// BADREG", [np.zeros(1)])


def test_two_ctas_writing_the_same_global_bytes_is_a_race():
    ptx = kernel("""
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %ctaid.x;
    st.global.u32 [%rd1], %r1;       // ST
    ret;""")
    expect_hazard(ptx, "race", "// ST", [np.zeros(4, np.uint32)], grid=(2,), block=(1,))


def test_reading_what_another_cta_wrote_is_a_race():
    ptx = kernel("""
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ld.global.u32 %r2, [%rd1];       // LD
    ret;""")
    expect_hazard(ptx, "race", "// LD", [np.zeros(4, np.uint32)], grid=(2,), block=(1,))


# ------------------------------------------------------------------ bank conflicts
def tile_ldmatrix(swizzle: bool) -> str:
    """8 rows of a 64-wide f16 tile (128-byte rows); matrix j reads column chunk j of rows 0..7."""
    chunk = "xor.b32 %r5, %r3, %r4;" if swizzle else "mov.u32 %r5, %r3;"
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    shr.u32 %r3, %r1, 3;             // matrix j = logical chunk
    and.b32 %r4, %r1, 7;             // row
    {chunk}
    shl.b32 %r6, %r4, 7;
    shl.b32 %r7, %r5, 4;
    add.u32 %r6, %r6, %r7;
    add.u32 %r6, %r6, %r2;
    shl.b32 %r8, %r1, 5;
    add.u32 %r8, %r8, %r2;
    mov.u32 %r9, 0;
    st.shared.v4.u32 [%r8], {{%r9, %r9, %r9, %r9}};
    st.shared.v4.u32 [%r8+16], {{%r9, %r9, %r9, %r9}};
    bar.sync 0;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%r10, %r11, %r12, %r13}}, [%r6];   // LDM
    ret;""", shared=".shared .align 1024 .b8 buf[2048];")


def test_unswizzled_ldmatrix_is_8_way_conflicted_and_swizzled_is_not():
    for swizzle, factor in ((False, 8), (True, 1)):
        ptx = tile_ldmatrix(swizzle)
        res = sim.launch(ptx, "k", grid=(2,), block=(64,), args=[np.zeros(1)])
        wavefronts, ideal = res.smem_wavefronts[line_of(ptx, "// LDM")]
        assert ideal == 2 * 2 * 4                      # CTAs x warps x matrices
        assert wavefronts == factor * ideal


def test_gemm_ldmatrix_conflicts_depend_on_the_swizzle():
    A, Bt = np.ones((128, 256), np.float16), np.ones((128, 256), np.float16)
    for swizzle, factor in ((False, 8), (True, 1)):
        ptx = gemm_ptx(128, 128, 256, swizzle=swizzle)
        res = sim.launch(ptx, "gemm_tile", block=(128,), args=[A, Bt, np.zeros((128, 128), np.float32)],
                         dynamic_smem=gemm_dynamic_smem())
        lines = ptx.split("\n")
        ldm = {ln: v for ln, v in res.smem_wavefronts.items() if "ldmatrix" in lines[ln - 1]}
        cps = {ln: v for ln, v in res.smem_wavefronts.items() if "cp.async" in lines[ln - 1]}
        assert len(ldm) == 32 and len(cps) == 48
        assert all(w == factor * i for w, i in ldm.values())
        assert all(w == i for w, i in cps.values())    # the 16-byte row writes are conflict-free either way


def test_wide_shared_accesses_use_half_and_quarter_warp_phases():
    cases = [("u32", "%r4", 4, (1, 1)), ("u32", "%r4", 8, (2, 1)), ("u32", "%r4", 128, (32, 1)),
             ("u8", "%r4", 1, (1, 1)), ("v2.u32", "{%r4, %r5}", 8, (2, 2)), ("v2.u32", "{%r4, %r5}", 16, (4, 2)),
             ("v4.u32", "{%r4, %r5, %r6, %r7}", 16, (4, 4)), ("v4.u32", "{%r4, %r5, %r6, %r7}", 32, (8, 4))]
    for typ, dst, stride, expected in cases:
        ptx = kernel(f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    mad.lo.u32 %r3, %r1, {stride}, %r2;
    ld.shared.{typ} {dst}, [%r3];   // LD
    ret;""", shared=".shared .align 16 .b8 buf[4096];")
        res = sim.launch(ptx, "k", block=(32,), args=[np.zeros(1)])
        assert res.smem_wavefronts[line_of(ptx, "// LD")] == expected, (typ, stride)


# C (pC) sits right before A (pA) in the argument list; C is 4 rows of 2048 f32 (8 KiB a row).
UNGUARDED_ROW = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pC];
    add.u32 %r2, %r1, COL;             // column COL + tid of row 4, one row past the last
    mov.u32 %r4, 4;
    mad.lo.u32 %r2, %r4, 2048, %r2;    // element index row * ldc + column
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd1, %rd1, %rd2;
    ld.global.u32 %r3, [%rd1];         // LD
    st.global.u32 [%rd1], %r1;         // ST
    ret;"""


@pytest.mark.parametrize("col,first_past", [(0, 0), (1024, 4096), (2047, 8188)])
def test_store_past_the_end_of_c_never_reaches_the_next_argument(col, first_past):
    """A planted epilogue bug (no row guard: row M is stored) must be reported naming C, the address
    and C's bounds, however far past the end it lands, and A, right after C, must be untouched."""
    body = UNGUARDED_ROW.replace("COL", str(col)).replace("    ld.global.u32 %r3, [%rd1];         // LD\n", "")
    ptx = kernel(body, params=".param .u64 pC, .param .u64 pA")
    c, a = np.zeros((4, 2048), np.float32), np.arange(1 << 16, dtype=np.uint32)
    err = expect_hazard(ptx, "out-of-bounds", "// ST", [c, a], block=(64,))
    assert f"lies {first_past} bytes past the end of argument 'pC'" in str(err)
    assert f"({4 * 2048 * 4} bytes)" in str(err) and "global address 0x" in str(err)
    assert not c.any() and np.array_equal(a, np.arange(1 << 16, dtype=np.uint32)), "nothing was written"


def test_load_before_the_start_of_an_argument_is_named():
    body = UNGUARDED_ROW.replace("add.u32 %r2, %r1, COL;", "sub.s32 %r2, %r1, 8200;").replace(
        "    st.global.u32 [%rd1], %r1;         // ST\n", "").replace("mul.wide.u32", "mul.wide.s32")
    ptx = kernel(body, params=".param .u64 pC, .param .u64 pA")
    err = expect_hazard(ptx, "out-of-bounds", "// LD", [np.zeros((4, 2048), np.float32), np.zeros(64)],
                        block=(64,))
    assert "32 bytes before the start of argument 'pC'" in str(err)  # (4 * 2048 - 8200) * 4 = -32


def test_store_into_a_read_only_argument_is_reported():
    ptx = kernel(STORE.replace("OFF", "0"))
    out = np.zeros(32, np.uint32)
    out.flags.writeable = False
    err = expect_hazard(ptx, "out-of-bounds", "// ST", [out])
    assert "read-only argument 'pOut'" in str(err)


def test_null_pointer_access_is_not_blamed_on_an_argument_bound():
    ptx = kernel("""
    mov.u64 %rd1, 64;
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;         // ST
    ret;""")
    err = expect_hazard(ptx, "out-of-bounds", "// ST", [np.zeros(4, np.uint32)], block=(1,))
    assert "wild or null pointer" in str(err) and "0x40" in str(err)


# ---- every case the shared-memory race detector distinguishes, each planted and then fixed ----
# One word (buf[0]) seeded with 7 by thread 0, then a barrier; the CASE lines touch it; SYNC is the
# fix (bar.sync) or nothing (the planted race). Every thread finally reads the word after a
# barrier and stores it to out[tid], so the fixed kernels' results are checked too.
WORD = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    setp.eq.u32 %p1, %r1, 0;
    setp.eq.u32 %p2, %r1, 1;
    setp.eq.u32 %p3, %r1, 31;
    mov.u32 %r9, 7;
    @%p1 st.shared.u32 [%r2], %r9;
    bar.sync 0;
CASE
    bar.sync 0;
    ld.shared.u32 %r8, [%r2];
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r8;
    ret;"""

RACE_CASES = {
    # read-after-write: thread 1 reads what thread 0 just wrote (one writer, one reader)
    "read after write": ("""
    @%p1 st.shared.u32 [%r2], %r1;       // FIRST
    SYNC
    @%p2 ld.shared.u32 %r5, [%r2];       // SECOND""", 0),
    # write-after-read, one reader: thread 0 reads, thread 1 overwrites
    "write after one reader": ("""
    @%p1 ld.shared.u32 %r5, [%r2];       // FIRST
    SYNC
    @%p2 st.shared.u32 [%r2], %r1;       // SECOND""", 1),
    # write-after-read, several readers in one instruction: all 32 lanes read, lane 31 (one of them) writes
    "write after several readers in one instruction": ("""
    ld.shared.u32 %r5, [%r2];            // FIRST
    SYNC
    @%p3 st.shared.u32 [%r2], %r1;       // SECOND""", 31),
    # write-after-read, readers across instructions: lane 0 reads, then lane 1 reads, then lane 1 writes
    "write after readers across instructions": ("""
    @%p1 ld.shared.u32 %r5, [%r2];       // FIRST
    @%p2 ld.shared.u32 %r6, [%r2];
    SYNC
    @%p2 st.shared.u32 [%r2], %r1;       // SECOND""", 1),
    # write-after-write across instructions: lane 0 writes, then lane 1 writes
    "write after write": ("""
    @%p1 st.shared.u32 [%r2], %r1;       // FIRST
    SYNC
    @%p2 st.shared.u32 [%r2], %r1;       // SECOND""", 1),
}


@pytest.mark.parametrize("case", RACE_CASES, ids=list(RACE_CASES))
def test_each_race_case_is_caught_and_its_fix_is_clean(case):
    body, final = RACE_CASES[case]
    planted = kernel(WORD.replace("CASE", body.replace("SYNC", "")), shared=SHARED)
    err = expect_hazard(planted, "race", "// SECOND", [np.zeros(32, np.uint32)])
    if "several" in case:
        assert "several threads" in str(err), str(err)
    fixed = kernel(WORD.replace("CASE", body.replace("SYNC", "bar.sync 0;")), shared=SHARED)
    out = np.zeros(32, np.uint32)
    sim.launch(fixed, "k", block=(32,), args=[out])
    assert out.tolist() == [final] * 32


def test_write_after_write_in_one_instruction_is_caught_and_distinct_words_are_clean():
    """Two lanes of one st.shared writing the same word race; giving each lane its own word fixes it."""
    same = kernel("""
    mov.u32 %r1, %tid.x;
    and.b32 %r3, %r1, 1;                 // lanes 0 and 1 -> offset 0 and 4: no clash...
    shl.b32 %r3, %r3, 2;
    setp.lt.u32 %p1, %r1, 3;             // ...but lane 2 writes offset 0 too
    mov.u32 %r2, buf;
    add.u32 %r2, %r2, %r3;
    @%p1 st.shared.u32 [%r2], %r1;       // ST
    ret;""", shared=SHARED)
    expect_hazard(same, "race", "// ST", [np.zeros(1)])
    sim.launch(same.replace("setp.lt.u32 %p1, %r1, 3;", "setp.lt.u32 %p1, %r1, 2;"), "k", block=(32,),
               args=[np.zeros(1)])


def test_bar_warp_sync_orders_the_lanes_of_a_one_warp_cta():
    """Triton's one-warp mma.sync kernels exchange through shared memory with bar.warp.sync -1."""
    out = np.zeros(32, dtype=np.uint32)
    sim.launch(exchange("bar.warp.sync -1;", "bar.warp.sync 0xffffffff;"), "k", block=(32,), args=[out])
    assert out.tolist() == [t ^ 1 for t in range(32)]


def test_bar_warp_sync_is_not_credited_as_ordering_in_a_larger_cta():
    """Race detection keeps one epoch per CTA: in a two-warp CTA a warp barrier orders nothing it
    can credit, so the exchange is reported (never hidden)."""
    expect_hazard(exchange("bar.warp.sync -1;", "bar.sync 0;"), "race", "// READ",
                  [np.zeros(64, np.uint32)], block=(64,))


def test_bar_warp_sync_needs_a_full_immediate_mask_and_every_lane():
    ptx = exchange("bar.warp.sync %r1;   // PARTIAL", "bar.sync 0;")
    expect_hazard(ptx, "unsupported", "// PARTIAL", [np.zeros(32, np.uint32)])
    guard = "setp.lt.u32 %p1, %r1, 16;\n    @%p1 bar.warp.sync -1;   // HALF"
    expect_hazard(exchange(guard, "bar.sync 0;"), "divergence", "// HALF", [np.zeros(32, np.uint32)])
