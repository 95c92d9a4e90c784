"""wmma.load / mma / store m16n16k16 against numpy: every layout, f16/bf16 inputs, f16/f32 C and D,
global, shared and generic addresses, strides, qualifier orders, alignment and bank wavefronts.

Fragments are opaque, so the tests only look at what wmma.store writes (and apply a uniform
element-wise scaling to C fragments, which any fragment mapping must preserve). Input values are
small multiples of 1/8, so every product and sum is exact in f32 and D does not depend on rounding
order (an f16 D is the exact value rounded once to f16).
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of

ESIZE = {"f16": 2, "bf16": 2, "f32": 4}
NREGS = {("a", "f16"): 8, ("a", "bf16"): 4, ("c", "f16"): 4, ("c", "f32"): 8}


def nregs(matrix: str, typ: str) -> int:
    return NREGS[("a" if matrix in "ab" else "c", typ)]


def vec(prefix: str, n: int) -> str:
    return "{" + ", ".join(f"%{prefix}{i}" for i in range(n)) + "}"


def to_bits(m: np.ndarray, typ: str) -> np.ndarray:
    if typ == "f16":
        return m.astype(np.float16).view(np.uint16)
    if typ == "bf16":
        return (m.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return m.astype(np.float32).view(np.uint32)


def from_bits(bits: np.ndarray, typ: str) -> np.ndarray:
    if typ == "f16":
        return bits.view(np.float16).astype(np.float64)
    return bits.view(np.float32).astype(np.float64)


def store_image(mats: np.ndarray, layout: str, stride: int, typ: str) -> np.ndarray:
    """(warps, 16, 16) matrices -> memory image (warps, 16 lines, stride) of element bits."""
    lines = mats if layout == "row" else mats.transpose(0, 2, 1)
    image = np.zeros((mats.shape[0], 16, stride), dtype=np.uint16 if ESIZE[typ] == 2 else np.uint32)
    image[:, :, :16] = to_bits(lines, typ)
    return image


def read_image(image: np.ndarray, layout: str, typ: str) -> np.ndarray:
    lines = from_bits(np.ascontiguousarray(image[:, :, :16]), typ)
    return lines if layout == "row" else lines.transpose(0, 2, 1)


def wmma_kernel(lay: dict, itype: str, ctype: str, dtype: str, strides: dict, space: str, warps: int,
                scale_c: bool = False, order: str = "{lay}.m16n16k16", sync_out: bool = True) -> str:
    """Warp w computes D_w = A_w @ B_w + C_w (C scaled by 2 if scale_c), operands of warp w at
    w * 16 * stride elements. With space 'shared' A, B and C are first copied to shared memory and
    D is stored there and copied out; 'generic' uses cvta'd shared addresses without a space."""
    types = {"a": itype, "b": itype, "c": ctype, "d": dtype}
    nthreads = 32 * warps
    lines = ["mov.u32 %r1, %tid.x;", "shr.u32 %r2, %r1, 5;"]
    shared_decl = ""
    offset = 0
    for j, m in enumerate("abcd"):
        size = warps * 16 * strides[m] * ESIZE[types[m]]
        lines += [f"ld.param.u64 %rd{j + 1}, [p{m.upper()}];",
                  f"mul.lo.u32 %r{10 + j}, %r2, {16 * strides[m] * ESIZE[types[m]]};",
                  f"cvt.u64.u32 %rd{10 + j}, %r{10 + j};",
                  f"add.u64 %rd{20 + j}, %rd{j + 1}, %rd{10 + j};"]        # this warp's global pointer
        if space != "global":
            lines += [f"mov.u32 %r{20 + j}, buf;", f"add.u32 %r{20 + j}, %r{20 + j}, {offset};"]
            if m != "d":        # copy this operand to shared, one word per thread per step
                lines += ["mov.u32 %r30, %r1;", f"$L_copy_{m}:", "mul.wide.u32 %rd30, %r30, 4;",
                          f"add.u64 %rd31, %rd{j + 1}, %rd30;", "ld.global.u32 %r31, [%rd31];",
                          "shl.b32 %r32, %r30, 2;", f"add.u32 %r32, %r32, %r{20 + j};",
                          "st.shared.u32 [%r32], %r31;", f"add.u32 %r30, %r30, {nthreads};",
                          f"setp.lt.u32 %p1, %r30, {size // 4};", f"@%p1 bra $L_copy_{m};"]
            lines += [f"add.u32 %r{20 + j}, %r{20 + j}, %r{10 + j};"]      # this warp's shared pointer
            if space == "generic":
                lines += [f"cvta.shared.u64 %rd{20 + j}, %r{20 + j};"]
            offset += size
    if space != "global":
        lines.append("bar.sync 0;")
        shared_decl = f".shared .align 128 .b8 buf[{offset}];"

    def where(m: str) -> tuple[str, str]:
        j = "abcd".index(m)
        if space == "shared":
            return ".shared", f"[%r{20 + j}]"
        return (".global" if space == "global" else ""), f"[%rd{20 + j}]"

    def stride_op(m: str) -> str:
        if strides[m] == 16 and m == "b":
            return ""                                       # default stride
        return f", {strides[m]}" if m == "a" else f", %r{40 + 'abcd'.index(m)}"
    for j, m in enumerate("abcd"):
        lines.append(f"mov.u32 %r{40 + j}, {strides[m]};")
    frag = {m: vec("q" + m, nregs(m, types[m])) for m in "abcd"}
    for m in "abc":
        ss, addr = where(m)
        q = order.format(lay=lay[m])
        lines.append(f"wmma.load.{m}.sync.aligned.{q}{ss}.{types[m]} {frag[m]}, {addr}{stride_op(m)};"
                     f"   // LOAD_{m.upper()}")
    if scale_c:
        for i in range(nregs("c", ctype)):
            op = "mul.f32" if ctype == "f32" else "mul.rn.f16x2"
            k = "0f40000000" if ctype == "f32" else "%r50"
            lines.append(f"{op} %qc{i}, %qc{i}, {k};")
        lines.insert(0, "mov.b32 %r50, 0x40004000;")       # 2.0 in both f16 halves
    types_part = f"{dtype}.{ctype}" if itype == "f16" else "f32.bf16.bf16.f32"
    lines.append(f"wmma.mma.sync.aligned.{lay['a']}.{lay['b']}.m16n16k16.{types_part} {frag['d']}, {frag['a']}, "
                 f"{frag['b']}, {frag['c']};   // MMA")
    ss, addr = where("d")
    lines.append(f"wmma.store.d.sync.aligned.{order.format(lay=lay['d'])}{ss}.{dtype} {addr}, {frag['d']}"
                 f"{stride_op('d')};   // STORE")
    if space != "global":
        size = warps * 16 * strides["d"] * ESIZE[dtype]
        if sync_out:
            lines.append("bar.sync 0;")
        lines += ["mov.u32 %r30, %r1;", "$L_copy_out:", "shl.b32 %r32, %r30, 2;",
                  f"add.u32 %r32, %r32, %r{20 + 3};", f"sub.u32 %r32, %r32, %r{10 + 3};",
                  "ld.shared.u32 %r31, [%r32];   // COPY_OUT", "mul.wide.u32 %rd30, %r30, 4;",
                  "add.u64 %rd31, %rd4, %rd30;", "st.global.u32 [%rd31], %r31;",
                  f"add.u32 %r30, %r30, {nthreads};", f"setp.lt.u32 %p1, %r30, {size // 4};",
                  "@%p1 bra $L_copy_out;"]
    lines.append("ret;")
    regs = "".join(f"    .reg .b32 %q{m}<8>;\n" for m in "abcd")
    return kernel("\n".join("    " + x if not x.startswith("$") else x for x in lines),
                  params=".param .u64 pA, .param .u64 pB, .param .u64 pC, .param .u64 pD",
                  regs=regs, shared=shared_decl)


