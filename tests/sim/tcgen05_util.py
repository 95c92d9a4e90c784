"""Kernel text and shared-memory images for the tcgen05 tests, written from the ISA's tables
(docs/ptx_facts/tcgen05.md); nothing here imports the simulator's internals."""
from __future__ import annotations

import numpy as np

from ptxgen import sim

HEADER = ".version 8.7\n.target sm_100a\n.address_size 64\n"
SWIZZLE_CODE = {"none": 0, "128B": 2, "64B": 4, "32B": 6}      # sm100 descriptor bits 61-63
SWIZZLE_BYTES = {"128B": 128, "64B": 64, "32B": 32}


def smem_desc(start: int, lbo: int, sbo: int, swizzle: str) -> int:
    """Table 40: start>>4 [0,14), LBO>>4 [16,30), SBO>>4 [32,46), 0b001 at [46,49), swizzle [61,64)."""
    return ((start >> 4) & 0x3FFF) | ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | 1 << 46 \
        | SWIZZLE_CODE[swizzle] << 61


def idesc(dtype: int, atype: int, btype: int, m: int, n: int, ta: int = 0, tb: int = 0, sat: int = 0,
          neg_a: int = 0, neg_b: int = 0) -> int:
    """Table 42 written out: D type [4,6), A [7,10), B [10,13), negate 13/14, transpose 15/16,
    N>>3 [17,23), M>>4 [24,29)."""
    return (sat << 3 | dtype << 4 | atype << 7 | btype << 10 | neg_a << 13 | neg_b << 14 | ta << 15 | tb << 16
            | (n >> 3) << 17 | (m >> 4) << 24)


