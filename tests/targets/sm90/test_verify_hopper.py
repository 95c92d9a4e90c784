"""The sm_90a target and Hopper (wgmma) schedules: defaults, the derived plan, every verifier rule
rejecting what it must with the field and the fix, and compile refusing until the lowering exists."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError, ScheduleTypeError
from ptxgen.cli.app import main
from ptxgen.errors import LoweringNotBuilt
from ptxgen.targets.sm90.plan import N_FLOAT, N_INTEGER, WGMMA_N, hopper_plan, launch_regs, persistent_ctas
from ptxgen.schedule.occupancy import SM_LIMITS
from ptxgen.schedule.targets import TARGETS, target
from ptxgen.schedule.verify import verify, verify_rules

from .hopper_strategies import ARCH, draw_legal_hopper

G = Gemm(4096, 4096, 4096)
H = Schedule(block=(128, 128, 64), instruction="wgmma", stages=4)
SMEM_227K = 227 * 1024


def test_sm_90a_target_and_sm_90_unchanged():
    t, old = target("sm_90a"), target("sm_90")
    assert (t.ptx_version, t.smem_per_block, t.wgmma, t.tma, t.setmaxnreg, t.max_cluster) == (
        (8, 0), SMEM_227K, True, True, True, 8)
    assert (old.ptx_version, old.smem_per_block, old.wgmma, old.tma, old.setmaxnreg, old.max_cluster) == (
        (7, 8), SMEM_227K, False, False, False, 1)
    assert not any(TARGETS[a].wgmma for a in ("sm_80", "sm_86", "sm_89", "sm_90"))
    assert SM_LIMITS["sm_90a"] == SM_LIMITS["sm_90"]


def test_issue_examples_are_complete_schedules_with_the_stated_defaults():
    """Only block, instruction and stages (and cluster) given: every other field has its default."""
    big = Schedule(block=(128, 256, 64), instruction="wgmma", stages=3, cluster=(2, 1))
    for s in (H, big):
        verify_rules(G, s, ARCH)
        assert (s.consumers, s.warp_specialized, s.producer_regs, s.consumer_regs, s.persistent, s.warps,
                s.smem_layout) == (2, True, 40, 232, True, (8, 1), "swizzle")
        assert s.threads == 384  # two consumer warpgroups and the producer
    assert (H.cluster, H.multicast, big.multicast) == ((1, 1), False, True)
    assert H == Schedule(block=(128, 128, 64), instruction="wgmma", stages=4, consumers=2, producer_regs=40)
    p = hopper_plan(G, big)
    assert (p.swizzle, p.wgmma, p.launch_regs, p.accumulator_regs, p.multicast, p.epilogue) == (
        128, (64, 256, 16), 168, 128, ("B",), "tma")
    assert (p.a_box.inner, p.a_box.outer, p.b_box.outer) == (64, 128, 256)
    # 3 x (16 KiB A + 32 KiB B) + 2 consumers x 2 buffers x 64 rows x 128 B staging + 14 mbarriers
    # (6 of the ring; per consumer 2 C-load and 2 C-free ones, the producer loading C with beta)
    # padded to the staging's 1024 B + 1 KiB alignment
    assert p.smem.total == 3 * (16384 + 32768) + 32768 + 1024 + 1024 <= SMEM_227K
    assert (p.smem.barriers, p.smem.barrier_pad) == (112, 912)


def test_hopper_defaults_follow_bm_and_specialisation():
    one = Schedule(block=(192, 128, 64), instruction="wgmma")
    assert (one.consumers, one.warps, one.consumer_regs) == (1, (4, 1), 256)
    plain = Schedule(block=(128, 128, 64), instruction="wgmma", warp_specialized=False)
    assert (plain.producer_regs, plain.consumer_regs, plain.threads) == (None, None, 256)
    assert hopper_plan(G, plain).consumer_regs == launch_regs(256) == 248
    # other instructions keep every Hopper field None and their thread counts
    s = Schedule(block=(128, 128, 32))
    assert (s.consumers, s.cluster, s.threads, s.hopper) == (None, None, 128, False)


def test_default_swizzle_is_the_widest_the_tiles_allow():
    assert hopper_plan(G, Schedule(block=(128, 128, 32), instruction="wgmma")).swizzle == 64
    assert hopper_plan(G, Schedule(block=(128, 128, 16), instruction="wgmma")).swizzle == 32
    fp8 = Gemm(256, 256, 256, dtype="e4m3")
    p = hopper_plan(fp8, Schedule(block=(128, 128, 128), instruction="wgmma"))
    assert (p.swizzle, p.wgmma, p.a_box.inner, p.wgmmas_per_k_tile) == (128, (64, 128, 32), 128, 4)


def test_wgmma_n_tables():
    assert N_FLOAT == tuple(range(8, 257, 8))
    assert 40 not in N_INTEGER and {8, 16, 24, 32, 48, 256} <= set(N_INTEGER) and 248 not in N_INTEGER
    assert WGMMA_N["e4m3"] == N_FLOAT and WGMMA_N["u8"] == N_INTEGER


def _g(**kw) -> Gemm:
    return Gemm(**{"m": 1024, "n": 1024, "k": 1024, **kw})


def _h(**kw) -> Schedule:
    return Schedule(**{"block": (128, 128, 64), "instruction": "wgmma", "stages": 4, **kw})


# (label, gemm, schedule, arch, field named, words the rule or fix must contain)
INVALID = [
    ("wgmma on sm_90", G, H, "sm_90", "arch", "sm_90a"),
    ("wgmma on sm_80", G, H, "sm_80", "arch", "sm_90a"),
    ("mma.sync on sm_90a", G, Schedule(block=(128, 128, 32)), "sm_90a", "schedule.instruction", "sm_90"),
    ("wmma on sm_90a", G, Schedule(block=(128, 128, 32), instruction="wmma"), "sm_90a", "schedule.instruction",
     "wgmma"),
    ("hopper field on mma.sync", G, Schedule(block=(128, 128, 32), cluster=(2, 1)), "sm_90", "schedule.cluster",
     "wgmma"),
    ("regs on mma.sync", G, Schedule(block=(128, 128, 32), consumer_regs=232), "sm_90", "schedule.consumer_regs",
     "wgmma"),
    ("fp8 on sm_90", _g(dtype="e4m3"), Schedule(block=(128, 128, 64)), "sm_90", "gemm.dtype", "sm_90a"),
    ("fp8 on sm_80", _g(dtype="e5m2"), Schedule(block=(128, 128, 64)), "sm_80", "gemm.dtype", "f16"),
    ("fp8 wmma", _g(dtype="e4m3"), Schedule(block=(128, 128, 64), instruction="wmma"), "sm_80", "gemm.dtype",
     "sm_90a"),
    ("fp8 to s8", _g(dtype="e4m3", out_dtype="s8"), _h(block=(128, 128, 128)), ARCH, "gemm.out_dtype", "f32"),
    ("consumers 3", G, _h(consumers=3, block=(192, 128, 64)), ARCH, "schedule.consumers", "consumers=1"),
    ("BM / consumers", G, _h(block=(64, 128, 64), consumers=2), ARCH, "schedule.block.BM", "consumers=1"),
    ("BM not 64k", G, _h(block=(96, 128, 64)), ARCH, "schedule.block.BM", "multiple of 64"),
    ("explicit warps", G, _h(warps=(2, 2)), ARCH, "schedule.warps", "consumers"),
    ("pad layout", G, _h(smem_layout="pad"), ARCH, "schedule.smem_layout", "swizzle"),
    ("swizzle 16", G, _h(swizzle=16), ARCH, "schedule.swizzle", "128, 64 or 32"),
    ("regs without producer", G, _h(warp_specialized=False, producer_regs=40), ARCH, "schedule.producer_regs",
     "warp_specialized=True"),
    ("s8 N 40", _g(dtype="s8"), _h(block=(128, 40, 128)), ARCH, "schedule.block.BN", "BN=32"),
    ("s8 N 248", _g(dtype="s8", out_dtype="s32"), _h(block=(128, 248, 128)), ARCH, "schedule.block.BN",
     "multiple of 16"),
    ("f16 N 12", G, _h(block=(128, 12, 64)), ARCH, "schedule.block.BN", "BN=8"),
    ("f16 N 264", G, _h(block=(128, 264, 64)), ARCH, "schedule.block.BN", "BN=256"),
    ("BK / k", G, _h(block=(128, 128, 8)), ARCH, "schedule.block.BK", "multiple of 16"),
    ("tf32 A M-major", _g(dtype="tf32", a_layout="col"), _h(block=(128, 128, 32)), ARCH, "gemm.a_layout",
     "sm_90'"),
    ("fp8 B N-major", _g(dtype="e4m3", b_layout="row"), _h(block=(128, 128, 128)), ARCH, "gemm.b_layout",
     "compile dtype='f16' for arch='sm_90'"),
    ("lda not 16 B", _g(k=1004), H, ARCH, "gemm.lda", "arch='sm_90'"),
    ("ldb not 16 B", _g(k=1004, a_layout="col"), H, ARCH, "gemm.ldb", "pad lda and ldb"),
    ("align 8", _g(align=8), H, ARCH, "gemm.align", "16-byte"),
    ("C not 16 B for TMA store", _g(n=1000, out_dtype="f16", ldc=1004), _h(epilogue_via_smem=True), ARCH,
     "schedule.epilogue_via_smem", "epilogue_via_smem=None or False"),
    ("BK rows vs 128B swizzle", G, _h(block=(128, 128, 32), swizzle=128), ARCH, "schedule.block.BK",
     "narrower swizzle"),
    ("MN-major B rows vs swizzle", _g(b_layout="row"), _h(block=(128, 24, 64)), ARCH, "schedule.block.BN",
     "multiple of 32"),
    ("TMA box > 256", _g(a_layout="col"), _h(block=(128, 128, 512), stages=1), ARCH, "schedule.block.BK",
     "BK <= 256"),
    ("setmaxnreg step", G, _h(producer_regs=44), ARCH, "schedule.producer_regs", "multiple of 8"),
    ("setmaxnreg floor", G, _h(producer_regs=16), ARCH, "schedule.producer_regs", "24"),
    ("setmaxnreg ceiling", G, _h(consumer_regs=264), ARCH, "schedule.consumer_regs", "256"),
    ("dec above the cap", G, _h(producer_regs=176), ARCH, "schedule.producer_regs", "168"),
    ("inc below the cap", G, _h(consumer_regs=160), ARCH, "schedule.consumer_regs", "168"),
    ("register pool", G, _h(consumer_regs=240), ARCH, "schedule.consumer_regs", "consumer_regs <= 232"),
    ("register pool by 16/thread", G, _h(producer_regs=48, consumer_regs=232), ARCH, "schedule.consumer_regs",
     "65536 registers, more than the 64512"),   # issue 21: within 64K, over .maxnreg 168 x 384
    ("accumulators, one consumer", G, _h(block=(128, 256, 64), consumers=1, stages=3), ARCH, "schedule.block",
     "consumers=2"),
    ("accumulators vs consumer_regs", G, _h(block=(128, 216, 64), consumers=1, stages=2, consumer_regs=248), ARCH,
     "schedule.consumer_regs", "raise consumer_regs"),
    ("smem 128x256x64 x5", G, _h(block=(128, 256, 64), stages=5), ARCH, "schedule.stages", "stages <= 4"),
    ("smem with C staging", _g(epilogue=Epilogue(beta=1.0)), _h(block=(256, 128, 64), stages=5), ARCH,
     "schedule.stages", "epilogue_via_smem=False"),
    ("cluster 16", G, _h(cluster=(4, 4)), ARCH, "schedule.cluster", "(2, 1)"),
    ("multicast B slice", G, _h(block=(128, 24, 64), cluster=(2, 1), consumers=1), ARCH, "schedule.block.BN",
     "multiple of 16"),
    ("multicast A slice", _g(a_layout="col"), _h(block=(128, 128, 16), cluster=(1, 4)), ARCH, "schedule.block.BK",
     "multicast=False"),
    ("multicast without cluster", G, _h(multicast=True), ARCH, "schedule.multicast", "cluster=(2, 1)"),
    ("stream-k in a cluster", G, _h(cluster=(2, 1), decomposition="stream-k"), ARCH, "schedule.decomposition",
     "cluster=(1, 1)"),
    ("grouped raster vs cluster", G, _h(cluster=(2, 1), raster="grouped", group_m=3), ARCH, "schedule.group_m",
     "multiple of 2"),
    ("sms vs cluster", G, _h(cluster=(2, 1), sms=131), ARCH, "schedule.sms", "sms=130"),
    ("stream-k not persistent", G, _h(persistent=False, decomposition="stream-k"), ARCH, "schedule.persistent",
     "persistent=None/True"),
    ("split-K of s32", _g(dtype="s8", out_dtype="s32"), _h(block=(128, 128, 128), split_k=2), ARCH,
     "schedule.split_k", "split_k=1"),
    ("lda below width", _g(lda=512), H, ARCH, "gemm.lda", "lda=1024 or more"),
]


@pytest.mark.parametrize("label,g,s,arch,field,words", INVALID, ids=[c[0] for c in INVALID])
def test_every_hopper_rule_rejects_with_field_and_fix(label, g, s, arch, field, words):
    with pytest.raises(ScheduleError) as info:
        verify_rules(g, s, arch)
    e = info.value
    assert not isinstance(e, LoweringNotBuilt)
    assert e.field == field, str(e)
    assert e.fix and words in str(e), str(e)
    assert str(e).startswith(f"{field}=")


@pytest.mark.parametrize("field,value", [("consumers", "2"), ("warp_specialized", 1), ("persistent", "yes"),
                                         ("multicast", 0), ("cluster", [2]), ("producer_regs", 40.0),
                                         ("swizzle", True)])
def test_hopper_fields_are_type_checked(field, value):
    with pytest.raises(ScheduleTypeError if field != "cluster" else ScheduleError) as info:
        verify_rules(G, _h(**{field: value}), ARCH)
    assert info.value.field.startswith(f"schedule.{field}")


def test_the_fixes_named_for_n_and_stages_are_legal():
    """The suggested values themselves pass (the fix is a real fix)."""
    verify_rules(_g(dtype="s8"), _h(block=(128, 32, 128)), ARCH)
    verify_rules(G, _h(block=(128, 256, 64), stages=4), ARCH)
    verify_rules(G, _h(cluster=(2, 1), sms=130), ARCH)
    verify_rules(_g(k=1004, a_layout="row"), Schedule(block=(128, 128, 32)), "sm_90")  # the sm_80 path takes it


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_drawn_hopper_schedules_keep_every_limit(data):
    """The strategy's legal draws: the plan stays within the ISA and TMA limits, recomputed here."""
    g, s = draw_legal_hopper(data)
    p = hopper_plan(g, s)
    esize = g.in_bytes
    assert s.bn in WGMMA_N[g.dtype] and s.bm % (64 * s.consumers) == 0
    for box in (p.a_box, p.b_box):
        assert box.inner * esize == p.swizzle and box.outer <= 256 and box.contiguous_bytes % p.swizzle == 0
    ring = s.stages * (s.bm + s.bn) * s.bk * esize
    assert ring <= p.smem.ring and p.smem.total <= SMEM_227K
    assert p.threads == 128 * (s.consumers + (1 if s.warp_specialized else 0)) == s.threads
    if s.warp_specialized:
        # the pool is what the CTA launches with, .maxnreg x threads (warp_specialisation.md §9g:
        # setmaxnreg moves registers between warpgroups, it adds none), not the 64K register file
        cap = min(248, 65536 // p.threads // 8 * 8)
        assert p.launch_regs == cap
        assert (s.producer_regs + s.consumers * s.consumer_regs) * 128 <= cap * p.threads
        assert s.producer_regs <= p.launch_regs <= s.consumer_regs
        assert all(24 <= r <= 256 and r % 8 == 0 for r in (s.producer_regs, s.consumer_regs))
    assert p.accumulator_regs + 40 <= p.consumer_regs
    assert s.cluster[0] * s.cluster[1] <= 8      # tile counts need not divide: the walk rounds up (sm90/cluster.py)
    for box, parts in ((p.b_box, s.cluster[0]), (p.a_box, s.cluster[1])):
        if box.operand in p.multicast:           # each CTA's multicast slice is whole swizzle atoms
            assert box.outer % (8 * parts) == 0
    assert (g.leading_dims()[0] * esize) % 16 == 0 and (g.leading_dims()[1] * esize) % 16 == 0
    assert persistent_ctas(g, s, 132) % (s.cluster[0] * s.cluster[1]) == 0
    try:
        verify(g, s, ARCH)
    except LoweringNotBuilt:
        pass
    else:  # compiled by the sm_90a lowering (test_sm90_gemm.py, test_sm90_ws.py, test_sm90_cluster.py, ...)
        assert s.warp_specialized or not s.persistent or s.stream_k
        assert s.cluster == (1, 1) or (s.warp_specialized and s.persistent)
        assert not (s.warp_specialized and (s.split_k > 1 or s.stream_k))  # batches: built (persistent.py)


@settings(max_examples=200, deadline=None)
@given(consumers=st.sampled_from((1, 2)), producer=st.sampled_from(range(24, 257, 8)),
       consumer=st.sampled_from(range(24, 257, 8)))
def test_register_split_is_refused_exactly_when_it_overdraws_the_launch_pool(consumers, producer, consumer):
    """Any setmaxnreg pair the ISA takes, around the launch cap: the verifier accepts it exactly when
    (producer + consumers x consumer) x 128 fits .maxnreg x threads, recomputed here from the ISA
    facts (warp_specialisation.md §9g), so a rule bounding by the 64K file (16 registers a thread
    over for 384 threads) fails here."""
    threads = 128 * (consumers + 1)
    cap = min(248, 65536 // threads // 8 * 8)
    if not producer <= cap <= consumer:
        return   # the other setmaxnreg rules (dec lowers, inc raises): tested in BAD above
    s = _h(block=(64 * consumers, 64, 64), consumers=consumers, producer_regs=producer, consumer_regs=consumer)
    over = (producer + consumers * consumer) * 128 > cap * threads
    try:
        verify_rules(G, s, ARCH)
    except ScheduleError as e:
        assert over and e.field == "schedule.consumer_regs" and "the CTA launches with" in str(e), str(e)
    else:
        assert not over, (producer, consumer, consumers)


def test_compile_refuses_a_legal_hopper_schedule_with_the_sm_90_fix():
    with pytest.raises(NotImplementedError) as info:
        ptxgen.compile(G, _h(cluster=(2, 1), persistent=False), ARCH)   # clusters off the persistent grid: not built
    e = info.value
    assert isinstance(e, LoweringNotBuilt) and isinstance(e, ScheduleError)
    assert "not built yet" in str(e) and "arch='sm_90'" in e.fix
    with pytest.raises(LoweringNotBuilt, match="convert A and B to f16 first .* compile dtype='f16' for arch='sm_90'"):
        ptxgen.compile(_g(dtype="e4m3"), _h(block=(128, 128, 128), cluster=(2, 1), persistent=False), ARCH)  # fp8: built; clusters off the persistent grid: not


def test_illegal_hopper_schedule_fails_its_rule_before_not_built():
    with pytest.raises(ScheduleError) as info:
        ptxgen.compile(G, _h(block=(128, 12, 64)), ARCH)
    assert not isinstance(info.value, LoweringNotBuilt) and info.value.field == "schedule.block.BN"


def test_cli_says_not_built_and_names_flags(capsys):
    assert main(["info", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "128x128x64", "--cluster", "2x1",
                 "--no-persistent"]) == 2
    err = capsys.readouterr().err
    assert "not built yet" in err and "--arch sm_90" in err and "Traceback" not in err
    assert main(["run", "--dtype", "e4m3", "--shape", "64x64x64"]) == 2
    err = capsys.readouterr().err
    assert "--arch sm_90a" in err and "Traceback" not in err
    assert main(["info", "--arch", "sm_90a"]) == 0  # no schedule flags: the cost model picks a built wgmma one
    assert "chosen     --instruction wgmma" in capsys.readouterr().out


def test_persistent_grid_is_whole_clusters_within_the_work():
    s = _h(cluster=(2, 1))
    assert persistent_ctas(G, s, 132) == 132                     # 1024 tiles: one CTA per SM
    assert persistent_ctas(G, _h(cluster=(2, 1), sms=8), 132) == 8
    assert persistent_ctas(_g(m=256, n=256), s, 132) == 4         # 2 x 2 tiles: no idle CTAs
    assert persistent_ctas(G, Schedule(block=(128, 128, 64), instruction="wgmma", cluster=(2, 2)), 131) == 128


def test_epilogue_path_follows_c_alignment():
    assert hopper_plan(G, H).epilogue == "tma"
    odd = _g(n=1000, out_dtype="f16", ldc=1004)                   # 2008-byte rows: TMA cannot store them
    p = hopper_plan(odd, H)
    assert p.epilogue == "direct" and p.smem.epilogue_store == 0
    verify_rules(odd, H, ARCH)
    assert hopper_plan(G, _h(epilogue_via_smem=False)).epilogue == "direct"
    beta = hopper_plan(_g(epilogue=Epilogue(beta=1.0)), H)
    assert beta.smem.epilogue_load == beta.smem.epilogue_store > 0  # C read through TMA as well


@settings(max_examples=40, deadline=None)
@given(bm=st.sampled_from([64, 128, 256]), bn=st.sampled_from([64, 128, 192, 256]), bk=st.sampled_from([64, 128]),
       beta=st.sampled_from([0.0, 1.0]), out=st.sampled_from(["f32", "bf16"]))
def test_the_stage_count_the_smem_rule_suggests_is_the_largest_that_fits(bm, bn, bk, beta, out):
    g = _g(out_dtype=out, epilogue=Epilogue(beta=beta))
    consumers = 2 if bm % 128 == 0 and bm * bn // 256 + 40 > 232 else (2 if bm == 256 else 1)
    base = dict(block=(bm, bn, bk), consumers=consumers)
    with pytest.raises(ScheduleError) as info:
        verify_rules(g, _h(stages=40, **base), ARCH)
    if info.value.field != "schedule.stages":  # another rule (registers) comes first for this tile
        return
    fits = int(info.value.fix.split("stages <= ")[1].split(",")[0]) if "stages <=" in info.value.fix else 0
    if fits:
        verify_rules(g, _h(stages=fits, **base), ARCH)
    with pytest.raises(ScheduleError, match="stages"):
        verify_rules(g, _h(stages=fits + 1, **base), ARCH)


def test_schedule_tables_agree_with_the_emit_side_wgmma_table():
    """The verifier's N/K/transpose tables and targets/sm90's instruction table (assembled with ptxas
    in tests/targets/sm90/test_sm90_isa.py) must say the same; skipped where targets/sm90 is not merged yet."""
    isa = pytest.importorskip("ptxgen.targets.sm90.wgmma_isa")
    from ptxgen.targets.sm90.plan import TRANSPOSABLE
    from ptxgen.schedule.problem import WGMMA_K

    for dtype, k in WGMMA_K.items():
        row = isa.lookup("s32" if dtype in ("s8", "u8") else "f32", dtype, dtype)
        assert (row.k, row.n_values, row.transpose) == (k, WGMMA_N[dtype], dtype in TRANSPOSABLE), dtype
