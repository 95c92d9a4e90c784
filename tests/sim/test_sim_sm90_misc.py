"""stmatrix, elect.sync, setmaxnreg, griddepcontrol and the cluster special registers (sm_90a)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of


def sm90(ptx: str, version: str = "8.0") -> str:
    return ptx.replace(".version 7.8\n.target sm_80\n", f".version {version}\n.target sm_90a\n", 1)


ROW_STRIDE, MAT_STRIDE = 32, 256


def stmatrix_kernel(count: int, trans: bool) -> str:
    """Lane l's register j = l * 16 + j in both halves' high byte pattern (see values()); rows of
    matrix j at buf + j*256 + r*32; then every thread copies 32 bytes of buf to pOut."""
    regs = ", ".join(f"%r{20 + j}" for j in range(count))
    body = f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    mov.u32 %r2, buf;
    mul.wide.u32 %rd3, %r1, {4 * count};
    add.u64 %rd4, %rd1, %rd3;
""" + "".join(f"    ld.global.u32 %r{20 + j}, [%rd4+{4 * j}];\n" for j in range(count)) + f"""
    shr.u32 %r12, %r1, 3;
    and.b32 %r13, %r1, 7;
    mul.lo.u32 %r14, %r12, {MAT_STRIDE};
    mad.lo.u32 %r14, %r13, {ROW_STRIDE}, %r14;
    add.u32 %r14, %r14, %r2;
    stmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 [%r14], {{{regs}}};  // STM
    bar.sync 0;
    shl.b32 %r3, %r1, 5;
    add.u32 %r3, %r3, %r2;
    ld.shared.v4.u32 {{%r4, %r5, %r6, %r7}}, [%r3];
    ld.shared.v4.u32 {{%r8, %r9, %r10, %r11}}, [%r3+16];
    mul.wide.u32 %rd5, %r1, 32;
    add.u64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {{%r4, %r5, %r6, %r7}};
    st.global.v4.u32 [%rd6+16], {{%r8, %r9, %r10, %r11}};
    ret;"""
    return sm90(kernel(body, params=".param .u64 pOut, .param .u64 pIn",
                       shared=".shared .align 128 .b8 buf[1024];"))


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_places_fragments_as_the_sheet_says(count, trans):
    regs = np.random.default_rng(count + 3 * trans).integers(1, 1 << 16, (32, count, 2), dtype=np.uint16)
    out = np.zeros(1024, dtype=np.uint8)
    ptx = stmatrix_kernel(count, trans)
    res = sim.launch(ptx, "k", block=(32,), args=[out, regs.copy()])
    # rows 32 bytes apart: 8 rows of a matrix cover 256 bytes, two rows share each bank quad
    assert res.smem_wavefronts[line_of(ptx, "STM")] == (2 * count, count)
    halves = out.view(np.uint16)
    for j in range(count):
        for lane in range(32):
            for h in range(2):
                g, t = lane >> 2, lane & 3
                r, c = (2 * t + h, g) if trans else (g, 2 * t + h)     # docs/ptx_facts/shared_memory.md §4, inverted
                assert halves[(j * MAT_STRIDE + r * ROW_STRIDE) // 2 + c] == regs[lane, j, h]


def _elect_kernel(guard: str, mask: str) -> str:
    return sm90(kernel(f"""
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p3, %r1, 5;
    mov.u32 %r2, 99;
    {guard}elect.sync %r2|%p1, {mask};   // ELECT
    selp.u32 %r3, 1, 0, %p1;
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r1, 8;
    add.u64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {{%r2, %r3}};
    ret;"""))


def test_elect_sync_elects_the_lowest_member_lane():
    out = np.zeros((64, 2), dtype=np.uint32)
    sim.launch(_elect_kernel("", "0xffffffff"), "k", block=(64,), args=[out])
    assert (out[:, 0] == 0).all() and out[:, 1].tolist() == [1 if lane % 32 == 0 else 0 for lane in range(64)]
    sim.launch(_elect_kernel("@%p3 ", "0xffffffe0"), "k", block=(64,), args=[out])
    assert out[5:32, 0].tolist() == [5] * 27 and out[:5, 0].tolist() == [99] * 5
    assert out[:32, 1].tolist() == [0] * 5 + [1] + [0] * 26   # %p1 of lanes 0-4 is never written
    assert out[32:, 0].tolist() == [5] * 32 and out[32:, 1].tolist() == [0] * 5 + [1] + [0] * 26


def test_elect_sync_member_not_executing_is_divergence():
    ptx = _elect_kernel("@%p3 ", "0xffffffff")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(32,), args=[np.zeros((32, 2), np.uint32)])
    assert e.value.kind == "divergence" and e.value.line == line_of(ptx, "ELECT")


