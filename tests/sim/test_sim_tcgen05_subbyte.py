"""fp6 operands (e2m3, e3m2) of tcgen05.mma .kind::f8f6f4 / .kind::mxf8f6f4 from shared memory in the
`.b6x16_p32` form, against numpy (docs/ptx_facts/sm100_formats.md §2b): each 16-byte unit holds 16
values in its first 12 bytes, value p in bits 6p..6p+5 of them read as one little-endian number
(CUTLASS's sub-byte packing, which its 16U6_ALIGN16B TMA lands unchanged), then 4 padding bytes;
and e2m1 in `.b4x16_p64` MN-major (K-major e2m1 is in test_sim_tcgen05_mma.py)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import gemm_kernel, idesc, image_kmajor, run_gemm, smem_desc

M = 128
CODE = {"e4m3": 0, "e2m3": 3, "e3m2": 4}
DTYPE = {"e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn, "e4m3": ml_dtypes.float8_e4m3fn}


def fp6_codes(rng, shape) -> np.ndarray:
    """Never-zero 6-bit codes (sign bit 5; any exponent/mantissa but zero)."""
    return (rng.integers(1, 32, shape) | rng.choice([0, 32], shape)).astype(np.uint8)


def pack_fp6(codes: np.ndarray, order: str = "little", pad: bool = True) -> np.ndarray:
    """rows x K codes -> rows x K bytes: per 16 values 12 bytes holding value p at bits 6p (the
    bytes of that 96-bit number little-endian, as CUTLASS's SubbyteReference stores fp6), then 4
    zero bytes (pad=False: without them, rows x 3K/4 bytes, the global form). order="reversed"
    puts value p at bits 6(15-p) instead (a wrong reading)."""
    rows, k = codes.shape
    groups = codes.reshape(rows, k // 16, 16).astype(object)
    out = np.zeros((rows, k // 16, 16 if pad else 12), np.uint8)
    for r in range(rows):
        for g in range(k // 16):
            word = 0
            for p in range(16):
                word |= int(groups[r, g, p]) << (6 * (p if order == "little" else 15 - p))
            out[r, g, :12] = np.frombuffer(word.to_bytes(12, "little"), np.uint8)
    return out.reshape(rows, -1)


def operand(rng, typ: str, rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, shared-memory bytes rows x K) of one operand."""
    if typ == "e4m3":
        v = (rng.integers(1, 4, (rows, k)) * rng.choice([-1, 1], (rows, k))).astype(DTYPE[typ])
        return v.astype(np.float64), v.view(np.uint8)
    codes = fp6_codes(rng, (rows, k))
    return codes.view(DTYPE[typ]).astype(np.float64), pack_fp6(codes)


def _kmajor(atype: str, btype: str, order: str = "little", seed: int = 3):
    rng = np.random.default_rng(seed)
    k, n = 32, 128
    a, img_a = operand(rng, atype, M, k)
    b, img_b = operand(rng, btype, n, k)
    if order != "little":
        img_b = pack_fp6(np.ascontiguousarray(b.astype(DTYPE[btype]).view(np.uint8)), order)
    ia, lbo, sbo = image_kmajor(img_a, "128B", M * 128)
    ib, _, _ = image_kmajor(img_b, "128B", n * 128)
    da, db = smem_desc(0, lbo, sbo, "128B"), smem_desc(ia.size, lbo, sbo, "128B")
    ptx = gemm_kernel(n, "f8f6f4", 1, idesc(1, CODE[atype], CODE[btype], M, n), 32, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), da, db)
    return out.view(np.float32), a @ b.T


@pytest.mark.parametrize("atype,btype", [("e2m3", "e3m2"), ("e3m2", "e2m3"), ("e2m3", "e4m3"), ("e4m3", "e3m2")])
def test_fp6_k_major_operands(atype, btype):
    got, ref = _kmajor(atype, btype)
    np.testing.assert_array_equal(got, ref)


def test_fp6_bit_order_is_read_not_assumed():
    """B packed with value p at bits 6(15-p): another product, so the placement matters."""
    got, ref = _kmajor("e4m3", "e3m2", order="reversed")
    assert not np.array_equal(got, ref)


