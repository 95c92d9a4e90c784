"""cp.async: sizes, zero-fill, commit groups, waits, and the hazards around them (docs/ptx_facts/cp_async.md §5)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of

PARAMS = ".param .u64 pOut, .param .u64 pIn, .param .u32 srcsize"


def copy_kernel(copy: str, size: int, extra_wait: str = "cp.async.wait_all;") -> str:
    """Thread t copies `size` bytes from in[t*size] to shared, waits, and writes them to out[t*size]."""
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    ld.param.u32 %r9, [srcsize];
    mul.wide.u32 %rd3, %r1, {size};
    add.u64 %rd4, %rd1, %rd3;
    mov.u32 %r2, buf;
    mad.lo.u32 %r3, %r1, {size}, %r2;
    {copy}
    {extra_wait}
    ld.shared.v{size // 4 if size > 4 else 1}.u32 {_regs(size)}, [%r3];
    add.u64 %rd5, %rd2, %rd3;
    st.global.v{size // 4 if size > 4 else 1}.u32 [%rd5], {_regs(size)};
    ret;""".replace(".v1.", "."), params=PARAMS, shared=".shared .align 16 .b8 buf[512];")


def _regs(size: int) -> str:
    n = max(1, size // 4)
    names = ", ".join(f"%r{10 + i}" for i in range(n))
    return f"{{{names}}}" if n > 1 else names


@pytest.mark.parametrize("level,size", [("ca", 4), ("ca", 8), ("ca", 16), ("cg", 16)])
def test_copy_sizes(level, size):
    ptx = copy_kernel(f"cp.async.{level}.shared.global [%r3], [%rd4], {size};", size)
    src = np.random.default_rng(size).integers(0, 255, 32 * size, dtype=np.uint8)
    out = np.zeros_like(src)
    res = sim.launch(ptx, "k", block=(32,), args=[out, src, 0])
    assert np.array_equal(out, src)
    line = line_of(ptx, "cp.async." + level)
    phases = {4: 1, 8: 2, 16: 4}[size]
    assert res.smem_wavefronts[line] == (phases, phases)


def test_src_size_zero_fills_and_zero_reads_nothing():
    ptx = copy_kernel("cp.async.ca.shared.global.L2::128B [%r3], [%rd4], 16, %r9;", 16)
    src = np.arange(32 * 16, dtype=np.uint8)
    for n in (16, 5, 0):
        out = np.full_like(src, 0xAA)
        sim.launch(ptx, "k", block=(32,), args=[out, src, n])
        rows, want = out.reshape(32, 16), src.reshape(32, 16).copy()
        want[:, n:] = 0
        assert np.array_equal(rows, want), n
    # with src-size 0 the source address may point anywhere: here 1 MiB past the array
    far = copy_kernel("add.u64 %rd4, %rd4, 1048576;\n    cp.async.cg.shared.global [%r3], [%rd4], 16, 0;", 16)
    out = np.full_like(src, 0xAA)
    sim.launch(far, "k", block=(32,), args=[out, src, 0])
    assert not out.any()
    with pytest.raises(sim.HazardError) as err:
        sim.launch(far.replace("16, 0;", "16, 4;"), "k", block=(32,), args=[out, src, 0])
    assert err.value.kind == "out-of-bounds"


def test_ignore_src_predicate_writes_zeros():
    ptx = copy_kernel("setp.ge.u32 %p1, %r1, 16;\n    cp.async.ca.shared.global [%r3], [%rd4], 8, %p1;", 8)
    src = np.arange(1, 32 * 8 + 1, dtype=np.uint8)
    out = np.full_like(src, 0xAA)
    sim.launch(ptx, "k", block=(32,), args=[out, src, 0])
    assert np.array_equal(out[:128], src[:128]) and not out[128:].any()


GROUPS = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    mov.u32 %r2, buf;
    shl.b32 %r4, %r1, 2;
    add.u32 %r3, %r2, %r4;
    cp.async.ca.shared.global [%r3], [%rd4], 4;            // group 0
    cp.async.commit_group;
    cp.async.ca.shared.global [%r3+128], [%rd4+128], 4;    // group 1
    cp.async.commit_group;
    cp.async.ca.shared.global [%r3+256], [%rd4+256], 4;    // group 2
    cp.async.commit_group;
    cp.async.ca.shared.global [%r3+384], [%rd4+384], 4;    // never committed
    WAIT
    ld.shared.u32 %r10, [%r3+OFFSET];  // READ
    ld.param.u64 %rd2, [pOut];
    add.u64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r10;
    cp.async.wait_all;                 // what is still in flight lands before the CTA exits
    ret;"""


@pytest.mark.parametrize("wait,offset,ok", [
    ("cp.async.wait_group 1;", 128, True),     # groups 0 and 1 complete
    ("cp.async.wait_group 1;", 256, False),    # group 2 may still be in flight
    ("cp.async.wait_group 0;", 256, True),
    ("cp.async.wait_group 0;", 384, False),    # uncommitted copies are not covered by wait_group
    ("cp.async.wait_all;", 384, True),         # ... but wait_all commits them first
    ("", 0, False),
])
def test_wait_group_completes_all_but_the_newest_n(wait, offset, ok):
    ptx = kernel(GROUPS.replace("WAIT", wait).replace("OFFSET", str(offset)),
                 params=PARAMS, shared=".shared .align 16 .b8 buf[512];")
    src = np.arange(128, dtype=np.uint32)
    out = np.zeros(32, dtype=np.uint32)
    if ok:
        sim.launch(ptx, "k", block=(32,), args=[out, src, 0])
        assert out.tolist() == src[offset // 4:offset // 4 + 32].tolist()
    else:
        with pytest.raises(sim.HazardError) as err:
            sim.launch(ptx, "k", block=(32,), args=[out, src, 0])
        assert err.value.kind == "async-pending"
        assert err.value.line == line_of(ptx, "// READ")


def test_landed_data_needs_a_barrier_before_other_threads_read_it():
    body = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    mov.u32 %r2, buf;
    shl.b32 %r4, %r1, 2;
    add.u32 %r3, %r2, %r4;
    cp.async.ca.shared.global [%r3], [%rd4], 4;
    cp.async.wait_all;
    BARRIER
    xor.b32 %r5, %r4, 4;                 // read the neighbour's word
    add.u32 %r6, %r2, %r5;
    ld.shared.u32 %r10, [%r6];           // READ
    ld.param.u64 %rd2, [pOut];
    add.u64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r10;
    ret;"""
    src = np.arange(32, dtype=np.uint32) * 3
    out = np.zeros(32, dtype=np.uint32)
    good = kernel(body.replace("BARRIER", "bar.sync 0;"), params=PARAMS, shared=".shared .align 16 .b8 buf[128];")
    sim.launch(good, "k", block=(32,), args=[out, src, 0])
    assert out.tolist() == (src[np.arange(32) ^ 1]).tolist()
    bad = kernel(body.replace("BARRIER", ""), params=PARAMS, shared=".shared .align 16 .b8 buf[128];")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(bad, "k", block=(32,), args=[out, src, 0])
    assert (err.value.kind, err.value.line) == ("race", line_of(bad, "// READ"))


def test_copy_into_pending_bytes_is_flagged():
    ptx = copy_kernel("cp.async.ca.shared.global [%r3], [%rd4], 4;\n"
                      "    cp.async.ca.shared.global [%r3], [%rd4], 4;  // AGAIN", 4)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(32,), args=[np.zeros(32, np.uint32), np.zeros(32, np.uint32), 0])
    assert (err.value.kind, err.value.line) == ("async-pending", line_of(ptx, "// AGAIN"))


