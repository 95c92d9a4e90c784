"""Why a consumer of two m64 row blocks loses its uniform wgmma descriptors under ptxas 13.5: the
emitted PTX varied in place, each variant's consumer loop counted under each ptxas.

Why: HGMMA reads A's and B's shared-memory descriptors as one quad of four consecutive uniform
registers (`gdesc[URx]`: A in URx..x+1, B in URx+2..x+3). A warpgroup holding 128 rows (BM 256 with
two consumers, or BM 128 with one) issues two wgmmas per k-step that share B, so B must sit in two
quads. ptxas 13.0 copies it with UMOV; ptxas 13.5 computes it once and moves it into each quad
through general registers (IMAD.U32 + R2UR), about 30 more SASS per 64-wide k-tile. The variants:
  as-emitted       ptxgen's PTX (B joined once per k-step, A stepped with add.s64)
  a-32bit          A's low word stepped with a 32-bit add and joined at each wgmma, like B
  a-row-bases      the second row block's A descriptor joined once per stage, stepped with add.s64
  b-per-wgmma      B joined again, in fresh registers, right before the second block's wgmma
  b-per-wgmma+a-32bit, b-per-wgmma+a-row-bases   the two combined
Static only (no GPU): each variant is assembled by every --ptxas given and its loop counted with
cuobjdump (bench/sass_assemblers.py); the rows print the loop SASS, registers and spill bytes.

    PYTHONPATH=. python bench/sass_descriptor_shapes.py --ptxas PATH [--ptxas PATH ...] [--out DIR]
"""
from __future__ import annotations

import argparse
import re
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import commit, today, write_result  # noqa: E402

#: (label, Gemm keyword arguments, Schedule keyword arguments): consumers of two m64 row blocks.
CASES = (
    ("bf16 8192^3 256x192x64 s4 2wg ws direct", dict(block=(256, 192, 64), stages=4, consumers=2,
                                                      epilogue_via_smem=False)),
    ("bf16 8192^3 256x192x64 s4 2wg ws 1x2 direct", dict(block=(256, 192, 64), stages=4, consumers=2,
                                                          epilogue_via_smem=False, cluster=(1, 2), multicast=True)),
    ("bf16 8192^3 256x128x64 s4 2wg ws direct", dict(block=(256, 128, 64), stages=4, consumers=2,
                                                      epilogue_via_smem=False)),
)


def _a_32bit(t: str) -> str:
    return re.sub(r"add\.s64 (%rd\d+), (%rd\d+), (\d+);(\s*// A rows)",
                  lambda m: f"add.u32 %rq0, %rlo, {m.group(3)}; mov.b64 {m.group(1)}, {{%rq0, %rhi}};{m.group(4)}",
                  t)


def _bind_a_words(t: str) -> str:
    """Name the words of A's per-stage join (`mov.b64 %rdA, {lo, hi}` before the first A step)."""
    m = re.search(r"mov\.b64 (%rd\d+), \{(%r\d+), (%r\d+)\};\s*\n(?:.*\n){0,3}?.*// A rows", t)
    if not m:
        raise SystemExit("no A descriptor join found before the first 'A rows' step: the PTX shape changed")
    return t.replace("%rlo", m.group(2)).replace("%rhi", m.group(3))


def _a_row_bases(t: str) -> str:
    m = re.search(r"add\.s64 (%rd\d+), (%rd\d+), (\d+);\s*// A rows \+64, k\+0", t)
    if not m:
        raise SystemExit("no second row block found: the case is not a two-block consumer")
    dst, base, step = m.group(1), m.group(2), int(m.group(3))
    t = t.replace(m.group(0), f"mov.b64 {dst}, %rdrow1;  // A rows +64, k+0")
    t = re.sub(rf"(mov\.b64 {re.escape(base)}, \{{%r\d+, %r\d+\}};)", rf"\1 add.s64 %rdrow1, {base}, {step};", t)
    return re.sub(rf"add\.s64 (%rd\d+), {re.escape(base)}, (\d+);(\s*// A rows \+64)",
                  lambda x: f"add.s64 {x.group(1)}, %rdrow1, {int(x.group(2)) - step};{x.group(3)}", t)


