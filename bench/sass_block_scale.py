"""Static cost of block-scaled fp8 (issue 24; targets/sm90/block_scales.py): the consumer loop's
SASS per k-tile of the block-scaled kernel next to the plain promoted fp8 kernel, same tile, under
each assembler given (bench/sass.py's control-flow analysis; no GPU needed).

    PYTHONPATH=. python3 bench/sass_block_scale.py [--ptxas /usr/local/bin/ptxas --ptxas /path/13.5/ptxas]
                                                  [--out bench/results]

Per row: SASS per k-tile of the consumer loop, registers, spill bytes, shared memory (the dynamic
bytes the launch reserves, from the kernel's shared-memory plan, plus ptxas's static bytes), and
the instruction families the promotion changes (FADD: plain promotion's adds; FFMA: the
block-scaled fma per accumulator register; FMUL: sa * sb; LDG: the scale loads). One table per
assembler (`--ptxas`, repeatable: each one whole-program; default /usr/local/bin/ptxas).
"""
from __future__ import annotations

import argparse
import platform
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import commit, today, write_result  # noqa: E402
from sass import cuobjdump, sass_text  # noqa: E402
from sass_assemblers import assemble_under, version_of  # noqa: E402
from sass_hopper import analyse_sass  # noqa: E402

import ptxgen  # noqa: E402

PROBLEM = (8192, 8192, 8192)
#: (block, consumers, stages): the 2-consumer 128x128 tiles at BK 128 and 64.
TILES = (((128, 128, 128), 2, 4), ((128, 128, 64), 2, 4), ((128, 64, 128), 2, 4))
FAMILIES = ("FADD", "FFMA", "FMUL", "LDG")
DEFAULT_PTXAS = "/usr/local/bin/ptxas"


def kernels() -> list[tuple[str, object]]:
    out = []
    for block, consumers, stages in TILES:
        s = ptxgen.Schedule(block=block, instruction="wgmma", consumers=consumers, stages=stages)
        for bs in (None, ptxgen.BlockScale()):
            g = ptxgen.Gemm(*PROBLEM, dtype="e4m3", out_dtype="bf16", block_scale=bs)
            label = f"e4m3 8192^3 {'x'.join(map(str, block))} s{stages} {consumers}wg " + ("block-scaled" if bs else
                                                                                          "promoted")
            out.append((label, ptxgen.compile(g, s, arch="sm_90a")))
    return out


def row(label: str, kernel, ptxas: str, tool: str) -> str:
    a = assemble_under(kernel, "sm_90a", ptxas)
    found = [h for h in analyse_sass(sass_text(a.cubin, tool)) if h.function == kernel.entry]
    loop = found[0].consumer if found else None
    fams = Counter(i.family for i in loop.hot) if loop is not None else Counter()
    total = "-" if loop is None else str(loop.total)
    smem = kernel.smem_plan.total + a.resources.shared_bytes
    cells = " ".join(f"{fams.get(f, 0):5d}" for f in FAMILIES)
    return f"{label:44s} {total:>5s} {a.resources.registers:4d} {a.resources.spill_bytes:6d} {smem:7d} {cells}"


def table(rows: list[tuple[str, object]], ptxas: str, tool: str) -> list[str]:
    """The rows under one ptxas, with its version as the heading."""
    head = f"{'kernel':44s} {'SASS':>5s} {'regs':>4s} {'spill':>6s} {'smem B':>7s} " + " ".join(f"{f:>5s}" for f in
                                                                                             FAMILIES)
    return ["", f"## {version_of(ptxas)}", head, *(row(label, k, ptxas, tool) for label, k in rows)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptxas", action="append", default=[], metavar="PATH",
                    help=f"assemble with this ptxas (repeatable; default {DEFAULT_PTXAS})")
    ap.add_argument("--out", type=Path, default=None, help="folder for <date>-sass-block-scale-sm_90a-<commit>.txt")
    args = ap.parse_args(argv)
    tool = cuobjdump()
    if tool is None:
        print("cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 1
    assemblers = args.ptxas or [DEFAULT_PTXAS]
    command = "PYTHONPATH=. python3 bench/sass_block_scale.py" + "".join(f" --ptxas {p}" for p in assemblers)
    lines = [f"# {command} at {commit()} ({today()}); machine {platform.machine()} {platform.node()} (static: "
             "assembled only, no GPU)", "# SASS: the consumer loop's instructions per k-tile; smem B: the launch's "
             "dynamic shared memory plus ptxas's static bytes"]
    rows = kernels()
    for ptxas in assemblers:
        lines += table(rows, ptxas, tool)
    write_result(lines, args.out, "sass-block-scale-sm_90a")
    return 0


if __name__ == "__main__":
    sys.exit(main())