def test_copy_checks_alignment_and_cg_size():
    ptx = copy_kernel("add.u32 %r3, %r3, 8;\n    cp.async.cg.shared.global [%r3], [%rd4], 16;  // HERE", 16)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(16,), args=[np.zeros(512, np.uint8), np.zeros(512, np.uint8), 0])
    assert (err.value.kind, err.value.line) == ("misaligned", line_of(ptx, "// HERE"))
    ptx = copy_kernel("cp.async.cg.shared.global [%r3], [%rd4], 8;  // HERE", 8)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(16,), args=[np.zeros(512, np.uint8), np.zeros(512, np.uint8), 0])
    assert (err.value.kind, err.value.line) == ("unsupported", line_of(ptx, "// HERE"))


# ------------------------------------------------------------------ narrow copies (unaligned operands)
@pytest.mark.parametrize("size", [4, 8])
def test_narrow_ca_copies_zero_fill_every_src_size(size):
    ptx = copy_kernel(f"cp.async.ca.shared.global [%r3], [%rd4], {size}, %r9;", size)
    src = np.arange(1, 32 * size + 1, dtype=np.uint8)
    for n in range(size + 1):
        out = np.full_like(src, 0xAA)
        sim.launch(ptx, "k", block=(32,), args=[out, src, n])
        want = src.reshape(32, size).copy()
        want[:, n:] = 0
        assert np.array_equal(out.reshape(32, size), want), n


@pytest.mark.parametrize("size,shift,where", [(8, 4, "global"), (4, 2, "global"), (8, 4, "shared")])
def test_narrow_copies_need_natural_alignment(size, shift, where):
    move = f"add.u64 %rd4, %rd4, {shift};" if where == "global" else f"add.u32 %r3, %r3, {shift};"
    ptx = copy_kernel(f"{move}\n    cp.async.ca.shared.global [%r3], [%rd4], {size};  // HERE", size)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(16,), args=[np.zeros(512, np.uint8), np.zeros(512, np.uint8), 0])
    assert (err.value.kind, err.value.line) == ("misaligned", line_of(ptx, "// HERE"))
    # with src-size 0 nothing is read, so only the destination's alignment is checked
    # (as for the out-of-bounds source in test_src_size_zero_fills_and_zero_reads_nothing)
    zero = ptx.replace(f"[%rd4], {size};", f"[%rd4], {size}, 0;")
    if where == "global":
        sim.launch(zero, "k", block=(16,), args=[np.zeros(512, np.uint8), np.zeros(512, np.uint8), 0])
    else:
        with pytest.raises(sim.HazardError):
            sim.launch(zero, "k", block=(16,), args=[np.zeros(512, np.uint8), np.zeros(512, np.uint8), 0])
