"""ldmatrix and mma.sync against numpy, with fragments built from the facts-sheet tables.

The fragment packing uses the tables transcribed in test_sim_layouts (the sheet's text), so these
tests do not rely on the simulator's own layout code.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of
from test_sim_layouts import (SHEET_A_16BIT, SHEET_A_K8_16BIT, SHEET_A_TF32, SHEET_B_16BIT,
                              SHEET_B_K8_16BIT, SHEET_B_TF32, SHEET_C_F16, SHEET_C_F32, _int8_a, _int8_b)

# ------------------------------------------------------------------ ldmatrix
ROW_STRIDE, MAT_STRIDE = 32, 256   # rows of 16 data bytes with 16-byte gaps; matrices 256 bytes apart


def ldmatrix_kernel(count: int, trans: bool, order: str = "m8n8.{x}") -> str:
    regs = ", ".join(f"%r{20 + j}" for j in range(count))
    qual = order.format(x=f"x{count}") + (".trans" if trans else "")
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    mov.u32 %r2, buf;
    mul.wide.u32 %rd3, %r1, 32;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4];
    ld.global.v4.u32 {{%r8, %r9, %r10, %r11}}, [%rd4+16];
    shl.b32 %r3, %r1, 5;
    add.u32 %r3, %r3, %r2;
    st.shared.v4.u32 [%r3], {{%r4, %r5, %r6, %r7}};
    st.shared.v4.u32 [%r3+16], {{%r8, %r9, %r10, %r11}};
    bar.sync 0;
    shr.u32 %r12, %r1, 3;                 // matrix supplied by this lane
    and.b32 %r13, %r1, 7;                 // row
    setp.lt.u32 %p1, %r12, {count};
    mul.lo.u32 %r14, %r12, {MAT_STRIDE};
    mad.lo.u32 %r14, %r13, {ROW_STRIDE}, %r14;
    add.u32 %r14, %r14, %r2;
    selp.u32 %r14, %r14, 0xFFFFFF0, %p1;  // lanes that supply no row get a wild address
    ldmatrix.sync.aligned.{qual}.shared.b16 {{{regs}}}, [%r14];  // LDM
    mul.wide.u32 %rd5, %r1, {4 * count};
    add.u64 %rd6, %rd2, %rd5;
""" + "".join(f"    st.global.u32 [%rd6+{4 * j}], %r{20 + j};\n" for j in range(count)) + "    ret;",
        params=".param .u64 pOut, .param .u64 pIn", shared=".shared .align 128 .b8 buf[1024];")


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_distributes_rows_as_the_sheet_says(count, trans):
    smem = np.random.default_rng(count + 10 * trans).integers(0, 1 << 16, 512, dtype=np.uint16)
    out = np.zeros((32, count), dtype=np.uint32)
    ptx = ldmatrix_kernel(count, trans)
    res = sim.launch(ptx, "k", block=(32,), args=[out, smem])
    as_bytes = smem.view(np.uint8)

    def element(j, r, c):  # M_j[r][c]: 16-bit element c of row r of matrix j
        off = j * MAT_STRIDE + r * ROW_STRIDE + 2 * c
        return int(as_bytes[off]) | (int(as_bytes[off + 1]) << 8)

    for lane in range(32):
        for j in range(count):
            if trans:
                lo, hi = element(j, 2 * (lane & 3), lane >> 2), element(j, 2 * (lane & 3) + 1, lane >> 2)
            else:
                lo, hi = element(j, lane >> 2, 2 * (lane & 3)), element(j, lane >> 2, 2 * (lane & 3) + 1)
            assert int(out[lane, j]) == lo | (hi << 16), (lane, j)
    # rows 32 bytes apart: rows r and r+4 share banks -> 2 wavefronts per matrix
    assert res.smem_wavefronts[line_of(ptx, "// LDM")] == (2 * count, count)


def test_ldmatrix_accepts_cutlass_qualifier_order():
    smem = np.arange(512, dtype=np.uint16)
    a, b = np.zeros((32, 4), np.uint32), np.zeros((32, 4), np.uint32)
    sim.launch(ldmatrix_kernel(4, True), "k", block=(32,), args=[a, smem])
    sim.launch(ldmatrix_kernel(4, True, order="{x}.m8n8"), "k", block=(32,), args=[b, smem])
    assert np.array_equal(a, b) and a.any()


