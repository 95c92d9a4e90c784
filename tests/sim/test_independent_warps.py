"""Independent warps in ptxgen.sim: divergent branches that reconverge inside a warp, elect.sync-guarded
sections, warp-specialised producer/consumer warps talking through shared memory and mbarriers, and
the hazards that stay: a .sync.aligned instruction reached by part of a warp, a wait that can never
complete. Each hazard is planted next to its fixed twin."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import line_of

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def entry(body: str, shared: str = "", params: str = ".param .u64 pOut") -> str:
    """One entry with %r0 = %tid.x, %r30 = lane, %r31 = warp and %rd0 = &out[%tid.x] (u32)."""
    return (HEADER + shared + f".visible .entry k({params})\n{{\n"
            "    .reg .pred %p<16>;\n    .reg .b32 %r<40>;\n    .reg .b64 %rd<16>;\n"
            "    .reg .f32 %f<16>;\n"
            "    ld.param.u64 %rd0, [pOut];\n    mov.u32 %r0, %tid.x;\n"
            "    and.b32 %r30, %r0, 31;\n    shr.u32 %r31, %r0, 5;\n"
            "    mul.wide.u32 %rd1, %r0, 4;\n    add.u64 %rd0, %rd0, %rd1;\n"
            + body + "\n    ret;\n}\n")


def run(ptx: str, threads: int, *extra) -> np.ndarray:
    out = np.full(threads, 0xDEAD, dtype=np.uint32)
    sim.launch(ptx, "k", block=(threads,), args=[out, *extra])
    return out


def hazard(ptx: str, threads: int, kind: str, marker: str, *extra) -> sim.HazardError:
    with pytest.raises(sim.HazardError) as e:
        run(ptx, threads, *extra)
    assert e.value.kind == kind, e.value
    assert e.value.line == line_of(ptx, marker), e.value
    return e.value


# ------------------------------------------------------------------ divergence inside a warp
BRANCH_AROUND = """
    mov.u32 %r2, %r0;
    setp.lt.u32 %p1, %r30, 11;
    @%p1 bra SKIP;                       // lanes 11..31 add 1000
    add.u32 %r2, %r2, 1000;
    {inside}
SKIP:
    {after}
    st.global.u32 [%rd0], %r4;
"""
SHFL = "shfl.sync.bfly.b32 %r4, %r2, 1, 0x1f, 0xffffffff;   // SHFL"


def test_predicated_branch_around_a_block_reconverges_before_shfl():
    out = run(entry(BRANCH_AROUND.format(inside="", after=SHFL)), 64)
    v = np.arange(64) + np.where(np.arange(64) % 32 >= 11, 1000, 0)
    assert out.tolist() == v[np.arange(64) ^ 1].tolist()


def test_shfl_by_part_of_a_warp_is_divergence():
    ptx = entry(BRANCH_AROUND.format(inside=SHFL, after="mov.u32 %r9, 0;"))
    e = hazard(ptx, 64, "divergence", "// SHFL")
    assert "shfl.sync" in e.detail


def test_loop_with_per_lane_trip_count_reconverges():
    ptx = entry("""
    and.b32 %r5, %r30, 3;
    add.u32 %r5, %r5, 1;                 // lane does lane%4 + 1 iterations
    mov.u32 %r2, 0;
LOOP:
    add.u32 %r2, %r2, 3;
    sub.u32 %r5, %r5, 1;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra LOOP;
    shfl.sync.idx.b32 %r4, %r2, 3, 0x1f, 0xffffffff;
    add.u32 %r4, %r4, %r2;
    st.global.u32 [%rd0], %r4;
""")
    out = run(ptx, 32)
    assert out.tolist() == [12 + 3 * (lane % 4 + 1) for lane in range(32)]


MMA = """
    mov.b32 %r10, 0x3c003c00;            // two f16 ones
    mov.f32 %f1, 0f00000000;
    {guard}
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%f1, %f2, %f3, %f4}}, {{%r10, %r10, %r10, %r10}}, {{%r10, %r10}}, {{%f1, %f1, %f1, %f1}};   // MMA
SKIP:
    cvt.rzi.u32.f32 %r4, %f1;
    st.global.u32 [%rd0], %r4;
"""


def test_mma_by_a_whole_warp_while_another_warp_is_elsewhere_is_fine():
    ptx = entry(MMA.format(guard="setp.eq.u32 %p1, %r31, 0;\n    @%p1 bra SKIP;    // warp 0 skips"))
    out = run(ptx, 64)
    assert out[32:].tolist() == [16] * 32 and out[:32].tolist() == [0] * 32


def test_mma_by_part_of_a_warp_is_divergence():
    ptx = entry(MMA.format(guard="setp.lt.u32 %p1, %r30, 16;\n    @%p1 bra SKIP;    // half of each warp"))
    e = hazard(ptx, 64, "divergence", "// MMA")
    assert "16 of 32 lanes" in e.detail


def test_bra_uni_that_splits_a_warp_is_divergence_but_may_split_warps():
    body = """
    mov.u32 %r4, 1;
    setp.lt.u32 %p1, {reg}, 1;
    @%p1 bra.uni SKIP;                   // BRA
    mov.u32 %r4, 2;
