"""Show where a golden case's PTX differs from the PTX a git revision emits.

    PYTHONPATH=$PWD python tests/emit_golden/diff_golden.py CASE [REV] [--context N]

REV (default: the commit that last changed golden.txt) is exported with `git archive` to a
temporary directory and the case compiled there in a subprocess, so the two ptxgen copies never
share one interpreter. Prints the first differing line and a unified diff around it."""
from __future__ import annotations

import argparse
import difflib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.emit_golden.make_golden import ptx_of  # noqa: E402


def golden_revision() -> str:
    out = subprocess.run(["git", "log", "-1", "--format=%H", "--", str(HERE / "golden.txt")], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.strip()
    return out or "HEAD"


def ptx_at(rev: str, case: str) -> str:
    """The case's PTX as emitted by ptxgen at git revision `rev` (the cases of this checkout)."""
    archive = subprocess.run(["git", "archive", rev, "ptxgen"], cwd=ROOT, capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(tmp)
        code = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]);"
                "from tests.emit_golden.cases import CASES; import ptxgen;"
                "g, s, a = next((g, s, a) for n, g, s, a in CASES if n == sys.argv[3]);"
                "sys.stdout.write(ptxgen.compile(g, s, a).ptx)")
        return subprocess.run([sys.executable, "-c", code, tmp, str(ROOT), case], capture_output=True, text=True,
                              check=True, cwd=tmp).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("rev", nargs="?", default=None)
    ap.add_argument("--context", type=int, default=5)
    args = ap.parse_args()
    rev = args.rev or golden_revision()
    old, new = ptx_at(rev, args.case).splitlines(), ptx_of(args.case).splitlines()
    first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), None)
    if first is None and len(old) == len(new):
        print(f"{args.case}: identical to {rev[:12]} ({len(new)} lines)")
        return 0
    first = min(len(old), len(new)) if first is None else first
    print(f"{args.case}: first difference at line {first + 1} ({rev[:12]} has {len(old)} lines, now {len(new)})")
    sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(old, new, rev[:12], "working tree",
                                                                n=args.context, lineterm=""))
    return 1


if __name__ == "__main__":
    sys.exit(main())
