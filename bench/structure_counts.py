"""Measure the structural "Done when" items of issue 19 (one backend per GPU target) from the source.

    python bench/structure_counts.py [--root DIR] [--json]

Counts, each defined so a test can enforce it (tests/common/test_structure.py imports `measure`):

* cycles: strongly connected components of more than one module in the import graph of ptxgen's
  modules. Every `import`/`from ... import` counts, module level or inside a function (a
  function-local import dodges a cycle at import time but still closes it at run time), except
  those under `if TYPE_CHECKING:`. `from pkg import name` is an edge to `pkg.name` when that is a
  module, else to `pkg` (its `__init__`). `ptxgen.sim` and everything below it is one node (the
  simulator's internals are its own business), as are edges inside it.
* schedule_upward: modules in `ptxgen/schedule/` that import (as above) from `ptxgen.tune`,
  `ptxgen.targets`, `ptxgen.compile` or `ptxgen.runtime`; `schedule_outside` also counts imports
  of anything in ptxgen outside `schedule/` and `errors` (the layer's strict form).
* arch_branches: test expressions of `if`, `elif`, conditional expressions, `while` and
  comprehension filters whose source mentions `hopper`, `sm_90a`, `wgmma` or compares `arch`
  (`arch ==`, `!=`, `in`, `not in`), outside `ptxgen/targets/` and `ptxgen/sim/`.
* lowering_attr_writes: assignments (`=`, `+=`, annotated) to an attribute of a lowering or
  context object outside its constructor. Such objects are instances of classes in the code
  generator (`ptxgen/emit`, `ptxgen/targets`, `ptxgen/compile*`) whose names end in `Lowering`,
  `Context`, `Pipeline` or `Loop`. Counted: `self.x = ...` in a method of such a class other than
  `__init__`/`__post_init__`; `v.x = ...` (and `v.w.x = ...`) anywhere in the code generator where
  `v` is not `self` and is a parameter annotated with such a class or is named `lw`, `lowering`,
  `cx`, `ctx`, `context`, `loop` or `pipe`; and `setattr(v, ...)` on such a `v`.
* top_level_modules: `.py` files directly in `ptxgen/` other than `__init__.py`/`__main__.py`.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

SIM = "ptxgen.sim"
UPWARD = ("ptxgen.tune", "ptxgen.targets", "ptxgen.compile", "ptxgen.runtime")
ARCH_WORDS = re.compile(r"hopper|sm_90a|wgmma|\barch\s*(==|!=|\bin\b|\bnot in\b)", re.I)
CONTEXT_CLASS = re.compile(r"(Lowering|Context|Pipeline|Loop)$")
CONTEXT_NAMES = {"lw", "lowering", "cx", "ctx", "context", "loop", "pipe"}
CONSTRUCTORS = {"__init__", "__post_init__"}
CODEGEN = ("ptxgen.emit", "ptxgen.targets", "ptxgen.compile")


@dataclass
class Counts:
    cycles: int = 0
    cycle_modules: list[list[str]] = field(default_factory=list)
    function_local_imports: int = 0
    schedule_upward: int = 0
    schedule_upward_modules: list[str] = field(default_factory=list)
    schedule_outside: int = 0
    arch_branches: int = 0
    arch_branch_files: dict[str, int] = field(default_factory=dict)
    lowering_attr_writes: int = 0
    lowering_attr_write_sites: list[str] = field(default_factory=list)
    top_level_modules: int = 0
    top_level_names: list[str] = field(default_factory=list)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def node(name: str) -> str:
    return SIM if name == SIM or name.startswith(SIM + ".") else name


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(tree: ast.Module, mod: str, is_pkg: bool, modules: set[str]) -> tuple[set[str], int]:
    """(the ptxgen modules this module imports outside TYPE_CHECKING blocks, function-local count)."""
    out: set[str] = set()
    local = 0

    def visit(n: ast.AST, in_function: bool) -> None:
        nonlocal local
        if isinstance(n, ast.If) and is_type_checking(n.test):
            for child in n.orelse:
                visit(child, in_function)
            return
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            found = resolve(n)
            if found and in_function:
                local += 1
            out.update(found)
            return
        inner = in_function or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(n):
            visit(child, inner)

    def resolve(n: ast.Import | ast.ImportFrom) -> set[str]:
        if isinstance(n, ast.Import):
            return {a.name for a in n.names if a.name.split(".")[0] == "ptxgen"}
        if n.level:
            base = mod.split(".") if is_pkg else mod.split(".")[:-1]
            base = base[:len(base) - (n.level - 1)]
            target = ".".join(base + ([n.module] if n.module else []))
        else:
            target = n.module or ""
        if target.split(".")[0] != "ptxgen":
            return set()
        found = set()
        for a in n.names:
            sub = f"{target}.{a.name}"
            found.add(sub if sub in modules else target)
        return found

    visit(tree, False)
    return {m for m in out if m.split(".")[0] == "ptxgen"}, local


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components of more than one node, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps)


def arch_branches(tree: ast.Module, source: str) -> int:
    tests: list[ast.expr] = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.If, ast.IfExp, ast.While)):
            tests.append(n.test)
        elif isinstance(n, ast.comprehension):
            tests.extend(n.ifs)
    return sum(bool(ARCH_WORDS.search(ast.get_source_segment(source, t) or "")) for t in tests)


def attr_base(target: ast.expr) -> ast.Name | None:
    """The name at the root of `v.x` or `v.w.x` (None for anything else)."""
    if not isinstance(target, ast.Attribute):
        return None
    value = target.value
    while isinstance(value, ast.Attribute):
        value = value.value
    return value if isinstance(value, ast.Name) else None


def annotation_name(a: ast.expr | None) -> str:
    if a is None:
        return ""
    if isinstance(a, ast.Constant) and isinstance(a.value, str):
        return a.value.split("[")[0].split(".")[-1].strip("\"' ")
    if isinstance(a, ast.Attribute):
        return a.attr
    return a.id if isinstance(a, ast.Name) else ""


def lowering_attr_writes(tree: ast.Module, rel: str) -> list[str]:
    sites: list[str] = []

    def targets_of(n: ast.AST) -> list[ast.expr]:
        if isinstance(n, ast.Assign):
            out = []
            for t in n.targets:
                out.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
            return out
        if isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            return [n.target]
        return []

    def scan(fn: ast.AST, cls: str | None, contexts: set[str]) -> None:
        for n in ast.walk(fn):
            for t in targets_of(n):
                base = attr_base(t)
                if base is None:
                    continue
                if base.id == "self":
                    if cls and CONTEXT_CLASS.search(cls) and getattr(fn, "name", "") not in CONSTRUCTORS:
                        sites.append(f"{rel}:{n.lineno}")
                elif base.id in contexts:
                    sites.append(f"{rel}:{n.lineno}")
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args
                    and isinstance(n.args[0], ast.Name) and n.args[0].id in contexts):
                sites.append(f"{rel}:{n.lineno}")

    def functions(body: list[ast.stmt], cls: str | None) -> None:
        for n in body:
            if isinstance(n, ast.ClassDef):
                functions(n.body, n.name)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                params = a.posonlyargs + a.args + a.kwonlyargs
                contexts = set(CONTEXT_NAMES) | {p.arg for p in params if CONTEXT_CLASS.search(annotation_name(p.annotation))}
                contexts.discard("self")
                scan(n, cls, contexts)

    functions(tree.body, None)
    return sorted(set(sites), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def measure(root: Path) -> Counts:
    """The counts for the ptxgen package under `root` (the repository root)."""
    pkg = root / "ptxgen"
    files = sorted(p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(root, p) for p in files}
    counts = Counts()
    graph: dict[str, set[str]] = {}
    for path in files:
        mod = module_name(root, path)
        rel = path.relative_to(root).as_posix()
        source = path.read_text()
        tree = ast.parse(source)
        deps, local = imports(tree, mod, path.name == "__init__.py", modules)
        me = node(mod)
        graph.setdefault(me, set()).update(d for d in map(node, deps) if not (me == SIM and d == SIM))
        graph[me].discard(me)
        if me == SIM:
            continue
        counts.function_local_imports += local
        if mod.startswith("ptxgen.schedule"):
            if any(d == u or d.startswith(u + ".") for d in deps for u in UPWARD):
                counts.schedule_upward_modules.append(mod)
            if any(not (d.startswith("ptxgen.schedule") or d == "ptxgen.errors") for d in deps):
                counts.schedule_outside += 1
        if not rel.startswith("ptxgen/targets/"):
            n = arch_branches(tree, source)
            if n:
                counts.arch_branch_files[rel] = n
        if mod.startswith(CODEGEN):
            counts.lowering_attr_write_sites += lowering_attr_writes(tree, rel)
    counts.cycle_modules = strongly_connected(graph)
    counts.cycles = len(counts.cycle_modules)
    counts.schedule_upward = len(counts.schedule_upward_modules)
    counts.arch_branches = sum(counts.arch_branch_files.values())
    counts.lowering_attr_writes = len(counts.lowering_attr_write_sites)
    counts.top_level_names = sorted(p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__"))
    counts.top_level_modules = len(counts.top_level_names)
    return counts


def summary(c: Counts) -> list[str]:
    return [
        f"import cycles (SCCs > 1 module): {c.cycles}"
        + "".join(f"\n  cycle of {len(m)}: {', '.join(m)}" for m in c.cycle_modules),
        f"function-local ptxgen imports: {c.function_local_imports}",
        f"schedule/ modules importing tune/targets/compile/runtime: {c.schedule_upward} {c.schedule_upward_modules}",
        f"schedule/ modules importing ptxgen outside schedule/ and errors: {c.schedule_outside}",
        f"architecture branches outside targets/ and sim/: {c.arch_branches} in {len(c.arch_branch_files)} files"
        + "".join(f"\n  {f}: {n}" for f, n in sorted(c.arch_branch_files.items())),
        f"attribute writes onto lowering/context objects outside constructors: {c.lowering_attr_writes}",
        f"modules directly under ptxgen/: {c.top_level_modules} ({', '.join(c.top_level_names)})",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="repository root holding ptxgen/ (default: this checkout)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args(argv)
    if not (args.root / "ptxgen").is_dir():
        ap.error(f"{args.root} has no ptxgen/ folder: pass the repository root with --root")
    c = measure(args.root)
    print(json.dumps(asdict(c), indent=1) if args.json else "\n".join(summary(c)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
