"""Issue 13's static gate for sm_90a: whole-program `ptxas -v` on every Hopper bench candidate reports
0 spills and none of C7515 (wgmma serialized), C7508 (setmaxnreg ignored: no register cap) or C7504
(setmaxnreg ignored: relocatable code), and a warp-specialised kernel keeps its setmaxnreg split.

    PYTHONPATH=. python3 bench/sass_check.py                      # print the table; exit 1 on a failure
    PYTHONPATH=. python3 bench/sass_check.py --out bench/results  # also <date>-sass-check-sm_90a-<commit>.txt

Candidates: bench/gemm.py's (`candidates_for(..., "sm_90a")`, every dtype it benches) and the
warp-specialised rows of bench/sass.py (HOPPER_ROWS "ws": producer + consumers with setmaxnreg, which
bench/gemm.py does not list yet), each on a divisible and an edge problem, TN as bench/gemm.py runs them.

Why ptxas, forced per kernel (`assemble(..., backend="ptxas")`), not PTXGEN_ASSEMBLER: the gate is about
the binary a GPU runs, and a setmaxnreg kernel on a GPU is compiled whole-program (ptxas, or the
driver's JIT: ptxgen/runtime/modules.py), never from nvJitLink's relocatable code. (PTXGEN_ASSEMBLER
=ptxas|nvjitlink forces one assembler for every kernel ptxgen assembles; left unset, PTX with
setmaxnreg goes to ptxas first when it is on PATH, everything else to nvJitLink.) The `nvJitLink`
column shows what nvJitLink's relocatable build of the same PTX reports, for contrast (C7504 expected
wherever setmaxnreg is used); it is not part of the gate.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_cases import DTYPES, SHAPES, candidates_for  # noqa: E402
from sass import HOPPER_ROWS  # noqa: E402
from results_file import commit, today, write_result  # noqa: E402
from sass_hopper import perf_notes  # noqa: E402

ARCH = "sm_90a"
FORBIDDEN = ("C7515", "C7508", "C7504")
PROBLEMS = ((4096, 4096, 4096), (4000, 4000, 4008))


def cases() -> list[tuple[str, str, tuple[int, int, int], object]]:
    """(source, label, problem, Schedule) for every candidate, each schedule once per problem/dtype."""
    specs = {}
    for m, n, k, *_ in SHAPES:
        for spec in candidates_for(m, n, k, ARCH):
            specs.setdefault(spec.name, spec)
    out = []
    for dtype in DTYPES:
        for problem in PROBLEMS:
            out += [("gemm.py", f"{dtype} {name}", problem, spec.schedule()) for name, spec in specs.items()]
    import ptxgen

    ws = {" ".join(label.split()[-4:]): kw for label, _, kw in HOPPER_ROWS if label.endswith(" ws")}
    for dtype in DTYPES:
        for problem in PROBLEMS:
            out += [("sass.py ws", f"{dtype} {name}", problem, ptxgen.Schedule(**kw)) for name, kw in ws.items()]
    return out


def verdict(assembled) -> tuple[bool, list[str]]:
    """(passes the gate, the C75xx codes in its log) for one `Assembled`."""
    codes = sorted({n.code for n in perf_notes(assembled.log)})
    ok = (assembled.resources.spill_bytes == 0 and not any(c in FORBIDDEN for c in codes)
          and not assembled.split_dropped)
    return ok, codes


def check(dtype_label: str, problem: tuple[int, int, int], schedule) -> tuple[bool, str]:
    """(passed, the row) for one candidate."""
    import ptxgen
    from ptxgen.runtime.assemble import assemble

    dtype = dtype_label.split()[0]
    g = ptxgen.Gemm(*problem, dtype=dtype, out_dtype=dtype, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, schedule, arch=ARCH)
    whole = assemble(k.ptx, ARCH, k.entry, backend="ptxas")
    r = whole.resources
    ok, codes = verdict(whole)
    split = whole.setmaxnreg or "no setmaxnreg"
    reloc = ""
    if whole.setmaxnreg:
        nv = assemble(k.ptx, ARCH, k.entry, backend="nvjitlink")
        reloc = f"{nv.resources.registers} regs, " + (",".join(sorted({n.code for n in perf_notes(nv.log)})) or "-")
    row = (f"{'PASS' if ok else 'FAIL'}  {dtype_label:30s} {'x'.join(map(str, problem)):15s} "
           f"{r.registers:4d} {r.spill_store_bytes:5d}/{r.spill_load_bytes:<5d} {','.join(codes) or '-':12s} "
           f"{split:26s} {reloc}")
    return ok, row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for <date>-sass-check-sm_90a-<commit>.txt")
    ap.add_argument("--ptxas", action="append", default=[], metavar="PATH",
                    help="after the gate, list the consumer loop under this ptxas (repeatable) and nvJitLink "
                         "side by side (bench/sass_assemblers.py; each assembler's version in the header)")
    ap.add_argument("--arch", default=ARCH, choices=(ARCH, "sm_100a"),
                    help="sm_100a: the tcgen05 candidates under each --ptxas (default 13.0, and 13.5 where "
                         "installed): 0 spills and no C75xx warning (bench/sass_blackwell.py)")
    args = ap.parse_args(argv)
    if args.arch == "sm_100a":
        return blackwell_gate(args, list(argv if argv is not None else sys.argv[1:]))
    from ptxgen.runtime.assemble import AssemblerNotFound, available_assemblers

    ptxas = available_assemblers()["ptxas"]
    if not isinstance(ptxas, tuple):
        print(f"bench/sass_check.py needs ptxas (whole-program compilation): {ptxas}. Fix: install the CUDA "
              f"toolkit and put ptxas on PATH", file=sys.stderr)
        return 2
    nv = available_assemblers()["nvjitlink"]
    command = ("PYTHONPATH=. python3 bench/sass_check.py" + (f" --out {shlex.quote(str(args.out))}" if args.out else "")
               + "".join(f" --ptxas {shlex.quote(p)}" for p in args.ptxas))
    lines = [f"# {command}", f"# at {commit()} ({today()}); {ptxas[1]} -arch={ARCH} -v "
             f"(whole-program); nvJitLink column: {nv[1] if isinstance(nv, tuple) else 'not installed'}",
             f"# gate: 0 spill bytes, none of {', '.join(FORBIDDEN)}, setmaxnreg kept where used",
             f"{'':6s}{'candidate':30s} {'problem':15s} {'regs':>4s} {'spill st/ld':>11s} {'C75xx':12s} "
             f"{'setmaxnreg (ptxas)':26s} nvJitLink (relocatable)"]
    failed = 0
    for source, label, problem, schedule in cases():
        try:
            ok, row = check(label, problem, schedule)
        except (AssemblerNotFound, ValueError, RuntimeError) as e:  # ScheduleError is a ValueError
            ok, row = False, f"FAIL  {label:30s} {'x'.join(map(str, problem)):15s} {type(e).__name__}: {e}"
        failed += not ok
        lines.append(f"{row}   [{source}]")
    total = len(lines) - 4
    lines.append(f"# {total - failed} of {total} candidates pass" + ("" if not failed else f"; {failed} FAIL"))
    if args.ptxas:
        from sass import assembler_table

        lines += assembler_table("f16", args.ptxas)
    write_result(lines, args.out, f"sass-check-{ARCH}")
    return 1 if failed else 0


def blackwell_gate(args: argparse.Namespace, argv: list[str]) -> int:
    """The sm_100a gate (bench/sass_blackwell.py `gate`): exit 1 on any FAIL row."""
    import sass_blackwell as bw

    paths = bw.ptxas_paths(args.ptxas)
    rows, failed = bw.gate(paths)
    lines = bw.header("sass_check.py", paths, argv) + [
        "# gate: 0 spill bytes and no C75xx performance warning for every sm_100a bench candidate",
        f"{'':6s}{'candidate':48s} {'ptxas':8s} {'regs':>4s} {'spill':>5s} C75xx", *rows,
        f"# {len(rows) - failed} of {len(rows)} rows pass" + (f"; {failed} FAIL" if failed else "")]
    write_result(lines, args.out, "sass-check-sm_100a")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