SKIP:
    st.global.u32 [%rd0], %r4;
"""
    out = run(entry(body.format(reg="%r31")), 64)
    assert out.tolist() == [1] * 32 + [2] * 32
    e = hazard(entry(body.format(reg="%r30")), 64, "divergence", "// BRA")
    assert "bra.uni" in e.detail


# ------------------------------------------------------------------ elect.sync
def test_elect_sync_guarded_section_then_barrier():
    ptx = entry("""
    elect.sync _|%p2, 0xffffffff;
    @!%p2 bra JOIN;                      // only the leader of each warp writes
    mov.u32 %r3, slots;
    shl.b32 %r5, %r31, 2;
    add.u32 %r3, %r3, %r5;
    add.u32 %r6, %r31, 7;
    st.shared.u32 [%r3], %r6;
JOIN:
    bar.sync 0;
    mov.u32 %r3, slots;
    xor.b32 %r5, %r31, 1;
    shl.b32 %r5, %r5, 2;
    add.u32 %r3, %r3, %r5;
    ld.shared.u32 %r4, [%r3];            // the other warp's slot
    shfl.sync.idx.b32 %r4, %r4, 0, 0x1f, 0xffffffff;
    st.global.u32 [%rd0], %r4;
""", shared=".shared .align 4 .b32 slots[2];\n")
    out = run(ptx, 64)
    assert out.tolist() == [8] * 32 + [7] * 32


# ------------------------------------------------------------------ producer / consumer warps
PIPELINE = """
    @%p0 mbarrier.init.shared::cta.b64 [full], 32;
    @%p0 mbarrier.init.shared::cta.b64 [full+8], 32;
    @%p0 mbarrier.init.shared::cta.b64 [empty], 32;
    @%p0 mbarrier.init.shared::cta.b64 [empty+8], 32;
    bar.sync 0;
    mov.u32 %r2, 0;                      // iteration i
    setp.ne.u32 %p1, %r31, 0;
    @%p1 bra CONSUMER;
// ---- producer: warp 0 copies in[i*32 + lane] into stage i % 2
    ld.param.u64 %rd2, [pIn];
    mul.wide.u32 %rd3, %r30, 4;
    add.u64 %rd2, %rd2, %rd3;
PRODUCE:
    and.b32 %r3, %r2, 1;                 // stage
    shr.u32 %r4, %r2, 1;
    and.b32 %r4, %r4, 1;
    xor.b32 %r4, %r4, {empty_flip};      // empty parity
    shl.b32 %r5, %r3, 3;
    mov.u32 %r6, empty;
    add.u32 %r6, %r6, %r5;
WAIT_EMPTY:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r6], %r4;   // WAIT_EMPTY
    @!%p2 bra WAIT_EMPTY;
    ld.global.u32 %r7, [%rd2];
    add.u64 %rd2, %rd2, 128;
    shl.b32 %r8, %r3, 7;
    shl.b32 %r9, %r30, 2;
    add.u32 %r8, %r8, %r9;
    mov.u32 %r10, buf;
    add.u32 %r8, %r8, %r10;
    st.shared.u32 [%r8], %r7;
    mov.u32 %r6, full;
    add.u32 %r6, %r6, %r5;
    mbarrier.arrive.shared::cta.b64 _, [%r6];
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p3, %r2, {n};
    @%p3 bra PRODUCE;
    bra DONE;
// ---- consumer: warp 1 sums (i + 1) * stage[lane]
CONSUMER:
    mov.u32 %r20, 0;
CONSUME:
    and.b32 %r3, %r2, 1;
    shr.u32 %r4, %r2, 1;
    and.b32 %r4, %r4, 1;                 // full parity
    shl.b32 %r5, %r3, 3;
    mov.u32 %r6, full;
    add.u32 %r6, %r6, %r5;
WAIT_FULL:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r6], %r4;
    @!%p2 bra WAIT_FULL;
    shl.b32 %r8, %r3, 7;
    shl.b32 %r9, %r30, 2;
    add.u32 %r8, %r8, %r9;
    mov.u32 %r10, buf;
    add.u32 %r8, %r8, %r10;
    ld.shared.u32 %r7, [%r8];
    add.u32 %r2, %r2, 1;
    mad.lo.u32 %r20, %r7, %r2, %r20;
    mov.u32 %r6, empty;
    add.u32 %r6, %r6, %r5;
    mbarrier.arrive.shared::cta.b64 _, [%r6];
    setp.lt.u32 %p3, %r2, {n};
    @%p3 bra CONSUME;
    sub.u64 %rd4, %rd0, 128;
    st.global.u32 [%rd4], %r20;          // out[lane]