def run_wmma(lay, itype="f16", ctype="f32", dtype="f32", strides=None, space="global", warps=2,
             scale_c=False, order="{lay}.m16n16k16", seed=0):
    strides = strides or {m: 16 for m in "abcd"}
    types = {"a": itype, "b": itype, "c": ctype, "d": dtype}
    rng = np.random.default_rng(seed)
    mats = {m: rng.integers(-32, 32, (warps, 16, 16)) / 8.0 for m in "abc"}
    images = {m: store_image(mats[m], lay[m], strides[m], types[m]) for m in "abc"}
    images["d"] = np.full((warps, 16, strides["d"]), 0x7F7F, dtype=np.uint16 if dtype == "f16" else np.uint32)
    ptx = wmma_kernel(lay, itype, ctype, dtype, strides, space, warps, scale_c, order)
    res = sim.launch(ptx, "k", block=(32 * warps,), args=[images[m] for m in "abcd"])
    want = mats["a"] @ mats["b"] + (2.0 if scale_c else 1.0) * mats["c"]       # exact
    if dtype == "f16":
        want = want.astype(np.float16).astype(np.float64)                      # rounded once
    got = read_image(images["d"], lay["d"], dtype)
    return ptx, res, got, want, images["d"]


LAYOUTS = [dict(a=a, b=b, c=c, d=d) for a in ("row", "col") for b in ("row", "col")
           for c, d in (("row", "col"), ("col", "row"))]


