"""Structural checks of the emitted PTX: instruction mix per k-tile, groups, barriers, readability.

Expected counts are worked out here from the schedule's numbers (block, warps, stages, dtype
sizes) and the documented rules, never from the geometry helpers the emitter itself uses.
"""
from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings, strategies as st

import ptxgen
from ptxgen import Gemm, Schedule, ScheduleError


def body(ptx: str) -> list[str]:
    """Instruction lines (comments stripped), with labels kept as 'LABEL:'."""
    out = []
    for line in ptx.split("{", 1)[1].splitlines():
        line = line.split("//")[0].strip()
        if line and not line.startswith(".reg") and line != "}":
            out.append(line)
    return out


def opcode(line: str) -> str:
    words = line.split()
    return words[1] if words[0].startswith("@") else words[0]


def sections(ptx: str):
    lines = body(ptx)
    start = lines.index("$L_main_loop:")
    end = next(i for i in range(start, len(lines)) if opcode(lines[i]).startswith("bra"))
    return lines[:start], lines[start + 1:end + 1], lines[end + 1:]


def count(lines, prefix):
    return sum(opcode(l).startswith(prefix) for l in lines)


def threads(s: Schedule) -> int:
    return 32 * s.warps[0] * s.warps[1]


def expected_mix(g: Gemm, s: Schedule):
    """Per k-tile: each 16-byte cp.async.cg moves 8 f16/bf16 elements of the BMxBK and BKxBN tiles,
    split evenly over the threads; per k-step of 16, an x4 ldmatrix per 16-row A tile and per
    pair of 8-column B tiles, and one mma per 16x8 output tile."""
    mi, ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8
    steps = s.bk // 16
    return {"cp.async.cg": (s.bm * s.bk + s.bk * s.bn) * 2 // 16 // threads(s),
            "ldmatrix": steps * (mi + (ni + 1) // 2), "mma.sync": steps * mi * ni}


def expect_prefetch(s: Schedule) -> bool:
    """The cross-k-tile prefetch (README): double-buffered fragments, a pipelined loop, 2 to 4
    k-steps per k-tile, and 24 registers to spare over the estimate (4 mi ni accumulators +
    2 (4 mi + 2 ni) fragments + 24) under min(255, 65536 / threads rounded down to 8)."""
    mi, ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8
    estimate = 4 * mi * ni + 2 * (4 * mi + 2 * ni) + 24
    limit = min(255, 65536 // threads(s) // 8 * 8)
    return s.frag_double_buffer and s.stages > 1 and 2 <= s.bk // 16 <= 4 and estimate + 24 <= limit


@st.composite
def legal(draw):
    """Labelled draws of schedules from the issue's sweep space, kept only if the verifier agrees."""
    bm = draw(st.sampled_from([64, 128, 256]), label="BM")
    bn = draw(st.sampled_from([64, 128, 256]), label="BN")
    bk = draw(st.sampled_from([32, 64]), label="BK")
    wm = draw(st.sampled_from([1, 2, 4]), label="WM")
    wn = draw(st.sampled_from([1, 2]), label="WN")
    g = Gemm(512, 512, 256, dtype=draw(st.sampled_from(["f16", "bf16"]), label="dtype"),
             out_dtype=draw(st.sampled_from(["f32", "f16", "bf16"]), label="out"),
             a_layout=draw(st.sampled_from(["row", "col"]), label="a_layout"),
             b_layout=draw(st.sampled_from(["row", "col"]), label="b_layout"))
    s = Schedule(block=(bm, bn, bk), warps=(wm, wn), stages=draw(st.integers(1, 5), label="stages"),
                 smem_layout=draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                 raster=draw(st.sampled_from(["row", "grouped"]), label="raster"),
                 frag_double_buffer=draw(st.booleans(), label="dbuf"),
                 epilogue_via_smem=draw(st.booleans(), label="staged epilogue"))
    try:
        ptxgen.verify(g, s)
    except ScheduleError:
        from hypothesis import assume
        assume(False)
    return g, s


@settings(max_examples=60, deadline=None)
@given(legal())
def test_main_loop_instruction_mix_groups_and_barriers(case):
    g, s = case
    ptx = ptxgen.compile(g, s).ptx
    pro, loop, epi = sections(ptx)
    mix = expected_mix(g, s)
    for family, n in mix.items():
        assert count(loop, family) == n, (family, count(loop, family), n)
    assert count(pro, "mma.sync") == 0 and count(epi, "mma.sync") == 0
    waits = [l for l in loop if opcode(l) == "cp.async.wait_group"]
    bars = [i for i, l in enumerate(loop) if opcode(l) == "bar.sync"]
    copies = [i for i, l in enumerate(loop) if opcode(l).startswith("cp.async.cg")]
    mmas = [i for i, l in enumerate(loop) if opcode(l).startswith("mma.sync")]
    if s.stages == 1:
        assert waits == ["cp.async.wait_group 0;"]
        assert len(bars) == 2 and bars[0] > max(copies) and bars[1] > max(mmas)
        assert count(pro, "cp.async") == 0
    elif expect_prefetch(s):
        # copies of k-tile i+S-1 open the loop; the wait and barrier for k-tile i+1 come after k-tile
        # i's second-last k-step, and k-tile i+1's first fragments load under the last k-step's mma
        assert waits == [f"cp.async.wait_group {s.stages - 2};"] and len(bars) == 1
        assert loop.index(waits[0]) == bars[0] - 1
        assert max(copies) < min(mmas) and max(copies) < bars[0]
        per_step = mix["mma.sync"] // (s.bk // 16)
        assert sum(i > bars[0] for i in mmas) == per_step
        lds = [i for i, l in enumerate(loop) if opcode(l).startswith("ldmatrix")]
        assert sum(i > bars[0] for i in lds) == mix["ldmatrix"] // (s.bk // 16)
        pro_bars = [l for l in pro if opcode(l) == "bar.sync"]
        assert [l for l in pro if opcode(l) == "cp.async.wait_group"] == waits and len(pro_bars) == 1
        assert count(pro, "ldmatrix") == mix["ldmatrix"] // (s.bk // 16), "k-tile 0's first fragments"
    else:
        assert waits == [f"cp.async.wait_group {s.stages - 2};"]
        assert loop.index(waits[0]) == 0 and bars == [1], "wait_group then bar.sync open the loop"
        assert min(copies) > bars[0] and max(copies) < min(mmas)
    if s.stages > 1:
        assert all(l.startswith("@") for l in loop if opcode(l).startswith("cp.async.cg")), "tile i+S-1 guarded"
        assert count(loop, "cp.async.commit_group") == 1
        assert count(pro, "cp.async.commit_group") == s.stages - 1
        assert count(pro, "cp.async.cg") == (s.stages - 1) * mix["cp.async.cg"]
        assert [l for l in epi if opcode(l) == "cp.async.wait_group"] == ["cp.async.wait_group 0;"]
    stores = count(epi, "st.global")
    mi, ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8
    out_bytes = 4 if g.out_dtype == "f32" else 2
    if not s.epilogue_via_smem:  # one store per accumulator pair
        assert stores == mi * ni * 2
        assert count(epi, "cvt.rn") == (0 if g.out_dtype == "f32" else mi * ni * 2)
        assert count(epi, "st.shared") == 0
    elif g.out_dtype == "f32":  # f32 pairs into the staging tile, then one 16-byte store per chunk of BMxBN
        assert count(epi, "st.shared.v2.f32") == mi * ni * 2
        assert stores == s.bm * s.bn * out_bytes // 16 // threads(s)
        assert all(re.search(r"st\.global\.v(4|2)\.(f32|b32)", l) or "v4" in l
                   for l in epi if opcode(l).startswith("st.global"))
        assert count(epi, "bar.sync") == 2
    else:  # 16-bit outputs staged as packed pairs after the math; each 16 bytes copied out as they are
        assert count(epi, "st.shared.b32") == mi * ni * 2 and count(epi, "cvt.rn") == mi * ni * 2
        assert stores == s.bm * s.bn * 2 // 16 // threads(s)
        assert count(epi, "ld.shared.v4.b32") == stores and count(epi, "st.global.v4.b32") == stores
        assert count(epi, "bar.sync") == 2


def test_staged_epilogue_holds_the_output_dtype():
    """128x128x32, 2x2 warps, 3 stages: the A/B stages are 3 x (128x32 + 128x32) x 2 B = 48 KB.
    An f32 staging tile is 128 rows x (128 x 4 + 32) B = 68 KB; an f16 one 128 x (128 x 2 + 16) B
    = 34 KB (17 16-byte units per row: an odd count), so f16 output needs only the 48 KB of stages,
    as CUTLASS's kernel for the same tile; s8 output: 128 x (128 + 16) B."""
    s = Schedule(block=(128, 128, 32), warps=(2, 2), stages=3)
    stages = 3 * (128 * 32 + 128 * 32) * 2
    for out, staged in [("f32", 128 * (128 * 4 + 32)), ("f16", 128 * (128 * 2 + 16)),
                        ("bf16", 128 * (128 * 2 + 16))]:
        k = ptxgen.compile(Gemm(4096, 4096, 4096, out_dtype=out), s)
        assert k.smem_bytes == max(stages, staged), out
        assert f"{k.smem_bytes} B dynamic shared memory" in k.ptx
    assert (stages, 128 * (128 * 2 + 16)) == (49152, 34816)
    from ptxgen.schedule.geometry import staging_layout

    k8 = ptxgen.compile(Gemm(4096, 4096, 4096, dtype="s8", out_dtype="s8"), Schedule(block=(128, 128, 64)))
    assert k8.smem_plan.offsets and staging_layout(k8.gemm, k8.schedule).bytes == 128 * (128 + 16)
    assert "staged in s8" in k8.ptx


def test_fragment_double_buffer_prefetches_next_k_step():
    """On: each k-step's fragments load before the previous k-step's mma, k-tile i+1's first ones
    included (into the registers k-step 0 reads, after the barrier). Off: load, then mma."""
    g, s = Gemm(512, 512, 256), Schedule(block=(128, 128, 32), frag_double_buffer=True)
    k = ptxgen.compile(g, s)
    _, loop, _ = sections(k.ptx)
    ops = [opcode(l).split(".")[0] for l in loop]
    n_ld = expected_mix(g, s)["ldmatrix"]  # two k-steps
    first_mma, bar = ops.index("mma"), ops.index("bar")
    assert ops[:first_mma].count("ldmatrix") == n_ld // 2 and first_mma < bar, "k-step 1 loads under k-step 0"
    after = ops[bar:]
    assert after.count("ldmatrix") == n_ld // 2 and after.index("ldmatrix") < after.index("mma")
    mmas = [ins for ins in k.function.instructions() if ins.op.startswith("mma")]
    lds = [ins for ins in k.function.instructions() if ins.op.startswith("ldmatrix")]
    step0_a = {r for ins in mmas[:32] for r in ins.operands[1].regs}
    carried = {r for ins in lds[-n_ld // 2:] for r in ins.operands[0].regs}
    assert step0_a <= carried, "the next k-tile's loads write the registers k-step 0 reads"
    s2 = Schedule(block=(128, 128, 32), frag_double_buffer=False)
    _, loop2, _ = sections(ptxgen.compile(g, s2).ptx)
    ops2 = [opcode(l).split(".")[0] for l in loop2]
    assert ops2[:ops2.index("mma")].count("ldmatrix") == n_ld // 2 and ops2.index("bar") < ops2.index("ldmatrix")


def test_readable_ptx():
    k = ptxgen.compile(Gemm(4096, 4096, 4096), Schedule(block=(128, 128, 32)), "sm_90")
    text = k.ptx
    assert re.search(r"^\.version 7\.8\n\.target sm_90\n\.address_size 64$", text, re.M)
    assert "// block 128x128x32, warps 2x2 (warp tile 64x64)" in text
    for banner in ("Setup:", "Prologue:", "Main loop:", "Epilogue:"):
        assert re.search(rf"^\s+// {banner}", text, re.M), banner
    assert "k-tile i+2 -> stage (i+2) % 3: cp.async A" in text
    assert "$L_main_loop:" in text
    assert f".visible .entry {k.entry}(" in text and ".maxntid 128, 1, 1" in text
    assert ".extern .shared .align 1024 .b8 smem[];" in text
    params = re.findall(r"\.param \.(u64|u32) (\w+)", text)
    assert [n for _, n in params] == ["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc"]


def test_register_declarations_come_from_the_allocator():
    k = ptxgen.compile(Gemm(512, 512, 256), Schedule(block=(128, 128, 32)))
    for cls, prefix in (("b32", "%r"), ("b64", "%rd"), ("f32", "%f"), ("pred", "%p")):
        n = k.allocation.counts[cls]
        assert f"{prefix}<{n}>;" in k.ptx
        used = {int(x) for x in re.findall(rf"{re.escape(prefix)}(\d+)\b", k.ptx.split("{", 1)[1])}
        assert max(used) == n - 1, cls
    assert k.peak_live["f32"] == 128  # the 64x64 warp tile's accumulators


def test_pack_order_puts_odd_column_high():
    k = ptxgen.compile(Gemm(512, 512, 256, out_dtype="f16"), Schedule(block=(128, 128, 32), epilogue_via_smem=False))
    ins = [ins for ins in k.function.instructions() if ins.op.startswith("cvt.rn.f16x2")]
    acc0 = next(ins for ins in k.function.instructions() if ins.op.startswith("mma")).operands[0].regs
    first = ins[0]
    assert first.operands[1] == acc0[1] and first.operands[2] == acc0[0]


# -- the code's own structure (issue 19: one backend per GPU target) ----------------------------

ROOT = Path(__file__).resolve().parents[2]


def _counter():
    """bench/structure_counts.py, loaded from its file (bench/ is not a package)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("structure_counts", ROOT / "bench" / "structure_counts.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _structure_counts():
    """The counts for this checkout (structure_counts.py's docstring defines each one)."""
    return _counter().measure(ROOT)


def test_layers_point_one_way_and_targets_sit_behind_the_registry():
    """No import circles (function-local imports count), nothing in schedule/ imports tune/,
    targets/, compile or runtime/, at most 5 architecture branches outside targets/ and the
    simulator, no attribute of a lowering or context object written outside its constructor
    (values flow by return), and at most 6 modules directly under ptxgen/."""
    c = _structure_counts()
    assert c.lowering_attr_writes == 0, c.lowering_attr_write_sites
    assert c.cycles == 0, c.cycle_modules
    assert c.schedule_upward == 0 and c.schedule_outside == 0, c.schedule_upward_modules
    assert c.arch_branches <= 5, c.arch_branch_files
    assert c.top_level_modules <= 6, c.top_level_names


def test_the_counter_sees_what_it_counts(tmp_path):
    """The counts are not vacuous: a planted cycle, an upward import, an arch branch, a write onto
    a lowering object and a seventh top-level module are each found."""
    import textwrap

    pkg = tmp_path / "ptxgen"
    for d in ("", "schedule", "emit"):
        (pkg / d).mkdir(parents=True, exist_ok=True)
        (pkg / d / "__init__.py").write_text("")
    files = {
        "a.py": "def f():\n    from . import b\n",
        "b.py": "from . import a\n",
        "schedule/s.py": "def g():\n    from ..compile import x\n",
        "compile.py": "x = 1\ndef h(s):\n    if s.hopper:\n        return 1\n",
        "emit/l.py": textwrap.dedent("""
            class FooLowering:
                def __init__(self):
                    self.ok = 1
                def setup(self):
                    self.late = 2
            def helper(lw):
                lw.tile = 3
            def by_annotation(state: "Sm80Context", n):
                state.z = n
                setattr(ctx, "smem", n)
            def by_return(state: "Sm80Context"):
                return replace(state, z=1)
            """),
        "c.py": "", "d.py": "", "e.py": "", "f.py": "",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    c = _counter().measure(tmp_path)
    assert c.cycle_modules == [["ptxgen.a", "ptxgen.b"]]
    assert c.schedule_upward_modules == ["ptxgen.schedule.s"]
    assert c.arch_branch_files == {"ptxgen/compile.py": 1}
    assert c.lowering_attr_write_sites == ["ptxgen/emit/l.py:6", "ptxgen/emit/l.py:8", "ptxgen/emit/l.py:10",
                                           "ptxgen/emit/l.py:11"]
    assert c.top_level_modules == 7
