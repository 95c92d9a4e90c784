"""MXFP4 and NVFP4 on sm_100a (targets/sm100/scales.py, runtime/fp4.py): e2m1 operands packed two
per byte along K, tcgen05.mma.kind::mxf4 (per-32 ue8m0 scales, 2X) and kind::mxf4nvf4 (per-16 ue4m3
scales, 4X; the per-tensor scale as the epilogue's alpha). Proven on the simulator against the
float64 group-by-group product (random never-zero scales, never-zero inputs, poisoned C,
elementwise `compare`) with K edges inside a k-tile and a scale block, BN offsets and persistent
walks; every operand form (float4_e2m1fn one per byte, packed uint8) gives the same C; refusals
name the field; a scale block applied to the wrong K slice is caught."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule
from ptxgen.check import check_simulated, compare, random_operands, reference
from ptxgen.errors import ScheduleError
from ptxgen.runtime.fp4 import as_packed, pack_rows, unpack_rows
from ptxgen.schedule.block_scale import random_block_scales
from tests.targets.sm100.common import tc

ARCH = "sm_100a"
MX = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")
NV = BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")


def fp4(m, n, k, bs, out="f32", **kw) -> Gemm:
    return Gemm(m, n, k, dtype="e2m1", out_dtype=out, a_layout="row", b_layout="col", block_scale=bs, **kw)


def run_checked(g: Gemm, s: Schedule, seed: int = 0, ptx: str | None = None, packed: bool = False):
    k = ptxgen.compile(g, s, arch=ARCH)
    if ptx is not None:
        k = dataclasses.replace(k, ptx=ptx)
    a, b = random_operands(g, seed)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=seed + 7)
    res = check_simulated(k, a, b, scale_a=sa, scale_b=sb) if not packed else None
    return k, a, b, sa, sb, res


@pytest.mark.parametrize("g, s", [
    (fp4(130, 72, 320, MX), tc((128, 64, 128))),                        # MXFP4: K edge mid-block, BN 64 offsets
    (fp4(200, 256, 512, MX, "bf16"), tc((128, 256, 256), 2, sms=1)),    # BN 256, 2 blocks of K per k-tile
    (fp4(130, 100, 352, NV, "f16", epilogue=Epilogue(alpha=0.375)), tc((128, 32, 128), 3, sms=3)),  # NVFP4, BN 32
    (fp4(256, 128, 192, NV, "bf16", epilogue=Epilogue(alpha=2.5, bias="col")), tc((128, 128, 64), 2)),  # BK 64
], ids=["mxfp4-k-edge-bn64", "mxfp4-bn256", "nvfp4-alpha-bn32", "nvfp4-bk64-bias"])
def test_fp4_kernels_match_the_group_by_group_reference(g, s):
    from ptxgen.check import random_epilogue_operands

    k = ptxgen.compile(g, s, arch=ARCH)
    a, b = random_operands(g, 0)
    c, bias = random_epilogue_operands(g, 1)
    sa, sb = random_block_scales(g.block_scale, g.m, g.n, g.k, seed=7)
    res = check_simulated(k, a, b, c, bias, scale_a=sa, scale_b=sb)
    assert res.ok, res
    assert not compare(k.simulate(a, b, c, bias, scale_a=sa, scale_b=sb), reference(a, b, g.epilogue, c, bias), g).ok


def test_packed_operands_are_taken_as_they_are():
    """A as (M, K/2) uint8 and B as (K/2, N) column-major uint8 (the transpose of its (N, K/2) packed
    rows) give the C of the one-value-per-byte float4_e2m1fn arrays."""
    g, s = fp4(130, 72, 320, NV), tc((128, 64, 128))
    k, a, b, sa, sb, _ = run_checked(g, s, packed=True)
    one_per_byte = k.simulate(a, b, scale_a=sa, scale_b=sb)
    pa, pb = pack_rows(a), pack_rows(np.asarray(b).T).T
    assert pa.shape == (130, 160) and pb.shape == (160, 72) and pb.flags["F_CONTIGUOUS"]
    assert np.array_equal(k.simulate(pa, pb, scale_a=sa, scale_b=sb), one_per_byte)
    assert compare(one_per_byte, reference(a, b, block_scale=NV, scale_a=sa, scale_b=sb), g).ok


def test_packing_puts_the_lower_k_in_the_low_nibble():
    """sm100_formats.md §2: value 2j in bits 3:0 of byte j, 2j + 1 in bits 7:4."""
    x = np.array([[0.5, 6.0, -1.0, 3.0]], dtype=ml_dtypes.float4_e2m1fn)
    packed = pack_rows(x)
    codes = x.view(np.uint8)
    assert packed.tolist() == [[codes[0, 0] | codes[0, 1] << 4, codes[0, 2] | codes[0, 3] << 4]]
    assert np.array_equal(unpack_rows(packed).astype(np.float64), x.astype(np.float64))
    assert as_packed(packed, "A") is packed    # packed uint8 is taken as it is


def test_a_scale_block_applied_to_the_wrong_k_slice_is_caught():
    """NVFP4 with BK 128: the second MMA of each k-tile reads A's scales of the first K block."""
    g, s = fp4(130, 72, 320, NV), tc((128, 64, 128), 2, sms=1)
    ptx = ptxgen.compile(g, s, arch=ARCH).ptx
    lines = ptx.split("\n")
    second = [i for i, line in enumerate(lines) if "mxf4nvf4.block_scale" in line and "k+64" in line]
    assert len(second) == 1 and "+4], [" in lines[second[0]]
    lines[second[0]] = lines[second[0]].replace("+4], [", "], [", 1)
    res = run_checked(g, s, ptx="\n".join(lines))[-1]
    assert not res.ok, res
    assert run_checked(g, s)[-1].ok


