"""The README's interop example ("Calling a kernel with PyTorch, CuPy or DLPack arrays") runs as
written through the stand-in driver: PyTorch CPU tensors (DLPack, host) and DeviceArray (the CUDA
array interface, device) in, C out. CuPy and CUDA tensors need a GPU (tests/gpu)."""
from __future__ import annotations

from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def interop_example() -> str:
    section = README.read_text().split("## Calling a kernel with PyTorch, CuPy or DLPack arrays", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def test_the_readme_interop_example_runs(standin):
    pytest.importorskip("torch")
    before = standin.launches
    exec(compile(interop_example(), "README.md (interop)", "exec"), {})
    assert standin.launches == before + 2