@pytest.mark.parametrize("lay", LAYOUTS, ids=lambda d: "".join(v[0] for v in d.values()))
@pytest.mark.parametrize("ctype,dtype", [("f32", "f32"), ("f16", "f32"), ("f32", "f16"), ("f16", "f16")])
def test_wmma_f16_all_layouts_and_accumulator_types_from_global(lay, ctype, dtype):
    _, _, got, want, image = run_wmma(lay, ctype=ctype, dtype=dtype)
    np.testing.assert_array_equal(got, want)
    assert (image[:, :, 16:] == 0x7F7F).all() or image.shape[2] == 16


@pytest.mark.parametrize("space", ["shared", "generic"])
def test_wmma_through_shared_memory_with_strides_and_scaled_c(space):
    lay = dict(a="row", b="col", c="row", d="col")
    strides = dict(a=32, b=48, c=24, d=16)
    _, res, got, want, _ = run_wmma(lay, strides=strides, space=space, scale_c=True)
    np.testing.assert_array_equal(got, want)
    _, res, got, want, _ = run_wmma(lay, ctype="f16", dtype="f16", strides=dict(a=16, b=16, c=32, d=64),
                                    space=space, scale_c=True)
    np.testing.assert_array_equal(got, want)


def test_wmma_bf16_inputs():
    for lay in (dict(a="row", b="col", c="row", d="row"), dict(a="col", b="row", c="col", d="col")):
        _, _, got, want, _ = run_wmma(lay, itype="bf16", strides=dict(a=16, b=32, c=16, d=24), space="shared")
        np.testing.assert_array_equal(got, want)


def test_wmma_rounds_like_mma_sync():
    """With general values: f32 D = (exact product rounded to f32) + C in f32; f16 D rounded once."""
    lay = dict(a="row", b="col", c="row", d="row")
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((1, 16, 16)), rng.standard_normal((1, 16, 16))
    c = rng.standard_normal((1, 16, 16))
    a16, b16 = a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64)
    images = [store_image(a16, "row", 16, "f16"), store_image(b16, "col", 16, "f16"),
              store_image(c, "row", 16, "f32"), np.zeros((1, 16, 16), np.uint32)]
    ptx = wmma_kernel(lay, "f16", "f32", "f32", dict(a=16, b=16, c=16, d=16), "global", 1)
    sim.launch(ptx, "k", block=(32,), args=images)
    want = ((a16 @ b16).astype(np.float32) + c.astype(np.float32)).astype(np.float32)
    np.testing.assert_array_equal(images[3].view(np.float32), want)


