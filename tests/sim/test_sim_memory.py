"""ld/st widths and address forms, parameters, special registers, shared layout and launch checks."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import HEADER, kernel


def run(ptx, *args, block=(32,), grid=(1,), **kw):
    return sim.launch(ptx, "k", grid=grid, block=block, args=list(args), **kw)


def test_loads_extend_by_type_and_stores_truncate():
    src = np.array([0x80, 0x7F, 0xFF, 0x01, 0x34, 0x12, 0xFE, 0xFF], dtype=np.uint8)
    ptx = kernel("""
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    ld.global.s8 %r1, [%rd1];           // 0x80 -> -128 sign-extended into 32 bits
    ld.global.u8 %r2, [%rd1];           // 0x80 -> 128
    ld.global.b16 %r3, [%rd1+4];        // 0x1234 zero-extended
    ld.global.s16 %r4, [%rd1+6];        // 0xFFFE -> -2
    ld.global.u16 %h1, [%rd1+4];
    st.global.u32 [%rd2], %r1;
    st.global.u32 [%rd2+4], %r2;
    st.global.u32 [%rd2+8], %r3;
    st.global.u32 [%rd2+12], %r4;
    st.global.u8 [%rd2+16], %r3;        // truncates to 0x34
    st.global.b16 [%rd2+18], %h1;
    ret;""", params=".param .u64 pOut, .param .u64 pIn")
    out = np.zeros(5, dtype=np.uint32)
    run(ptx, out, src, block=(1,))
    assert out[:4].view(np.int32).tolist() == [-128, 128, 0x1234, -2]
    assert int(out[4]) == 0x1234_0034


@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("vec,typ,dtype", [(1, "b64", np.uint64), (2, "u32", np.uint32), (4, "f32", np.float32),
                                           (2, "f64", np.float64), (4, "s32", np.int32), (2, "b16", np.uint16)])
def test_vector_loads_and_stores_round_trip(space, vec, typ, dtype):
    size = np.dtype(dtype).itemsize
    width = vec * size
    regs = ", ".join(f"%v{i}" for i in range(vec))
    reg_type = {"b64": "b64", "u32": "b32", "f32": "f32", "f64": "f64", "s32": "s32", "b16": "b16"}[typ]
    vdecl = f"    .reg .{reg_type} %v<4>;\n"
    operand = f"{{{regs}}}" if vec > 1 else "%v0"
    vt = f".v{vec}" if vec > 1 else ""
    if space == "global":
        move = f"    ld.global{vt}.{typ} {operand}, [%rd3];\n"
    else:  # thread t writes slot 31-t, barrier, then reads slot t back
        move = (f"    ld.global{vt}.{typ} {operand}, [%rd3];\n    mov.u32 %r2, buf;\n    sub.u32 %r3, 31, %r1;\n"
                f"    mad.lo.u32 %r4, %r3, {width}, %r2;\n    st.shared{vt}.{typ} [%r4], {operand};\n"
                f"    bar.sync 0;\n    mad.lo.u32 %r5, %r1, {width}, %r2;\n"
                f"    ld.shared{vt}.{typ} {operand}, [%r5];\n")
    ptx = kernel(f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    mul.wide.u32 %rd4, %r1, {width};
    add.u64 %rd3, %rd1, %rd4;
{move}    add.u64 %rd5, %rd2, %rd4;
    st.global{vt}.{typ} [%rd5], {operand};
    ret;""", params=".param .u64 pOut, .param .u64 pIn", regs=vdecl,
                 shared=f".shared .align 16 .b8 buf[{32 * width}];")
    rng = np.random.default_rng(vec * 10 + size)
    src = rng.integers(0, 255, size=32 * width, dtype=np.uint8).view(dtype)
    out = np.zeros_like(src)
    res = run(ptx, out, src)
    expect = src.reshape(32, vec)
    if space == "shared":
        expect = expect[::-1]
        lines = sorted(res.smem_wavefronts)
        assert len(lines) == 2
    assert out.view(np.uint8).tobytes() == np.ascontiguousarray(expect).view(np.uint8).tobytes()


