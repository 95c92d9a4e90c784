"""Count the PTX opcode strings written in the code generator (`ptxgen/emit` and every target
package under `ptxgen/targets`), inline (in a function body) or as data (module- or class-level
tables), per directory: the measure of issue 19 item 5 ("instructions as
data": type suffixes should come from an operand's type or a table, not be typed at each use).

An opcode string is a string literal (or the literal head of an f-string) whose first
dot-separated word is a PTX opcode followed by a dot ("add.u32", "setp.lt.u32",
f"ldmatrix.sync.aligned.m8n8.x{n}...", f"cvt.rn.{t}"); bare words ("bra", "ret") and prose are
not counted. Lambdas in a module-level table count as table entries.

    python bench/opcode_strings.py [--list] [--files] [root ...]
        default roots: ptxgen/emit and ptxgen/targets next to this script; directories are named
        relative to ptxgen/ (`emit`, `emit/epilogue`, `targets/sm90`, ...)
        --list: every inline site, then the table; --files: one row per module, not per directory
"""
from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

#: PTX opcodes (the first word of an instruction) the emitters use or could use.
OPCODES = frozenset("""
abs activemask add and atom bar barrier bfe bfi bfind bra brev brkpt call clz cnot copysign cos cp cvt cvta div
elect ex2 exit fence fma fns getctarank griddepcontrol isspacep ld ldmatrix ldu lg2 lop3 mad mad24 mapa
match max mbarrier membar min mma mov mul mul24 multimem nanosleep neg not or popc prefetch prmt rcp red
redux rem ret rsqrt sad selp set setmaxnreg setp shf shfl shl shr sin slct sqrt st stmatrix sub suld sust
tanh testp tex tcgen05 trap vote wgmma wmma xor
""".split())
_HEAD = re.compile(r"^([a-z][a-z0-9]*)\.")


def is_opcode(text: str) -> bool:
    m = _HEAD.match(text)
    return bool(m) and m.group(1) in OPCODES and not any(c in text for c in " ()")


def _literal_head(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def count_file(path: Path, sites: list[str] | None = None) -> Counter:
    """{"inline": n, "table": m} for one module; inline sites appended to `sites` as "path:line text"."""
    tree = ast.parse(path.read_text(), str(path))
    counts: Counter = Counter()

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # docstrings
        head = _literal_head(node)
        if head is not None:
            if is_opcode(head):
                counts["inline" if in_function else "table"] += 1
                if in_function and sites is not None:
                    sites.append(f"{path}:{getattr(node, 'lineno', 0)} {head}")
            if isinstance(node, ast.JoinedStr):
                return
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return counts


def count_tree(root: Path, sites: list[str] | None = None, base: Path | None = None,
               per_file: bool = False) -> dict[str, Counter]:
    """Counts per directory (or per module) under `root`, named relative to `base` (default `root`;
    "." for `base` itself)."""
    base = base or root
    per_dir: dict[str, Counter] = {}
    for path in sorted(root.rglob("*.py")):
        key = (path if per_file else path.parent).relative_to(base).as_posix() or "."
        per_dir.setdefault(key, Counter()).update(count_file(path, sites))
    return per_dir


def main(argv: list[str]) -> int:
    listing, per_file = "--list" in argv, "--files" in argv
    args = [a for a in argv[1:] if a not in ("--list", "--files")]
    pkg = Path(__file__).resolve().parent.parent / "ptxgen"
    roots = [Path(a) for a in args] or [pkg / "emit", pkg / "targets"]
    sites: list[str] = []
    per_dir: dict[str, Counter] = {}
    for root in roots:
        base = pkg if root.resolve().is_relative_to(pkg.resolve()) else root
        per_dir.update(count_tree(root.resolve(), sites, base.resolve(), per_file))
    if listing:
        print("\n".join(sites))
    total: Counter = Counter()
    width = max([12] + [len(k) for k in per_dir])
    print(f"{'directory':<{width}} {'inline':>7} {'table':>7} {'inline %':>9}")
    for key, c in per_dir.items():
        total.update(c)
        n = c["inline"] + c["table"]
        print(f"{key:<{width}} {c['inline']:>7} {c['table']:>7} {100 * c['inline'] / n if n else 0:>8.0f}%")
    n = total["inline"] + total["table"]
    print(f"{'all':<{width}} {total['inline']:>7} {total['table']:>7} {100 * total['inline'] / n if n else 0:>8.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
