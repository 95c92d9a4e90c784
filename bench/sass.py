"""Static report of what the assembler made of ptxgen's benchmark kernels: registers, spills,
occupancy, and the SASS of the main loop. No GPU needed; it answers "where could the time go"
before a device run, and explains a slow row after one.

    PYTHONPATH=. python3 bench/sass.py                      # bench/gemm.py's candidates, sm_90
    PYTHONPATH=. python3 bench/sass.py --arch sm_80 --out bench/results
    PYTHONPATH=. python3 bench/sass.py --arch sm_90a        # adds the Hopper columns
    PYTHONPATH=. python3 bench/sass.py --arch sm_100a       # tcgen05, next to Triton (sass_blackwell.py)

The SASS comes from `cuobjdump -sass` (on PATH, or from the `nvidia-cuda-cuobjdump` wheel:
`pip install nvidia-cuda-cuobjdump`, a bench-only extra). Without it the SASS columns are blank
and the table keeps the assembler's register and spill report.

Per kernel: registers/thread and spill bytes (from the assembler's log: nvJitLink's, or whole-program
ptxas's for PTX using setmaxnreg when ptxas is on PATH; see bench/sass_check.py for the sm_90a gate), dynamic shared memory,
CTAs and warps per SM (the tightest of the register file, shared memory and the thread limit),
and for the main loop (the backward branch whose body holds the most HMMA/IMMA): the tensor
instructions per iteration, the ldmatrix/scalar shared loads, the cp.async copies, barriers,
and every other instruction per tensor instruction (integer and address overhead the tensor
pipe cannot hide). `mma@bar` is how many tensor instructions the loop issues before its
barrier: with the cross-tile fragment prefetch the barrier sits behind in-flight mma. `total`
counts every instruction of the loop body, i.e. per k-tile. Loops are found from the SASS
control-flow graph (bench/sass_cfg.py: back edges to a dominating block), and the main loop is
the one with the most tensor instructions (HMMA/IMMA/HGMMA), the innermost on a tie.

With --arch sm_90a each row also shows the Hopper machinery (bench/sass_hopper.py): TMA loads and
mbarrier (SYNCS) instructions in the main (consumer) loop, the producer loop's length when the
kernel is warp-specialised, setmaxnreg, and ptxas's C-numbered performance notes (wgmma
serialized, setmaxnreg ignored), listed in full under the table. A second table (SHAPE_ROWS) puts the
same tile on a divisible and an edge problem, where the K remainder shows in the main loop.

cuobjdump needs nvdisasm beside it (`pip install nvidia-cuda-nvdisasm`, bench-only as well).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_cases import Spec, candidates_for  # noqa: E402
from sass_cfg import Instr, busiest_loop, find_loops, parse_functions  # noqa: E402
from sass_hopper import analyse_sass, perf_notes  # noqa: E402
from results_file import commit, today, write_result  # noqa: E402

from ptxgen.schedule.occupancy import SM_LIMITS, occupancy  # noqa: E402  (the limits `ptxgen info` uses)

TENSOR_OPS = ("HMMA", "IMMA", "HGMMA", "QGMMA", "IGMMA")
SHARED_LOADS = ("LDSM", "LDS")
#: Representative problems: a large square one for the tile schedules, a decode-like one for the
#: candidates `candidates_for` adds only for small M (the code does not depend on the sizes).
PROBLEMS = ((8192, 8192, 8192), (64, 4096, 4096))
#: Rows where the shape matters: the same tile on a divisible problem and on one with M, N and K
#: edges (the K remainder costs main-loop instructions), TN f16 -> f32 as in issue 10's
#: comparison with CUTLASS 2.x and Triton; and the 2-stage padded tile that ptxas 13.0 squeezed
#: to 128 registers (NT, f16 -> f16). (label, Gemm keyword arguments, Schedule keyword arguments)
SHAPE_ROWS = (
    ("4096^3 tn, f32 out", dict(m=4096, n=4096, k=4096), dict(block=(128, 128, 32), warps=(2, 2), stages=3)),
    ("4000x4000x4008 tn, f32 out", dict(m=4000, n=4000, k=4008), dict(block=(128, 128, 32), warps=(2, 2), stages=3)),
    ("4000x4000x4008 tn, f32 out, s4", dict(m=4000, n=4000, k=4008), dict(block=(128, 128, 32), warps=(2, 2), stages=4)),
    ("4096^3 nt 64x128x64 s2 pad", dict(m=4096, n=4096, k=4096, out_dtype="f16", a_layout="col",
                                               b_layout="row"),
     dict(block=(64, 128, 64), warps=(2, 2), stages=2, smem_layout="pad")),
)
#: --arch sm_90a: the wgmma kernels ptxgen builds (targets/sm90), not warp-specialised (one CTA per
#: tile, the consumers issue the copies) and warp-specialised + persistent ("ws": the defaults), on
#: a divisible and an edge problem; the mma.sync rows above are sm_90's. The ws rows keep their
#: setmaxnreg split only with whole-program ptxas, which `assemble` picks for PTX using setmaxnreg
#: when ptxas is on PATH (PTXGEN_ASSEMBLER=ptxas forces it for every row, =nvjitlink shows the
#: relocatable build, which drops the split: C7504). bench/sass_check.py is the pass/fail gate.
_SM90 = dict(instruction="wgmma", warp_specialized=False, persistent=False)
HOPPER_ROWS = tuple(
    (f"{label} {bm}x{bn}x{bk} s{st} {wg}wg", dict(m=m, n=n, k=k, a_layout="row", b_layout="col"),
     dict(block=(bm, bn, bk), stages=st, consumers=wg, **_SM90))
    for label, (m, n, k) in (("4096^3 tn", (4096, 4096, 4096)), ("4000x4000x4008", (4000, 4000, 4008)))
    for bm, bn, bk, st, wg in ((64, 128, 64, 4, 1), (128, 128, 64, 3, 1), (64, 256, 64, 3, 1), (128, 128, 64, 4, 2),
                               (128, 256, 64, 3, 2))) + tuple(
    (f"{label} {bm}x{bn}x{bk} s{st} {wg}wg ws", dict(m=m, n=n, k=k, a_layout="row", b_layout="col"),
     dict(block=(bm, bn, bk), stages=st, consumers=wg, instruction="wgmma"))
    for label, (m, n, k) in (("4096^3 tn", (4096, 4096, 4096)), ("4000x4000x4008", (4000, 4000, 4008)))
    for bm, bn, bk, st, wg in ((128, 128, 64, 4, 1), (128, 128, 64, 4, 2), (128, 256, 64, 3, 2)))
@dataclass
class Loop:
    """Instruction mix of one loop body (straight-line SASS between a label and its back edge)."""

    counts: Counter
    tensor_before_barrier: int

    @property
    def tensor(self) -> int:
        return sum(self.counts[o] for o in TENSOR_OPS)

    def of(self, *ops: str) -> int:
        return sum(self.counts[o] for o in ops)

    @property
    def other(self) -> int:
        return sum(self.counts.values()) - self.tensor - self.of(*SHARED_LOADS, "LDGSTS", "BAR", "DEPBAR",
                                                                 "LDGDEPBAR", "NOP", "BRA")


def cuobjdump() -> str | None:
    """cuobjdump from PATH, or from the nvidia-cuda-cuobjdump wheel's bin folder."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia  # namespace package of NVIDIA's CUDA wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for path in Path(root).glob("*/bin/cuobjdump"):
            return str(path)
    return None