def _b_per_wgmma(t: str) -> str:
    """Before each second-block wgmma, join B again from its low word's base and k offset."""
    out: list[str] = []
    joins: dict[str, tuple[str, str]] = {}     # %rdB -> (low word, high word) of its latest join
    steps: dict[str, tuple[str, str]] = {}     # low word -> (base, k offset) of its latest B step
    for line in t.split("\n"):
        step = re.match(r"\s*add\.u32 (%r\d+), (%r\d+), (\d+);\s*// B k", line)
        join = re.match(r"\s*mov\.b64 (%rd\d+), \{(%r\d+), (%r\d+)\};", line)
        if step:
            steps[step.group(1)] = (step.group(2), step.group(3))
        elif join:
            joins[join.group(1)] = (join.group(2), join.group(3))
        ops = re.search(r"\}, (%rd\d+), (%rd\d+),", line) if "wgmma.mma_async" in line else None
        if ops and out and "A rows +64" in out[-1] and ops.group(2) in joins:
            low, high = joins[ops.group(2)]
            base, offset = steps.get(low, (low, "0"))
            out.append(f"    add.u32 %rq1, {base}, {offset}; mov.b64 %rdq1, {{%rq1, {high}}};")
            line = line.replace(f"{ops.group(1)}, {ops.group(2)},", f"{ops.group(1)}, %rdq1,")
        out.append(line)
    return "\n".join(out)


def _declare(t: str) -> str:
    t = t.replace(".reg .f32 %f<", ".reg .b32 %rq<2>;\n    .reg .b64 %rdq1, %rdrow1;\n    .reg .f32 %f<", 1)
    return t


VARIANTS = {
    "as-emitted": lambda t: t,
    "a-32bit": lambda t: _bind_a_words(_a_32bit(t)),
    "a-row-bases": _a_row_bases,
    "b-per-wgmma": _b_per_wgmma,
    "b-per-wgmma+a-32bit": lambda t: _b_per_wgmma(_bind_a_words(_a_32bit(t))),
    "b-per-wgmma+a-row-bases": lambda t: _b_per_wgmma(_a_row_bases(t)),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptxas", action="append", required=True, metavar="PATH", help="a ptxas to assemble with (repeat)")
    ap.add_argument("--out", type=Path, default=None, help="folder for <date>-sass-descriptor-shapes-<commit>.txt")
    args = ap.parse_args(argv)
    import ptxgen
    from sass import cuobjdump
    from sass_assemblers import loop_under, version_of

    tool = cuobjdump()
    if tool is None:
        raise SystemExit("cuobjdump is needed to count the loop: pip install nvidia-cuda-cuobjdump")
    lines = [f"# PYTHONPATH=. python bench/sass_descriptor_shapes.py {' '.join(f'--ptxas {p}' for p in args.ptxas)}"
             f" at {commit()} ({today()})"]
    lines += [f"#   [{i}] {version_of(p)}" for i, p in enumerate(args.ptxas)]
    lines.append("# cell: consumer loop SASS per 64-wide k-tile, registers, spill bytes, C75xx notes")
    for label, sched in CASES:
        g = ptxgen.Gemm(m=8192, n=8192, k=8192, dtype="bf16", out_dtype="bf16", a_layout="row", b_layout="col")
        k = ptxgen.compile(g, ptxgen.Schedule(instruction="wgmma", swizzle=128, **sched), arch="sm_90a")
        lines.append(f"\n{label}")
        for name, vary in VARIANTS.items():
            text = _declare(vary(k.ptx))
            variant = types.SimpleNamespace(ptx=text, entry=k.entry)
            cells = []
            for p in args.ptxas:
                try:
                    cells.append(loop_under(variant, "sm_90a", p, tool).cell())
                except Exception as e:  # a variant an assembler rejects: say so in its cell
                    cells.append(f"{type(e).__name__}: {str(e)[:60]}")
            lines.append(f"  {name:26s} " + " | ".join(f"[{i}] {c}" for i, c in enumerate(cells)))
            print(lines[-1], flush=True)
    write_result(lines, args.out, "sass-descriptor-shapes")
    print("\n".join(lines[:4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
