"""tcgen05.mma (sm_100a) against numpy: every simulated kind, 128x128 and 128x256, the sm100 shared-memory
descriptor in each swizzle, the instruction-descriptor fields (docs/ptx_facts/tcgen05.md §12c-§12e)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import gemm_kernel, idesc, image_kmajor, run_gemm, smem_desc

M = 128


def values(rng, typ: str, shape) -> np.ndarray:
    """Never-zero small values exactly representable in `typ`."""
    v = rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)
    if typ in ("s8",):
        return v.astype(np.int8)
    if typ == "u8":
        return np.abs(v).astype(np.uint8)
    return v.astype({"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32,
                     "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[typ])


# kind, A/B type, A/B code, D code, element bytes
KINDS = [("f16", "f16", 0, 1, 2), ("f16", "bf16", 1, 1, 2), ("tf32", "tf32", 2, 1, 4),
         ("f8f6f4", "e4m3", 0, 1, 1), ("f8f6f4", "e5m2", 1, 1, 1), ("i8", "s8", 1, 2, 1), ("i8", "u8", 0, 2, 1)]


def _gemm(kind, typ, code, dcode, esize, n, swizzle="128B", steps=2, seed=0):
    rng = np.random.default_rng(seed)
    k_step = 32 // esize
    row_bytes = {"128B": 128, "64B": 64, "32B": 32, "none": 32}[swizzle]
    steps = min(steps, row_bytes // 32)
    k = k_step * steps
    a, b = values(rng, typ, (M, k)), values(rng, typ, (n, k))
    ia, lbo, sbo = image_kmajor(a, swizzle, M * row_bytes)
    ib, _, _ = image_kmajor(b, swizzle, n * row_bytes)
    da, db = smem_desc(0, lbo, sbo, swizzle), smem_desc(ia.size, lbo, sbo, swizzle)
    step_bytes = 256 if swizzle == "none" else 32    # none: next K chunk pair is 2 LBO away
    ptx = gemm_kernel(n, kind, steps, idesc(dcode, code, code, M, n), step_bytes, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), da, db)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    return out, ref


@pytest.mark.parametrize("kind,typ,code,dcode,esize", KINDS)
def test_128x128_every_kind(kind, typ, code, dcode, esize):
    out, ref = _gemm(kind, typ, code, dcode, esize, 128)
    got = out.view(np.int32) if dcode == 2 else out.view(np.float32)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("kind,typ,code,dcode,esize", KINDS)
def test_128x256(kind, typ, code, dcode, esize):
    out, ref = _gemm(kind, typ, code, dcode, esize, 256, steps=1)
    np.testing.assert_array_equal(out.view(np.int32) if dcode == 2 else out.view(np.float32), ref)


def test_m64_accumulator_uses_lanes_0_to_15_of_each_quarter():
    """Layout F: row m of an M = 64 D in lane 32 * (m // 16) + m % 16 (docs/ptx_facts/tcgen05.md §12f)."""
    rng = np.random.default_rng(9)
    a, b = values(rng, "f16", (64, 16)), values(rng, "f16", (64, 16))
    ia, _, sbo = image_kmajor(a, "32B", 2048)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, 64, 64), 32, ia.size, ib.size)
    out = run_gemm(ptx, 64, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"),
                   smem_desc(ia.size, 16, sbo, "32B")).view(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    for m in range(64):
        np.testing.assert_array_equal(out[32 * (m // 16) + m % 16], ref[m])
    assert not out.reshape(4, 32, 64)[:, 16:].any()     # lanes 16-31 of each quarter untouched


def test_m64_read_back_as_triton_does_with_16x32bx2():
    """Triton reads an M = 64 D with .16x32bx2.x(N/2), half-split N/2: thread t < 16 gets row t of the
    warp's 16 rows, columns 0..N/2-1; thread t >= 16 the same row's columns N/2..N-1."""
    rng = np.random.default_rng(15)
    a, b = values(rng, "f16", (64, 16)), values(rng, "f16", (64, 16))
    ia, _, sbo = image_kmajor(a, "32B", 2048)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, 64, 64), 32, ia.size, ib.size)
    load = next(line for line in ptx.splitlines() if "tcgen05.ld" in line)
    regs = ", ".join(f"%d{i}" for i in range(32))
    ptx = ptx.replace(load, f"    tcgen05.ld.sync.aligned.16x32bx2.x32.b32 {{{regs}}}, [%r11+0], 32;")
    out = run_gemm(ptx, 64, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"),
                   smem_desc(ia.size, 16, sbo, "32B")).view(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    for w in range(4):
        for t in range(32):
            row, half = 16 * w + (t & 15), t >> 4
            np.testing.assert_array_equal(out[32 * w + t, :32], ref[row, 32 * half:32 * half + 32])


def test_two_m64_accumulators_interleave_at_lanes_0_and_16():
    """A second M = 64 D at lane 16 uses the other 16 lanes of each quarter: both MMAs may be in
    flight together (their cells do not overlap) and each lands in its own lanes."""
    rng = np.random.default_rng(13)
    a, b = values(rng, "f16", (64, 16)), values(rng, "f16", (64, 16))
    ia, _, sbo = image_kmajor(a, "32B", 2048)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, 64, 64), 32, ia.size, ib.size)
    first = next(line for line in ptx.splitlines() if "tcgen05.mma" in line)
    ptx = ptx.replace(first, first + "\n" + first.replace("[%r10]", f"[%r10+{16 << 16}]"))
    out = run_gemm(ptx, 64, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"),
                   smem_desc(ia.size, 16, sbo, "32B")).view(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_array_equal(out.reshape(4, 2, 16, 64), np.stack([ref.reshape(4, 16, 64)] * 2, axis=1))


def test_a_from_tensor_memory():
    """A (128 x 16 f16) stored to TMEM columns 128.. with tcgen05.st (row m in lane m, two f16 per
    column, the lower k in the low half), then tcgen05.mma [d], [a-tmem], b-desc."""
    rng = np.random.default_rng(10)
    a, b = values(rng, "f16", (M, 16)), values(rng, "f16", (64, 16))
    ib, _, sbo = image_kmajor(b, "32B", 2048)
    place = """    shl.b32 %r20, %r0, 5;
    ld.shared.v4.u32 {%r21, %r22, %r23, %r24}, [%r20];
    ld.shared.v4.u32 {%r25, %r26, %r27, %r28}, [%r20+16];
    tcgen05.st.sync.aligned.32x32b.x8.b32 [%r11+128], {%r21, %r22, %r23, %r24, %r25, %r26, %r27, %r28};
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;"""
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, M, 64), 32, 4096, ib.size, extra_before_mma=place,
                      a_operand="[%r10+128]")
    out = run_gemm(ptx, 64, np.concatenate([a.view(np.uint8).ravel(), ib]), 0, smem_desc(4096, 16, sbo, "32B"))
    np.testing.assert_array_equal(out.view(np.float32), a.astype(np.float64) @ b.astype(np.float64).T)