DONE:
"""
PIPE_SHARED = (".shared .align 8 .b64 full[2];\n.shared .align 8 .b64 empty[2];\n"
               ".shared .align 16 .b32 buf[64];\n")


def pipeline(n: int, empty_flip: int = 1) -> str:
    body = "    setp.eq.u32 %p0, %r0, 0;\n" + PIPELINE.format(n=n, empty_flip=empty_flip)
    return entry(body, shared=PIPE_SHARED, params=".param .u64 pOut, .param .u64 pIn")


def test_producer_and_consumer_warps_through_mbarriers():
    n = 7
    data = np.random.default_rng(1).integers(1, 1000, size=(n, 32)).astype(np.uint32)
    out = run(pipeline(n), 64, data)
    want = (data.astype(np.int64) * np.arange(1, n + 1)[:, None]).sum(axis=0)
    assert out[:32].tolist() == want.tolist()


def test_producer_waiting_on_the_wrong_empty_parity_is_a_deadlock_naming_the_barrier():
    ptx = pipeline(3, empty_flip=0)      # waits for a phase of `empty` no consumer can complete
    data = np.ones((3, 32), dtype=np.uint32)
    e = hazard(ptx, 64, "deadlock", "// WAIT_EMPTY", data)
    assert "mbarrier" in e.detail and "can never complete" in e.detail


# ------------------------------------------------------------------ what Triton's warp-specialised PTX needs
def test_labels_in_nested_blocks_are_local_to_their_block():
    """Triton and CUTLASS inline each mbarrier wait as `{ .reg .pred complete; waitLoop: ... }`:
    the same label in several blocks, each branch going to its own block's label."""
    wait = """
    {{
    .reg .pred complete;
    waitLoop:
    mbarrier.try_wait.parity.shared::cta.b64 complete, [{bar}], 0;
    @!complete bra.uni waitLoop;
    }}"""
    ptx = entry("""
    setp.eq.u32 %p0, %r0, 0;
    @%p0 mbarrier.init.shared::cta.b64 [bars], 64;
    @%p0 mbarrier.init.shared::cta.b64 [bars+8], 32;
    bar.sync 0;
    mbarrier.arrive.shared::cta.b64 _, [bars];
""" + wait.format(bar="bars") + """
    setp.ne.u32 %p1, %r31, 0;
    @%p1 mbarrier.arrive.shared::cta.b64 _, [bars+8];
""" + wait.format(bar="bars+8") + """
    st.global.u32 [%rd0], %r0;
""", shared=".shared .align 8 .b64 bars[2];\n")
    assert run(ptx, 64).tolist() == list(range(64))


@pytest.mark.parametrize("value, ok", [("7", True), ("%r0", False)])
def test_threads_storing_one_shared_word_in_one_instruction_need_the_same_value(value, ok):
    """Triton's warp-specialised prologue has every thread store one constant to the same word."""
    ptx = entry(f"""
    st.shared.u32 [word], {value};       // ST
    bar.sync 0;
    ld.shared.u32 %r4, [word];
    st.global.u32 [%rd0], %r4;
""", shared=".shared .align 4 .b32 word;\n")
    if ok:
        assert run(ptx, 64).tolist() == [7] * 64
    else:
        e = hazard(ptx, 64, "race", "// ST")
        assert "same instruction" in e.detail


# ------------------------------------------------------------------ wgmma: the whole warpgroup together
def _wgmma(after_fence: str, tail: str = ""):
    from test_sim_wgmma import _launch, wgmma_ptx
    step = ["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {D}, %rd10, %rd11, %p2, 1, 1, 0, 0;   // WGMMA"]
    ptx = wgmma_ptx(8, step + ([tail] if tail else []), 8192, 2048, after_fence=after_fence)
    return ptx, lambda: _launch(ptx)


def test_warps_of_a_warpgroup_that_reconverge_before_wgmma_are_fine():
    _, go = _wgmma("    setp.ge.u32 %p4, %r0, 64;\n    @%p4 bra JOIN;       // warps 2-3 skip ahead\n"
                   "    add.u32 %r9, %r0, 1;\nJOIN:")
    _, plain = _wgmma("")
    np.testing.assert_array_equal(go(), plain())


def test_wgmma_by_part_of_a_warpgroup_is_divergence():
    ptx, go = _wgmma("    setp.ge.u32 %p4, %r0, 64;\n    @%p4 bra SKIP;       // warps 2-3 skip the wgmma",
                     "SKIP:")
    with pytest.raises(sim.HazardError) as e:
        go()
    assert e.value.kind == "divergence" and e.value.line == line_of(ptx, "// WGMMA")
    assert "2 of the 4 warps of warpgroup 0" in e.value.detail
