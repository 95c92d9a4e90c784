"""MXFP8 on sm_100a (targets/sm100/scales.py): e4m3/e5m2 with one ue8m0 scale per 32 K of each row
of A and column of B, tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X reading the scales from TMEM,
where the MMA thread copies them with tcgen05.cp from the stage TMA filled (128x4 block layout,
runtime/scale_layout.py). Proven on the simulator against the float64 group-by-group product
(random never-zero scales over four decades, never-zero inputs, poisoned C, elementwise `compare`)
with K edges, every BN's scale-column offset and persistent walks; the refusals; and planted bugs
caught (a scale applied to the wrong K group, the MMA not ordered after the copy of its scales)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule, sim
from ptxgen.check import compare, random_epilogue_operands, random_operands, reference
from ptxgen.errors import ScheduleError
from ptxgen.runtime.scale_layout import block_scales, logical_scales
from ptxgen.schedule.block_scale import random_block_scales
from tests.targets.sm100.common import run_block_scaled, tc

ARCH = "sm_100a"
MX = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")


def mx(m, n, k, dtype="e4m3", out="f32", **kw) -> Gemm:
    return Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col", block_scale=MX, **kw)


def scales(g: Gemm, seed: int):
    return random_block_scales(g.block_scale, g.m, g.n, g.k, seed=seed)


def run_checked(g: Gemm, s: Schedule, seed: int = 0, ptx: str | None = None):
    k, (a, b, _, _, sa, sb), result = run_block_scaled(g, s, seed, ptx)
    assert sa.min() >= 1 and sb.min() >= 1   # never zero (2^-127) nor NaN
    return k, a, b, sa, sb, result


@pytest.mark.parametrize("g, s", [
    (mx(130, 72, 304), tc((128, 64, 128))),                    # K edge mid-group; BN 64: offsets 0 and 2; 4 tiles / 2 CTAs
    (mx(200, 256, 512, "e5m2", "bf16"), tc((128, 256, 128), 3, sms=1)),   # BN 256: two B row blocks, one acc buffer
    (mx(150, 100, 528, out="f16"), tc((128, 32, 256), 2, sms=3)),       # BN 32: all four column offsets; 2 K blocks
    (mx(140, 136, 256, out="bf16", epilogue=Epilogue(alpha=0.5, bias="col", activation="gelu")),
     tc((128, 128, 128), 4)),                                          # BN 128, fused epilogue, 4 stages
    (mx(130, 72, 304, "e5m2", b_dtype="e4m3"), tc((128, 64, 128))),  # mixed MXFP8: e5m2 A, e4m3 B
], ids=["e4m3-k-edge-bn64", "e5m2-bn256", "bn32-bk256", "bn128-gelu", "mixed-e5m2-e4m3"])
def test_mxfp8_kernels_match_the_group_by_group_reference(g, s):
    k, a, b, sa, sb, res = run_checked(g, s)
    assert res.ok, res
    # the scales really are in the comparison: the unscaled product is far from what the kernel gave
    c, bias = random_epilogue_operands(g, 1)
    assert not compare(k.simulate(a, b, c, bias, scale_a=sa, scale_b=sb), reference(a, b, g.epilogue, c, bias), g).ok


def test_the_block_layout_puts_each_scale_where_the_mma_reads_it():
    """scale[128a + 32b + c, 4d + e] at byte 16c + 4b + e of block (a, d): a tcgen05.cp.32x128b of the
    block puts it in lane c, column b, byte e, which the MMA reads for row 128a + 32b + c with SF_ID e
    (tcgen05.md §12g, §12h); padding holds 1.0 (ue8m0 127); the inverse gives the scales back."""
    rng = np.random.default_rng(1)
    x = rng.integers(1, 255, (200, 9)).astype(np.uint8)
    blocked = block_scales(x, 127)
    assert blocked.shape == (2, 6, 256)
    flat = blocked.reshape(2, 3, 512)
    for r, grp in ((0, 0), (37, 5), (199, 8), (150, 2)):
        a, rest = divmod(r, 128)
        bq, c = divmod(rest, 32)
        d, e = divmod(grp, 4)
        assert flat[a, d, 16 * c + 4 * bq + e] == x[r, grp]
    assert flat[1, 0, 16 * 31 + 4 * 3] == 127 and flat[0, 2, 16 * 5 + 1] == 127   # row 255 / group 9: padding
    assert np.array_equal(logical_scales(blocked, 200, 9), x)


def test_the_kernel_copies_scales_before_the_mmas_and_uses_the_scaled_kind():
    k = ptxgen.compile(mx(256, 256, 256), tc((128, 128, 128)), arch=ARCH)
    lines = [line for line in k.ptx.split("\n") if not line.startswith("//")]   # instructions, not the header
    cps = [i for i, line in enumerate(lines) if "tcgen05.cp.cta_group::1.32x128b.warpx4" in line]
    mmas = [i for i, line in enumerate(lines) if "kind::mxf8f6f4.block_scale.scale_vec::1X" in line]
    assert len(cps) == 2 and len(mmas) == 4 and max(cps) < min(mmas)
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" not in k.ptx
    # Triton's mxfp8 descriptors for M = N = 128 with SF_ID 0..3 (tcgen05.md §12h)
    for value in (0x08A00000, 0x28A00010, 0x48A00020, 0x68A00030):
        assert "mov.u32 %r" in k.ptx and re.search(rf"mov\.u32 %r\d+, {value};", k.ptx), hex(value)


@pytest.mark.parametrize("make, field", [
    (lambda: BlockScale(a=(1, 32)), "block_scale.b"),
    (lambda: BlockScale(a=(1, 32), b=(32, 1)), "block_scale.dtype"),              # MX takes ue8m0
    (lambda: BlockScale(a=(1, 16), b=(16, 1), dtype="ue8m0"), "block_scale.dtype"),   # NVFP4 takes ue4m3
    (lambda: Gemm(256, 256, 256, dtype="e4m3", block_scale=BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")),
     "gemm.block_scale"),                                                        # NVFP4 needs e2m1: not built
    (lambda: Gemm(256, 256, 256, dtype="f16", block_scale=MX), "gemm.block_scale"),
])
def test_bad_blackwell_block_scales_are_refused_on_construction(make, field):
    with pytest.raises(ScheduleError) as e:
        make()
    assert e.value.field == field and e.value.fix, e.value


@pytest.mark.parametrize("g, s, arch, field", [
    (mx(256, 256, 256), tc((64, 64, 128)), ARCH, "schedule.block.BM"),
    (mx(256, 256, 256), tc((128, 64, 64)), ARCH, "schedule.block.BK"),
    (mx(256, 256, 256), tc((128, 48, 128)), ARCH, "schedule.block.BN"),
    (mx(256, 256, 256), tc((128, 256, 128), 8), ARCH, "schedule.stages"),
    (Gemm(256, 256, 256, dtype="e4m3", block_scale=BlockScale()), tc((128, 64, 128)), ARCH, "gemm.block_scale"),
    (mx(256, 256, 256), Schedule(block=(128, 64, 128), instruction="wgmma"), "sm_90a", "gemm.block_scale"),
])
def test_blackwell_block_scale_rules_name_the_field(g, s, arch, field):
    with pytest.raises(ScheduleError) as e:
        ptxgen.compile(g, s, arch=arch)
    assert e.value.field == field, e.value


def test_run_time_scales_are_checked():
    g = mx(130, 72, 304)
    k = ptxgen.compile(g, tc((128, 64, 128)), arch=ARCH)
    a, b = random_operands(g, 0)
    sa, sb = scales(g, 1)
    with pytest.raises(ValueError, match=r"shape \(130, 10\)"):
        k.simulate(a, b, scale_a=sa[:, :5], scale_b=sb)
    with pytest.raises(ValueError, match="pass scale_b="):
        k.simulate(a, b, scale_a=sa)


# -- planted bugs ----------------------------------------------------------------------------------
PLANT_G, PLANT_S = mx(130, 72, 304), tc((128, 64, 128), 2, sms=1)


def _planted(edit) -> str:
    return edit(ptxgen.compile(PLANT_G, PLANT_S, arch=ARCH).ptx)


def test_the_unplanted_kernel_is_right():
    assert run_checked(PLANT_G, PLANT_S)[-1].ok


def test_a_scale_applied_to_the_wrong_k_group_is_caught():
    """The MMA of K group 1 given SF_ID 2: it multiplies its 32 K by the next group's scales."""
    idesc = {sf: 8 << 24 | 8 << 17 | 1 << 23 | sf << 4 | sf << 29 for sf in (1, 2)}   # M 128, N 64, ue8m0
    ptx = _planted(lambda t: t.replace(f", {idesc[1]};", f", {idesc[2]};", 1))
    assert ptx != _planted(lambda t: t)
    assert not run_checked(PLANT_G, PLANT_S, ptx=ptx)[-1].ok