def test_a_mn_major():
    """A stored M-major (transpose A = idesc bit 15): 64 M elements per 128-byte row, one row per k."""
    rng = np.random.default_rng(12)
    a, b = values(rng, "f16", (64, 16)), values(rng, "f16", (64, 16))
    ia, _, _ = image_kmajor(np.ascontiguousarray(a.T), "128B", 16 * 128)
    ib, _, sbo = image_kmajor(b, "32B", 2048)
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, 64, 64, ta=1), 32, ia.size, ib.size)
    out = run_gemm(ptx, 64, np.concatenate([ia, ib]), smem_desc(0, 8192, 1024, "128B"),
                   smem_desc(ia.size, 16, sbo, "32B")).view(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_array_equal(out.reshape(4, 32, 64)[:, :16].reshape(64, 64), ref)


@pytest.mark.parametrize("sat,want", [(0, -(1 << 31)), (1, (1 << 31) - 1)])
def test_i8_saturate_bit(sat, want):
    """D = A x B + D with D near the s32 maximum: wraps without the saturate bit, clamps with it."""
    a, b = np.full((M, 32), 1, np.int8), np.full((8, 32), 1, np.int8)
    ia, _, sbo = image_kmajor(a, "32B", 4096)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    place = """    mov.u32 %r21, 0x7FFFFFE0;
    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r11], {%r21};
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;"""
    ptx = gemm_kernel(8, "i8", 1, idesc(2, 1, 1, M, 8, sat=sat), 32, 4096, 2048, extra_before_mma=place)
    ptx = ptx.replace("%p7;\n", "%p6;\n", 1)      # accumulate into the stored D
    out = run_gemm(ptx, 8, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"), smem_desc(4096, 16, sbo, "32B"))
    assert out.view(np.int32)[5, 0] == want      # 0x7FFFFFE0 + 32 = 2^31


@pytest.mark.parametrize("swizzle", ["none", "32B", "64B", "128B"])
def test_every_swizzle(swizzle):
    out, ref = _gemm("f16", "f16", 0, 1, 2, 64, swizzle=swizzle, steps=4)
    np.testing.assert_array_equal(out[:, :64].view(np.float32), ref)


def test_fp32_rounding_of_exact_sum():
    """The exact sum of products is rounded once to f32 (1 + 2^-24 + 2^-24 is not 1)."""
    a = np.zeros((M, 16), np.float16)
    b = np.zeros((8, 16), np.float16)
    a[:, 0], a[:, 1], a[:, 2] = 1.0, 2.0 ** -12, 2.0 ** -12
    b[:, 0], b[:, 1], b[:, 2] = 1.0, 2.0 ** -12, 2.0 ** -12
    ia, _, sbo = image_kmajor(a, "32B", M * 32)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    img = np.concatenate([ia, ib])
    ptx = gemm_kernel(8, "f16", 1, idesc(1, 0, 0, M, 8), 32, ia.size, 2048)
    out = run_gemm(ptx, 8, img, smem_desc(0, 16, sbo, "32B"), smem_desc(ia.size, 16, sbo, "32B"))
    assert out.view(np.float32)[0, 0] == np.float32(1 + 2.0 ** -23)


def test_idesc_negate_and_f16_accumulator():
    rng = np.random.default_rng(3)
    a, b = values(rng, "f16", (M, 16)), values(rng, "f16", (64, 16))
    ia, _, sbo = image_kmajor(a, "32B", M * 32)
    ib, _, _ = image_kmajor(b, "32B", 64 * 32)
    ptx = gemm_kernel(64, "f16", 1, idesc(0, 0, 0, M, 64, neg_a=1), 32, ia.size, ib.size)
    out = run_gemm(ptx, 64, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"),
                   smem_desc(ia.size, 16, sbo, "32B"))
    ref = -(a.astype(np.float64) @ b.astype(np.float64).T)
    np.testing.assert_array_equal((out & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64), ref)


def test_b_mn_major():
    """B stored N-major (transpose B = idesc bit 16): 128B swizzle, 64 N elements per 128-byte row,
    one row per k (8 rows = 1024 B, SBO between 8-K groups)."""
    rng = np.random.default_rng(5)
    n = 64
    a, b = values(rng, "f16", (M, 16)), values(rng, "f16", (n, 16))
    ia, _, sbo = image_kmajor(a, "32B", M * 32)
    ib, _, _ = image_kmajor(np.ascontiguousarray(b.T), "128B", 16 * 128)   # rows = k, 64 n each
    ptx = gemm_kernel(n, "f16", 1, idesc(1, 0, 0, M, n, tb=1), 32, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"),
                   smem_desc(ia.size, 8192, 1024, "128B"))
    np.testing.assert_array_equal(out.view(np.float32), a.astype(np.float64) @ b.astype(np.float64).T)


@pytest.mark.parametrize("bad,msg", [
    (idesc(1, 2, 2, M, 64), "not a .kind::f16 combination"),
    (idesc(1, 0, 0, 96, 64), "M = 96"),
    (idesc(1, 0, 0, M, 64) | 1 << 23, "reserved bit"),
    (idesc(1, 0, 0, M, 64) | 1 << 3, "saturate"),
])
def test_bad_instruction_descriptor_is_refused(bad, msg):
    ptx = gemm_kernel(64, "f16", 1, bad, 32, 4096, 2048)
    with pytest.raises(sim.HazardError, match=msg):
        run_gemm(ptx, 64, np.zeros(6144, np.uint8), smem_desc(0, 16, 256, "32B"), smem_desc(4096, 16, 256, "32B"))


def test_hopper_descriptor_is_refused():
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, M, 64), 32, 4096, 2048)
    hopper = smem_desc(0, 16, 256, "32B") & ~(1 << 46)
    with pytest.raises(sim.HazardError, match="0b001"):
        run_gemm(ptx, 64, np.zeros(6144, np.uint8), hopper, smem_desc(4096, 16, 256, "32B"))


