"""Result files of the bench scripts: `<date>-<kind>-<commit>.txt` in the `--out` folder (the
convention of bench/results/), printed as well, so every script names and writes them alike."""
from __future__ import annotations

import datetime as _dt
import os
import subprocess
from pathlib import Path


def commit() -> str:
    """The checkout's short commit (PTXGEN_COMMIT where git is unavailable, e.g. a copied tree)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("PTXGEN_COMMIT", "unknown")


def today() -> str:
    return _dt.date.today().isoformat()


def write_result(lines: list[str], out: Path | None, kind: str) -> Path | None:
    """Print `lines`; with `out`, also write them to out/<date>-<kind>-<commit>.txt (made if
    missing) and say where. Returns the path written, if any."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{today()}-{kind}-{commit()}.txt"
    path.write_text(text)
    print(f"wrote {path}")
    return path