# ------------------------------------------------------------------ mma
def fragments(bits: np.ndarray, sheet: dict, elem_bits: int) -> np.ndarray:
    """(32, regs) uint32 fragment of a matrix of raw element bits, per the sheet's table."""
    nregs = max(reg for reg, _ in sheet) + 1
    out = np.zeros((32, nregs), dtype=np.uint64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for (reg, sub), where in sheet.items():
            r, c = where(g, t)
            out[lane, reg] |= np.uint64(int(bits[r, c]) << (elem_bits * sub))
    return out.astype(np.uint32)


def unfragment(frag: np.ndarray, sheet: dict, elem_bits: int, shape) -> np.ndarray:
    out = np.zeros(shape, dtype=np.uint64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for (reg, sub), where in sheet.items():
            r, c = where(g, t)
            out[r, c] = (int(frag[lane, reg]) >> (elem_bits * sub)) & ((1 << elem_bits) - 1)
    return out


def mma_kernel(instr: str, na: int, nb: int, nc: int, guard: str = "") -> str:
    total = na + nb + nc
    loads = "".join(f"    ld.global.b32 %x{i}, [%rd3+{4 * i}];\n" for i in range(total))
    a = ", ".join(f"%x{i}" for i in range(na))
    b = ", ".join(f"%x{na + i}" for i in range(nb))
    c = ", ".join(f"%x{na + nb + i}" for i in range(nc))
    d = ", ".join(f"%y{i}" for i in range(nc))
    inits = "".join(f"    mov.u32 %y{i}, 0xDEADBEEF;\n" for i in range(nc))
    stores = "".join(f"    st.global.b32 [%rd5+{4 * i}], %y{i};\n" for i in range(nc))
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    ld.param.u64 %rd1, [pIn];
    ld.param.u64 %rd2, [pOut];
    mul.wide.u32 %rd4, %r1, {4 * total};
    add.u64 %rd3, %rd1, %rd4;
{loads}{inits}    setp.eq.u32 %p1, %r2, 0;
    setp.lt.u32 %p2, %r1, 48;
    {guard}{instr} {{{d}}}, {{{a}}}, {{{b}}}, {{{c}}};  // MMA
    mul.wide.u32 %rd6, %r1, {4 * nc};
    add.u64 %rd5, %rd2, %rd6;
{stores}    ret;""", params=".param .u64 pOut, .param .u64 pIn",
        regs=f"    .reg .b32 %x<{total}>;\n    .reg .b32 %y<{nc}>;\n")


def run_mma(instr, sheets, elem_bits, a_bits, b_bits, c_bits, guard=""):
    """a_bits etc.: per-warp lists of raw element-bit matrices. Returns per-warp D fragments."""
    sa, sb, sc = sheets
    per_warp = []
    for wa, wb, wc in zip(a_bits, b_bits, c_bits):
        per_warp.append(np.concatenate([fragments(wa, sa, elem_bits[0]), fragments(wb, sb, elem_bits[0]),
                                        fragments(wc, sc, elem_bits[1])], axis=1))
    frag_in = np.concatenate(per_warp, axis=0)
    nc = per_warp[0].shape[1] - (max(r for r, _ in sa) + 1) - (max(r for r, _ in sb) + 1)
    out = np.zeros((len(per_warp) * 32, nc), dtype=np.uint32)
    ptx = mma_kernel(instr, max(r for r, _ in sa) + 1, max(r for r, _ in sb) + 1, nc, guard)
    sim.launch(ptx, "k", block=(32 * len(per_warp),), args=[out, frag_in])
    return [out[32 * w:32 * (w + 1)] for w in range(len(per_warp))], ptx


F16_CASES = [
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16, np.float16, SHEET_A_16BIT, SHEET_B_16BIT),
    ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, "bf16", SHEET_A_16BIT, SHEET_B_16BIT),
    ("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 8, np.float16, SHEET_A_K8_16BIT, SHEET_B_K8_16BIT),
]


def bf16_round(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bits, values) of x truncated to bf16 (exactly representable test inputs)."""
    bits = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("instr,k,dtype,sa,sb", F16_CASES, ids=["f16", "bf16", "f16-k8"])
def test_mma_16bit_inputs_f32_accumulate(instr, k, dtype, sa, sb):
    rng = np.random.default_rng(k)
    a_bits, b_bits, c_bits, refs = [], [], [], []
    for w in range(2):  # two warps, different data
        a, b = rng.standard_normal((16, k)), rng.standard_normal((k, 8))
        if dtype == "bf16":
            ab, av = bf16_round(a)
            bb, bv = bf16_round(b)
        else:
            av, bv = a.astype(np.float16), b.astype(np.float16)
            ab, bb = av.view(np.uint16), bv.view(np.uint16)
            av, bv = av.astype(np.float64), bv.astype(np.float64)
        c = rng.standard_normal((16, 8)).astype(np.float32)
        a_bits.append(ab), b_bits.append(bb), c_bits.append(c.view(np.uint32))
        refs.append(av @ bv + c.astype(np.float64))
    outs, _ = run_mma(instr, (sa, sb, SHEET_C_F32), (16, 32), a_bits, b_bits, c_bits)
    for out, ref in zip(outs, refs):
        d = unfragment(out, SHEET_C_F32, 32, (16, 8)).astype(np.uint32).view(np.float32)
        np.testing.assert_allclose(d, ref, rtol=1e-6, atol=1e-5)


def test_mma_f16_accumulate_rounds_to_f16():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float16)
    outs, _ = run_mma("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", (SHEET_A_16BIT, SHEET_B_16BIT, SHEET_C_F16),
                      (16, 16), [a.view(np.uint16)], [b.view(np.uint16)], [c.view(np.uint16)])
    d = unfragment(outs[0], SHEET_C_F16, 16, (16, 8)).astype(np.uint16).view(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    np.testing.assert_allclose(d.astype(np.float64), ref, rtol=1e-3, atol=2e-3)
    assert (d == ref.astype(np.float16)).mean() > 0.9   # one rounding of the exact result


def test_mma_tf32_ignores_the_low_13_bits():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    keep = np.uint32(0xFFFFE000)
    at = (a.view(np.uint32) & keep).view(np.float32).astype(np.float64)
    bt = (b.view(np.uint32) & keep).view(np.float32).astype(np.float64)
    outs, _ = run_mma("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", (SHEET_A_TF32, SHEET_B_TF32, SHEET_C_F32),
                      (32, 32), [a.view(np.uint32)], [b.view(np.uint32)], [c.view(np.uint32)])
    d = unfragment(outs[0], SHEET_C_F32, 32, (16, 8)).astype(np.uint32).view(np.float32)
    np.testing.assert_allclose(d, at @ bt + c, rtol=1e-6, atol=1e-6)
    assert not np.allclose(d, a.astype(np.float64) @ b + c, rtol=1e-7, atol=0)


@pytest.mark.parametrize("atype,btype,sat", [("s8", "s8", False), ("u8", "s8", False), ("s8", "u8", True),
                                             ("u8", "u8", True)])
def test_mma_int8_wraps_or_saturates(atype, btype, sat):
    rng = np.random.default_rng(len(atype + btype) + sat)
    lo = {"s8": -128, "u8": 0}
    a = rng.integers(lo[atype], lo[atype] + 256, (16, 32))
    b = rng.integers(lo[btype], lo[btype] + 256, (32, 8))
    c = rng.integers(-(1 << 31), 1 << 31, (16, 8))
    c[:4] = (1 << 31) - 5        # force overflow in the first rows
    c[4:6] = -(1 << 31) + 5
    qual = ".satfinite" if sat else ""
    instr = f"mma.sync.aligned.m16n8k32.row.col{qual}.s32.{atype}.{btype}.s32"
    outs, _ = run_mma(instr, (_int8_a(), _int8_b(), SHEET_C_F32), (8, 32), [a.astype(np.uint8)], [b.astype(np.uint8)],
                      [c.astype(np.int32).view(np.uint32)])
    d = unfragment(outs[0], SHEET_C_F32, 32, (16, 8)).astype(np.uint32).view(np.int32).astype(np.int64)
    exact = a @ b + c
    if sat:
        want = np.clip(exact, -(1 << 31), (1 << 31) - 1)
    else:
        want = (exact + (1 << 31)) % (1 << 32) - (1 << 31)
    assert np.array_equal(d, want)
    assert (exact != want).any()      # the overflow case was exercised


def test_mma_satfinite_after_types_is_accepted_too():
    a = np.ones((16, 32), dtype=np.uint8)
    c = np.full((16, 8), (1 << 31) - 1, dtype=np.int32)
    outs, _ = run_mma("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32.satfinite", (_int8_a(), _int8_b(), SHEET_C_F32),
                      (8, 32), [a], [np.ones((32, 8), np.uint8)], [c.view(np.uint32)])
    d = unfragment(outs[0], SHEET_C_F32, 32, (16, 8)).astype(np.uint32).view(np.int32)
    assert (d == (1 << 31) - 1).all()


def test_mma_predicated_per_warp_and_divergent_warp_is_an_error():
    rng = np.random.default_rng(1)
    a = [rng.standard_normal((16, 16)).astype(np.float16).view(np.uint16) for _ in range(2)]
    b = [rng.standard_normal((16, 8)).astype(np.float16).view(np.uint16) for _ in range(2)]
    c = [np.zeros((16, 8), np.float32).view(np.uint32)] * 2
    sheets = (SHEET_A_16BIT, SHEET_B_16BIT, SHEET_C_F32)
    instr = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    outs, _ = run_mma(instr, sheets, (16, 32), a, b, c, guard="@%p1 ")
    assert (outs[1] == 0xDEADBEEF).all() and not (outs[0] == 0xDEADBEEF).any()
    with pytest.raises(sim.HazardError) as err:
        run_mma(instr, sheets, (16, 32), a, b, c, guard="@%p2 ")
    ptx = mma_kernel(instr, 4, 2, 4, "@%p2 ")
    assert (err.value.kind, err.value.line) == ("divergence", line_of(ptx, "// MMA"))


@pytest.mark.parametrize("instr", [
    "mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16",     # bf16 needs f32 accumulators
    "mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32",       # only .row.col exists
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32",
])
def test_mma_invalid_forms_are_unsupported(instr):
    ptx = mma_kernel(instr, 4, 2, 4)
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(32,), args=[np.zeros(1), np.zeros(1)])
    assert (err.value.kind, err.value.line) == ("unsupported", line_of(ptx, "// MMA"))