def test_tcgen05_needs_sm100a():
    ptx = gemm_kernel(64, "f16", 1, idesc(1, 0, 0, M, 64), 32, 4096, 2048).replace("sm_100a", "sm_100")
    with pytest.raises(sim.HazardError, match="sm_100a"):
        run_gemm(ptx, 64, np.zeros(6144, np.uint8), 0, 0)


def test_tile_kernel_128x128x256_in_four_k_blocks():
    """The bench's tile kernel (bench/sim_speed.py): four stages through one buffer, each reused only
    after the wait on the MMAs' commit (the simulator would report an earlier overwrite)."""
    from tcgen05_util import tile_kernel, tile_operands
    rng = np.random.default_rng(7)
    a, b = values(rng, "f16", (128, 256)), values(rng, "f16", (128, 256))
    image, da, db = tile_operands(a, b)
    out = np.full((128, 128), np.nan, np.float32)
    sim.launch(tile_kernel(256), "tile", block=(128,), args=[out, image, da, db])
    np.testing.assert_array_equal(out, a.astype(np.float64) @ b.astype(np.float64).T)


# ------------------------------------------------------------------ block-scaled kinds
def _scaled(kind: str, vec: int, block: int, fmt: str, scale_type: str, sf_id: int, seed: int, via: str = "st"):
    """One 128x128 MMA with per-block scales: A, B as codes in shared memory (e2m1 packed two per
    byte, low nibble first), scales placed by scale_words; reference from the ISA's formula."""
    from tcgen05_util import scale_words, store_scales
    rng = np.random.default_rng(seed)
    n, k = 128, 32 * (1 if kind == "mxf8f6f4" else 2)
    if fmt == "e2m1":
        nz = np.array([c for c in range(16) if c not in (0, 8)], np.uint8)
        ca, cb = rng.choice(nz, (M, k)), rng.choice(nz, (n, k))
        va = ca.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        vb = cb.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        pa, pb = (ca[:, 0::2] | ca[:, 1::2] << 4), (cb[:, 0::2] | cb[:, 1::2] << 4)
    elif fmt in ("e2m3", "e3m2"):    # fp6 in the .b6x16_p32 form (test_sim_tcgen05_subbyte.py)
        from test_sim_tcgen05_subbyte import DTYPE, fp6_codes, pack_fp6
        ca, cb = fp6_codes(rng, (M, k)), fp6_codes(rng, (n, k))
        va, vb = ca.view(DTYPE[fmt]).astype(np.float64), cb.view(DTYPE[fmt]).astype(np.float64)
        pa, pb = pack_fp6(ca), pack_fp6(cb)
    else:
        va, vb = values(rng, "e4m3", (M, k)).astype(np.float64), values(rng, "e4m3", (n, k)).astype(np.float64)
        pa = va.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        pb = vb.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    if scale_type == "ue8m0":
        sa, sb = rng.integers(124, 131, (M, vec)), rng.integers(124, 131, (n, vec))
        fa, fb = 2.0 ** (sa - 127.0), 2.0 ** (sb - 127.0)
    else:
        sa, sb = rng.integers(0x30, 0x48, (M, vec)), rng.integers(0x30, 0x48, (n, vec))
        fa = sa.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        fb = sb.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    ref = (va * np.repeat(fa, block, axis=1)) @ (vb * np.repeat(fb, block, axis=1)).T
    ia, _, sbo = image_kmajor(np.ascontiguousarray(pa), "32B", M * 32)
    ib, _, _ = image_kmajor(np.ascontiguousarray(pb), "32B", n * 32)
    words_a = np.zeros((128, 4), np.uint32)
    words_b = np.zeros((128, 4), np.uint32)
    full_a = np.zeros((M, 4), np.int64)
    full_b = np.zeros((n, 4), np.int64)
    full_a[:, sf_id:sf_id + vec], full_b[:, sf_id:sf_id + vec] = sa, sb
    words_a, words_b = scale_words(full_a), scale_words(full_b)
    image = np.concatenate([ia, ib, words_a.view(np.uint8).ravel(), words_b.view(np.uint8).ravel()])
    off = ia.size + ib.size
    code = 1 if kind != "mxf8f6f4" else {"e2m3": 3, "e3m2": 4}.get(fmt, 0)
    idesc_value = (sf_id << 4 | code << 7 | code << 10 | (n >> 3) << 17 | (scale_type == "ue8m0") << 23
                   | (M >> 4) << 24 | sf_id << 29)
    qual = {1: "block32", 2: "block32", 4: "block16"}[vec]
    if via in ("st", "st-unsynced"):
        place = store_scales(off, 128, via == "st") + "\n" + store_scales(off + 2048, 132, via == "st")
    else:    # one tcgen05.cp.32x128b.warpx4 per operand (rows 0-31 of the words: 16 dense bytes each),
        # then the MMA with no wait (cp -> mma is pipelined); "cp-other": thread 32 issues the copies
        issuer = "%p2" if via.startswith("cp-other") else "%p4"
        place = "    setp.eq.u32 %p2, %r0, 32;\n" + "".join(
            f"    @{issuer} tcgen05.cp.cta_group::1.32x128b.warpx4 [%r10+{col}], "
            f"{smem_desc(src, 16, 128, 'none'):#x};\n" for col, src in ((128, off), (132, off + 2048)))
        if via.startswith("cp-other-waited"):   # thread 32 commits the copies, warp 1 waits, then (maybe) bar.sync
            place += ("    @%p2 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];\n"
                      "    shr.u32 %r30, %r0, 5;\n    setp.ne.u32 %p1, %r30, 1;\n    @%p1 bra SKIPCP;\n"
                      "WCP:\n    mbarrier.try_wait.parity.shared::cta.b64 %p0, [bar], 0;\n    @!%p0 bra WCP;\n"
                      "SKIPCP:\n" + ("" if via.endswith("nosync") else
                                      "    tcgen05.fence::before_thread_sync;\n    bar.sync 0;\n"))
    ptx = gemm_kernel(n, f"{kind}.block_scale.{qual}", 1, idesc_value, 32, ia.size, ib.size + 4096,
                      extra_before_mma=place,
                      scale_operands="[%r10+128], [%r10+132], ")
    if via.startswith("cp-other-waited"):     # the MMA's commit completes the barrier's second phase
        ptx = ptx.replace("%p5, [bar], 0;", "%p5, [bar], 1;")
    out = run_gemm(ptx, n, image, smem_desc(0, 16, sbo, "32B"), smem_desc(ia.size, 16, sbo, "32B"))
    return out.view(np.float32), ref