def sass_text(cubin: bytes, tool: str) -> str:
    """cuobjdump -sass of a cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=True).stdout


def main_loop(instrs: list[Instr]) -> Loop | None:
    """The innermost loop (from the control-flow graph) that holds tensor instructions, the one with
    the most of them if several: a tile loop around a k loop (with a peeled first k-tile, more
    tensor instructions than the k loop) is not the main loop (sass_cfg.busiest_loop, leaf)."""
    found = busiest_loop(find_loops(instrs), ("mma", "hgmma"), leaf=True)
    if found is None:
        return None
    body = [i.family for i in found.hot]
    first_bar = next((k for k, o in enumerate(body) if o == "BAR"), len(body))
    return Loop(Counter(body), sum(1 for o in body[:first_bar] if o in TENSOR_OPS))


def specs() -> list[tuple[Spec, tuple[int, int, int]]]:
    """Each distinct candidate of bench/gemm.py once, with a problem that lists it."""
    seen: dict[str, tuple[Spec, tuple[int, int, int]]] = {}
    for problem in PROBLEMS:
        for spec in candidates_for(*problem):
            seen.setdefault(spec.name, (spec, problem))
    return list(seen.values())


HOPPER_HEAD = f" | {'tma':>3s} {'syncs':>5s} {'wg':>3s} {'prod':>4s} {'setmaxnreg':>25s} {'notes':>5s}"


def report(arch: str, dtype: str) -> list[str]:
    import ptxgen

    tool = cuobjdump()
    head = (f"{'schedule':34s} {'regs':>4s} {'spill':>5s} {'smem KB':>7s} {'CTA/SM':>6s} {'limit':>9s} "
            f"{'warps':>5s} | {'mma':>4s} {'ldsm':>4s} {'lds':>4s} {'cp.as':>5s} {'bar':>3s} "
            f"{'other':>5s} {'oth/mma':>7s} {'mma@bar':>7s} {'total':>5s}")
    if is_hopper(arch):
        head += HOPPER_HEAD
    lines = [head, "-" * len(head)]
    notes: dict[str, list[str]] = {}
    if is_hopper(arch):
        for label, gemm_kw, sched_kw in HOPPER_ROWS:
            lines.append(row_of(label, ptxgen.Gemm(dtype=dtype, out_dtype=dtype, **gemm_kw),
                                ptxgen.Schedule(**sched_kw), arch, tool, notes))
        return hopper_footer(lines, notes, tool)
    for spec, (m, n, k) in specs():
        g = ptxgen.Gemm(m, n, k, dtype=dtype, out_dtype=dtype)
        lines.append(row_of(spec.name, g, spec.schedule(), arch, tool, notes))
    lines += ["", f"shapes: the same tile divisible and with edges ({dtype} inputs; 'total' = SASS per k-tile)"]
    for label, gemm_kw, sched_kw in SHAPE_ROWS:
        lines.append(row_of(label, ptxgen.Gemm(dtype=dtype, **gemm_kw), ptxgen.Schedule(**sched_kw), arch, tool,
                            notes))
    return lines + (["(no cuobjdump: `pip install nvidia-cuda-cuobjdump` for the main-loop columns)"]
                    if tool is None else [])


def hopper_footer(lines: list[str], notes: dict[str, list[str]], tool: str | None) -> list[str]:
    """The Hopper column legend and ptxas's C75xx notes under the sm_90a table."""
    lines += ["", "Hopper columns: TMA loads, mbarrier (SYNCS) and wgmma fence/wait (WARPGROUP) instructions of "
              "the main loop; 'prod' = SASS of one pass of the producer's TMA loop (- when the main loop "
              "issues its own loads); 'setmaxnreg' = the register budget each loop runs under (the "
              "setmaxnreg that dominates it); 'notes' = ptxas "
              "C75xx performance notes (below)."]
    lines += [f"{label}: {text}" for label, texts in notes.items() for text in texts] or ["no C75xx notes"]
    if tool is None:
        lines.append("(no cuobjdump: `pip install nvidia-cuda-cuobjdump` for the main-loop columns)")
    return lines


