"""Assembly of PTX using setmaxnreg (ptxgen/runtime/assemble.py, assemble_setmaxnreg.py): with no
assembler forced, whole-program ptxas comes before nvJitLink (whose relocatable code drops the split,
C7504), and `Assembled` says which assembler ran, how, and whether the split survived."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.runtime import assemble as asm
from ptxgen.runtime.assemble_setmaxnreg import KEPT, setmaxnreg_status, uses_setmaxnreg

C7504 = "ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain compatibility"
C7508 = "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine"


def _ws_ptx() -> tuple[str, str]:
    g = Gemm(64, 64, 128, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, consumers=1), arch="sm_90a")
    return k.ptx, k.entry


def test_setmaxnreg_is_found_in_instructions_not_comments():
    assert uses_setmaxnreg("    setmaxnreg.inc.sync.aligned.u32 232;\n")
    assert uses_setmaxnreg("@%p1 setmaxnreg.dec.sync.aligned.u32 40;")
    assert not uses_setmaxnreg("// warpgroup 2 produces (setmaxnreg.dec 40)\n    ret;")


def test_status_reads_the_log():
    ptx = "setmaxnreg.dec.sync.aligned.u32 40;"
    assert setmaxnreg_status(ptx, "ptxas info : Used 168 registers") == KEPT
    assert setmaxnreg_status(ptx, C7504) == "setmaxnreg ignored: C7504, relocatable compilation"
    assert setmaxnreg_status(ptx, C7508) == "setmaxnreg ignored: C7508, no register cap at entry"
    assert setmaxnreg_status("ret;", C7504) == ""


def test_auto_puts_whole_program_ptxas_first_for_setmaxnreg(monkeypatch):
    if asm._ptxas_path() is None or not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("needs ptxas and nvJitLink")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    ptx, entry = _ws_ptx()
    r = asm.assemble(ptx, "sm_90a", entry)
    assert r.assembler.startswith("ptxas") and r.whole_program and r.setmaxnreg == KEPT and not r.split_dropped
    assert r.describe() == f"{r.assembler} (whole-program; setmaxnreg kept)"
    plain = asm.assemble(ptx.replace("setmaxnreg.", "// setmaxnreg."), "sm_90a", entry)
    assert plain.assembler.startswith("nvJitLink") and not plain.whole_program  # no split: unchanged order


def test_without_ptxas_nvjitlink_assembles_and_says_the_split_was_dropped(monkeypatch):
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    monkeypatch.setattr(asm, "_ptxas_path", lambda: None)
    ptx, entry = _ws_ptx()
    r = asm.assemble(ptx, "sm_90a", entry)
    assert r.assembler.startswith("nvJitLink") and not r.whole_program and r.split_dropped
    assert r.describe() == f"{r.assembler} (relocatable; setmaxnreg ignored: C7504, relocatable compilation)"


def test_a_ptxas_that_rejects_the_ptx_falls_back_to_nvjitlink_with_a_warning(monkeypatch, tmp_path):
    """A ptxas older than the PTX (it rejects the .version) must not make auto mode fail where
    nvJitLink alone would succeed; the warning names ptxas's error and the fix."""
    if not isinstance(asm._nvjitlink_probe(), tuple):
        pytest.skip("nvJitLink is not installed")
    monkeypatch.delenv("PTXGEN_ASSEMBLER", raising=False)
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(asm, "_ptxas_path", lambda: "/opt/old/ptxas")
    monkeypatch.setattr(asm, "_ptxas_probe", lambda path: ("ptxas 12.0", "ptxas 12.0.76"))

    def old_ptxas(ptx, arch):
        raise asm._Failed("ptxas fatal   : Unsupported .version 8.8; current version is '8.0'",
                          "ptxas exited with status 255")
    monkeypatch.setattr(asm, "_run_ptxas", old_ptxas)
    ptx, entry = _ws_ptx()
    with pytest.warns(RuntimeWarning, match=r"ptxas 12.0 could not assemble .*Unsupported .version.*"
                                            r"assembling with nvJitLink"):
        r = asm.assemble(ptx, "sm_90a", entry)
    assert r.assembler.startswith("nvJitLink") and r.split_dropped
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")  # forced: the error is the user's to see
    with pytest.raises(ptxgen.AssembleError, match="Unsupported .version"):
        asm.assemble(ptx, "sm_90a", entry)


def test_a_jit_cache_hit_without_a_log_is_reported_from_the_ptx():
    """The driver's JIT writes no log for a module its cache served (measured on an H200, driver
    580): the fate is inferred from the register cap at entry and the report says so."""
    from ptxgen.runtime.assemble_setmaxnreg import jit_cached_status

    capped = ".maxnreg 168\n{\nsetmaxnreg.dec.sync.aligned.u32 40;\n}"
    assert jit_cached_status(capped).startswith(KEPT + " (inferred")
    assert jit_cached_status("{\nsetmaxnreg.dec.sync.aligned.u32 40;\n}").startswith(
        "setmaxnreg ignored: C7508, no register cap at entry (inferred")
    assert jit_cached_status(".maxnreg 168\nret;") == ""