@pytest.mark.parametrize("kind,vec,block,fmt,scale_type,sf_id", [
    ("mxf8f6f4", 1, 32, "e4m3", "ue8m0", 0), ("mxf8f6f4", 1, 32, "e4m3", "ue8m0", 3),
    ("mxf4", 2, 32, "e2m1", "ue8m0", 0), ("mxf4", 2, 32, "e2m1", "ue8m0", 2),
    ("mxf4nvf4", 4, 16, "e2m1", "ue4m3", 0), ("mxf8f6f4", 1, 32, "e2m3", "ue8m0", 1),
    ("mxf8f6f4", 1, 32, "e3m2", "ue8m0", 2)])
def test_block_scaled_mma(kind, vec, block, fmt, scale_type, sf_id):
    got, ref = _scaled(kind, vec, block, fmt, scale_type, sf_id, seed=sf_id + vec)
    np.testing.assert_array_equal(got, ref)


def test_block_scales_copied_with_tcgen05_cp_feed_the_mma_without_a_wait():
    got, ref = _scaled("mxf4", 2, 32, "e2m1", "ue8m0", 2, seed=11, via="cp")
    np.testing.assert_array_equal(got, ref)


def test_scales_stored_by_other_warps_without_a_barrier_race_with_the_mma():
    """Each warp waits for its own tcgen05.st of the scales (wait::st), but no barrier hands the
    stores to thread 0 before its MMA reads them: warps 1-3's stores are not ordered before it
    (docs/ptx_facts/tcgen05.md §12l); with the bar.sync (test_block_scaled_mma) they are."""
    with pytest.raises(sim.HazardError, match=r"race .*warp 1's tcgen05.st at line \d+ \(waited for"):
        _scaled("mxf8f6f4", 1, 32, "e4m3", "ue8m0", 0, seed=1, via="st-unsynced")