def _setmaxnreg(n: int, target_sm90a: bool = True) -> str:
    ptx = kernel(f"    setmaxnreg.inc.sync.aligned.u32 {n};   // SMR\n    griddepcontrol.wait;\n"
                 "    griddepcontrol.launch_dependents;\n    ret;")
    return sm90(ptx) if target_sm90a else ptx


def test_setmaxnreg_checks_count_target_and_warpgroups():
    sim.launch(_setmaxnreg(232), "k", block=(256,), args=[np.zeros(1)])
    for bad in (20, 236, 264):
        with pytest.raises(sim.HazardError) as e:
            sim.launch(_setmaxnreg(bad), "k", block=(128,), args=[np.zeros(1)])
        assert e.value.kind == "unsupported" and "multiple of 8" in e.value.detail
    with pytest.raises(sim.HazardError) as e:
        sim.launch(_setmaxnreg(40, target_sm90a=False), "k", block=(128,), args=[np.zeros(1)])
    assert e.value.kind == "unsupported" and "sm_90a" in e.value.detail
    with pytest.raises(sim.HazardError) as e:
        sim.launch(_setmaxnreg(40), "k", block=(96,), args=[np.zeros(1)])
    assert e.value.kind == "divergence" and e.value.line == line_of(_setmaxnreg(40), "SMR")


@pytest.mark.parametrize("version", ["8.0", "8.8", "9.0"])
def test_cluster_special_registers_describe_one_cta_clusters(version):
    body = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 32;
    add.u64 %rd3, %rd1, %rd2;
    mov.u32 %r2, %clusterid.x;
    mov.u32 %r3, %nclusterid.x;
    mov.u32 %r4, %cluster_ctaid.x;
    mov.u32 %r5, %cluster_nctaid.y;
    mov.u32 %r6, %cluster_ctarank;
    mov.u32 %r7, %cluster_nctarank;
    selp.u32 %r8, 1, 0, %is_explicit_cluster;
    st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r5};
    st.global.v4.u32 [%rd3+16], {%r6, %r7, %r8, %r1};
    ret;"""
    out = np.zeros((3, 8), dtype=np.uint32)
    sim.launch(sm90(kernel(body), version), "k", grid=(3,), block=(1,), args=[out])
    assert out.tolist() == [[c, 3, 0, 1, 0, 1, 0, c] for c in range(3)]


def _split_setmaxnreg(idle: str, producer: str) -> str:
    """Gluon's warp_specialize shape: warpgroup 1 holds one producer warp (4) and three idle warps,
    which reach their setmaxnreg at different PTX lines; warpgroup 0 raises its registers."""
    return sm90(kernel(f"""
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    setp.lt.u32 %p1, %r2, 4;
    @%p1 bra CONSUMER;
    setp.eq.u32 %p2, %r2, 4;
    @%p2 bra PRODUCER;
    {idle}   // IDLE
    bra.uni DONE;
PRODUCER:
    {producer}
    ret;   // PRODUCER_RET
CONSUMER:
    setmaxnreg.inc.sync.aligned.u32 232;
DONE:
    ret;"""))


def test_setmaxnreg_may_be_reached_at_different_lines_by_the_warps_of_a_warpgroup():
    """What the warpgroup must agree on is the setmaxnreg each warp executes (action and count, in
    order), not its PTX line: Gluon's idle and producer warps of one warpgroup reach theirs in
    different blocks. A different count, or a warp that exits without it, is still a hazard."""
    dec40 = "setmaxnreg.dec.sync.aligned.u32 40;"
    sim.launch(_split_setmaxnreg(dec40, dec40), "k", block=(256,), args=[np.zeros(1)])
    twice = dec40 + "\n    setmaxnreg.inc.sync.aligned.u32 40;"
    sim.launch(_split_setmaxnreg(twice, twice), "k", block=(256,), args=[np.zeros(1)])
    bad = _split_setmaxnreg("setmaxnreg.dec.sync.aligned.u32 48;", dec40)
    with pytest.raises(sim.HazardError) as e:
        sim.launch(bad, "k", block=(256,), args=[np.zeros(1)])
    assert e.value.kind == "divergence" and "40" in e.value.detail and "48" in e.value.detail
    missing = _split_setmaxnreg(dec40, "")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(missing, "k", block=(256,), args=[np.zeros(1)])
    assert e.value.kind == "divergence" and e.value.line == line_of(missing, "PRODUCER_RET")
    assert "warp 4" in e.value.detail
