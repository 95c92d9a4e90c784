"""The `torch` extra: declared in pyproject, named by the README quickstart's install (which CI runs),
so tests/torch runs in CI instead of skipping; and `import ptxgen` still does not import torch."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_installs_the_torch_extra():
    pyproject = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+; ptxgen supports 3.10)
    extras = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^torch\s*=\s*\["torch>=2\.\d+"\]', extras, re.M), extras
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("\n")[1]
    names = install.split('".[', 1)[1].split(']"', 1)[0].split(",")
    assert "torch" in names and "test" in names, install


def test_import_ptxgen_does_not_import_torch():
    code = "import sys, ptxgen; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