def test_scales_copied_by_another_thread_race_with_the_mma():
    """cp -> mma needs no wait only within one thread (PTX ISA §9.7.16.6.2): thread 32's tcgen05.cp,
    still in flight, read by thread 0's MMA is reported."""
    with pytest.raises(sim.HazardError, match=r"race .*tcgen05.cp at line \d+ issued by another thread"):
        _scaled("mxf4", 2, 32, "e2m1", "ue8m0", 2, seed=11, via="cp-other")


def test_scales_copied_by_another_thread_reach_the_mma_through_its_commit_and_a_barrier():
    """Thread 32 copies and commits; warp 1 waits on the commit's phase, then bar.sync hands the
    copies to thread 0: ordered, and the product matches. Without the bar.sync thread 0's MMA
    is not ordered after the copies (a race, whether they are still in flight or retired)."""
    got, ref = _scaled("mxf4", 2, 32, "e2m1", "ue8m0", 2, seed=11, via="cp-other-waited")
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(sim.HazardError, match=r"race .*tcgen05.cp at line \d+"):
        _scaled("mxf4", 2, 32, "e2m1", "ue8m0", 2, seed=11, via="cp-other-waited-nosync")


# ------------------------------------------------------------------ with TMA: a two-block pipeline
def tma_pipeline_kernel(wait_mma_before_reload: bool) -> str:
    """K = 32 in two blocks through ONE shared stage: TMA A (128 x 16) and B (64 x 16) boxes
    (32B swizzle, the canonical K-major SW32 layout), wait, MMA, commit to bar_mma; the second
    block's TMA may overwrite the stage only after bar_mma's phase is seen."""
    blocks = []
    for kb in range(2):
        reload_guard = ("WM%d:\n    mbarrier.try_wait.parity.shared::cta.b64 %%p5, [%%r6], %d;\n    @!%%p5 bra WM%d;\n"
                        % (kb, kb - 1, kb)) if kb and wait_mma_before_reload else ""
        blocks.append(f"""{reload_guard}    mov.u32 %r20, {16 * kb};
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 6144;
    @%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {{%r20, %r21}}], [%r5];
    @%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd2, {{%r20, %r21}}], [%r5];
WL{kb}:
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r5], {kb};
    @!%p4 bra WL{kb};
    @%p0 tcgen05.mma.cta_group::1.kind::f16 [%r10], %rd10, %rd11, {idesc(1, 0, 0, M, 64):#x}, {'%p7' if kb == 0 else '%p6'};
    @%p0 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r6];
""")
    regs = ", ".join(f"%d{i}" for i in range(64))
    stores = "".join(f"    st.global.b32 [%rd7+{4 * i}], %d{i};\n" for i in range(64))
    return (".version 8.7\n.target sm_100a\n.address_size 64\n.extern .shared .align 1024 .b8 smem[];\n"
            ".visible .entry k(.param .u64 pOut, .param .align 64 .b8 tmA[128], .param .align 64 .b8 tmB[128], "
            ".param .u64 dA, .param .u64 dB)\n{\n    .reg .pred %p<8>;\n    .reg .b32 %r<40>;\n    .reg .b64 %rd<16>;\n"
            "    .reg .b32 %d<64>;\n" + f"""
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, smem;
    add.u32 %r2, %r1, 4096;
    add.u32 %r5, %r1, 6144;
    add.u32 %r6, %r1, 6152;
    add.u32 %r7, %r1, 6160;
    mov.u32 %r21, 0;
    ld.param.u64 %rd10, [dA];
    ld.param.u64 %rd11, [dB];
    mov.b64 %rd1, tmA;
    cvta.param.u64 %rd1, %rd1;
    mov.b64 %rd2, tmB;
    cvta.param.u64 %rd2, %rd2;
    setp.eq.u32 %p0, %r0, 0;
    setp.lt.u32 %p3, %r0, 32;
    setp.eq.u32 %p6, %r0, %r0;
    setp.ne.u32 %p7, %r0, %r0;
    @%p0 mbarrier.init.shared::cta.b64 [%r5], 1;
    @%p0 mbarrier.init.shared::cta.b64 [%r6], 1;
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r7], 64;
    bar.sync 0;
    ld.shared.b32 %r10, [%r7];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
{''.join(blocks)}WE:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r6], 1;
    @!%p5 bra WE;
    tcgen05.fence::after_thread_sync;
    shr.u32 %r12, %r0, 5;
    shl.b32 %r12, %r12, 21;
    add.u32 %r11, %r10, %r12;
    tcgen05.ld.sync.aligned.32x32b.x64.b32 {{{regs}}}, [%r11];
    tcgen05.wait::ld.sync.aligned;
    ld.param.u64 %rd0, [pOut];
    mul.wide.u32 %rd6, %r0, 256;
    add.u64 %rd7, %rd0, %rd6;
{stores}    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 64;
    ret;
}}
""")


