"""Every verifier limit at its boundary: a schedule just inside compiles, one just outside is rejected.

The limits are the published per-architecture numbers (CUDA C Programming Guide, "Technical
Specifications per Compute Capability"), written out here, never read from ptxgen's targets or
helpers; the bytes and registers a schedule needs are worked out by hand in each case.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, ScheduleError

KIB = 1024
#: Max dynamic shared memory per block with the opt-in: A100 (8.0) 163 KB, 8.6 and 8.9 99 KB, H100 227 KB.
SMEM_PER_BLOCK = {"sm_80": 163 * KIB, "sm_86": 99 * KIB, "sm_89": 99 * KIB, "sm_90": 227 * KIB}
MAX_THREADS_PER_BLOCK = 1024
REGS_PER_SM = 64 * KIB  # 32-bit registers per SM (and per block) on 8.x and 9.0
MAX_REGS_PER_THREAD = 255
MAX_GRID_Y = MAX_GRID_Z = 65535


def rejected(gemm: Gemm, sched: Schedule, arch: str, field: str) -> ScheduleError:
    with pytest.raises(ScheduleError) as info:
        ptxgen.compile(gemm, sched, arch)
    assert info.value.field == field, str(info.value)
    return info.value


# --- shared memory per block, per arch --------------------------------------------------------
# A row-major and B column-major keep both tiles K-contiguous: BM + BN rows of BK f16 elements per
# stage, no padding with the swizzle: stage bytes = (BM + BN) * BK * 2. epilogue_via_smem=False
# keeps the staged C tile out of the count.
SMEM_BLOCKS = [(128, 48, 32, (2, 1)), (128, 128, 32, (2, 2)), (64, 64, 64, (2, 2)), (128, 64, 64, (2, 2))]


def smem_need(bm: int, bn: int, bk: int, stages: int) -> int:
    return stages * (bm + bn) * bk * 2


@settings(max_examples=40, deadline=None)
@given(arch=st.sampled_from(sorted(SMEM_PER_BLOCK)), shape=st.sampled_from(SMEM_BLOCKS),
       extra=st.sampled_from([0, 1]))
def test_smem_limit_at_its_boundary(arch, shape, extra):
    """The most stages that fit compile (and report their bytes); one more is rejected."""
    bm, bn, bk, warps = shape
    most = SMEM_PER_BLOCK[arch] // smem_need(bm, bn, bk, 1)
    stages = most + extra
    g = Gemm(1024, 1024, 1024, a_layout="row", b_layout="col")
    s = Schedule(block=(bm, bn, bk), warps=warps, stages=stages, epilogue_via_smem=False)
    if extra == 0:
        k = ptxgen.compile(g, s, arch)
        assert k.smem_bytes == smem_need(bm, bn, bk, stages) <= SMEM_PER_BLOCK[arch]
    else:
        err = rejected(g, s, arch, "schedule.stages")
        assert str(smem_need(bm, bn, bk, stages)) in str(err)


def test_smem_exactly_at_the_limit_is_allowed():
    """9 stages of (128 + 48) x 32 f16 = 101376 B = 99 KiB exactly: inside on sm_86 and sm_89."""
    g = Gemm(1024, 1024, 1024, a_layout="row", b_layout="col")
    for arch in ("sm_86", "sm_89"):
        k = ptxgen.compile(g, Schedule(block=(128, 48, 32), warps=(2, 1), stages=9, epilogue_via_smem=False), arch)
        assert k.smem_bytes == 99 * KIB
        rejected(g, Schedule(block=(128, 48, 32), warps=(2, 1), stages=10, epilogue_via_smem=False), arch,
                 "schedule.stages")


def test_issue_example_112_kib_on_sm_86_is_rejected():
    """7 stages of 128x32 + 32x128 f16 = 112 KiB: over sm_86's 99 KiB, inside sm_80's 163 KiB."""
    g, s = Gemm(1024, 1024, 1024), Schedule(block=(128, 128, 32), stages=7)
    rejected(g, s, "sm_86", "schedule.stages")
    assert ptxgen.compile(g, s, "sm_80").smem_bytes >= 112 * KIB


def test_smem_limit_counts_the_staged_c_tile():
    """One stage of operands is small, but the staged epilogue holds the whole BM x BN f32 C tile,
    each row padded by 32 bytes against bank conflicts (README: the staging tile reuses the stage
    bytes, so the larger of the two counts): 128 x (128*4 + 32) = 69632 B fits sm_86's 99 KiB,
    192 x (128*4 + 32) = 104448 B does not."""
    g = Gemm(1024, 1024, 1024, out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(128, 128, 32), stages=1, epilogue_via_smem=True), "sm_86")
    assert k.smem_bytes == 128 * (128 * 4 + 32)
    err = rejected(g, Schedule(block=(192, 128, 32), warps=(2, 2), stages=1, epilogue_via_smem=True), "sm_86",
                   "schedule.stages")
    assert "104448" in str(err)


# --- threads per block ------------------------------------------------------------------------
def test_threads_at_1024_compile_and_1056_are_rejected():
    """32 warps (8 x 4) = 1024 threads compile: a 128x128x64 block, 16x32 warp tiles. 33 warps do not."""
    g = Gemm(1024, 1024, 1024)
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64), warps=(8, 4), stages=2), "sm_80")
    assert k.block[0] * k.block[1] * k.block[2] == MAX_THREADS_PER_BLOCK
    err = rejected(Gemm(1056, 1024, 1024), Schedule(block=(176, 96, 64), warps=(11, 3)), "sm_80", "schedule.warps")
    assert "1056 threads" in str(err)


# --- registers per thread ---------------------------------------------------------------------
# One CTA must fit the register file: min(255, 65536 / threads rounded down to 8) per thread.
# The estimate (see geometry.register_estimate's docstring) for an f16 warp tile of mi x ni mma tiles
# (mi = rows / 16, ni = cols / 8): 4 mi ni accumulators + 2 (4 mi + 2 ni) double-buffered
# fragments + 24 addressing (+ 24 where the cross-k-tile prefetch fits).
def regs_limit(threads: int) -> int:
    return min(MAX_REGS_PER_THREAD, REGS_PER_SM // threads // 8 * 8)


def test_registers_at_1024_threads():
    """Limit 64: a 16x32 warp tile needs 4*4 + 2*(4 + 8) + 24 = 64 (BK=64: 4 k-steps, no room
    to prefetch); a 32x32 one with single-buffered fragments 4*8 + (8 + 8) + 24 = 72."""
    assert regs_limit(1024) == 64
    ptxgen.compile(Gemm(1024, 1024, 1024), Schedule(block=(128, 128, 64), warps=(8, 4), stages=2), "sm_80")
    err = rejected(Gemm(1024, 1024, 1024),
                   Schedule(block=(256, 128, 64), warps=(8, 4), stages=2, frag_double_buffer=False), "sm_80",
                   "schedule.warps")
    assert "72 registers" in str(err) and "limit of 64" in str(err)


def test_registers_at_the_255_cap():
    """128 threads: 65536 / 128 = 512, capped at 255. A 64x64 warp tile: 4*4*8 + 2*(16 + 16) + 24
    = 216 (+ 24 prefetch = 240) fits; 64x72: 4*4*9 + 2*(16 + 18) + 24 = 236 fits without the
    prefetch; 64x80: 4*4*10 + 2*(16 + 20) + 24 = 256 is one over."""
    assert regs_limit(128) == 255
    g = Gemm(1024, 1024, 1024, a_layout="row", b_layout="col")
    ptxgen.compile(g, Schedule(block=(128, 128, 32), warps=(2, 2)), "sm_80")
    ptxgen.compile(g, Schedule(block=(128, 144, 64), warps=(2, 2), stages=2, smem_layout="pad"), "sm_80")
    err = rejected(g, Schedule(block=(128, 160, 64), warps=(2, 2), stages=2, smem_layout="pad"), "sm_80",
                   "schedule.warps")
    assert "256 registers" in str(err) and "limit of 255" in str(err)


# --- grid dimensions --------------------------------------------------------------------------
def test_grid_y_at_65535():
    """raster='row' puts ceil(M / BM) CTA rows on grid y."""
    s = Schedule(block=(16, 64, 32), warps=(1, 2), raster="row")
    k = ptxgen.compile(Gemm(16 * MAX_GRID_Y, 64, 32), s, "sm_80")
    assert k.grid[1] == MAX_GRID_Y
    rejected(Gemm(16 * MAX_GRID_Y + 1, 64, 32), s, "sm_80", "schedule.raster")


def test_grid_z_batch_at_65535():
    s = Schedule(block=(64, 64, 32))
    k = ptxgen.compile(Gemm(64, 64, 64, batch=MAX_GRID_Z), s, "sm_80")
    assert k.grid[2] == MAX_GRID_Z
    rejected(Gemm(64, 64, 64, batch=MAX_GRID_Z + 1), s, "sm_80", "gemm.batch")


def test_grid_z_batch_times_split_k_at_65535():
    """Split-K puts batch x split_k on grid z: 21845 x 3 = 65535 fits, 21846 x 3 does not."""
    s = Schedule(block=(64, 64, 32), split_k=3)
    k = ptxgen.compile(Gemm(64, 64, 96, batch=21845), s, "sm_80")
    assert k.grid[2] == MAX_GRID_Z
    rejected(Gemm(64, 64, 96, batch=21846), s, "sm_80", "schedule.split_k")


def test_split_k_every_split_has_work():
    """K = 96 with BK = 32 is 3 k-tiles: split_k = 3 gives each one; 4 leaves one without."""
    ptxgen.compile(Gemm(64, 64, 96), Schedule(block=(64, 64, 32), split_k=3), "sm_80")
    rejected(Gemm(64, 64, 96), Schedule(block=(64, 64, 32), split_k=4), "sm_80", "schedule.split_k")


# --- instruction shape rules ------------------------------------------------------------------
# mma.sync m16n8k16 (f16/bf16), m16n8k8 (tf32), m16n8k32 (s8/u8): BK a multiple of k, each warp
# tile a multiple of 16 x 8. wmma: 16x16x16, warp tiles multiples of 16 x 16.
@pytest.mark.parametrize("dtype,k_step", [("f16", 16), ("bf16", 16), ("tf32", 8), ("s8", 32)])
def test_bk_multiple_of_the_k_step(dtype, k_step):
    out = {"tf32": "f32", "s8": "s32"}.get(dtype, "f32")
    g = Gemm(256, 256, 256, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col")
    ptxgen.compile(g, Schedule(block=(64, 64, 2 * k_step), warps=(2, 2)), "sm_80")
    rejected(g, Schedule(block=(64, 64, 3 * k_step // 2), warps=(2, 2), smem_layout="pad"), "sm_80",
             "schedule.block.BK")


def test_warp_tile_multiple_of_16_by_8():
    g = Gemm(256, 256, 256, a_layout="row", b_layout="col")
    ptxgen.compile(g, Schedule(block=(32, 16, 64), warps=(2, 2)), "sm_80")  # 16x8 warp tiles
    rejected(g, Schedule(block=(48, 16, 32), warps=(2, 1), smem_layout="pad"), "sm_80", "schedule.block")  # 24 rows
    rejected(g, Schedule(block=(32, 24, 32), warps=(1, 2), smem_layout="pad"), "sm_80", "schedule.block")  # 12 cols


def test_wmma_warp_tile_multiple_of_16_by_16():
    g = Gemm(256, 256, 256, a_layout="row", b_layout="col")
    ptxgen.compile(g, Schedule(block=(64, 64, 32), warps=(2, 2), instruction="wmma", smem_layout="pad"), "sm_80")
    rejected(g, Schedule(block=(64, 32, 32), warps=(2, 4), instruction="wmma", smem_layout="pad"), "sm_80",
             "schedule.block")  # 32x8 warp tiles
