"""bench/sass_cfg.py, bench/sass_hopper.py and bench/sass_check.py's gate on small synthetic SASS listings (the layouts
ptxas gives Hopper kernels) and on ptxas/nvJitLink log lines copied verbatim from real runs."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import sass_cfg  # noqa: E402
import sass_hopper  # noqa: E402


def listing(*lines: str, start: int = 0) -> str:
    """cuobjdump-style text: one `/*addr*/ instr ;` per line, 16 bytes apart."""
    return "\n".join(f"        /*{start + 16 * k:04x}*/                   {ins} ;  /* 0x0000 */"
                     for k, ins in enumerate(lines))


#: A non-specialised TMA + wgmma kernel as ptxas lays it out: the loop's mbarrier wait retries in
#: an out-of-line block below EXIT that spins on itself and then jumps back into the loop body.
#: 0x00 S2R | 0x10 header: SYNCS try_wait | 0x20 @!P0 BRA 0xb0 (to the retry) | 0x30 resume:
#: WARPGROUP.ARRIVE | 0x40, 0x50 HGMMA | 0x60 WARPGROUP.DEPBAR | 0x70 UTMALDG | 0x80 @P1 BRA 0x10
#: | 0x90 UTMASTG | 0xa0 EXIT | 0xb0 retry: try_wait | 0xc0 @!P0 BRA 0xb0 | 0xd0 BRA 0x30
SINGLE = "\n".join([
    "\tFunction : mm",
    listing(
        "S2R R0, SR_TID.X",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8+0x20000], R5",
        "@!P0 BRA 0xb0",
        "WARPGROUP.ARRIVE",
        "HGMMA.64x128x16.F32 R24, gdesc[UR32].tnspB, R24",
        "HGMMA.64x128x16.F32 R24, gdesc[UR28].tnspB, R24, gsb0",
        "WARPGROUP.DEPBAR.LE gsb0, 0x1",
        "@UP0 UTMALDG.2D [UR16], [UR20]",
        "@P1 BRA 0x10",
        "UTMASTG.2D [UR4], [UR10]",
        "EXIT",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8+0x20000], R5",
        "@!P0 BRA 0xb0",
        "BRA 0x30",
    ),
])

#: A warp-specialised kernel: the producer warpgroup (branch at 0x20) gives registers back and
#: loops over TMA loads; the consumers take registers and loop over wgmma. Two loops, one function.
#: consumer 0x30..0xf0 (loop 0x40..0xc0), producer 0x100..0x190 (loop 0x110..0x170).
WARP_SPECIALISED = "\n".join([
    "\tFunction : ws_gemm",
    listing(
        "S2R R0, SR_TID.X",                                      # 0x00
        "ISETP.GE.U32.AND P0, PT, R0, 0x100, PT",                # 0x10
        "@P0 BRA 0x100",                                         # 0x20 producer warpgroup
        "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8",                # 0x30 consumers: 232 registers
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR8+0x20000], R5",  # 0x40 loop: full barrier
        "WARPGROUP.ARRIVE",                                      # 0x50
        "HGMMA.64x256x16.F32 R24, gdesc[UR32], R24",             # 0x60
        "HGMMA.64x256x16.F32 R24, gdesc[UR36], R24",             # 0x70
        "HGMMA.64x256x16.F32 R24, gdesc[UR40], R24, gsb0",       # 0x80
        "WARPGROUP.DEPBAR.LE gsb0, 0x1",                         # 0x90
        "SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR8+0x20040], RZ",       # 0xa0 release the stage
        "IADD3 R4, R4, 0x1, RZ",                                 # 0xb0
        "@P2 BRA 0x40",                                          # 0xc0 consumer back edge
        "WARPGROUP.DEPBAR.LE gsb0, 0x0",                         # 0xd0
        "STG.E [R2], R24",                                       # 0xe0
        "EXIT",                                                  # 0xf0
        "USETMAXREG.DEALLOC.CTAPOOL 0x28",                       # 0x100 producer: 40 registers
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P3, [UR8+0x20040], R6",  # 0x110 loop: empty barrier
        "SYNCS.ARRIVE.TRANS64 RZ, [UR8+0x20000], R7",            # 0x120 expect_tx
        "UTMALDG.2D [UR16], [UR20]",                             # 0x130
        "UTMALDG.2D [UR24], [UR28]",                             # 0x140
        "IADD3 R6, R6, 0x1, RZ",                                 # 0x150
        "ISETP.NE.AND P4, PT, R6, R9, PT",                       # 0x160
        "@P4 BRA 0x110",                                         # 0x170 producer back edge
        "EXIT",                                                  # 0x180
        "@!PT BRA 0x0",                                          # 0x190 padding: never executes
    ),
])

#: A persistent kernel: an outer tile loop (0x10..0x80) around the k loop (0x20..0x50).
NESTED = listing(
    "S2R R0, SR_CTAID.X",                          # 0x00
    "MOV R4, RZ",                                  # 0x10 tile loop header
    "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24",    # 0x20 k loop header
    "HGMMA.64x128x16.F32 R24, gdesc[UR8], R24",    # 0x30
    "IADD3 R4, R4, 0x1, RZ",                       # 0x40
    "@P0 BRA 0x20",                                # 0x50 k back edge
    "STG.E [R2], R24",                             # 0x60
    "IADD3 R0, R0, 0x84, RZ",                      # 0x70
    "@P1 BRA.U 0x10",                              # 0x80 tile back edge
    "EXIT",                                        # 0x90
)


def test_instructions_are_classified_by_opcode_with_hgmma_shapes():
    ins = sass_cfg.parse_instructions(WARP_SPECIALISED)
    by_addr = {i.addr: i for i in ins}
    assert 0x190 not in by_addr  # @!PT padding dropped
    assert [sass_cfg.classify(by_addr[a]) for a in (0x30, 0x40, 0x50, 0x60, 0x90, 0xa0, 0x130, 0xb0, 0xc0)] == [
        "setmaxnreg", "mbarrier", "wg_arrive", "hgmma", "wg_depbar", "mbarrier", "tma_load", "other", "branch"]
    assert by_addr[0x60].opcode == "HGMMA.64x256x16.F32" and sass_cfg.hgmma_shape(by_addr[0x60]) == "64x256x16"
    assert sass_cfg.hgmma_shape(by_addr[0x50]) is None
    single = {i.addr: i for i in sass_cfg.parse_instructions(SINGLE)}
    assert sass_cfg.classify(single[0x90]) == "tma_store"
    assert single[0x80].target == 0x10 and single[0x80].conditional
    assert single[0xd0].target == 0x30 and not single[0xd0].conditional
    branch_on_operand = sass_cfg.Instr(0, "", "BRA.U", "!UP0, 0x1f0")
    assert branch_on_operand.conditional and branch_on_operand.target == 0x1f0


def test_loop_with_out_of_line_retry_keeps_the_retry_cold():
    (name, ins), = sass_cfg.parse_functions(SINGLE).items()
    assert name == "mm"
    loops = {lp.header: lp for lp in sass_cfg.find_loops(ins)}
    # The jump from the retry block back into the body (0xd0 -> 0x30) goes to a lower address but
    # is no back edge (0x30 does not dominate the retry): no loop is headed there.
    assert set(loops) == {0x10, 0xb0}
    main = loops[0x10]
    assert [i.addr for i in main.hot] == list(range(0x10, 0x90, 0x10))
    assert [i.addr for i in main.cold] == [0xb0, 0xc0, 0xd0]
    assert main.classes["hgmma"] == 2 and main.classes["tma_load"] == 1 and main.classes["mbarrier"] == 1
    assert main.hgmma_shapes == {"64x128x16": 2} and main.total == 8 and main.inner == 1
    hs, = sass_hopper.analyse_sass(SINGLE)
    assert hs.consumer.hot == main.hot and hs.producer is None and not hs.warp_specialised
    assert hs.counts["tma_store"] == 1 and hs.counts["mbarrier"] == 2


def test_warp_specialised_kernel_has_separate_consumer_and_producer_loops():
    hs, = sass_hopper.analyse_sass(WARP_SPECIALISED)
    assert hs.function == "ws_gemm" and hs.warp_specialised
    assert hs.consumer.header == 0x40 and [i.addr for i in hs.consumer.hot] == list(range(0x40, 0xd0, 0x10))
    assert hs.consumer.classes["hgmma"] == 3 and hs.consumer.classes["tma_load"] == 0
    assert hs.consumer.hgmma_shapes == {"64x256x16": 3}
    assert hs.producer.header == 0x110 and hs.producer.total == 7
    assert hs.producer.classes["tma_load"] == 2 and hs.producer.classes["mbarrier"] == 2
    assert hs.setmaxnreg == [("alloc", 232), ("dealloc", 40)]
    cols = sass_hopper.loop_columns(hs.consumer)
    assert cols["total"] == 9 and cols["hgmma"] == 3 and cols["syncs"] == 2 and cols["other"] == 2
    assert cols["wg.arr"] == 1 and cols["wg.dep"] == 1 and cols["shapes"] == "64x256x16x3"
    # The same loop unrolled over two k-tiles: every column halves.
    assert sass_hopper.loop_columns(hs.consumer, ktiles=2)["total"] == 4.5


def test_nested_loops_pick_the_innermost_loop_with_the_most_wgmma():
    loops = sass_cfg.find_loops(sass_cfg.parse_instructions(NESTED))
    assert sorted(lp.header for lp in loops) == [0x10, 0x20]
    outer = next(lp for lp in loops if lp.header == 0x10)
    assert outer.inner == 1 and outer.total == 8 and outer.classes["hgmma"] == 2
    best = sass_cfg.busiest_loop(loops, "hgmma")
    assert best.header == 0x20 and best.total == 4
    assert sass_cfg.busiest_loop(loops, "tma_load") is None


def test_hgmma_per_ktile_from_the_block_and_shape():
    # Triton 128x128x64, one warpgroup: 2 x 4 HGMMA.64x128x16 per k-tile; two warpgroups: 4 each.
    assert sass_hopper.hgmma_per_ktile((128, 128, 64), "64x128x16", 1) == 8
    assert sass_hopper.hgmma_per_ktile((128, 128, 64), "64x128x16", 2) == 4
    assert sass_hopper.hgmma_per_ktile((128, 256, 64), "64x256x16", 2) == 4


#: Verbatim from ptxas 13.0 (`ptxas -arch=sm_90a -v`) and nvJitLink 13.5 (-verbose) logs.
PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function 'mm'
ptxas info    : Compiling entry function 'mm' for 'sm_90a'
ptxas info    : Function properties for mm
    1272 bytes stack frame, 2400 bytes spill stores, 1888 bytes spill loads
ptxas info    : Used 254 registers, used 1 barriers, 1272 bytes cumulative stack size
ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function 'mm' in line 704
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.
ptxas info    : Compile time = 1634.516 ms
"""
NVJITLINK_LOG = """\
ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility across compilation units.
ptxas info    : Compiling entry function 'mm' for 'sm_90a'
ptxas info    : Function properties for mm
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers, used 1 barriers
info    : Function properties for 'mm':
info    : used 90 registers, used 1 barriers, 0 stack, 1024 bytes smem, 1136 bytes cmem[0], 0 bytes lmem
"""


