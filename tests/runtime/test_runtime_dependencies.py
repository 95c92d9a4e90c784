"""The declared cuda-python floor provides every cuda.bindings module ptxgen imports."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the first cuda-python release that ships each module (cuda-python release notes)
FIRST_RELEASE = {"driver": (12, 6, 1), "nvjitlink": (12, 8, 0)}


def _floor() -> tuple[int, ...]:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"cuda-python>=([\d.]+)"', text)
    assert m, "pyproject.toml must declare a cuda-python floor"
    return tuple(int(x) for x in m.group(1).split("."))


def _imported_modules() -> set[str]:
    used = set()
    for path in (ROOT / "ptxgen").rglob("*.py"):
        used |= set(re.findall(r"from cuda\.bindings import (\w+)", path.read_text()))
        used |= set(re.findall(r"import cuda\.bindings\.(\w+)", path.read_text()))
    return used


def test_cuda_python_floor_covers_the_bindings_used():
    used = _imported_modules()
    assert used, "ptxgen imports cuda.bindings modules; the scan found none"
    unknown = used - FIRST_RELEASE.keys()
    assert not unknown, f"add the first cuda-python release of {unknown} to FIRST_RELEASE"
    need = max(FIRST_RELEASE[m] for m in used)
    padded = _floor() + (0,) * (3 - len(_floor()))
    assert padded >= need, f"cuda-python>={'.'.join(map(str, _floor()))} lacks a module ptxgen uses: need {need}"