def _tma_pipeline(wait_mma_before_reload: bool):
    rng = np.random.default_rng(14)
    a, b = values(rng, "f16", (M, 32)), values(rng, "f16", (64, 32))
    out = np.full((M, 64), np.nan, np.float32)
    args = [out, sim.TensorMap(a, (M, 16), swizzle="32B"), sim.TensorMap(b, (64, 16), swizzle="32B"),
            smem_desc(0, 16, 256, "32B"), smem_desc(4096, 16, 256, "32B")]
    sim.launch(tma_pipeline_kernel(wait_mma_before_reload), "k", block=(128,), args=args, dynamic_smem=8192)
    return out, a.astype(np.float64) @ b.astype(np.float64).T


def test_tma_pipeline_reusing_the_stage_after_the_mma_commit():
    out, ref = _tma_pipeline(True)
    np.testing.assert_array_equal(out, ref)


def test_tma_overwriting_the_stage_before_the_mma_commit_is_seen_is_a_hazard():
    with pytest.raises(sim.HazardError) as e:
        _tma_pipeline(False)
    assert e.value.kind == "async-pending" and "cp.async.bulk.tensor" in str(e.value)


def _padded_fp4(codes: np.ndarray) -> np.ndarray:
    """rows x K e2m1 codes -> rows x K bytes in .b4x16_p64: per 16 values 8 bytes (lower k in the low
    nibble) then 8 zero bytes (PTX ISA §5.5.1.1.1; docs/ptx_facts/sm100_formats.md §2a)."""
    rows, k = codes.shape
    packed = (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8).reshape(rows, k // 16, 8)
    return np.concatenate([packed, np.zeros_like(packed)], axis=2).reshape(rows, k)


def _e4m3_x_padded_e2m1(swap_nibbles: bool = False, btype: int = 5):
    rng = np.random.default_rng(7)
    k, n = 32, 128
    a = values(rng, "e4m3", (M, k))
    codes = rng.integers(1, 8, (n, k)) | rng.choice([0, 8], (n, k))       # never-zero e2m1 codes
    b = codes.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    img_b = _padded_fp4(codes)
    if swap_nibbles:
        img_b = (img_b >> 4) | ((img_b & 0xF) << 4)
    ia, lbo, sbo = image_kmajor(a, "128B", M * 128)
    ib, _, _ = image_kmajor(img_b, "128B", n * 128)
    da, db = smem_desc(0, lbo, sbo, "128B"), smem_desc(ia.size, lbo, sbo, "128B")
    ptx = gemm_kernel(n, "f8f6f4", 1, idesc(1, 0, btype, M, n), 32, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), da, db)
    return out.view(np.float32), a.astype(np.float64) @ b.T