def test_perf_notes_capture_wgmma_serialisation_and_ignored_setmaxnreg():
    notes = sass_hopper.perf_notes(PTXAS_LOG)
    assert [(n.code, n.kind) for n in notes] == [("C7511", "wgmma serialized"), ("C7508", "setmaxnreg ignored")]
    assert notes[0].text.endswith("in the function 'mm' in line 704")  # the longer copy, with the line
    assert notes[1].text == "Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry."
    (only,) = sass_hopper.perf_notes(NVJITLINK_LOG)
    assert (only.code, only.kind) == ("C7504", "setmaxnreg ignored")
    assert sass_hopper.perf_notes("ptxas info    : Used 154 registers, used 1 barriers\n") == []


def test_setmaxnreg_summary_lists_each_target_once():
    hs, = sass_hopper.analyse_sass(WARP_SPECIALISED)
    assert sass_hopper.setmaxnreg_summary(hs.setmaxnreg) == "dec 40, inc 232"
    assert sass_hopper.setmaxnreg_summary([("alloc", 256), ("dealloc", 40), ("alloc", 256)]) == "dec 40, inc 256"
    assert sass_hopper.setmaxnreg_summary([]) == "-"


def test_sass_report_hopper_columns_for_a_warp_specialised_kernel():
    """bench/sass.py's sm_90a columns (ptxgen does not emit sm_90a yet, so they are checked on the
    synthetic listing): TMA loads, SYNCS and WARPGROUP of the consumer loop, the producer loop's
    length, setmaxnreg, and the notes' count with their text collected."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_sass", ROOT / "bench" / "sass.py")
    sass = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sass
    spec.loader.exec_module(sass)
    notes: dict[str, list[str]] = {}
    cols = sass.hopper_columns("ws", WARP_SPECIALISED, "ws_gemm", PTXAS_LOG, notes)
    assert cols.split() == ["|", "0", "2", "2", "7", "producer", "40,", "consumer", "232", "2"]
    assert notes["ws"][0].startswith("(C7511) Potential Performance Loss: wgmma.mma_async")
    assert sass.limits_arch("sm_90a") == "sm_90" and sass.is_hopper("sm_90a") and not sass.is_hopper("sm_90")
    loop = sass.main_loop(sass_cfg.parse_instructions(WARP_SPECIALISED))
    assert loop.tensor == 3 and sum(loop.counts.values()) == 9 and loop.tensor_before_barrier == 3


def test_registers_per_role_follow_the_setmaxnreg_that_dominates_each_loop():
    hs, = sass_hopper.analyse_sass(WARP_SPECIALISED)
    assert (hs.producer_registers, hs.consumer_registers) == (40, 232)
    assert hs.registers_per_role == "producer 40, consumer 232"
    # Swap the two budgets' places: each loop follows the one on its own path, not the address order.
    swapped = WARP_SPECIALISED.replace("USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8", "USETMAXREG.DEALLOC.CTAPOOL 0x18") \
        .replace("USETMAXREG.DEALLOC.CTAPOOL 0x28", "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0")
    hs2, = sass_hopper.analyse_sass(swapped)
    assert (hs2.producer_registers, hs2.consumer_registers) == (240, 24)
    single, = sass_hopper.analyse_sass(SINGLE)
    assert single.consumer_registers is None and single.registers_per_role == "-"


# -- bench/sass_check.py: the sm_90a static gate ---------------------------------------------------
def test_sass_check_gate_fails_on_spills_and_on_each_forbidden_note():
    from dataclasses import replace

    from ptxgen.runtime.assemble import Assembled, Resources
    from sass_check import verdict

    clean = Assembled(b"", "ptxas info    : Used 168 registers", Resources(168), "sm_90a", "ptxas 13.0",
                      whole_program=True, setmaxnreg="setmaxnreg kept")
    assert verdict(clean) == (True, [])
    assert verdict(replace(clean, resources=Resources(168, spill_store_bytes=4)))[0] is False
    for code in ("C7515", "C7508", "C7504"):
        log = f"ptxas info    : ({code}) Potential Performance Loss: something."
        ok, codes = verdict(replace(clean, log=log))
        assert not ok and codes == [code]
    dropped = replace(clean, setmaxnreg="setmaxnreg ignored: C7504, relocatable compilation")
    assert verdict(dropped)[0] is False


def test_sass_check_passes_a_warp_specialised_candidate_with_whole_program_ptxas():
    from ptxgen.runtime import assemble as asm

    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH")
    import ptxgen
    from sass_check import cases, check

    ws = [c for c in cases() if c[0] == "sass.py ws"]
    assert len({c[1] for c in ws}) == 6  # 3 warp-specialised schedules x 2 dtypes, each named once
    ok, row = check("f16 128x256x64 s3 2wg ws", (4000, 4000, 4008),
                    ptxgen.Schedule(block=(128, 256, 64), instruction="wgmma", stages=3, consumers=2))
    assert ok and "setmaxnreg kept" in row and "C7504" in row.split("setmaxnreg kept")[1], row


#: A consumer tile loop (0x10..0x90) around its k loop (0x40..0x70) whose first k-tile is peeled
#: out in front of it (0x20, 0x30): the tile loop holds more wgmma (fp8: QGMMA) than the k loop.
PEELED = listing(
    "S2R R0, SR_TID.X",                                     # 0x00
    "QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24",   # 0x10 tile loop: the peeled k-tile
    "QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR12], R24",  # 0x20
    "@P0 BRA 0x80",                                         # 0x30 one k-tile only
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR8+0x20000], R5",  # 0x40 k loop
    "IGMMA.64x256x32.S8.S8 R24, gdesc[UR8], R24",           # 0x50
    "SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR5], RZ",              # 0x60
    "@P1 BRA 0x40",                                         # 0x70
    "STG.E [R2], R24",                                      # 0x80 epilogue
    "@P2 BRA 0x10",                                         # 0x90
    "EXIT",                                                 # 0xa0
)


def test_fp8_and_int8_wgmma_are_recognised_and_a_peeled_k_loop_is_the_tensor_loop():
    ins = {i.addr: i for i in sass_cfg.parse_instructions(PEELED)}
    assert sass_cfg.classify(ins[0x10]) == "hgmma" and sass_cfg.hgmma_shape(ins[0x10]) == "64x256x32"
    assert sass_cfg.classify(ins[0x50]) == "hgmma" and sass_cfg.hgmma_shape(ins[0x50]) == "64x256x32"
    loops = sass_cfg.find_loops(list(ins.values()))
    assert sorted(lp.header for lp in loops) == [0x10, 0x40]
    assert sass_cfg.busiest_loop(loops, "hgmma").header == 0x10   # the old rule: most wgmma
    k_loop = sass_cfg.busiest_loop(loops, "hgmma", leaf=True)
    assert k_loop.header == 0x40 and k_loop.total == 4
    hs, = sass_hopper.analyse_sass("\tFunction : fp8\n" + PEELED)
    assert hs.consumer.header == 0x40


def test_results_file_names_by_date_kind_and_commit(tmp_path, capsys, monkeypatch):
    """bench/results_file.py, which sass.py, sass_check.py and sass_block_scale.py write through."""
    import results_file

    monkeypatch.setattr(results_file, "commit", lambda: "abc1234")
    assert results_file.write_result(["a", "b"], None, "sass-x") is None
    path = results_file.write_result(["a", "b"], tmp_path / "new", "sass-x")
    assert path == tmp_path / "new" / f"{results_file.today()}-sass-x-abc1234.txt"
    assert path.read_text() == "a\nb\n"
    assert capsys.readouterr().out == f"a\nb\na\nb\nwrote {path}\n"
