"""Loop-carried registers: what keeps 64x128x64, 2x2 warps, 2 stages, pad within ptxas's budget.

ptxas 13.0 assembles that schedule (NT/TT, any output) at 128 registers and, before these
change, spilled one loop-invariant shared address (4 B stored, 4 B reloaded every k-tile,
issue 10). With two stages the written stage is now derived from the read one (rd ^ 1), so the
loop carries one stage index instead of two.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

import ptxgen
from ptxgen import Gemm, Schedule

from ...common.test_structure import sections

SCHEDULE = Schedule(block=(64, 128, 64), warps=(2, 2), stages=2, smem_layout="pad")


def test_two_stage_loop_carries_one_stage_index():
    pre, loop, _ = sections(ptxgen.compile(Gemm(4096, 4096, 4096, out_dtype="f16"), SCHEDULE).ptx)
    # the stage indices: read index 0 (both S) and write index S - 1 (only S > 2)
    assert [line for line in pre if line.startswith("mov.u32") and line.endswith(", 1;")] == []
    assert sum(line.startswith("xor.b32") for line in loop) == 2  # written stage, and the flip
    three = sections(ptxgen.compile(Gemm(4096, 4096, 4096), Schedule(block=(64, 128, 64), stages=3)).ptx)[1]
    assert not any(line.startswith("xor.b32") for line in three)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("layout", [("row", "col"), ("col", "col"), ("row", "row"), ("col", "row")])
def test_no_spill_with_the_default_assembler(arch, layout):
    g = Gemm(4096, 4096, 4096, out_dtype="f16", a_layout=layout[0], b_layout=layout[1])
    assert ptxgen.compile(g, SCHEDULE, arch=arch).resources.spill_bytes == 0


def _ptxas_13_0() -> str | None:
    """ptxas 13.0 from PATH or a CUDA 13.0 toolkit folder, if installed."""
    for path in [shutil.which("ptxas"), *sorted(glob.glob("/usr/local/cuda*/bin/ptxas"))]:
        if path and "release 13.0" in subprocess.run([path, "--version"], capture_output=True, text=True).stdout:
            return path
    return None


@pytest.mark.skipif(_ptxas_13_0() is None, reason="ptxas 13.0 (the assembler that spilled) is not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_no_spill_with_ptxas_13_0(arch, monkeypatch, tmp_path):
    """The issue's measurement: ptxas 13.0 squeezes this kernel to 128 registers."""
    path = _ptxas_13_0()
    monkeypatch.setenv("PATH", os.path.dirname(path) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    for a_layout in ("row", "col"):
        g = Gemm(4096, 4096, 4096, out_dtype="f16", a_layout=a_layout, b_layout="row")
        r = ptxgen.compile(g, SCHEDULE, arch=arch).resources
        assert r.spill_bytes == 0, f"{a_layout} A, row B on {arch}: {r}"
