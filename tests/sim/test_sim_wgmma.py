"""wgmma.mma_async on the simulator against numpy, and its ordering rules as hazards.

Shared-memory images are built here from the ISA's description of the canonical layouts (core
matrices of 8 rows x 16 bytes; 128B swizzle = 16-byte chunk c of 128-byte row r stored at chunk
c ^ (r % 8)), written independently of ptxgen/sim/wgmma_layouts.py; the accumulator fragment is
unpacked with the fact sheet's formula (§9a). Inputs are small nonzero integers, so every sum is
exact and results are compared bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of

A_OFF, B_OFF = 0, 16384


def sm90(ptx: str) -> str:
    return ptx.replace(".version 7.8\n.target sm_80\n", ".version 8.0\n.target sm_90a\n", 1)


def desc(start: int, lbo: int, sbo: int, swizzle: int) -> int:
    """Descriptor bits as the ISA's table gives them (written out here, not imported)."""
    return ((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | swizzle << 62


def nonzero(rng, shape):
    v = rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)
    return v.astype(np.float16)


# ------------------------------------------------------------------ images of the canonical layouts
def image_kmajor_sw128(mat: np.ndarray) -> np.ndarray:
    """rows x 64 f16 (128-byte rows, K contiguous), 128B-swizzled: chunk c of row r at c ^ (r % 8)."""
    rows = mat.shape[0]
    img = np.zeros((rows, 8, 8), dtype=np.float16)
    for r in range(rows):
        for c in range(8):
            img[r, c ^ (r % 8)] = mat[r, 8 * c:8 * c + 8]
    return img.reshape(-1)


def image_kmajor_none(mat: np.ndarray, lbo: int, sbo: int) -> np.ndarray:
    """rows x 16 f16 in 8x(16 B) core matrices: core (i, j) at i*sbo + j*lbo bytes, rows 16 B apart."""
    rows, cols = mat.shape
    img = np.zeros(max(lbo, sbo) * 4 * rows // 8 // 2 + 4096, dtype=np.float16)
    for m in range(rows):
        for k in range(cols):
            byte = (m // 8) * sbo + (k // 8) * lbo + (m % 8) * 16 + (k % 8) * 2
            img[byte // 2] = mat[m, k]
    return img


def d_unpack(regs: np.ndarray, n: int) -> np.ndarray:
    """(128, n/2) accumulator values -> 64 x n via docs/ptx_facts/wgmma.md §9a."""
    out = np.zeros((64, n), dtype=regs.dtype)
    for th in range(128):
        w, lane = divmod(th, 32)
        g, t = lane >> 2, lane & 3
        for i in range(n // 2):
            out[16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)] = regs[th, i]
    return out


def a_pack(a: np.ndarray) -> np.ndarray:
    """64 x 16 f16 -> (128 threads, 8 halves) in the m16n8k16 A layout per warp (docs/ptx_facts/mma_sync.md §1, §9a)."""
    out = np.zeros((128, 8), dtype=np.float16)
    for th in range(128):
        w, lane = divmod(th, 32)
        g, t = lane >> 2, lane & 3
        for i in range(8):
            out[th, i] = a[16 * w + g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)]
    return out


# ------------------------------------------------------------------ kernel text
def copy_in(nbytes: int, dst: int, src_reg: str, threads: int = 128) -> str:
    """All threads copy nbytes from global [src_reg] to shared buf+dst, 16 bytes at a time."""
    lines = []
    step = 16 * threads
    for j in range(nbytes // step):
        lines += [f"    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [{src_reg}+{step * j}];",
                  f"    st.shared.v4.u32 [%r3+{dst + step * j}], {{%r4, %r5, %r6, %r7}};"]
    return "\n".join(lines)


def wgmma_ptx(n: int, steps: list[str], a_bytes: int, b_bytes: int, a_regs: bool = False,
              before_store: str = "", after_fence: str = "", nd: int | None = None,
              threads: int = 128) -> str:
    """One warpgroup: copy A and B images to shared memory, run `steps` (wgmma lines using %rd10 =
    A desc / %rd11 = B desc, %p1 = true, %p2 = false), commit, wait, store the accumulators."""
    nd = n // 2 if nd is None else nd
    dregs = ", ".join(f"%d{i}" for i in range(nd))
    body = f"""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pOut];
    ld.param.u64 %rd1, [pA];
    ld.param.u64 %rd2, [pB];
    ld.param.u64 %rd10, [dA];
    ld.param.u64 %rd11, [dB];
    mov.u32 %r2, buf;
    shl.b32 %r1, %r0, 4;
    add.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd3, %r0, 16;
    add.u64 %rd4, %rd1, %rd3;
    add.u64 %rd5, %rd2, %rd3;
{copy_in(a_bytes, A_OFF, "%rd4", threads) if not a_regs else ""}
{copy_in(b_bytes, B_OFF, "%rd5", threads)}
    ld.global.v4.u32 {{%a0, %a1, %a2, %a3}}, [%rd4];
    fence.proxy.async.shared::cta;
    bar.sync 0;
    setp.eq.u32 %p1, %r0, %r0;
    setp.ne.u32 %p2, %r0, %r0;
    wgmma.fence.sync.aligned;
{after_fence}
""" + "\n".join("    " + s.replace("{D}", "{" + dregs + "}") for s in steps) + f"""
    wgmma.commit_group.sync.aligned;
{before_store}
    wgmma.wait_group.sync.aligned 0;
    mul.wide.u32 %rd6, %r0, {4 * nd};
    add.u64 %rd7, %rd0, %rd6;
""" + "".join(f"    st.global.f32 [%rd7+{4 * i}], %d{i};\n" for i in range(nd)) + "    ret;"
    return sm90(kernel(body, params=".param .u64 pOut, .param .u64 pA, .param .u64 pB, "
                                    ".param .u64 dA, .param .u64 dB",
                       regs=f"    .reg .f32 %d<{nd}>;\n    .reg .b32 %a<4>;\n",
                       shared=".shared .align 1024 .b8 buf[32768];"))


def run(ptx, n, a_img, b_img, da, db, raw: bool = False, nd: int | None = None):
    out = np.zeros((128, n // 2 if nd is None else nd), dtype=np.float32)
    pad = lambda x: np.concatenate([x.view(np.uint8), np.zeros(16384 - x.nbytes, np.uint8)])  # noqa: E731
    sim.launch(ptx, "k", block=(128,), args=[out, pad(a_img), pad(b_img), da, db])
    return out if raw else d_unpack(out, n)


# ------------------------------------------------------------------ numerics and layouts
@pytest.mark.parametrize("n", [8, 64])
def test_kmajor_128b_swizzle_four_k_steps(n):
    """A 64x64 and B^T nx64 K-major, 128B swizzle; four k16 wgmmas advance the start by 32 B."""
    rng = np.random.default_rng(n)
    a, bt = nonzero(rng, (64, 64)), nonzero(rng, (n, 64))
    steps = []
    for s in range(4):
        steps.append(f"add.u64 %rd12, %rd10, {2 * s};")
        steps.append(f"add.u64 %rd13, %rd11, {2 * s};")
        steps.append(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{D}}, %rd12, %rd13, "
                     f"{'%p2' if s == 0 else '%p1'}, 1, 1, 0, 0;")
    ptx = wgmma_ptx(n, steps, 8192, 16384 if n == 64 else 2048)
    got = run(ptx, n, image_kmajor_sw128(a), image_kmajor_sw128(bt),
              desc(A_OFF, 16, 1024, 1), desc(B_OFF, 16, 1024, 1))
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("n", [8, 64])
def test_kmajor_no_swizzle_and_a_from_registers(n):
    rng = np.random.default_rng(100 + n)
    a, bt = nonzero(rng, (64, 16)), nonzero(rng, (n, 16))
    lbo, sbo = 128, 256                           # the two K core matrices 128 B apart, row groups 256 B
    a_img, b_img = image_kmajor_none(a, lbo, sbo), image_kmajor_none(bt, lbo, sbo)
    step = [f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{D}}, %rd10, %rd11, %p2, 1, 1, 0, 0;"]
    ptx = wgmma_ptx(n, step, 8192, 8192)
    got = run(ptx, n, a_img[:8192], b_img[:8192], desc(A_OFF, lbo, sbo, 0), desc(B_OFF, lbo, sbo, 0))
    want = (a.astype(np.float64) @ bt.astype(np.float64).T).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    # A from registers: thread th's 4 registers hold a_pack(a)[th], loaded from pA
    step = [f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{D}}, {{%a0, %a1, %a2, %a3}}, %rd11, "
            "%p2, 1, -1, 0;"]
    ptx = wgmma_ptx(n, step, 0, 8192, a_regs=True)
    got = run(ptx, n, a_pack(a).reshape(-1), b_img[:8192], 0, desc(B_OFF, lbo, sbo, 0))
    np.testing.assert_array_equal(got, -want)


def test_b_mn_major_128b_swizzle_transpose():
    """B 16 x 64 stored N-contiguous (128-byte rows of k), swizzled; imm-trans-b = 1."""
    rng = np.random.default_rng(7)
    a, b = nonzero(rng, (64, 64)), nonzero(rng, (16, 64))
    step = ["wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {D}, %rd10, %rd11, %p2, 1, 1, 0, 1;"]
    ptx = wgmma_ptx(64, step, 8192, 2048)
    got = run(ptx, 64, image_kmajor_sw128(a), image_kmajor_sw128(b),
              desc(A_OFF, 16, 1024, 1), desc(B_OFF, 8192, 1024, 1))
    want = a[:, :16].astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_a_mn_major_128b_swizzle_transpose():
    """A 64 x 16 stored M-contiguous (16 rows of 64 m = 128 B), swizzled; imm-trans-a = 1, scale-a -1."""
    rng = np.random.default_rng(8)
    a, bt = nonzero(rng, (64, 16)), nonzero(rng, (8, 64))
    step = ["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {D}, %rd10, %rd11, %p2, -1, 1, 1, 0;"]
    ptx = wgmma_ptx(8, step, 2048, 2048)
    got = run(ptx, 8, image_kmajor_sw128(np.ascontiguousarray(a.T)), image_kmajor_sw128(bt),
              desc(A_OFF, 8192, 1024, 1), desc(B_OFF, 16, 1024, 1))
    want = -(a.astype(np.float64) @ bt[:, :16].astype(np.float64).T)
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("only_second", [False, True])
def test_two_warpgroups_use_their_own_descriptors(only_second):
    """256 threads: warpgroup w reads A image w (A desc + w * 8192 B); optionally only warpgroup 1
    executes the wgmma (a guard on whole warpgroups), leaving warpgroup 0's accumulators alone."""
    rng = np.random.default_rng(9)
    a0, a1, bt = nonzero(rng, (64, 64)), nonzero(rng, (64, 64)), nonzero(rng, (8, 64))
    guard = "@%p5 " if only_second else ""
    steps = ["shr.u32 %r9, %r0, 7;", "setp.ne.u32 %p5, %r9, 0;", "mul.wide.u32 %rd14, %r9, 512;",
             "add.u64 %rd12, %rd10, %rd14;",
             guard + "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {D}, %rd12, %rd11, %p2, 1, 1, 0, 0;"]
    ptx = wgmma_ptx(8, steps, 16384, 4096, threads=256)
    out = np.zeros((256, 4), dtype=np.float32)
    a_img = np.concatenate([image_kmajor_sw128(a0), image_kmajor_sw128(a1)]).view(np.uint8)
    b_img = np.concatenate([image_kmajor_sw128(bt).view(np.uint8), np.zeros(3072, np.uint8)])
    sim.launch(ptx, "k", block=(256,), args=[out, a_img, b_img, desc(A_OFF, 16, 1024, 1), desc(B_OFF, 16, 1024, 1)])
    b = bt[:, :16].astype(np.float64).T
    want0 = np.zeros((64, 8)) if only_second else a0[:, :16].astype(np.float64) @ b
    np.testing.assert_array_equal(d_unpack(out[:128], 8), want0.astype(np.float32))
    np.testing.assert_array_equal(d_unpack(out[128:], 8), (a1[:, :16].astype(np.float64) @ b).astype(np.float32))


# ------------------------------------------------------------------ hazards, each with its fixed twin
def _simple(n=8, **kw):
    step = [f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{D}}, %rd10, %rd11, %p2, 1, 1, 0, 0;"]
    return wgmma_ptx(n, step, 8192, 2048, **kw)


def _launch(ptx, n=8):
    rng = np.random.default_rng(1)
    return run(ptx, n, image_kmajor_sw128(nonzero(rng, (64, 64))), image_kmajor_sw128(nonzero(rng, (8, 64))),
               desc(A_OFF, 16, 1024, 1), desc(B_OFF, 16, 1024, 1))


def test_reading_accumulators_in_flight_is_a_hazard():
    bad = _simple(before_store="    mov.f32 %f0, %d3;   // EARLY")
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "async-pending" and e.value.line == line_of(bad, "EARLY")
    _launch(_simple(after_fence="").replace("    ret;", "    mov.f32 %f0, %d3;\n    ret;"))


def test_overwriting_shared_operand_in_flight_is_a_hazard():
    # thread 0 overwrites row 0, chunk 1 of A: bytes the k16 wgmma reads
    bad = _simple(before_store="    setp.eq.u32 %p3, %r0, 0;\n    @%p3 st.shared.u32 [buf+16], %r0;   // CLOBBER")
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "async-pending" and e.value.line == line_of(bad, "CLOBBER")
    _launch(_simple().replace("    ret;", "    setp.eq.u32 %p3, %r0, 0;\n    @%p3 st.shared.u32 [buf+16], %r0;\n"
                                        "    ret;"))


def test_register_write_after_fence_is_a_hazard():
    bad = _simple(after_fence="    mov.f32 %d1, 0f00000000;   // LATE")
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "missing-fence" and "line " + str(line_of(bad, "LATE")) in e.value.detail
    fixed = _simple().replace("    wgmma.fence.sync.aligned;",
                              "    mov.f32 %d1, 0f00000000;\n    wgmma.fence.sync.aligned;")
    _launch(fixed)


def test_first_wgmma_needs_a_fence():
    bad = _simple().replace("    wgmma.fence.sync.aligned;\n", "")
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "missing-fence"


def test_wait_group_keeps_the_newest_groups_in_flight():
    """wait_group 1 after two groups retires only the first: reading its D is fine, the second's not."""
    two = ["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {D}, %rd10, %rd11, %p2, 1, 1, 0, 0;",
           "wgmma.commit_group.sync.aligned;",
           "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, %rd10, %rd11, %p2, 1, 1, 0, 0;"]
    ok = wgmma_ptx(8, two, 8192, 2048, before_store="    wgmma.wait_group.sync.aligned 1;\n    mov.f32 %f9, %d0;")
    _launch(ok)
    bad = ok.replace("mov.f32 %f9, %d0;", "mov.f32 %f9, %f1;   // SECOND")
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "async-pending" and e.value.line == line_of(bad, "SECOND")


def test_partial_warpgroup_is_divergence():
    ptx = _simple()
    out = np.zeros((128, 4), dtype=np.float32)
    img = np.zeros(16384, np.uint8)
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=[out, img, img, desc(A_OFF, 16, 1024, 1), desc(B_OFF, 16, 1024, 1)])
    assert e.value.kind == "divergence" and "warpgroup" in e.value.detail


# ------------------------------------------------------------------ address map, cell by cell
# Each expected address is worked out by hand from the ISA's canonical-layout description.
from ptxgen.sim import wgmma_layouts as wl  # noqa: E402

CELLS = [
    # (swizzle, mn_major, lbo, sbo, esize, (mn, k), byte address)
    (1, False, 16, 1024, 2, (0, 0), 0),
    (1, False, 16, 1024, 2, (1, 0), 144),     # row 1 at 128, chunk 0 -> 0 ^ 1
    (1, False, 16, 1024, 2, (9, 10), 1156),   # group 1 (1024) + row 1 (128), chunk 1 ^ 1 = 0, elem 2
    (0, False, 128, 256, 2, (9, 10), 404),    # core (1,1): 256 + 128, row 1 (16), elem 2 (4)
    (3, False, 0, 256, 2, (5, 9), 162),       # 32-byte rows: 160 + chunk 1 ^ (bit 7 = 1) = 0, elem 1
    (1, True, 8192, 1024, 2, (10, 9), 1156),  # k row 9 at 1152, n chunk 1 ^ 1 = 0, elem 2
    (0, True, 512, 256, 2, (10, 9), 788),     # n block 1 (SBO 256), k8 1 (16), k group 1 (LBO 512), elem 2
    (2, False, 16, 512, 2, (3, 9), 194),      # 64-byte rows: row 3 at 192, chunk 1 ^ 1 = 0, elem 1
    (3, True, 0, 512, 2, (10, 9), 564),       # MN 32B: k group 1 (512) + k row 1 (32) + n chunk 1 (16), bit 7 clear
    (1, False, 16, 1024, 4, (3, 5), 420),     # tf32 (4 per chunk): row 3 at 384, chunk 1 ^ 3 = 2 (32), elem 1 (4)
]


@pytest.mark.parametrize("cell", CELLS)
def test_operand_address_cells(cell):
    swz, mn_major, lbo, sbo, esize, (mn, k), want = cell
    d = wl.decode_descriptor(desc(0, lbo, sbo, swz))
    got = wl.operand_addresses(d, 16, 32 // esize, esize, mn_major)[mn, k]
    assert got == want


def test_descriptor_fields():
    value = desc(0x4A0, 16, 1024, 1) | (5 << 49)
    d = wl.decode_descriptor(value)
    assert (d.start, d.lbo, d.sbo, d.base_offset, d.swizzle) == (0x4A0, 16, 1024, 5, 1)
    assert wl.encode_descriptor(0x4A0, 16, 1024, 1, 5) == value


def test_accumulator_fragment_cell():
    table = wl.d_fragment(16)          # thread 37: warp 1, lane 5 (g 1, t 1); d6
    assert tuple(table[37, 6]) == (16 + 1 + 8, 8 + 2)
    assert tuple(table[127, 0]) == (48 + 7, 6)


def image_sw128_bytes(rows: np.ndarray) -> np.ndarray:
    """(r, 128) bytes per row, 128B swizzle: chunk c of row r at c ^ (r % 8)."""
    img = np.zeros((rows.shape[0], 8, 16), dtype=np.uint8)
    for r in range(rows.shape[0]):
        for c in range(8):
            img[r, c ^ (r % 8)] = rows[r, 16 * c:16 * c + 16]
    return img.reshape(-1)


def _values(rng, typ, shape):
    import ml_dtypes
    v = rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)
    if typ in ("u8",):
        v = np.abs(v)
    enc = {"bf16": ml_dtypes.bfloat16, "tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8, "f16": np.float16}[typ]
    return v.astype(np.float64), v.astype(enc).view(np.uint8).reshape(shape[0], -1)


@pytest.mark.parametrize("dtype,atype,btype,k", [
    ("f32", "bf16", "bf16", 16), ("f32", "tf32", "tf32", 8), ("f32", "e4m3", "e5m2", 32),
    ("f16", "e4m3", "e4m3", 32), ("f16", "f16", "f16", 16), ("s32", "s8", "u8", 32)])
def test_other_types_one_step(dtype, atype, btype, k):
    """One wgmma m64n16 per type combination, K-major 128B swizzle, exact small integers."""
    n = 16
    rng = np.random.default_rng(hash((atype, btype)) & 0xFFFF)
    esize = {"bf16": 2, "f16": 2, "tf32": 4}.get(atype, 1)
    a, a_bytes = _values(rng, atype, (64, 128 // esize))
    bt, b_bytes = _values(rng, btype, (n, 128 // esize))
    nd = n // 4 if dtype == "f16" else n // 2
    ints = dtype == "s32"
    tail = "" if ints else (", 1, 1, 0, 0" if esize == 2 else ", 1, 1")
    sat = ".satfinite" if ints else ""
    step = [f"wgmma.mma_async.sync.aligned.m64n{n}k{k}{sat}.{dtype}.{atype}.{btype} {{D}}, %rd10, %rd11, %p2{tail};"]
    ptx = wgmma_ptx(n, step, 8192, 2048, nd=nd)
    out = run(ptx, n, image_sw128_bytes(a_bytes), image_sw128_bytes(b_bytes),
              desc(A_OFF, 16, 1024, 1), desc(B_OFF, 16, 1024, 1), raw=True, nd=nd)
    want = a[:, :k] @ bt[:, :k].T
    if dtype == "f16":
        vals = d_unpack(out.view(np.float16).reshape(128, n // 2), n).astype(np.float64)
    elif ints:
        vals = d_unpack(out.view(np.int32), n).astype(np.float64)
    else:
        vals = d_unpack(out, n).astype(np.float64)
    np.testing.assert_array_equal(vals, want)


def test_bad_type_combinations_are_rejected():
    for bad in ("m64n16k16.f16.bf16.bf16", "m64n12k16.f32.f16.f16", "m64n16k8.f32.f16.f16",
                "m64n16k32.f32.s8.s8"):
        ptx = wgmma_ptx(16, [f"wgmma.mma_async.sync.aligned.{bad} {{D}}, %rd10, %rd11, %p2, 1, 1, 0, 0;"],
                        8192, 2048)
        with pytest.raises(sim.HazardError) as e:
            _launch(ptx, 16)
        assert e.value.kind == "unsupported", bad


def test_wgmma_needs_target_sm90a():
    ptx = _simple().replace(".version 8.0\n.target sm_90a\n", ".version 8.0\n.target sm_90\n")
    with pytest.raises(sim.HazardError) as e:
        _launch(ptx)
    assert e.value.kind == "unsupported" and "sm_90a" in e.value.detail


def test_a_register_written_after_fence_is_a_hazard():
    step = ["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {D}, {%a0, %a1, %a2, %a3}, %rd11, %p2, 1, 1, 0;"]
    ok = wgmma_ptx(8, step, 0, 2048, a_regs=True)
    _launch(ok)
    bad = wgmma_ptx(8, step, 0, 2048, a_regs=True, after_fence="    mov.b32 %a2, 0;   // ALATE")
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "missing-fence" and "%a2" in e.value.detail


def test_other_shape_on_in_flight_accumulators_is_a_hazard():
    """Only a same-shape wgmma into the same registers may follow without a wait."""
    first = "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {D}, %rd10, %rd11, %p2, 1, 1, 0, 0;"
    same = first.replace("%p2", "%p1")
    other = ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, %rd10, %rd11, "
             "%p1, 1, 1, 0, 0;   // OTHER")
    _launch(wgmma_ptx(16, [first, same], 8192, 4096), 16)
    bad = wgmma_ptx(16, [first, other], 8192, 4096)
    with pytest.raises(sim.HazardError) as e:
        _launch(bad, 16)
    assert e.value.kind == "async-pending" and e.value.line == line_of(bad, "OTHER")
    fixed = wgmma_ptx(16, [first, "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;",
                           other.replace("// OTHER", "")], 8192, 4096)
    _launch(fixed, 16)


@pytest.mark.parametrize("second", [
    # a wider shape whose accumulators are a superset of the in-flight m64n8's
    "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {D}, %rd10, %rd11, %p1, 1, 1, 0, 0;   // OTHER",
    # the same shape and registers, another input type
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, %rd10, %rd11, %p1, 1, 1, 0, 0;"
    "   // OTHER",
])
def test_superset_or_other_type_on_in_flight_accumulators_is_a_hazard(second):
    """Issue 21: chaining is allowed only for the same shape and types into the same registers; the
    test above covers a subset, this one a superset and a type change."""
    first = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, %rd10, %rd11, %p2, 1, 1, 0, 0;"
    bad = wgmma_ptx(16, [first, second], 8192, 4096)
    with pytest.raises(sim.HazardError) as e:
        _launch(bad, 16)
    assert e.value.kind == "async-pending" and e.value.line == line_of(bad, "OTHER")
    fixed = wgmma_ptx(16, [first, "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;",
                           second.replace("// OTHER", "")], 8192, 4096)
    _launch(fixed, 16)


def test_generic_writes_read_by_wgmma_need_a_proxy_fence():
    """st.shared data read by wgmma (async proxy) without fence.proxy.async is a race; the same
    kernel with the fence (every other test here) runs."""
    bad = _simple().replace("    fence.proxy.async.shared::cta;\n", "")
    assert bad != _simple()
    with pytest.raises(sim.HazardError) as e:
        _launch(bad)
    assert e.value.kind == "race" and "fence.proxy.async" in e.value.detail


def test_integer_wgmma_shapes_follow_the_isa_table():
    """s8/u8 wgmma has N = 8, 16, 24 and multiples of 16 only (ptxas rejects m64n40k32.s32)."""
    from ptxgen.sim.machine import compile_entry
    for n, legal in ((40, False), (24, True), (48, True), (248, False), (256, True)):
        dregs = ", ".join(f"%d{i}" for i in range(n // 2))
        ptx = sm90(kernel(f"""
    mov.u64 %rd1, 0;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.s8 {{{dregs}}}, %rd1, %rd1, 0;
    ret;""", regs=f"    .reg .s32 %d<{n // 2}>;\n"))
        if legal:
            compile_entry(ptx, "k")
        else:
            with pytest.raises(sim.HazardError, match="integer wgmma shape"):
                compile_entry(ptx, "k")