@pytest.mark.parametrize("make, field", [
    (lambda: Gemm(256, 256, 256, dtype="e2m1"), "gemm.dtype"),                        # fp4 needs block scales
    (lambda: Gemm(256, 256, 256, dtype="e2m1", block_scale=BlockScale()), "gemm.block_scale"),
    (lambda: Gemm(256, 256, 256, dtype="e4m3", block_scale=NV), "gemm.block_scale"),  # NVFP4 scales take fp4
])
def test_fp4_problems_are_checked_on_construction(make, field):
    with pytest.raises(ScheduleError) as e:
        make()
    assert e.value.field == field and e.value.fix, e.value


@pytest.mark.parametrize("g, s, arch, field", [
    (fp4(256, 256, 272, MX), tc((128, 64, 128)), ARCH, "gemm.k"),           # packed rows of 136 bytes
    (fp4(256, 256, 256, NV), tc((128, 64, 96)), ARCH, "schedule.block.BK"),
    (fp4(256, 256, 256, MX), tc((128, 64, 64)), ARCH, "schedule.block.BK"),  # MX blocks hold 128 of K
    (fp4(256, 256, 256, MX), Schedule(block=(128, 64, 128), instruction="wgmma"), "sm_90a", "gemm.block_scale"),
])
def test_fp4_rules_name_the_field(g, s, arch, field):
    with pytest.raises(ScheduleError) as e:
        ptxgen.compile(g, s, arch=arch)
    assert e.value.field == field, e.value


def test_ue4m3_scales_with_a_sign_bit_are_refused():
    g = fp4(130, 72, 320, NV)
    k, a, b, sa, sb, _ = run_checked(g, tc((128, 64, 128)), packed=True)
    with pytest.raises(ValueError, match="sign bit"):
        k.simulate(a, b, scale_a=sa | 0x80, scale_b=sb)


@pytest.mark.parametrize("bs", [MX, NV], ids=["mxfp4", "nvfp4"])
def test_ptxas_assembles_the_fp4_kernels_without_spills(bs, monkeypatch):
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    k = ptxgen.compile(fp4(4096, 4096, 4096, bs, "bf16"), tc((128, 256, 256), 4, sms=None), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources


def test_torch_float4_x2_tensors_are_taken_as_packed_bytes():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    raw = torch.arange(16, dtype=torch.uint8).reshape(2, 8)
    x2 = raw.view(torch.float4_e2m1fn_x2)
    got = as_packed(x2, "A")
    assert got.dtype == torch.uint8 and got.shape == (2, 8) and torch.equal(got, raw)


def test_the_cli_runs_nvfp4_on_sm100a(capsys):
    from ptxgen.cli import main

    code = main(["run", "--shape", "130x72x320", "--layout", "tn", "--arch", "sm_100a", "--instruction", "tcgen05",
                 "--block", "128x64x128", "--stages", "2", "--dtype", "e2m1", "--block-scale", "1x16,16x1,ue4m3"])
    out = capsys.readouterr().out
    assert code in (0, None) and "PASS" in out, out


@pytest.mark.parametrize("dtype, bs, bk", [("e4m3", MX, 128), ("e2m1", MX, 256), ("e2m1", NV, 256)])
def test_the_chooser_picks_a_block_scaled_schedule(dtype, bs, bk):
    """compile(gemm) with no schedule: the candidates' BK is 128 bytes of K, whole scale blocks; the
    chooser may take the CTA pair (BM 256, each CTA's M 128) now that block scaling is built on it."""
    k = ptxgen.compile(Gemm(4096, 4096, 4096, dtype=dtype, out_dtype="bf16", a_layout="row", b_layout="col",
                            block_scale=bs), arch=ARCH)
    group = k.schedule.cta_group or 1
    assert k.schedule.bm == 128 * group and k.schedule.bk == bk and "block_scale" in k.ptx
    assert f"tcgen05.mma.cta_group::{group}.kind::" in k.ptx