def is_hopper(arch: str) -> bool:
    """sm_90a: the target whose kernels use wgmma, TMA and setmaxnreg."""
    return arch == "sm_90a"


def limits_arch(arch: str) -> str:
    """The occupancy limits of an arch-specific target are its family's (sm_90a -> sm_90)."""
    return arch[:-1] if arch.endswith("a") else arch


def row_of(label: str, g, schedule, arch: str, tool: str | None, notes: dict[str, list[str]] | None = None) -> str:
    """One report row: the assembler's resources, occupancy and (with cuobjdump) the main loop;
    for sm_90a also the Hopper columns, with ptxas's performance notes collected in `notes`."""
    import ptxgen

    try:
        kern = ptxgen.compile(g, schedule, arch=arch)
    except ptxgen.ScheduleError as e:
        return f"{label:34s} unsupported: {e}"
    r = kern.resources
    threads = kern.block[0] * kern.block[1] * kern.block[2]
    occ = occupancy(limits_arch(arch), r.registers, kern.smem_bytes + r.shared_bytes, threads)
    ctas, limit = occ.ctas_per_sm, {"shared memory": "smem", "CTA slots": "ctas"}.get(occ.limiter, occ.limiter)
    row = (f"{label:34s} {r.registers:4d} {r.spill_bytes:5d} {kern.smem_bytes / 1024:7.1f} {ctas:6d} "
           f"{limit:>9s} {ctas * threads // 32:5d} |")
    text = sass_text(kern.cubin, tool) if tool else ""
    funcs = parse_functions(text)
    instrs = funcs.get(kern.entry) or next(iter(funcs.values()), [])
    loop = main_loop(instrs) if tool else None
    if loop is not None:
        row += (f" {loop.tensor:4d} {loop.of('LDSM'):4d} {loop.of('LDS'):4d} {loop.of('LDGSTS'):5d} "
                f"{loop.of('BAR'):3d} {loop.other:5d} {loop.other / max(loop.tensor, 1):7.2f} "
                f"{loop.tensor_before_barrier:7d} {sum(loop.counts.values()):5d}")
    if is_hopper(arch):
        row += hopper_columns(label, text, kern.entry, kern.assemble().log, notes if notes is not None else {})
    return row


def hopper_columns(label: str, text: str, entry: str, log: str, notes: dict[str, list[str]]) -> str:
    """The sm_90a columns of one row (see HOPPER_HEAD); the notes' full text goes to `notes`."""
    found = perf_notes(log)
    if found:
        notes[label] = [f"({n.code}) {n.text}" for n in found]
    hs = analyse_sass(text)
    if not hs:
        return f" | {'':>3s} {'':>5s} {'':>3s} {'':>4s} {'':>25s} {len(found):5d}"
    h = next((x for x in hs if x.function == entry), hs[0])
    c = h.consumer.classes if h.consumer else Counter()
    prod = f"{h.producer.total:4d}" if h.producer else f"{'-':>4s}"
    maxnreg = h.registers_per_role
    return (f" | {c['tma_load']:3d} {c['mbarrier']:5d} {c['wg_arrive'] + c['wg_depbar']:3d} {prod} "
            f"{maxnreg:>25s} {len(found):5d}")


