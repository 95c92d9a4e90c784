"""The `assembled` line of `ptxgen info`/`run` (ptxgen/cli_report.py resources_line): which assembler,
whole-program or relocatable, whether the kernel's setmaxnreg register split was kept, and, where
nvJitLink's relocatable report stands in for what a GPU runs (C7504), a note saying so and the fix."""
from __future__ import annotations

import re

import pytest

from ptxgen.cli.app import main
from ptxgen.runtime import assemble as asm

WS = ["info", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "64x64x64", "--stages", "2",
      "--consumers", "1", "--shape", "64x64x128"]


def _info(capsys, argv: list[str]) -> str:
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 0 and "Traceback" not in out + err, err
    return out


def _assembled(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("assembled  "))


def test_nvjitlink_report_says_setmaxnreg_was_dropped_and_what_a_gpu_runs(capsys, monkeypatch):
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    monkeypatch.setattr(asm, "_ptxas_path", lambda: None)  # only the runtime dependencies
    out = _info(capsys, WS)
    assert re.match(r"assembled  nvJitLink [\d.]+ \(relocatable; setmaxnreg ignored: C7504, relocatable "
                    r"compilation\): \d+ registers/thread", _assembled(out)), _assembled(out)
    note = next(line for line in out.splitlines() if line.startswith("note       "))
    assert "ignores setmaxnreg (C7504)" in note and "the driver's JIT compile the PTX whole-program" in note


def test_forced_nvjitlink_note_says_gpu_launches_run_that_cubin(capsys, monkeypatch):
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "nvjitlink")
    out = _info(capsys, WS)
    assert "PTXGEN_ASSEMBLER=nvjitlink makes GPU launches run this cubin: unset it" in out, out


def test_ptxas_report_says_whole_program_and_kept(capsys, monkeypatch):
    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    out = _info(capsys, WS)
    line = _assembled(out)
    assert re.match(r"assembled  ptxas [\d.]+ \(whole-program; setmaxnreg kept\): 248 registers/thread", line), line
    assert "note       " not in out


def test_a_kernel_without_setmaxnreg_says_only_how_it_was_compiled(capsys, monkeypatch):
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    out = _info(capsys, ["info", "--shape", "64x64x64", "--block", "64x64x32", "--warps", "2x2"])
    assert re.match(r"assembled  nvJitLink [\d.]+ \(relocatable\): ", _assembled(out)), _assembled(out)
    assert "setmaxnreg" not in _assembled(out)
