"""Mutation score of the CPU test suite: plant real bugs, one at a time, and see which tests notice.

    python bench/mutants.py [--only NAME ...] [--timeout 240] [--list]

Each mutant is a textual patch (one exact string replaced by another, the string occurring exactly
once) to a file of ptxgen, the kind of slip a developer makes: an off-by-one in a guard, a wrong
wait_group depth, a dropped counter reset, a missed race-detector case, a relaxed verifier limit,
a swapped layout table entry. The tracked files are copied to a scratch directory; for every
mutant the file is patched there, the smallest test selection that should catch it runs (pytest
-x, with a timeout), and the file is restored. A mutant is killed when a test fails (or the run
times out), survived when the selection passes. The report lists each with its first failing test.
Mutants run sequentially, so the run stays within ~20 minutes on 2 shared cores.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    old: str  # occurs exactly once in the file
    new: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, -k expressions
    why: str  # the bug, in words


def m(name: str, path: str, old: str, new: str, tests: str, why: str) -> Mutant:
    return Mutant(name, path, old, new, tuple(tests.split()), why)


GEMM = "tests/targets/sm80/test_gemm_sim.py"
MUTANTS: list[Mutant] = [
    # ---- emit ----------------------------------------------------------------------------
    m("smem chunk stride", "ptxgen/emit/swizzle.py", "return row * pitch + (chunk << 4)",
      "return row * pitch + (chunk << 3)", GEMM, "16-byte chunks placed 8 bytes apart in shared memory"),
    m("wait_group one too shallow", "ptxgen/emit/sm80/mainloop.py",
      'wait_group(b, S - 2, comment=f"k-tile i has landed', 'wait_group(b, S - 1, comment=f"k-tile i has landed',
      GEMM, "the main loop waits for one group too few: reads a stage still in flight"),
    m("split-K counter not reset", "ptxgen/emit/splitk.py",
      'b.emit("st.global.u32", Addr(counter), Imm("0"), guard=t0, comment="reset the counter for the next launch")',
      'b.comment("counter reset dropped")', "tests/targets/sm80/test_relaunch.py",
      "the last split leaves its tile counter at S: the next launch never reduces"),
    m("split-K last-arrival off by one", "ptxgen/emit/splitk.py",
      "not_last = lw.pred(\"setp.ne.u32\", seen, Imm(str(self.S - 1)))",
      "not_last = lw.pred(\"setp.ne.u32\", seen, Imm(str(self.S - 2)))", "tests/targets/sm80/test_split_k.py",
      "the second-last split reduces before the last partial is published"),
    m("split-K reduce skips a split", "ptxgen/emit/splitk.py",
      'again = lw.pred("setp.lt.u32", s, Imm(str(self.S)))', 'again = lw.pred("setp.lt.u32", s, Imm(str(self.S - 1)))',
      "tests/targets/sm80/test_split_k.py", "the reduction loop sums S-1 partials"),
    m("beta reads alpha", "ptxgen/emit/epilogue/math.py", 'v = self.f("fma.rn.f32", old, f32(e.beta), v)',
      'v = self.f("fma.rn.f32", old, f32(e.alpha), v)', "tests/targets/sm80/test_epilogue.py", "C scaled by alpha, not beta"),
    m("GELU cubic coefficient halved", "ptxgen/emit/epilogue/math.py", "f32(2 * SQRT_2_OVER_PI * GELU_CUBIC)",
      "f32(SQRT_2_OVER_PI * GELU_CUBIC)", "tests/targets/sm80/test_epilogue.py", "GELU's 0.044715 x^3 term halved"),
    m("ReLU as min", "ptxgen/emit/epilogue/math.py", 'v = self.f("max.f32", v, f32(0.0))',
      'v = self.f("min.f32", v, f32(0.0))', "tests/targets/sm80/test_epilogue.py", "relu keeps the negative part"),
    m("f16 pack order", "ptxgen/emit/epilogue/math.py", "self.b.emit(CVT_PACK[dt], packed, values[1], values[0], ndefs=1)",
      "self.b.emit(CVT_PACK[dt], packed, values[0], values[1], ndefs=1)", "tests/targets/sm80/test_structure.py " + GEMM,
      "cvt.rn.f16x2 puts the even column in the high half: adjacent columns swapped"),
    m("row guard <= M", "ptxgen/emit/edges.py",
      'rows[dr] = lw.pred("setp.lt.u32", lw.u32("add.u32", row, Imm(str(dr))), lw.dim("M"))',
      'rows[dr] = lw.pred("setp.le.u32", lw.u32("add.u32", row, Imm(str(dr))), lw.dim("M"))', "tests/targets/sm80/test_edges.py",
      "edge tiles store row M (one past the end)"),
    m("K remainder guard >", "ptxgen/emit/sm80/load_edges.py", 'outside[lim] = lw.pred("setp.ge.s32", lim, k_rem)',
      'outside[lim] = lw.pred("setp.gt.s32", lim, k_rem)', "tests/targets/sm80/test_edges.py",
      "the copy that starts exactly at K's end is loaded, not zero-filled (ignore-src predicate)"),
    m("ldmatrix without .trans", "ptxgen/emit/sm80/fragments.py",
      "regs = ldmatrix(self.b, ld.count, self._addr(plan.addr, ld.site, bases), ld.trans, into=into)",
      "regs = ldmatrix(self.b, ld.count, self._addr(plan.addr, ld.site, bases), False, into=into)",
      GEMM, "M/N-contiguous 16-bit tiles loaded without transposing"),
    m("mma accumulates from zero", "ptxgen/emit/sm80/isa.py", "b.emit(op, Vec(acc), Vec(a), Vec(bfrag), Vec(acc), ndefs=1)",
      "b.emit(op, Vec(acc), Vec(a), Vec(bfrag), Vec(a[:len(acc)] if len(a) >= len(acc) else acc), ndefs=1)", GEMM,
      "mma adds the wrong registers as C"),
    m("Stream-K flag relaxed", "ptxgen/emit/streamk.py", 'b.emit("st.release.gpu.global.u32"',
      'b.emit("st.relaxed.gpu.global.u32"', "tests/targets/sm80/test_relaunch.py::test_relaunch_resets_counters_and_is_correct",
      "the partial tile's flag is published without release: the owner may read a stale partial"),
    m("quantise truncates", "ptxgen/emit/quantize.py", '"s8": ByteFamily("cvt.rni.sat.s8.f32"',
      '"s8": ByteFamily("cvt.rzi.sat.s8.f32"', "tests/targets/sm80/test_int8_scale.py", "s8 outputs rounded toward zero"),
    # ---- regalloc ------------------------------------------------------------------------
    m("touching intervals share a register", "ptxgen/regalloc/allocate.py",
      "while active and active[0][0] < start:", "while active and active[0][0] <= start:",
      "tests/regalloc", "a register is reused by a value defined where the old one is last read"),
    m("guarded def kills", "ptxgen/regalloc/liveness.py", "            use[pos] = u | d\n",
      "            use[pos] = u\n            kill[pos] = d\n", "tests/regalloc",
      "a predicated write is treated as a full definition: the old value dies too early"),
    m("liveness ignores fall-through successor", "ptxgen/regalloc/liveness.py",
      "            for s in blocks[b].succs:", "            for s in blocks[b].succs[:1]:", "tests/regalloc",
      "live-out takes only the branch target of a guarded branch"),
    m("guarded branch does not fall through", "ptxgen/regalloc/cfg.py",
      "succs = (taken,) + tuple(f for f in fall if f != taken) if last.guard is not None else (taken,)",
      "succs = (taken,)", "tests/regalloc", "the CFG drops a predicated branch's fall-through edge"),
    m("shared planner overlaps live buffers", "ptxgen/regalloc/smem.py", "            if offset + buf.size <= lo:",
      "            if offset < lo:", "tests/regalloc/test_regalloc_smem.py",
      "a buffer is placed in a gap too small for it"),
    # ---- sim -----------------------------------------------------------------------------
    m("race: several readers in one instruction", "ptxgen/sim/memory.py", "many = other_before | several_now",
      "many = other_before", "tests/sim/test_sim_hazards.py", "the detector forgets all but one reader of an instruction"),
    m("race: readers across instructions", "ptxgen/sim/memory.py", "many = other_before | several_now",
      "many = several_now", "tests/sim/test_sim_hazards.py", "the detector forgets earlier readers since the barrier"),
    m("race: read after write unchecked", "ptxgen/sim/memory.py",
      "conflict = (self.w_epoch[idx] == epoch) & (wt != tid) & (wt != NOBODY)",
      "conflict = (self.w_epoch[idx] == epoch) & (wt != tid) & (wt == NOBODY)", "tests/sim/test_sim_hazards.py",
      "reads of bytes another thread wrote since the barrier pass"),
    m("128-bit accesses in half-warp phases", "ptxgen/sim/ops_mem.py",
      "return 32 if width <= 4 else (16 if width == 8 else 8)", "return 32 if width <= 4 else 16",
      "tests/sim/test_sim_hazards.py", "v4 shared accesses charged as 16-lane phases: conflicts under-counted"),
    m("ldmatrix .trans table", "ptxgen/sim/layouts.py", "out[:, h, 0], out[:, h, 1] = 2 * IN_GROUP + h, GROUP",
      "out[:, h, 0], out[:, h, 1] = GROUP, 2 * IN_GROUP + h", "tests/sim/test_sim_layouts.py",
      "ldmatrix.trans simulated without the transpose"),
    m("tf32 A fragment table", "ptxgen/sim/layouts.py", "(g + 8 * (i & 1), t + 4 * (i >> 1))",
      "(g + 8 * (i >> 1), t + 4 * (i & 1))", "tests/sim/test_sim_layouts.py", "m16n8k8 tf32 A registers 1 and 2 swapped"),
    m("cvt.rni floors", "ptxgen/sim/ops_cvt.py", '"rni": np.rint', '"rni": np.floor', "tests/sim/test_sim_math.py",
      "round-to-nearest-int simulated as floor"),
    m("atom.inc wraps late", "ptxgen/sim/ops_atomic.py",
      "return lambda old, b, c: np.where(old >= b, old.dtype.type(0), old + old.dtype.type(1))",
      "return lambda old, b, c: np.where(old > b, old.dtype.type(0), old + old.dtype.type(1))",
      "tests/sim/test_sim_atomics.py", "atom.inc wraps to 0 one step after reaching b"),
    m("cp.async zero-fill dropped", "ptxgen/sim/ops_async.py", "data = np.zeros((len(tids), cp_size), dtype=np.uint8)",
      "data = np.full((len(tids), cp_size), 0x3C, dtype=np.uint8)", "tests/sim/test_sim_async.py",
      "bytes past src-size are not zero-filled"),
    m("barrier opens no new epoch", "ptxgen/sim/ops_ctrl.py",
      'raise Fault("divergence", "barrier reached by only some of the active threads")\n        cta.epoch += 1',
      'raise Fault("divergence", "barrier reached by only some of the active threads")\n        cta.epoch += 0',
      "tests/sim/test_sim_hazards.py", "bar.sync does not order shared accesses: every exchange is a race"),
    # ---- schedule ------------------------------------------------------------------------
    m("smem limit relaxed 1.25x", "ptxgen/schedule/verify.py", "if need > t.smem_per_block:",
      "if need > t.smem_per_block * 1.25:", "tests/schedule/test_verifier_bounds.py", "shared memory over the limit accepted"),
    m("threads limit off by one", "ptxgen/schedule/verify.py", "if s.threads > MAX_THREADS:",
      "if s.threads >= MAX_THREADS:", "tests/schedule/test_verifier_bounds.py", "1024-thread CTAs rejected"),
    m("register cap dropped", "ptxgen/schedule/geometry.py",
      "return min(max_per_thread, regs_per_sm // s.threads // 8 * 8)", "return regs_per_sm // s.threads // 8 * 8",
      "tests/schedule/test_verifier_bounds.py", "more than 255 registers per thread allowed"),
    m("grid y limit off by one", "ptxgen/schedule/verify.py", 'if s.raster == "row" and gy > MAX_GRID_YZ:',
      'if s.raster == "row" and gy > MAX_GRID_YZ + 1:', "tests/schedule/test_verifier_bounds.py",
      "65536 CTA rows accepted"),
    m("empty split accepted", "ptxgen/schedule/verify.py", "if (s.split_k - 1) * per >= kt:",
      "if (s.split_k - 1) * per > kt:", "tests/schedule/test_verifier_bounds.py",
      "a split with no k-tile accepted (its CTA never publishes a partial)"),
    m("smem count ignores the staging tile", "ptxgen/schedule/geometry.py", "    return max(tiles, epilogue)",
      "    return tiles", "tests/schedule/test_verifier_bounds.py",
      "a staged C tile larger than the stages overflows the shared window"),
    # ---- runtime -------------------------------------------------------------------------
    m("operand strides swapped", "ptxgen/runtime/operands.py", "((self.ld, 1) if self.layout == \"row\" else (1, self.ld))",
      "((1, self.ld) if self.layout == \"row\" else (self.ld, 1))", "tests/runtime/test_runtime_operands.py",
      "row-major operands read as column-major"),
    m("cache key ignores arch", "ptxgen/runtime/cache.py", "for part in (ptx, arch, entry, assembler_id):",
      "for part in (ptx, entry, assembler_id):", "tests/runtime/test_runtime_cache.py",
      "a cubin for sm_80 reused for sm_90"),
    m("params packed big-endian", "ptxgen/runtime/params.py", 'dtype=np.dtype(f"<u{dt.itemsize}"))',
      'dtype=np.dtype(f">u{dt.itemsize}"))', "tests/runtime/test_runtime_driver.py",
      "integer parameters packed in the wrong byte order"),
    m("param range off by one", "ptxgen/runtime/params.py", "if not lo <= v <= hi:", "if not lo <= v <= hi + 1:",
      "tests/runtime/test_runtime_driver.py", "2^32 accepted for a .u32 parameter (wraps to 0)"),
    m("launch grid x/y swapped", "ptxgen/runtime/launch.py",
      'drv._call("cuLaunchKernel", fn.handle, grid[0], grid[1], grid[2]',
      'drv._call("cuLaunchKernel", fn.handle, grid[1], grid[0], grid[2]', "tests/runtime/test_runtime_launch_fake.py",
      "cuLaunchKernel gets grid y as x"),
]


#: A root conftest for the scratch copy: a Hypothesis profile without the shrink phase (a
#: mutant's first failure is all this needs; shrinking it can take minutes) and without the
#: example database (each mutant starts clean).
CONFTEST = """from hypothesis import Phase, settings
settings.register_profile("mutants", phases=[Phase.explicit, Phase.generate], database=None)
"""


def scratch_copy() -> Path:
    """The tracked (and untracked, not ignored) files of the repository in a fresh directory."""
    dest = Path(tempfile.mkdtemp(prefix="ptxgen-mutants-"))
    (dest / "conftest.py").write_text(CONFTEST)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    return dest


FAILED = re.compile(r"^(FAILED|ERROR) (.+?)(?: - |$)", re.M)


def run_one(mu: Mutant, work: Path, timeout: int) -> tuple[str, str, float]:
    """('killed' | 'survived' | 'timeout' | 'not applied', first failing test or detail, seconds)."""
    target = work / mu.path
    original = target.read_text()
    if original.count(mu.old) != 1:
        return "not applied", f"the patch text occurs {original.count(mu.old)} times", 0.0
    target.write_text(original.replace(mu.old, mu.new))
    env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", "-W", "ignore",
           "--hypothesis-profile=mutants", *mu.tests]
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
        hit = FAILED.search(out)
        if proc.returncode == 0:
            status, detail = "survived", ""
        elif hit:
            status, detail = "killed", hit.group(2)
        else:
            status, detail = "killed", f"pytest exit {proc.returncode}: {out.strip().splitlines()[-1][:100]}"
    except subprocess.TimeoutExpired:
        status, detail = "timeout", f"no result in {timeout} s (counted as killed)"
    finally:
        target.write_text(original)
    return status, detail, time.time() - start


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="run only mutants whose name contains one of these")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per mutant's test run")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = ap.parse_args()
    chosen = [mu for mu in MUTANTS if not args.only or any(o in mu.name for o in args.only)]
    if args.list:
        for mu in chosen:
            print(f"{mu.name:<44} {mu.path:<36} {' '.join(mu.tests)}")
        return 0
    work = scratch_copy()
    print(f"mutants: {len(chosen)} on commit {commit()}, {platform.machine()} ({os.cpu_count()} cores), "
          f"timeout {args.timeout} s each, scratch {work}")
    print(f"{'status':<11} {'seconds':>7}  {'mutant':<44} first failing test / detail")
    counts: dict[str, int] = {}
    t0 = time.time()
    try:
        for mu in chosen:
            status, detail, secs = run_one(mu, work, args.timeout)
            counts[status] = counts.get(status, 0) + 1
            print(f"{status:<11} {secs:7.1f}  {mu.name:<44} {detail}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    applied = len(chosen) - counts.get("not applied", 0)
    print(f"killed {killed} of {applied} ({100 * killed / max(applied, 1):.0f}%), survived "
          f"{counts.get('survived', 0)}, not applied {counts.get('not applied', 0)}; {time.time() - t0:.0f} s")
    return 0 if counts.get("not applied", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
