"""The `ptxgen` command line (console script `ptxgen = "ptxgen.cli:main"`): `app.py` parses and
dispatches, `flags.py` reads flag values, `report.py` writes `info`, `run.py` and `tune.py` run
their subcommands."""
from __future__ import annotations

from .app import main

__all__ = ["main"]
