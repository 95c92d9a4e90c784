"""Real assembly through nvJitLink and through the ptxas fallback (no GPU needed)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

import ptx_samples as S
from ptxgen.errors import AssembleError
import ptxgen.runtime.assemble as A
from ptxgen.runtime.assemble import AssemblerNotFound, assemble, assembler_version

BACKENDS = [b for b, probe in A.available_assemblers().items() if isinstance(probe, tuple)]


@pytest.fixture(params=["nvjitlink", "ptxas"])
def backend(request, monkeypatch):
    if request.param not in BACKENDS:
        pytest.skip(f"{request.param} not usable here: {A.available_assemblers()[request.param]}")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", request.param)
    return request.param


def test_both_backends_exist_here():
    # This machine is meant to test both paths; make a missing one loud rather than skipped.
    assert BACKENDS == ["nvjitlink", "ptxas"], A.available_assemblers()


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"])
def test_assembles_cubin(backend, arch):
    out = assemble(S.add_one(), arch, "add1")
    assert out.cubin[:4] == b"\x7fELF"
    assert out.arch == arch
    assert out.assembler == assembler_version()
    assert out.assembler.startswith("nvJitLink " if backend == "nvjitlink" else "ptxas ")
    assert 1 <= out.resources.registers <= 32
    assert out.resources.spill_bytes == 0
    assert "add1" in out.log


def test_sm90a_target(backend):
    out = assemble(S.add_one(target="sm_90a", version="8.0"), "sm_90a", "add1")
    assert out.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_spills_are_reported(backend, arch):
    r = assemble(S.spiller(), arch, "spill").resources
    assert r.registers == 32
    assert r.spill_store_bytes > 0 and r.spill_load_bytes > 0
    assert r.spill_bytes == r.spill_store_bytes + r.spill_load_bytes
    assert r.stack_bytes >= r.spill_store_bytes
    assert "spill" in str(r)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_stack_frame_is_reported(backend, arch):
    r = assemble(S.stacker(), arch, "stack").resources
    assert r.stack_bytes == 256
    assert r.spill_bytes == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_static_smem_is_reported(backend, arch):
    r = assemble(S.smem_user(4096), arch, "shm").resources
    assert r.shared_bytes == 4096


def test_backends_agree_on_registers(monkeypatch):
    if len(BACKENDS) < 2:
        pytest.skip("needs both backends")
    got = {}
    for b in BACKENDS:
        monkeypatch.setenv("PTXGEN_ASSEMBLER", b)
        got[b] = assemble(S.add_one(), "sm_80", "add1")
    assert got["ptxas"].resources.registers == got["nvjitlink"].resources.registers
    assert got["ptxas"].assembler != got["nvjitlink"].assembler


def test_error_carries_log_lines_and_command(backend):
    ptx = S.broken()
    with pytest.raises(AssembleError) as ei:
        assemble(ptx, "sm_80", "add1")
    e = ei.value
    assert [n for n, _ in e.lines] == sorted(S.BROKEN_LINES)
    for n, text in e.lines:
        assert text == S.BROKEN_LINES[n]
    assert "line 23" in e.log and "error" in e.log
    assert "Arguments mismatch" in str(e) or "Unknown symbol" in str(e)
    assert e.command.startswith("ptxas -arch=sm_80 -v")
    assert "bogus.op" in str(e) and "reproduce with:" in str(e)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_repro_command_reproduces(backend):
    with pytest.raises(AssembleError) as ei:
        assemble(S.broken(), "sm_80", "add1")
    run = subprocess.run(ei.value.command, shell=True, capture_output=True, text=True)
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "line 23; error" in out and "line 24; error" in out
    # the repro file is stable: the same PTX maps to the same path
    with pytest.raises(AssembleError) as ei2:
        assemble(S.broken(), "sm_80", "add1")
    assert ei2.value.command == ei.value.command


def test_ptxas_log_points_at_surviving_file(monkeypatch):
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    with pytest.raises(AssembleError) as ei:
        assemble(S.broken(), "sm_80", "add1")
    path = ei.value.command.split()[-1]
    assert path in ei.value.log


def test_missing_entry_is_an_error(backend):
    with pytest.raises(AssembleError, match="no register count for entry 'nope'.*add1"):
        assemble(S.add_one(), "sm_80", "nope")


@pytest.mark.parametrize("arch", ["80", "sm80", "compute_80", "sm_8", ""])
def test_bad_arch_names(arch):
    with pytest.raises(ValueError, match="SM architecture"):
        assemble(S.add_one(), arch, "add1")


def test_unknown_but_wellformed_arch_is_assemble_error(backend):
    with pytest.raises(AssembleError, match="sm_12"):
        assemble(S.add_one(), "sm_12", "add1")


def test_no_assembler_at_all(monkeypatch):
    monkeypatch.setattr(A, "_nvjitlink_probe", lambda: "ImportError: no module")
    monkeypatch.setattr(A, "_ptxas_probe", lambda path: "ptxas is not on PATH")
    with pytest.raises(AssemblerNotFound) as ei:
        assemble(S.add_one(), "sm_80", "add1")
    msg = str(ei.value)
    assert "pip install nvidia-nvjitlink" in msg and "ptxas" in msg and "PATH" in msg


def test_forced_backend_missing(monkeypatch):
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    monkeypatch.setattr(A, "_ptxas_probe", lambda path: "ptxas is not on PATH")
    with pytest.raises(AssemblerNotFound, match="PTXGEN_ASSEMBLER"):
        assemble(S.add_one(), "sm_80", "add1")


def test_fallback_to_ptxas_when_nvjitlink_missing(monkeypatch):
    if "ptxas" not in BACKENDS:
        pytest.skip("ptxas not available")
    monkeypatch.setattr(A, "_nvjitlink_probe", lambda: "OSError: libnvJitLink.so not found")
    assert assembler_version().startswith("ptxas ")
    assert assemble(S.add_one(), "sm_80", "add1").assembler.startswith("ptxas ")


def test_bad_env_value(monkeypatch):
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "nvcc")
    with pytest.raises(AssemblerNotFound, match="nvcc"):
        assembler_version()