def test_address_forms_symbol_plus_offset_and_negative_offsets():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    mov.u32 %r2, 11;
    mov.u32 %r3, 22;
    @%p1 st.shared.u32 [sym], %r2;
    @%p1 st.shared.u32 [sym+4], %r3;
    bar.sync 0;
    mov.u32 %r4, sym;
    add.u32 %r4, %r4, 8;
    ld.shared.u32 %r5, [%r4+-8];
    ld.shared.u32 %r6, [%r4-4];
    add.u32 %r7, %r5, %r6;
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r7;
    ret;""", shared=".shared .align 4 .b8 pad[12];\n.shared .align 8 .b8 sym[8];")
    out = np.zeros(32, dtype=np.uint32)
    run(ptx, out)
    assert out.tolist() == [33] * 32


def test_shared_layout_honours_alignment_and_puts_extern_last():
    ptx = (HEADER + ".shared .align 4 .b8 a[5];\n.extern .shared .align 16 .b8 dyn[];\n"
           ".visible .entry k(.param .u64 pOut)\n{\n    .reg .b32 %r<8>;\n    .reg .b64 %rd<4>;\n"
           "    .shared .align 64 .b8 b[3];\n    .shared .align 2 .b16 c[3];\n"
           "    mov.u32 %r1, a;\n    mov.u32 %r2, b;\n    mov.u32 %r3, c;\n    mov.u32 %r4, dyn;\n"
           "    cvta.shared.u64 %rd2, %r4;\n    mov.u32 %r5, 77;\n    st.u32 [%rd2+12], %r5;\n"
           "    cvta.to.shared.u64 %rd3, %rd2;\n    cvt.u32.u64 %r6, %rd3;\n    ld.shared.u32 %r7, [%r6+12];\n"
           "    ld.param.u64 %rd1, [pOut];\n"
           "    st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};\n    st.global.v2.u32 [%rd1+16], {%r6, %r7};\n"
           "    ret;\n}\n")
    out = np.zeros(6, dtype=np.uint32)
    run(ptx, out, block=(1,), dynamic_smem=16)
    assert out.tolist() == [0, 64, 68, 80, 80, 77]
    with pytest.raises(sim.HazardError) as err:
        run(ptx, out, block=(1,), dynamic_smem=8)   # the generic store at dyn+12 overruns 8 bytes
    assert err.value.kind == "out-of-bounds"


def test_special_registers_over_a_3d_grid_and_cta_subset():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;  mov.u32 %r2, %tid.y;  mov.u32 %r3, %tid.z;
    mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y; mov.u32 %r6, %ntid.z;
    mov.u32 %r7, %ctaid.x; mov.u32 %r8, %ctaid.y; mov.u32 %r9, %ctaid.z;
    mov.u32 %r10, %nctaid.x; mov.u32 %r11, %nctaid.y; mov.u32 %r12, %nctaid.z;
    mov.u32 %r13, %laneid; mov.u32 %r14, %warpid;
    mad.lo.u32 %r20, %r3, %r5, %r2;
    mad.lo.u32 %r20, %r20, %r4, %r1;          // linear thread id
    mad.lo.u32 %r21, %r9, %r11, %r8;
    mad.lo.u32 %r21, %r21, %r10, %r7;         // linear CTA id
    mul.lo.u32 %r22, %r4, %r5;
    mul.lo.u32 %r22, %r22, %r6;               // threads per CTA
    mad.lo.u32 %r23, %r21, %r22, %r20;        // global thread index
    ld.param.u64 %rd1, [pOut];
    mul.wide.u32 %rd2, %r23, 16;
    add.u64 %rd1, %rd1, %rd2;
    st.global.v4.u32 [%rd1], {%r13, %r14, %r21, %r12};
    ret;""")
    block, grid = (8, 5, 2), (3, 2, 2)
    nthreads, nctas = 80, 12
    out = np.full((nctas * nthreads, 4), 0xDEAD, dtype=np.uint32)
    res = run(ptx, out, block=block, grid=grid, ctas=[(2, 1, 1), (0, 0, 0)])
    assert res.ctas == 2
    for cta in (0, 2 + 3 * (1 + 2 * 1)):
        rows = out[cta * nthreads:(cta + 1) * nthreads]
        assert rows[:, 0].tolist() == [t % 32 for t in range(nthreads)]
        assert rows[:, 1].tolist() == [t // 32 for t in range(nthreads)]
        assert set(rows[:, 2].tolist()) == {cta} and set(rows[:, 3].tolist()) == {2}
    untouched = np.ones(nctas, dtype=bool)
    untouched[[0, 11]] = False
    assert (out.reshape(nctas, nthreads, 4)[untouched] == 0xDEAD).all()


def test_scalar_parameters_are_typed_by_declaration():
    ptx = kernel("""
    ld.param.u32 %r1, [a];
    ld.param.s32 %r2, [b];
    ld.param.f32 %f1, [c];
    ld.param.u64 %rd2, [d];
    ld.param.u64 %rd1, [pOut];
    st.global.v2.u32 [%rd1], {%r1, %r2};
    st.global.f32 [%rd1+8], %f1;
    st.global.u64 [%rd1+16], %rd2;
    ret;""", params=".param .u64 pOut, .param .u32 a, .param .s32 b, .param .f32 c, .param .u64 d")
    out = np.zeros(3, dtype=np.uint64)
    run(ptx, out, 4000000000, -5, 1.5, 1 << 40, block=(1,))
    words = out.view(np.uint32)
    assert int(words[0]) == 4000000000 and int(words[1]) == (-5) & 0xFFFFFFFF
    assert float(out[1:2].view(np.float32)[0]) == 1.5
    assert int(out[2]) == 1 << 40
    with pytest.raises(ValueError):
        run(ptx, out, 1, 2, 3.0, block=(1,))                 # missing argument
    with pytest.raises(TypeError):
        run(ptx, out, 1.0, 2, 3.0, 4, block=(1,))            # float for .u32
    with pytest.raises(TypeError):
        run(ptx, out, out, 2, 3.0, 4, block=(1,))            # array for .u32
    with pytest.raises(ValueError):
        run(ptx, out, -1, 2, 3.0, 4, block=(1,))             # out of range for .u32
    with pytest.raises(TypeError):
        run(ptx, out, 1, 2, "x", 4, block=(1,))


def test_arrays_get_distinct_aligned_addresses_and_write_through_any_layout():
    ptx = kernel("""
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pB];
    ld.param.u64 %rd3, [pC];
    st.global.v2.u64 [%rd1], {%rd2, %rd3};
    mov.f32 %f1, 0f40490FDB;
    st.global.f32 [%rd3+4], %f1;             // element [1,0] of an F-ordered 2x2
    ret;""", params=".param .u64 pOut, .param .u64 pB, .param .u64 pC")
    out = np.zeros(2, dtype=np.uint64)
    b = np.zeros(3, dtype=np.uint8)
    c = np.asfortranarray(np.zeros((2, 2), dtype=np.float32))
    res = run(ptx, out, b, c, block=(1,))
    addrs = [int(out[0]), int(out[1])]
    assert addrs == [res.global_addresses["pB"], res.global_addresses["pC"]]
    assert all(a % 256 == 0 and a > 0 for a in addrs) and addrs[1] >= addrs[0] + 3
    assert c[1, 0] == np.float32(np.pi) and c[0, 1] == 0
    with pytest.raises(ValueError, match="contiguous"):
        run(ptx, out, b, np.zeros((4, 4), np.float32)[:, ::2], block=(1,))


def test_launch_checks_block_against_reqntid_and_maxntid():
    ptx = kernel("    ret;", directives="\n.reqntid 64, 1, 1")
    run(ptx, np.zeros(1), block=(64,))
    with pytest.raises(ValueError, match="reqntid"):
        run(ptx, np.zeros(1), block=(32,))
    ptx = kernel("    ret;", directives="\n.maxntid 64, 1, 1\n.minnctapersm 2")
    with pytest.raises(ValueError, match="maxntid"):
        run(ptx, np.zeros(1), block=(96,))


def test_instruction_count_follows_loops_and_exits():
    ptx = kernel("""
    mov.u32 %r1, %tid.x;                   // 1
    mov.u32 %r2, 0;                        // 2
$L_top:
    add.u32 %r2, %r2, 1;                   // 5 times
    setp.lt.u32 %p1, %r2, 5;
    @%p1 bra $L_top;
    setp.ge.u32 %p2, %r1, 40;              // 1
    @%p2 ret;                              // 1 (threads 40.. exit)
    ld.param.u64 %rd1, [pOut];             // remaining threads only
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r2;
    ret;""")
    out = np.zeros(64, dtype=np.uint32)
    res = run(ptx, out, block=(50,))
    assert res.instructions == 50 * (2 + 5 * 3 + 2) + 40 * 5
    assert out[:40].tolist() == [5] * 40 and not out[40:].any()


def test_comments_labels_and_directives_parse():
    ptx = HEADER + """
// line comment with braces { } and ; semicolons
/* block
   comment ; { */
.visible .entry k(
    .param .u64 .ptr .global .align 16 pOut   // qualified pointer parameter
)
.maxntid 32, 1, 1
{
    .reg .b32 r<3>;
    .reg .b64 rd1;
    .reg .pred p;
    mov.u32 r0, 5; mov.u32 r1, 6;
START: add.u32 r2, r0, r1; /* inline */ setp.eq.u32 p, r2, 11;
    @!p bra.uni START;
    ld.param.u64 rd1, [pOut];
    st.global.u32 [rd1], r2;
    ret;
}
"""
    out = np.zeros(1, dtype=np.uint32)
    run(ptx, out, block=(1,))
    assert int(out[0]) == 11


# ------------------------------------------------------------------ narrow accesses (unaligned operands)
NARROW = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    mul.wide.u32 %rd3, %r1, 2;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.b16 %h1, [%rd4+OFF];        // LD16: element t of a matrix starting OFF bytes in
    ld.global.u16 %r2, [%rd4+OFF];        // zero-extended into 32 bits
    mov.u32 %r3, buf;
    xor.b32 %r4, %r1, 1;
    shl.b32 %r4, %r4, 1;
    add.u32 %r4, %r3, %r4;
    st.shared.b16 [%r4], %h1;             // ST16: neighbour's slot
    bar.sync 0;
    shr.u32 %r5, %r1, 1;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r3, %r5;
    and.b32 %r6, %r1, 1;
    setp.eq.u32 %p1, %r6, 0;
    @%p1 ld.shared.v2.b16 {%h2, %h3}, [%r5];          // pairs of the swapped row
    @%p1 ld.shared.b32 %r7, [%r5];
    bar.sync 0;
    @%p1 st.shared.v2.b16 [%r5+SOFF], {%h3, %h2};     // ST32
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd6, %rd2, %rd5;
    @%p1 st.global.v2.b16 [%rd6], {%h2, %h3};
    @%p1 st.global.b32 [%rd6+128], %r7;
    st.global.u32 [%rd6+256], %r2;
    ret;"""


def narrow(off: int = 2, soff: int = 128) -> str:
    return kernel(NARROW.replace("SOFF", str(soff)).replace("OFF", str(off)),
                  params=".param .u64 pOut, .param .u64 pIn", shared=".shared .align 16 .b8 buf[256];")


def test_16_bit_global_loads_and_shared_stores_of_an_unaligned_f16_operand():
    src = np.arange(1000, 1033, dtype=np.uint16)          # operand starts at element 1 (2 bytes in)
    out = np.zeros(96, dtype=np.uint32)
    run(narrow(), out, src)
    swapped = src[1:][np.arange(32) ^ 1]                  # shared slot t holds element t ^ 1
    pairs = swapped.view(np.uint32)                       # (lo, hi) = (slot 2i, slot 2i+1)
    assert out[0:32:2].tolist() == pairs.tolist() and out[32:64:2].tolist() == pairs.tolist()
    assert out[64:96].tolist() == src[1:].astype(np.uint32).tolist()


@pytest.mark.parametrize("off,soff,marker", [(1, 128, "// LD16"), (2, 130, "// ST32")])
def test_narrow_accesses_check_alignment(off, soff, marker):
    from sim_util import line_of
    ptx = narrow(off, soff)
    with pytest.raises(sim.HazardError) as err:
        run(ptx, np.zeros(96, np.uint32), np.zeros(40, np.uint16))
    assert (err.value.kind, err.value.line) == ("misaligned", line_of(ptx, marker))


def test_shared_byte_column_gathered_with_u8_loads_and_packed_with_prmt():
    """The int8 fragment idiom for an M/N-contiguous tile: thread t reads byte t of 4 consecutive
    128-byte rows with ld.shared.u8 (zero-extended into .b32) and packs them, row 0 lowest."""
    from sim_util import line_of
    ptx = kernel("""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [pIn];
    mul.wide.u32 %rd2, %r0, 16;
    add.u64 %rd1, %rd1, %rd2;
    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
    mov.u32 %r5, buf;
    shl.b32 %r6, %r0, 4;
    add.u32 %r6, %r5, %r6;
    st.shared.v4.u32 [%r6], {%r1, %r2, %r3, %r4};
    bar.sync 0;
    add.u32 %r7, %r5, %r0;
    ld.shared.u8 %r10, [%r7];        // ROW0
    ld.shared.u8 %r11, [%r7+128];
    ld.shared.u8 %r12, [%r7+256];
    ld.shared.u8 %r13, [%r7+384];
    prmt.b32 %r14, %r10, %r11, 0x0040;
    prmt.b32 %r15, %r12, %r13, 0x0040;
    prmt.b32 %r16, %r14, %r15, 0x5410;
    ld.param.u64 %rd3, [pOut];
    mul.wide.u32 %rd4, %r0, 8;
    add.u64 %rd3, %rd3, %rd4;
    st.global.v2.u32 [%rd3], {%r10, %r16};
    ret;""", params=".param .u64 pOut, .param .u64 pIn", shared=".shared .align 16 .b8 buf[512];")
    img = np.random.default_rng(3).integers(0, 256, size=(4, 128), dtype=np.uint8)
    out = np.zeros((32, 2), dtype=np.uint32)
    res = run(ptx, out, img.reshape(-1))
    assert out[:, 0].tolist() == img[0, :32].tolist()  # zero-extended byte
    assert out[:, 1].tolist() == img[:, :32].T.copy().view(np.uint32).reshape(-1).tolist()
    assert res.smem_wavefronts[line_of(ptx, "// ROW0")] == (1, 1)  # 32 bytes of one row: 8 words, 8 banks


def test_one_element_brace_is_the_scalar_as_ptxas_takes_it():
    """Triton writes unvectorised loads/stores as `ld.global.b32 { %r1 }, [...]`; ptxas reads a
    one-element brace as the scalar. Two elements still need .v2."""
    src = np.arange(1, 33, dtype=np.uint32)
    out = np.zeros(32, dtype=np.uint32)
    body = """
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd3, %r0, 4;
    add.u64 %rd1, %rd1, %rd3;
    add.u64 %rd2, %rd2, %rd3;
    ld.global.b32 { %r1 }, [ %rd1 + 0 ];
    add.u32 %r1, %r1, 100;
    st.global.b32 [ %rd2 + 0 ], { %r1 };
    ret;"""
    run(kernel(body, params=".param .u64 pOut, .param .u64 pIn"), out, src)
    assert np.array_equal(out, src + 100)
    two = body.replace("ld.global.b32 { %r1 }", "ld.global.b32 { %r1, %r2 }")
    with pytest.raises(sim.HazardError, match="vector of 2 but the instruction has no .v2/.v4"):
        run(kernel(two, params=".param .u64 pOut, .param .u64 pIn"), out, src)