def image_kmajor(mat: np.ndarray, swizzle: str, nbytes: int) -> tuple[np.ndarray, int, int]:
    """(bytes, LBO, SBO) of a rows x K matrix (K * esize = 32 bytes per MMA step or the swizzle
    width) in the canonical K-major layout. Swizzled: row r of 8-row group g at g*SBO + (r%8)*W,
    W = swizzle bytes, 16-byte chunk c of the row XORed with the row's bits (Swizzle<log2(W/16),4,3>
    on the address). No swizzle: core matrices of 8 rows x 16 B, K-chunk j at j*LBO, group g at g*SBO."""
    rows, k = mat.shape
    raw = np.ascontiguousarray(mat).view(np.uint8).reshape(rows, -1)
    row_bytes = raw.shape[1]
    img = np.zeros(nbytes, dtype=np.uint8)
    if swizzle == "none":
        lbo, sbo = 128, 128 * (row_bytes // 16)
        for r in range(rows):
            for j in range(row_bytes // 16):
                at = (r // 8) * sbo + j * lbo + (r % 8) * 16
                img[at:at + 16] = raw[r, 16 * j:16 * j + 16]
        return img, lbo, sbo
    w = SWIZZLE_BYTES[swizzle]
    assert row_bytes <= w
    sbo = 8 * w
    bits = {128: 3, 64: 2, 32: 1}[w]
    for r in range(rows):
        for j in range(row_bytes // 16):
            at = (r // 8) * sbo + (r % 8) * w + 16 * j
            at ^= ((at >> 7) & ((1 << bits) - 1)) << 4
            img[at:at + 16] = raw[r, 16 * j:16 * j + 16]
    return img, 16, sbo


def gemm_kernel(n: int, kind: str, steps: int, idesc_value: int, step_bytes: int, a_bytes: int, b_bytes: int,
                ncols: int = 256, extra_after_mma: str = "", extra_before_dealloc: str = "",
                wait: bool = True, dealloc: bool = True, extra_before_mma: str = "", scale_operands: str = "",
                a_operand: str = "%rd10") -> str:
    """128 threads: copy the A/B images to shared memory, warp 0 allocates `ncols` TMEM columns,
    thread 0 issues `steps` MMAs (descriptors advanced by step_bytes >> 4 each), commits to an
    mbarrier, everyone waits, each warp reads its 32 lanes x n columns with 32x32b and stores them."""
    copy = []
    for j in range((a_bytes + b_bytes) // (16 * 128)):
        copy += [f"    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4+{2048 * j}];",
                 f"    st.shared.v4.u32 [%r3+{2048 * j}], {{%r4, %r5, %r6, %r7}};"]
    mmas = []
    for s in range(steps):
        enable = "%p6" if s else "%p7"
        mmas.append(f"    @%p4 tcgen05.mma.cta_group::1.kind::{kind} [%r10], {a_operand}, %rd11, {idesc_value:#x}, "
                    f"{scale_operands}{enable};")
        mmas.append(f"    add.s64 %rd10, %rd10, {step_bytes >> 4};\n    add.s64 %rd11, %rd11, {step_bytes >> 4};")
    loads = []
    for c0 in range(0, n, 128):
        cnt = min(128, n - c0)
        regs = ", ".join(f"%d{c0 + i}" for i in range(cnt))
        loads.append(f"    tcgen05.ld.sync.aligned.32x32b.x{cnt}.b32 {{{regs}}}, [%r11+{c0}];")
    stores = "".join(f"    st.global.b32 [%rd7+{4 * i}], %d{i};\n" for i in range(n))
    body = f"""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pOut];
    ld.param.u64 %rd1, [pAB];
    ld.param.u64 %rd10, [dA];
    ld.param.u64 %rd11, [dB];
    mov.u32 %r2, buf;
    shl.b32 %r1, %r0, 4;
    add.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd3, %r0, 16;
    add.u64 %rd4, %rd1, %rd3;
{chr(10).join(copy)}
    fence.proxy.async.shared::cta;
    setp.lt.u32 %p3, %r0, 32;
    setp.eq.u32 %p4, %r0, 0;
    setp.eq.u32 %p6, %r0, %r0;
    setp.ne.u32 %p7, %r0, %r0;
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr], {ncols};
    @%p4 mbarrier.init.shared::cta.b64 [bar], 1;
    bar.sync 0;
    ld.shared.b32 %r10, [tptr];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    shr.u32 %r12, %r0, 5;
    and.b32 %r12, %r12, 3;
    shl.b32 %r12, %r12, 21;
    add.u32 %r11, %r10, %r12;
{extra_before_mma}
    tcgen05.fence::after_thread_sync;
{chr(10).join(mmas)}
    @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
{extra_after_mma}
""" + ("""WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [bar], 0;
    @!%p5 bra WAIT;
    tcgen05.fence::after_thread_sync;
""" if wait else "") + f"""
{chr(10).join(loads)}
    tcgen05.wait::ld.sync.aligned;
    mul.wide.u32 %rd6, %r0, {4 * n};
    add.u64 %rd7, %rd0, %rd6;
{stores}
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
{extra_before_dealloc}
""" + (f"    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, {ncols};\n" if dealloc else "") + "    ret;"
    return (HEADER + ".shared .align 1024 .b8 buf[65536];\n.shared .align 8 .b64 bar;\n.shared .align 4 .b32 tptr;\n"
            ".visible .entry k(.param .u64 pOut, .param .u64 pAB, .param .u64 dA, .param .u64 dB)\n{\n"
            "    .reg .pred %p<8>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<32>;\n"
            f"    .reg .b32 %d<{max(n, 1)}>;\n" + body + "\n}\n")


def run_gemm(ptx: str, n: int, image: np.ndarray, da: int, db: int) -> np.ndarray:
    """(128, n) uint32 cells of D as the warps read them (row 32w+lane)."""
    out = np.zeros((128, n), dtype=np.uint32)
    pad = (-image.size) % 2048
    data = np.concatenate([image, np.zeros(pad, np.uint8)])
    sim.launch(ptx, "k", block=(128,), args=[out, data, da, db])
    return out


def tile_kernel(k: int) -> str:
    """A 128x128xK f16 -> f32 tile (4 warps) in K blocks of 64: every block, all threads copy the
    block's pre-swizzled A and B images (16 KiB each, 128B-swizzled K-major) into shared memory,
    thread 0 issues four K=16 MMAs and commits them to an mbarrier that everyone waits on; then each
    warp reads its 32 lanes x 128 columns and stores them. `tile_operands` builds the images."""
    blocks = []
    for kb in range(k // 64):
        copy = "".join(f"    ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4+{32768 * kb + 2048 * j}];\n"
                       f"    st.shared.v4.u32 [%r3+{2048 * j}], {{%r4, %r5, %r6, %r7}};\n" for j in range(16))
        mmas = "".join(f"    @%p4 tcgen05.mma.cta_group::1.kind::f16 [%r10], %rd{12 + 2 * s}, %rd{13 + 2 * s}, "
                       f"0x08200010, {'%p7' if kb == 0 and s == 0 else '%p6'};\n" for s in range(4))
        blocks.append(f"""{copy}    fence.proxy.async.shared::cta;
    bar.sync 0;
{mmas}    @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
WAIT{kb}:
    mbarrier.try_wait.parity.shared::cta.b64 %p5, [bar], {kb & 1};
    @!%p5 bra WAIT{kb};
""")
    regs = ", ".join(f"%d{i}" for i in range(128))
    stores = "".join(f"    st.global.v4.b32 [%rd7+{16 * i}], "
                     f"{{%d{4 * i}, %d{4 * i + 1}, %d{4 * i + 2}, %d{4 * i + 3}}};\n" for i in range(32))
    descs = "".join(f"    add.s64 %rd{12 + 2 * s}, %rd10, {2 * s};\n    add.s64 %rd{13 + 2 * s}, %rd11, {2 * s};\n"
                    for s in range(4))
    body = f"""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd0, [pOut];
    ld.param.u64 %rd1, [pAB];
    ld.param.u64 %rd10, [dA];
    ld.param.u64 %rd11, [dB];
{descs}    mov.u32 %r2, buf;
    shl.b32 %r1, %r0, 4;
    add.u32 %r3, %r2, %r1;
    mul.wide.u32 %rd3, %r0, 16;
    add.u64 %rd4, %rd1, %rd3;
    setp.lt.u32 %p3, %r0, 32;
    setp.eq.u32 %p4, %r0, 0;
    setp.eq.u32 %p6, %r0, %r0;
    setp.ne.u32 %p7, %r0, %r0;
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [tptr], 128;
    @%p4 mbarrier.init.shared::cta.b64 [bar], 1;
    bar.sync 0;
    ld.shared.b32 %r10, [tptr];
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
{''.join(blocks)}    tcgen05.fence::after_thread_sync;
    shr.u32 %r12, %r0, 5;
    and.b32 %r12, %r12, 3;
    shl.b32 %r12, %r12, 21;
    add.u32 %r11, %r10, %r12;
    tcgen05.ld.sync.aligned.32x32b.x128.b32 {{{regs}}}, [%r11];
    tcgen05.wait::ld.sync.aligned;
    mul.wide.u32 %rd6, %r0, 512;
    add.u64 %rd7, %rd0, %rd6;
{stores}    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 128;
    ret;"""
    return (HEADER + ".shared .align 1024 .b8 buf[32768];\n.shared .align 8 .b64 bar;\n.shared .align 4 .b32 tptr;\n"
            ".visible .entry tile(.param .u64 pOut, .param .u64 pAB, .param .u64 dA, .param .u64 dB)\n{\n"
            "    .reg .pred %p<8>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<32>;\n    .reg .b32 %d<128>;\n"
            + body + "\n}\n")


def tile_operands(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(global image, A descriptor, B descriptor) for tile_kernel: per K block of 64, A's then B's
    128B-swizzled K-major image (rows of 128 bytes, SBO 1024) at shared offsets 0 and 16 KiB."""
    parts = []
    for kb in range(a.shape[1] // 64):
        parts.append(image_kmajor(a[:, 64 * kb:64 * kb + 64], "128B", 16384)[0])
        parts.append(image_kmajor(b[:, 64 * kb:64 * kb + 64], "128B", 16384)[0])
    return np.concatenate(parts), smem_desc(0, 16, 1024, "128B"), smem_desc(16384, 16, 1024, "128B")


def scale_words(scales: np.ndarray) -> np.ndarray:
    """(128 lanes, 4 columns) uint32 TMEM words holding the byte scales (rows, per-row count) the
    way Triton and CUTLASS lay them out (docs/ptx_facts/tcgen05.md §12h): row r's g-th scale in lane
    r % 32 of every quarter, column r // 32, byte g; duplicated to the four quarters."""
    rows, count = scales.shape
    words = np.zeros((128, 4), np.uint32)
    for r in range(rows):
        for g in range(count):
            for q in range(4):
                words[32 * q + r % 32, r // 32] |= np.uint32(int(scales[r, g]) << (8 * g))
    return words


def store_scales(offset: int, column: int, sync: bool = True) -> str:
    """Every thread loads its lane's 4 scale words from shared buf+offset (16 bytes per lane) and the
    warps store them with tcgen05.st.32x32b.x4 at TMEM column `column` of their quarter, wait for the
    stores and (`sync`) hand them to the MMA's issuing thread through bar.sync (without it, the MMA
    of thread 0 races with warps 1-3's stores)."""
    handoff = ("\n    tcgen05.fence::before_thread_sync;\n    bar.sync 0;\n    tcgen05.fence::after_thread_sync;"
               if sync else "")
    return f"""    shl.b32 %r20, %r0, 4;
    add.u32 %r20, %r20, {offset};
    ld.shared.v4.u32 {{%r21, %r22, %r23, %r24}}, [%r20];
    tcgen05.st.sync.aligned.32x32b.x4.b32 [%r11+{column}], {{%r21, %r22, %r23, %r24}};
    tcgen05.wait::st.sync.aligned;""" + handoff
