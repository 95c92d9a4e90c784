"""Which binary a GPU launch runs for a kernel using `setmaxnreg` (ptxgen/runtime/modules.py `_choose`):
whole-program ptxas's cubin when ptxas is usable, else the driver's PTX JIT (cuModuleLoadDataEx,
whole-program), never nvJitLink's relocatable cubin, which drops the register split (C7504); kernels
without setmaxnreg keep nvJitLink's cubin. Through the real cuda-python bindings (the stand-in driver
on a CPU); the JIT's error and info logs come back through CU_JIT_*_LOG_BUFFER."""
from __future__ import annotations

import re
import uuid

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.check import random_operands, tolerance
from gpu_helpers import on_simulator, rel_fro, require_gpu

require_gpu()

from ptxgen.runtime import assemble as asm  # noqa: E402
from ptxgen.runtime import simdriver  # noqa: E402
from ptxgen.runtime.driver import context  # noqa: E402
from ptxgen.runtime.driver_jit import DriverJitError, jit_load  # noqa: E402


@pytest.fixture(autouse=True)
def _needs_sm90():
    if context().arch != "sm_90":
        pytest.skip(f"the setmaxnreg kernels are sm_90a; this device is {context().arch}")


@pytest.fixture
def no_ptxas(monkeypatch):
    """A machine with only the runtime dependencies: nvJitLink, no ptxas."""
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    monkeypatch.setattr(asm, "_ptxas_path", lambda: None)


def _gemm() -> Gemm:
    return Gemm(64, 64, 128, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col")


def _ws(consumers: int = 1) -> Schedule:
    return Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=consumers)


def _run(k) -> None:
    a, b = random_operands(k.gemm, 7)
    c = np.full((k.gemm.m, k.gemm.n), np.nan, dtype=np.float32)
    k(a, b, c=c)
    assert rel_fro(c, a.astype(np.float64) @ b.astype(np.float64)) < tolerance(k.gemm)


def _standin_loaded(ptx: str, source: str) -> bool:
    """The stand-in driver holds a module of `ptx` loaded as `source` ("cubin" or "ptx")."""
    return any(m.source == source and m.ptx == ptx for m in simdriver.instance().modules.values())


def test_without_ptxas_a_setmaxnreg_kernel_runs_through_the_driver_jit(no_ptxas):
    k = ptxgen.compile(_gemm(), _ws(), arch="sm_90a")
    static = k.assemble()
    assert "setmaxnreg." in k.ptx and static.assembler.startswith("nvJitLink")
    assert static.describe().endswith("(relocatable; setmaxnreg ignored: C7504, relocatable compilation)")
    _run(k)
    binary = k.resources.binary
    assert binary.startswith("PTX JIT by the driver (") and "drops setmaxnreg (C7504)" in binary, binary
    assert "whole-program, setmaxnreg kept" in binary, binary
    if on_simulator():
        assert _standin_loaded(k.ptx, "ptx") and not _standin_loaded(k.ptx, "cubin")


def test_without_ptxas_a_kernel_without_setmaxnreg_keeps_the_nvjitlink_cubin(no_ptxas):
    s = Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1, warp_specialized=False,
                 persistent=False)
    k = ptxgen.compile(_gemm(), s, arch="sm_90a")
    assert "setmaxnreg." not in k.ptx and k.assemble().setmaxnreg == ""
    _run(k)
    assert re.fullmatch(r"cubin for sm_90a from nvJitLink [\d.]+ \(relocatable\)", k.resources.binary), \
        k.resources.binary
    if on_simulator():
        assert _standin_loaded(k.ptx, "cubin")


def test_with_ptxas_a_setmaxnreg_kernel_runs_the_whole_program_cubin(monkeypatch):
    if asm._ptxas_path() is None:
        pytest.skip("ptxas is not on PATH")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    k = ptxgen.compile(_gemm(), _ws(), arch="sm_90a")
    assert k.assemble().whole_program and k.assemble().setmaxnreg == "setmaxnreg kept"
    _run(k)
    assert re.fullmatch(r"cubin for sm_90a from ptxas [\d.]+ \(whole-program; setmaxnreg kept\)",
                        k.resources.binary), k.resources.binary
    if on_simulator():
        assert _standin_loaded(k.ptx, "cubin")


def test_forced_nvjitlink_runs_its_cubin_and_says_the_split_is_dropped(monkeypatch):
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "nvjitlink")
    k = ptxgen.compile(_gemm(), _ws(), arch="sm_90a")
    with pytest.warns(RuntimeWarning, match="runs without its setmaxnreg register split"):
        _run(k)
    assert "(relocatable; setmaxnreg ignored: C7504" in k.resources.binary, k.resources.binary
    assert k.resources.binary.startswith("cubin for sm_90a from nvJitLink")


def _without_cap(ptx: str) -> str:
    return re.sub(r"^\.(maxnreg|maxntid)\b.*$", "", ptx, flags=re.MULTILINE)


def test_driver_jit_info_log_says_whether_setmaxnreg_can_be_kept():
    """With a register cap (.maxnreg/.maxntid) the whole-program JIT raises no C7508; without one it
    does, and the run report says the split was ignored (what ptxas does, measured)."""
    k = ptxgen.compile(_gemm(), _ws(), arch="sm_90a")
    # a text no earlier test loaded: on a lent H200 (driver 580) the log of a module loaded before
    # came back empty (bench/results/2026-11-26-on-device-6080041; bench/driver_jit_log.py probes it)
    fresh = f"\n// {uuid.uuid4().hex}\n"
    _, capped = jit_load(k.ptx + fresh, k.entry, "sm_90a")
    assert "C7508" not in capped and "C7504" not in capped
    assert f"Compiling entry function '{k.entry}' for 'sm_90a'" in capped, capped
    _, uncapped = jit_load(_without_cap(k.ptx) + fresh, k.entry, "sm_90a")
    assert "(C7508) Potential Performance Loss: 'setmaxnreg' ignored" in uncapped, uncapped


def test_driver_jit_failure_names_the_kernel_and_quotes_the_log():
    k = ptxgen.compile(_gemm(), _ws(), arch="sm_90a")
    broken = k.ptx.replace("setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg.dec.sync.aligned.u32 %nope;", 1)
    assert broken != k.ptx
    with pytest.raises(DriverJitError) as e:
        jit_load(broken, k.entry, "sm_90a")
    msg = str(e.value)
    assert f"the CUDA driver's PTX JIT could not compile kernel {k.entry!r} for sm_90a" in msg, msg
    assert e.value.log.strip() and "reproduce with: ptxas -arch=sm_90a" in msg, msg


def test_cli_run_reports_nvjitlinks_static_numbers_and_the_jit_that_ran(no_ptxas, capsys):
    """`ptxgen run` on a GPU without ptxas: the `assembled` line is nvJitLink's (split dropped, with
    the note), the `executed` line names the driver's whole-program JIT that actually ran."""
    from ptxgen.cli.app import main

    status = main(["run", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "64x64x64", "--stages", "2",
                   "--consumers", "1", "--shape", "64x64x128"])
    out, err = capsys.readouterr()
    assert status == 0 and "Traceback" not in out + err, out + err
    lines = {line[:11]: line for line in out.splitlines()}
    assert "(relocatable; setmaxnreg ignored: C7504" in lines["assembled  "], out
    assert "the driver's JIT compile the PTX whole-program" in lines["note       "], out
    assert "runs PTX JIT by the driver (" in lines["executed   "] and \
        "whole-program, setmaxnreg kept" in lines["executed   "], out
    assert "PASS" in out