def test_fp6_a_mn_major():
    """A M-major (transpose A): each 16-byte unit holds 16 consecutive M values of one k."""
    rng = np.random.default_rng(5)
    k, n = 32, 64
    codes = fp6_codes(rng, (M, k))
    a = codes.view(ml_dtypes.float6_e2m3fn).astype(np.float64)
    b, img_b = operand(rng, "e4m3", n, k)
    ia, _, _ = image_kmajor(pack_fp6(np.ascontiguousarray(codes.T)), "128B", k * 128)   # k rows of 128 M bytes
    ib, lbo, sbo = image_kmajor(img_b, "128B", n * 128)
    ptx = gemm_kernel(n, "f8f6f4", 1, idesc(1, CODE["e2m3"], CODE["e4m3"], M, n, ta=1), 32, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), smem_desc(0, 8192, 1024, "128B"),
                   smem_desc(ia.size, lbo, sbo, "128B"))
    np.testing.assert_array_equal(out.view(np.float32), a @ b.T)


def test_fp6_a_in_tensor_memory_is_refused():
    """An fp6 A in TMEM sits in 8-bit containers whose bit placement no production code pins down."""
    ptx = gemm_kernel(64, "f8f6f4", 1, idesc(1, CODE["e2m3"], CODE["e4m3"], M, 64), 32, 4096, 2048,
                      a_operand="[%r10+128]")
    with pytest.raises(sim.HazardError, match="e2m3 A in tensor memory is not simulated"):
        run_gemm(ptx, 64, np.zeros(6144, np.uint8), 0, smem_desc(4096, 16, 256, "32B"))


def test_fp6_through_a_16u6_align16b_tma_then_the_mma():
    """The whole chain: B packed in global memory as CUTLASS stores fp6, landed by a 16U6_ALIGN16B
    TMA box (128 rows x 128 values, 128B swizzle), read by four K = 32 MMAs: matches numpy."""
    from test_sim_tma_fp4 import fp6_load
    rng = np.random.default_rng(8)
    n, k = 128, 128
    codes = fp6_codes(rng, (n, k))
    b = codes.view(ml_dtypes.float6_e3m2fn).astype(np.float64)
    img_b = fp6_load(pack_fp6(codes, pad=False), (n, k), (0, 0))
    a, img_a = operand(rng, "e4m3", M, k)
    ia, lbo, sbo = image_kmajor(img_a, "128B", M * 128)
    ptx = gemm_kernel(n, "f8f6f4", 4, idesc(1, CODE["e4m3"], CODE["e3m2"], M, n), 32, ia.size, img_b.size)
    out = run_gemm(ptx, n, np.concatenate([ia, img_b]), smem_desc(0, lbo, sbo, "128B"),
                   smem_desc(ia.size, lbo, sbo, "128B"))
    np.testing.assert_array_equal(out.view(np.float32), a @ b.T)


def test_e2m1_a_mn_major_in_the_padded_form():
    """e2m1 A M-major: each 16-byte unit holds 16 consecutive M values of one k in its first 8 bytes,
    value p in bits 4p (low nibble first), as for K-major (sm100_formats.md §2a)."""
    rng = np.random.default_rng(6)
    k, n = 32, 64
    codes = (rng.integers(1, 8, (M, k)) | rng.choice([0, 8], (M, k))).astype(np.uint8)
    a = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    packed = (codes.T[:, 0::2] | codes.T[:, 1::2] << 4).reshape(k, M // 16, 8)          # k rows of M values
    img_at = np.concatenate([packed, np.zeros_like(packed)], axis=2).reshape(k, M)
    b, img_b = operand(rng, "e4m3", n, k)
    ia, _, _ = image_kmajor(img_at, "128B", k * 128)
    ib, lbo, sbo = image_kmajor(img_b, "128B", n * 128)
    ptx = gemm_kernel(n, "f8f6f4", 1, idesc(1, 5, CODE["e4m3"], M, n, ta=1), 32, ia.size, ib.size)
    out = run_gemm(ptx, n, np.concatenate([ia, ib]), smem_desc(0, 8192, 1024, "128B"),
                   smem_desc(ia.size, lbo, sbo, "128B"))
    np.testing.assert_array_equal(out.view(np.float32), a @ b.T)