def tools() -> str:
    """Which assembler and disassembler made the numbers (both change the SASS)."""
    from ptxgen.runtime.assemble import assembler_version

    tool = cuobjdump()
    dis = "no cuobjdump"
    if tool:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        dis = f"cuobjdump {out[-1].split()[-1] if out else '?'}"
    from ptxgen.runtime.assemble import available_assemblers

    ptxas = available_assemblers()["ptxas"]
    ws = (f" (PTX with setmaxnreg: {ptxas[0]}, whole-program)" if isinstance(ptxas, tuple) and
          not os.environ.get("PTXGEN_ASSEMBLER") else "")
    return f"assembler {assembler_version()}{ws}, {dis}"


#: Rows the side-by-side assembler table adds to HOPPER_ROWS: issue 21's fp8 target and the
#: chooser's 8192^3 bf16 default (label, Gemm keyword arguments, Schedule keyword arguments or None).
ASSEMBLER_EXTRA_ROWS = (
    # fast_accum: 128x256's two promoted fp8 accumulators would not fit a consumer (targets/sm90/promotion.py)
    ("4096^3 e4m3->bf16 128x256x128 s3 2wg ws", dict(m=4096, n=4096, k=4096, dtype="e4m3", out_dtype="bf16",
                                                    a_layout="row", b_layout="col", fast_accum=True),
     dict(block=(128, 256, 128), stages=3, consumers=2, instruction="wgmma")),
    # the default promoted fp8 kernel (one add per accumulator register per 128 of K: the promotion's cost)
    ("4096^3 e4m3->bf16 128x192x128 s4 2wg ws promoted", dict(m=4096, n=4096, k=4096, dtype="e4m3",
                                                             out_dtype="bf16", a_layout="row", b_layout="col"),
     dict(block=(128, 192, 128), stages=4, consumers=2, instruction="wgmma")),
    ("8192^3 bf16 chooser default", dict(m=8192, n=8192, k=8192, dtype="bf16", out_dtype="bf16", a_layout="row",
                                        b_layout="col"), None),
)


def assembler_table(dtype: str, ptxas_paths: list[str]) -> list[str]:
    """The warp-specialised rows (and ASSEMBLER_EXTRA_ROWS) under each assembler, side by side."""
    import ptxgen
    from sass_assemblers import assemblers, side_by_side

    rows = []
    for label, gemm_kw, sched_kw in HOPPER_ROWS:
        if label.endswith(" ws"):
            g = ptxgen.Gemm(dtype=dtype, out_dtype=dtype, **gemm_kw)
            rows.append((f"{dtype} {label}", ptxgen.compile(g, ptxgen.Schedule(**sched_kw), arch="sm_90a")))
    for label, gemm_kw, sched_kw in ASSEMBLER_EXTRA_ROWS:
        g = ptxgen.Gemm(**gemm_kw)
        rows.append((label, ptxgen.compile(g, ptxgen.Schedule(**sched_kw), arch="sm_90a") if sched_kw
                     else ptxgen.compile(g, arch="sm_90a")))
    return side_by_side(rows, "sm_90a", assemblers(ptxas_paths), cuobjdump())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90", choices=sorted([*SM_LIMITS, "sm_90a", "sm_100a"]))
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16"))
    ap.add_argument("--out", type=Path, default=None, help="folder for <date>-sass-<arch>-<commit>.txt")
    ap.add_argument("--ptxas", action="append", default=[], metavar="PATH",
                    help="sm_90a: also assemble every row with this ptxas (repeatable) and with nvJitLink, "
                         "and list each one's consumer loop side by side (bench/sass_assemblers.py)")
    args = ap.parse_args(argv)
    if args.arch == "sm_100a":  # tcgen05 kernels next to Triton's, under each ptxas (bench/sass_blackwell.py)
        import sass_blackwell as bw

        paths = bw.ptxas_paths(args.ptxas)
        lines = bw.header("sass.py", paths, list(argv if argv is not None else sys.argv[1:])) + bw.report(
            paths, cuobjdump())
        write_result(lines, args.out, f"sass-{args.arch}")
        return 0
    lines = [f"# bench/sass.py --arch {args.arch} --dtype {args.dtype} at {commit()} "
             f"({today()}); {tools()}", *report(args.arch, args.dtype)]
    if is_hopper(args.arch) and args.ptxas:
        lines += assembler_table(args.dtype, args.ptxas)
    write_result(lines, args.out, f"sass-{args.arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