@pytest.mark.parametrize("order", ["{lay}.m16n16k16", "m16n16k16.{lay}"])
def test_wmma_accepts_both_qualifier_orders(order):
    lay = dict(a="col", b="row", c="row", d="row")
    _, _, got, want, _ = run_wmma(lay, order=order, warps=1)
    np.testing.assert_array_equal(got, want)


def test_shared_wmma_bank_wavefronts():
    """Model: 16-byte pieces of the stored lines, 8 per phase. f16 lines are 32 B (4 phases)."""
    lay = dict(a="row", b="col", c="row", d="row")
    cases = [(16, 4), (64, 16), (80, 4)]          # line pitch 32 B, 128 B (4 lines share banks), 160 B
    for stride_a, per_warp in cases:
        ptx, res, got, want, _ = run_wmma(lay, strides=dict(a=stride_a, b=16, c=16, d=16), space="shared")
        np.testing.assert_array_equal(got, want)
        assert res.smem_wavefronts[line_of(ptx, "// LOAD_A")] == (2 * per_warp, 2 * 4), stride_a
        assert res.smem_wavefronts[line_of(ptx, "// LOAD_C")] == (2 * 8, 2 * 8)    # f32: 64-B lines
        assert res.smem_wavefronts[line_of(ptx, "// STORE")] == (2 * 8, 2 * 8)


def expect(ptx: str, kind: str, marker: str, args, block=(32,)):
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=block, args=args)
    assert (err.value.kind, err.value.line) == (kind, line_of(ptx, marker)), str(err.value)


LOAD_A = "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%qa0, %qa1, %qa2, %qa3, %qa4, %qa5, %qa6, %qa7}"