def _move_copies_after_the_mmas(text: str) -> str:
    lines = text.split("\n")
    cps = [i for i, line in enumerate(lines) if "tcgen05.cp." in line and not line.startswith("//")]
    last_mma = max(i for i, line in enumerate(lines) if "block_scale.scale_vec::1X" in line)
    moved = [lines[i] for i in cps]
    kept = [line for i, line in enumerate(lines) if i not in cps]
    at = kept.index(lines[last_mma]) + 1
    return "\n".join(kept[:at] + moved + kept[at:])


def test_mmas_issued_before_the_copy_of_their_scales_are_caught():
    """The copies moved after the k-tile's MMAs: the MMAs read the stage's scale columns before the
    copy meant for them, which then overwrites cells those MMAs, still in flight, read."""
    with pytest.raises(sim.HazardError) as e:
        run_checked(PLANT_G, PLANT_S, ptx=_planted(_move_copies_after_the_mmas))
    assert e.value.kind == "async-pending" and "tcgen05.mma" in e.value.detail and "still in flight reads" in \
        e.value.detail, e.value


def test_copies_by_another_thread_than_the_mma_issuer_are_caught():
    """The copies issued by lane 1 of the MMA warp, the MMAs by lane 0 with no synchronisation in
    between: the MMA is not ordered after the copy (sim/tmem_order.py)."""
    def other_lane(text: str) -> str:
        lines = text.split("\n")
        top = next(i for i, line in enumerate(lines) if "MMA warp: lane 0" in line)
        elected = next(i for i in range(top, len(lines)) if lines[i].strip().startswith("setp.eq.u32"))
        lane = re.match(r"\s*setp\.eq\.u32 %p\d+, (%r\d+), 0;", lines[elected]).group(1)
        lines[elected + 1:elected + 1] = ["    .reg .pred %plant;", f"    setp.eq.u32 %plant, {lane}, 1;"]
        return "\n".join(re.sub(r"@%p\d+ (tcgen05\.cp\.)", r"@%plant \1", line) for line in lines)

    ptx = _planted(other_lane)
    with pytest.raises(sim.HazardError) as e:
        run_checked(PLANT_G, PLANT_S, ptx=ptx)
    assert e.value.kind == "race" and "issued by another thread" in e.value.detail, e.value


def test_ptxas_assembles_the_mxfp8_kernel_without_spills(monkeypatch):
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    k = ptxgen.compile(mx(4096, 4096, 4096, out="bf16"), tc((128, 256, 128), 4, sms=None), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
