"""Block-scaled MXFP8, MXFP4 and NVFP4 on a CTA pair (cta_group=2, targets/sm100/scales.py and
cta_pair.py): each CTA TMA-loads its own 128 rows' A scales and the scales of all the pair's B rows
into its stage, completing on the leader's full barrier; the leader's MMA thread copies them into
both CTAs' tensor memory with tcgen05.cp.cta_group::2 (each CTA from its own shared memory,
tcgen05.md §12g) and issues tcgen05.mma.cta_group::2.kind::*.block_scale, each CTA scaling its A
rows by its own SFA and all N rows of B by its own SFB (§12h). Proven on the simulator against the
float64 group-by-group product (random never-zero scales, never-zero inputs, poisoned C,
elementwise `compare`) with edges in M, N and K, BN 32 to 256 (the B-scale column offsets and two
B row blocks), persistent walks of several pair tiles per pair; planted bugs caught (the peer's A
scales of the leader's rows, a CTA's B scales of its own half of N only, the scales copied into the
leader's tensor memory only); the block-scaled pair not built (M = 128) is refused naming the fix."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ptxgen
from ptxgen import BlockScale, Epilogue, Gemm, Schedule, sim
from ptxgen.check import compare, reference
from ptxgen.emit.tiles import Tile
from ptxgen.errors import LoweringNotBuilt, ScheduleError
from ptxgen.ir import ops as ptx_ops
from ptxgen.ir.ops import U32
from ptxgen.targets.sm100.scales import StageScales
from tests.targets.sm100.common import run_block_scaled

ARCH = "sm_100a"
MX = BlockScale(a=(1, 32), b=(32, 1), dtype="ue8m0")
NV = BlockScale(a=(1, 16), b=(16, 1), dtype="ue4m3")


def pair(block, stages=2, sms=2, **kw) -> Schedule:
    return Schedule(block=block, instruction="tcgen05", stages=stages, sms=sms, cta_group=2, **kw)


def scaled(m, n, k, dtype, bs, out="f32", **kw) -> Gemm:
    return Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col", block_scale=bs, **kw)


def run(g: Gemm, s: Schedule, seed: int = 0, ptx: str | None = None):
    """(kernel, operands, the simulator's check) of `g` under `s`, the PTX replaced by `ptx` if given."""
    return run_block_scaled(g, s, seed, ptx)


CASES = [
    (scaled(300, 136, 304, "e4m3", MX), pair((256, 128, 128))),                     # M, N, K edges; 4 tiles / pair
    (scaled(300, 300, 512, "e5m2", MX, "bf16"), pair((256, 256, 128), 3)),          # BN 256: two B row blocks
    (scaled(520, 200, 256, "e4m3", MX, "f16", epilogue=Epilogue(alpha=0.5, bias="col", activation="gelu")),
     pair((256, 64, 128), sms=4)),                                                  # 2 pairs, B offsets 0/2, fused
    (scaled(300, 100, 528, "e4m3", MX, "f16", b_dtype="e5m2"), pair((256, 32, 256), 2)),  # BN 32: 16 B rows per CTA
    (scaled(300, 136, 320, "e2m1", MX), pair((256, 128, 128))),                     # MXFP4, K edge mid-block
    (scaled(300, 100, 352, "e2m1", NV, "f16", epilogue=Epilogue(alpha=0.375)), pair((256, 64, 128), 3)),  # NVFP4
    (scaled(520, 256, 192, "e2m1", NV, "bf16", epilogue=Epilogue(alpha=2.5, bias="col")), pair((256, 256, 64), sms=4)),
]


@pytest.mark.parametrize("g, s", CASES, ids=["mxfp8-edges", "mxfp8-e5m2-bn256", "mxfp8-2pairs-bn64-gelu",
                                              "mxfp8-mixed-bn32", "mxfp4-k-edge", "nvfp4-bn64-alpha",
                                              "nvfp4-bn256-bk64-2pairs"])
def test_pair_block_scaled_kernels_match_the_group_by_group_reference(g, s):
    k, (a, b, c, bias, sa, sb), res = run(g, s)
    assert res.ok, res
    assert ".reqnctapercluster 2, 1, 1" in k.ptx
    assert "tcgen05.cp.cta_group::2.32x128b.warpx4" in k.ptx and "tcgen05.cp.cta_group::1" not in k.ptx
    assert f"tcgen05.mma.cta_group::2.kind::{'mxf8f6f4' if g.dtype != 'e2m1' else 'mxf4'}" in k.ptx
    # the scales really are in the comparison: the unscaled product is far from what the kernel gave
    assert not compare(k.simulate(a, b, c, bias, scale_a=sa, scale_b=sb), reference(a, b, g.epilogue, c, bias), g).ok


def test_each_cta_loads_its_own_a_scales_and_the_whole_pairs_b_scales():
    """Per stage and CTA: one A-scale box of the CTA's 128 rows and the B-scale row blocks of the
    pair's BN (two for BN 256), all completing on the leader's full barrier (.cta_group::2 TMA)."""
    k = ptxgen.compile(*CASES[1], arch=ARCH)
    lines = [line for line in k.ptx.splitlines() if "cp.async.bulk.tensor" in line]
    assert all(".cta_group::2" in line for line in lines)
    assert sum("SFA:" in line for line in lines) == 1 and sum("SFB:" in line for line in lines) == 1
    assert "(1 + 2 per k-tile" in k.ptx   # the header's scale blocks: A's one, B's two (BN 256)


# -- planted bugs ------------------------------------------------------------------------------------
def _wrong_tile(monkeypatch, rows_of_leader: bool):
    """Plant a scale-load bug in the lowering: every CTA loads the A scales of the leader's rows, or
    B scales from its own half of N on (not the pair's first column)."""
    original = StageScales.issue_loads

    def planted(self, base, k_tile, bar, tile, load=None):
        b, cl = self.lw.b, self.lw.cluster
        if rows_of_leader:
            tile = Tile(tile.tm, tile.tn, ptx_ops.sub(b, U32, tile.bm0, cl.a_half), tile.bn0)
        else:
            tile = Tile(tile.tm, tile.tn, tile.bm0, ptx_ops.add(b, U32, tile.bn0, cl.b_half))
        return original(self, base, k_tile, bar, tile, load=load)
    monkeypatch.setattr(StageScales, "issue_loads", planted)


@pytest.mark.parametrize("rows_of_leader, g, s", [
    (True, *CASES[0]),
    (False, *CASES[1]),     # BN 256: the peer's half of N starts in B's second 128-row scale block
], ids=["peer-reads-leaders-a-scales", "b-scales-of-my-half-only"])
def test_scales_of_the_wrong_rows_are_caught(monkeypatch, rows_of_leader, g, s):
    assert run(g, s)[-1].ok
    _wrong_tile(monkeypatch, rows_of_leader)
    assert not run(g, s)[-1].ok


def test_scales_copied_into_the_leaders_tensor_memory_only_are_caught():
    """tcgen05.cp.cta_group::1 from the leader fills its own TMEM only: the peer's MMA half would
    read scale columns no copy wrote; the simulator refuses the mixed CTA groups (every tcgen05
    instruction of a kernel uses one: ptxas rejects a mix, tcgen05.md §12b)."""
    g, s = CASES[0]
    ptx = ptxgen.compile(g, s, arch=ARCH).ptx
    bad = ptx.replace("tcgen05.cp.cta_group::2", "tcgen05.cp.cta_group::1")
    assert bad != ptx
    with pytest.raises(sim.HazardError) as e:
        run(g, s, ptx=bad)
    assert "cta_group" in str(e.value), e.value


# -- refusals --------------------------------------------------------------------------------------
def test_a_block_scaled_pair_at_m128_is_refused_with_a_fix_that_compiles():
    g = scaled(300, 72, 256, "e4m3", MX, "f16")
    with pytest.raises(LoweringNotBuilt) as e:
        ptxgen.compile(g, pair((128, 64, 128)), arch=ARCH)
    assert e.value.field == "schedule.block.BM" and "layout B" in str(e.value)
    assert "block=(256, 64, 128) with cta_group=2" in e.value.fix
    assert "cta_group::2.kind::mxf8f6f4" in ptxgen.compile(g, pair((256, 64, 128)), arch=ARCH).ptx


# -- a small property test over the block-scaled pair space ------------------------------------------
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_pair_block_scaled_schedules_match_numpy(data):
    """MXFP8 (e4m3/e5m2), MXFP4 or NVFP4 with edges in M, N, K (rows kept 16-byte aligned for TMA),
    BN 32..256, 1 to 3 stages, 1 or 2 pairs walking several tiles each, random scales."""
    fmt = data.draw(st.sampled_from(["e4m3", "e5m2", "mxfp4", "nvfp4"]), label="format")
    dtype, bs = {"mxfp4": ("e2m1", MX), "nvfp4": ("e2m1", NV)}.get(fmt, (fmt, MX))
    m = 16 * data.draw(st.integers(9, 40), label="m")
    n = 16 * data.draw(st.integers(2, 20), label="n")
    k = 32 * data.draw(st.integers(2, 12), label="k")
    bn = data.draw(st.sampled_from([32, 64, 128, 256]), label="BN")
    per_block = 4 * bs.group_k
    bk = per_block * data.draw(st.sampled_from([1, 2]), label="BK blocks")
    g = scaled(m, n, k, dtype, bs, data.draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"))
    s = pair((256, bn, bk), stages=data.draw(st.integers(1, 3), label="stages"),
             sms=2 * data.draw(st.integers(1, 2), label="pairs"))
    try:
        ptxgen.verify(g, s, ARCH)
    except ScheduleError:
        assume(False)
    res = run(g, s, seed=m * n + k)[-1]
    assert res.ok, res


# -- ptxas ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, bs, bk", [("e4m3", MX, 128), ("e2m1", MX, 256), ("e2m1", NV, 256)],
                         ids=["mxfp8", "mxfp4", "nvfp4"])
def test_ptxas_assembles_the_pair_block_scaled_kernels_without_spills(dtype, bs, bk, monkeypatch):
    """ptxas -arch=sm_100a takes tcgen05.cp.cta_group::2 and the pair's block-scaled MMAs at
    4096^3 with BN 256 (one accumulator buffer beside the scale columns)."""
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH: the assembly check needs it")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    k = ptxgen.compile(scaled(4096, 4096, 4096, dtype, bs, "bf16"), pair((256, 256, bk), 3, sms=None), arch=ARCH)
    r = asm.assemble(k.ptx, ARCH, k.entry)
    assert r.resources.spill_store_bytes == 0 and r.resources.spill_load_bytes == 0, r.resources
