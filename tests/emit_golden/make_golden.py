"""Record the SHA-256 of every golden case's PTX in golden.txt (run from the repository root:
`PYTHONPATH=$PWD python tests/emit_golden/make_golden.py`). Only re-record when a change to the
emitted text is intended, and say so in the commit."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.emit_golden.cases import CASES  # noqa: E402

GOLDEN = HERE / "golden.txt"


def ptx_of(name: str) -> str:
    import ptxgen

    for n, g, s, arch in CASES:
        if n == name:
            return ptxgen.compile(g, s, arch).ptx
    raise KeyError(f"no golden case {name!r}")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def current() -> dict[str, str]:
    import ptxgen

    return {n: digest(ptxgen.compile(g, s, arch).ptx) for n, g, s, arch in CASES}


def recorded() -> dict[str, str]:
    out = {}
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            name, h = line.split()
            out[name] = h
    return out


def main() -> None:
    hashes = current()
    lines = ["# case sha256(ptx): regenerate with tests/emit_golden/make_golden.py"]
    lines += [f"{n} {h}" for n, h in hashes.items()]
    GOLDEN.write_text("\n".join(lines) + "\n")
    print(f"recorded {len(hashes)} cases in {GOLDEN}")


if __name__ == "__main__":
    main()