def test_f8f6f4_reads_e2m1_in_the_padded_form():
    got, ref = _e4m3_x_padded_e2m1()
    np.testing.assert_array_equal(got, ref)


def test_f8f6f4_padded_e2m1_nibble_order_matters():
    """Swapping B's nibbles permutes K in B only, so the product changes: the order is read, not assumed."""
    got, ref = _e4m3_x_padded_e2m1(swap_nibbles=True)
    assert not np.array_equal(got, ref)


def _image_mn_base32b(mat_t: np.ndarray, lbo: int, sbo: int, nbytes: int, xor: bool = True) -> np.ndarray:
    """k x mn (MN-major) 4-byte elements in the 128B-with-32B-atomicity atom, written from PTX ISA
    Table 55 (8 x 4 units of 16 B: 128 bytes of MN per K row, 4 K rows per atom) and CuTe's
    Swizzle<2,5,2>: element (k, j) at (j // 32) * LBO + (k // 4) * SBO + (k % 4) * 128 + (j % 32) * 4,
    then bits 5-6 of the byte offset XOR bits 7-8 (tile 512-byte aligned)."""
    img = np.zeros(nbytes, np.uint8)
    raw = np.ascontiguousarray(mat_t).view(np.uint8).reshape(mat_t.shape[0], -1)
    for k in range(mat_t.shape[0]):
        for j in range(mat_t.shape[1]):
            at = (j // 32) * lbo + (k // 4) * sbo + (k % 4) * 128 + (j % 32) * 4
            if xor:
                at ^= ((at >> 7) & 3) << 5
            img[at:at + 4] = raw[k, 4 * j:4 * j + 4]
    return img


@pytest.mark.parametrize("xor", [True, False])
def test_tf32_b_mn_major_in_the_128b_32b_atom(xor):
    """MN-major tf32 must use the 128B swizzle with 32B atomicity (descriptor code 1); without the
    XOR the same bytes give another product, so the swizzle is read, not assumed."""
    rng = np.random.default_rng(21)
    n = 64
    a, b = values(rng, "tf32", (M, 8)), values(rng, "tf32", (n, 8))
    ia, _, sbo = image_kmajor(a, "32B", M * 32)
    ib = _image_mn_base32b(b.T, 512, 1024, 2048, xor)
    desc_b = smem_desc(ia.size, 512, 1024, "none") | 1 << 61              # swizzle code 1
    ptx = gemm_kernel(n, "tf32", 1, idesc(1, 2, 2, M, n, tb=1), 32, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"), desc_b).view(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.array_equal(out, ref) == xor


def test_128b_32b_atom_with_k_major_is_refused():
    ptx = gemm_kernel(64, "tf32", 1, idesc(1, 2, 2, M, 64), 32, 4096, 2048)
    with pytest.raises(sim.HazardError, match="MN-major operands only"):
        run_gemm(ptx, 64, np.zeros(6144, np.uint8), smem_desc(0, 16, 256, "32B"),
                 smem_desc(4096, 16, 256, "none") | 1 << 61)