@pytest.mark.parametrize("setup,operand,kind", [
    ("add.u64 %rd1, %rd1, 16;", "[%rd1]", "misaligned"),                  # pointer 16 B off
    ("", "[%rd1], 24", "misaligned"),                                     # 48-byte lines
    ("", "[%rd1], 8", "misaligned"),                                      # below the default 16
    ("mul.wide.u32 %rd2, %r1, 32;\n    add.u64 %rd1, %rd1, %rd2;", "[%rd1]", "divergence"),   # per-lane p
    ("add.u64 %rd1, %rd1, 512;", "[%rd1]", "out-of-bounds"),
])
def test_wmma_load_hazards(setup, operand, kind):
    ptx = kernel(f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pOut];
    {setup}
    {LOAD_A}, {operand};   // LOAD
    ret;""", regs="    .reg .b32 %qa<8>;\n")
    expect(ptx, kind, "// LOAD", [np.zeros(16 * 16, np.float16)])


def test_wmma_with_part_of_a_warp_is_divergence_and_shared_store_needs_a_barrier():
    ptx = kernel(f"""
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pOut];
    setp.lt.u32 %p1, %r1, 16;
    @%p1 {LOAD_A}, [%rd1];   // LOAD
    ret;""", regs="    .reg .b32 %qa<8>;\n")
    expect(ptx, "divergence", "// LOAD", [np.zeros(256, np.float16)])
    lay = dict(a="row", b="row", c="row", d="row")
    ptx = wmma_kernel(lay, "f16", "f32", "f32", dict(a=16, b=16, c=16, d=16), "shared", 2, sync_out=False)
    args = [np.zeros((2, 16, 16), np.uint16)] * 2 + [np.zeros((2, 16, 16), np.uint32)] * 2
    expect(ptx, "race", "// COPY_OUT", args, block=(64,))


@pytest.mark.parametrize("text", [
    "wmma.load.a.sync.aligned.row.m16n16k16.f32 {%qa0, %qa1, %qa2, %qa3, %qa4, %qa5, %qa6, %qa7}, [%rd1];",
    "wmma.load.a.sync.aligned.row.m16n16k16.f16 {%qa0, %qa1, %qa2, %qa3}, [%rd1];",
    "wmma.load.a.sync.row.m16n16k16.f16 {%qa0, %qa1, %qa2, %qa3, %qa4, %qa5, %qa6, %qa7}, [%rd1];",
    "wmma.mma.sync.aligned.row.col.m16n16k16.f16.bf16.bf16.f32 {%qa0}, {%qa1}, {%qa2}, {%qa3};",
    "wmma.store.c.sync.aligned.row.m16n16k16.f32 [%rd1], {%qa0, %qa1, %qa2, %qa3, %qa4, %qa5, %qa6, %qa7};",
])
def test_invalid_wmma_forms_are_unsupported(text):
    ptx = kernel(f"    {text}   // BAD\n    ret;", regs="    .reg .b32 %qa<8>;\n")
    expect(ptx, "unsupported", "// BAD", [np.zeros(4)])


@pytest.mark.parametrize("lay", [dict(a="row", b="col", c=c, d=d) for c in ("row", "col") for d in ("row", "col")],
                         ids=lambda d: d["c"] + "-" + d["d"])
def test_wmma_global_c_and_d_with_runtime_strides(lay):
    """f32 C and D in global memory with non-default strides passed in registers (split-K's workspace)."""
    _, _, got, want, image = run_wmma(lay, strides=dict(a=16, b=32, c=24, d=40), space="global", scale_c=True)
    np.testing.assert_array_equal(got, want)
    assert (image[:, :, 16:] == 0x7F7F).all(), "wrote past the 16 elements of a line"


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("ctype", ["f32", "f16"])
def test_wmma_store_d_then_load_c_adds_elementwise(layout, ctype):
    """split-K's round trip: store.d a fragment to global, load.c it back with the same layout and
    stride, and add it to another fragment register by register: the sum is element-wise whatever
    the fragment mapping, because the same element comes back to the same slot."""
    n, stride = nregs("c", ctype), 24 if ctype == "f32" else 32  # 96- or 64-byte lines: 32-byte aligned
    frag = {x: vec("q" + x, n) for x in "abc"}
    add = "add.f32" if ctype == "f32" else "add.rn.f16x2"
    q = f"sync.aligned.{layout}.m16n16k16.global.{ctype}"
    body = ["ld.param.u64 %rd1, [pA];", "ld.param.u64 %rd2, [pB];", "ld.param.u64 %rd3, [pC];",
            "ld.param.u64 %rd4, [pD];", f"mov.u32 %r1, {stride};",
            f"wmma.load.c.{q} {frag['a']}, [%rd1], %r1;",
            f"wmma.load.c.{q} {frag['b']}, [%rd2], %r1;",
            f"wmma.store.d.{q} [%rd3], {frag['a']}, %r1;",   # publish, then read back
            f"wmma.load.c.{q} {frag['c']}, [%rd3], %r1;"]
    body += [f"{add} %qb{i}, %qb{i}, %qc{i};" for i in range(n)]
    body += [f"wmma.store.d.{q} [%rd4], {frag['b']}, %r1;", "ret;"]
    ptx = kernel("\n".join("    " + x for x in body), params=", ".join(f".param .u64 p{x}" for x in "ABCD"),
                 regs="".join(f"    .reg .b32 %q{x}<8>;\n" for x in "abc"))
    rng = np.random.default_rng(3)
    p, r = (rng.integers(-64, 64, (1, 16, 16)) / 8.0 for _ in range(2))
    images = [store_image(p, layout, stride, ctype), store_image(r, layout, stride, ctype),
              np.zeros((1, 16, stride), np.uint16 if ctype == "f16" else np.uint32),
              np.zeros((1, 16, stride), np.uint16 if ctype == "f16" else np.uint32)]
    sim.launch(ptx, "k", block=(32,), args=images)
    np.testing.assert_array_equal(read_image(images[2], layout, ctype), p)
    np.testing.assert_array_equal(read_image(images[3], layout, ctype), p + r)
