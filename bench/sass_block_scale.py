"""Static cost of block-scaled fp8 (issue 24; targets/sm90/block_scales.py): the consumer loop's
SASS per k-tile of the block-scaled kernel next to the plain promoted fp8 kernel, same tile, same
assembler (bench/sass.py's control-flow analysis; no GPU needed).

    PYTHONPATH=. python3 bench/sass_block_scale.py [--ptxas /usr/local/bin/ptxas] [--out bench/results]

Per row: SASS per k-tile of the consumer loop, registers, spill bytes, and the instruction
families the promotion changes (FADD: plain promotion's adds; FFMA: the block-scaled fma per
accumulator register; FMUL: sa * sb; LDG: the scale loads).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import platform
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sass import cuobjdump, sass_text  # noqa: E402
from sass_assemblers import assemble_under, version_of  # noqa: E402
from sass_hopper import analyse_sass  # noqa: E402

import ptxgen  # noqa: E402

PROBLEM = (8192, 8192, 8192)
#: (block, consumers, stages): the 2-consumer 128x128 tiles at BK 128 and 64.
TILES = (((128, 128, 128), 2, 4), ((128, 128, 64), 2, 4), ((128, 64, 128), 2, 4))
FAMILIES = ("FADD", "FFMA", "FMUL", "LDG")


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
    cells = " ".join(f"{fams.get(f, 0):5d}" for f in FAMILIES)
    return f"{label:44s} {total:>5s} {a.resources.registers:4d} {a.resources.spill_bytes:6d} {cells}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptxas", default="/usr/local/bin/ptxas")
    ap.add_argument("--out", type=Path, default=None, help="folder for <date>-sass-block-scale-sm_90a-<commit>.txt")
    args = ap.parse_args(argv)
    tool = cuobjdump()
    if tool is None:
        print("cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 1
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    today = _dt.date.today().isoformat()
    lines = [f"# bench/sass_block_scale.py --ptxas {args.ptxas} at {commit} ({today}); {version_of(args.ptxas)}; "
             f"machine {platform.machine()} {platform.node()} (static: assembled only, no GPU)",
             "", f"{'kernel':44s} {'SASS':>5s} {'regs':>4s} {'spill':>6s} " + " ".join(f"{f:>5s}" for f in FAMILIES)]
    lines += [row(label, k, args.ptxas, tool) for label, k in kernels()]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        path = args.out / f"{today}-sass-block-scale-sm_90a-{commit}.txt"
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
