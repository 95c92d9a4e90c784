"""CLI flags: nothing silently dropped or contradicted, every default shown, errors named as flags."""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import pytest

import ptxgen
from ptxgen.cli.app import _parser, main
from ptxgen.cli.flags import FIELD_FLAGS, flag_text

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    top = _parser()
    action = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", ["emit", "info", "run"])
def test_every_flag_shows_its_default(command):
    """README: "Every flag has a default; --help lists them"."""
    for action in _subparsers()[command]._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and "default" in action.help, f"{action.option_strings} shows no default"


def test_version_flag_reports_the_package_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"ptxgen {ptxgen.__version__}"
    assert f'version = "{ptxgen.__version__}"' in (ROOT / "pyproject.toml").read_text()


def test_license_file_and_pyproject_name_apache_2():
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    # The SPDX string (setuptools >= 77): the table form and License classifiers warn as deprecated
    # on the setuptools pip's build isolation installs (84), and stop building after 2027-02-18.
    project = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+; the project supports 3.10)
    assert 'license = "Apache-2.0"' in project and 'license-files = ["LICENSE"]' in project
    assert 'requires = ["setuptools>=77"]' in project and "License ::" not in project


@pytest.mark.parametrize("field,hint", [("bias", "bias=col or bias=row"), ("scale", "scale=col or scale=row"),
                                        ("act", "act=relu or act=gelu or act=silu"), ("alpha", "alpha=<number>"),
                                        ("bias=", "bias=col or bias=row")])
def test_epilogue_field_without_value_is_an_error_naming_the_values(field, hint, capsys):
    """`--epilogue bias` used to drop the bias silently."""
    with pytest.raises(SystemExit) as e:
        main(["info", "--epilogue", f"act=relu,{field}"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "needs a value" in err and hint in err


def test_epilogue_flag_still_reaches_the_kernel(capsys):
    assert main(["info", "--shape", "256x256x64", "--epilogue", "bias=row,act=relu"]) == 0
    assert "bias[m]" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--layout", "nt", "--a-layout", "row"], ["--layout", "tt", "--b-layout", "col"]])
def test_conflicting_layout_flags_are_rejected(argv, capsys):
    assert main(["info", "--shape", "256x256x64", *argv]) == 2
    err = capsys.readouterr().err
    assert "--layout" in err and argv[2] in err and f"drop {argv[2]} (--layout sets both)" in err


def test_agreeing_layout_flags_are_accepted(capsys):
    assert main(["info", "--shape", "256x256x64", "--layout", "nt", "--a-layout", "col"]) == 0
    assert "A[256x64] f16 col-major @ B[64x256] f16 row-major" in capsys.readouterr().out


def test_negative_seed_names_the_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--seed", "-1"])
    assert e.value.code == 2 and "--seed must be a non-negative integer" in capsys.readouterr().err


def test_field_names_become_flags():
    assert flag_text("schedule.epilogue_via_smem=False: x: use epilogue_via_smem=True") == \
        "--epilogue-via registers: x: use --epilogue-via smem"
    assert flag_text("gemm.acc_dtype='f16': use acc_dtype='f32' with split_k") == "--acc f16: use --acc f32 with --split-k"
    assert flag_text("use frag_double_buffer=False") == "use --no-frag-double-buffer"
    assert flag_text("schedule.block.BK=24: not a multiple of the instruction's k=16") == \
        "--block BK=24: not a multiple of the instruction's k=16"
    assert flag_text("gemm.k=0: K must be positive") == "--shape 0: K must be positive"
    assert flag_text("schedule.decomposition='stream-k-pure'") == "--stream-k pure"
    # Every flag the table names exists on the parser.
    flags = {s for a in _subparsers()["run"]._actions for s in a.option_strings}
    assert {f.split()[0] for f in FIELD_FLAGS.values()} <= flags


def test_warnings_are_one_line_with_flag_names(capsys):
    import warnings

    from ptxgen.cli.app import _show_warning

    _show_warning(UserWarning("slow: set epilogue_via_smem=True"), UserWarning, "x.py", 1)
    assert capsys.readouterr().err == "ptxgen: warning: slow: set --epilogue-via smem\n"
    del warnings


def _cli(*argv: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "ptxgen", *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, **kw)


def test_unknown_assembler_is_a_clear_error_not_a_traceback():
    r = _cli("info", "--shape", "256x256x64", env={"PTXGEN_ASSEMBLER": "bogus"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "PTXGEN_ASSEMBLER='bogus'" in r.stderr and "nvjitlink" in r.stderr and "unset it" in r.stderr


def test_unexpected_errors_are_one_line_with_a_report_hint(monkeypatch, capsys):
    import ptxgen.cli.app as cli

    def boom(args):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cli, "cmd_info", boom)
    assert main(["info"]) == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: kaboom" in err and "PTXGEN_DEBUG=1" in err and "Traceback" not in err
    monkeypatch.setenv("PTXGEN_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["info"])


def test_simulator_hazards_are_one_line_naming_a_bug(monkeypatch, capsys):
    import ptxgen.cli.app as cli
    from ptxgen.sim.errors import HazardError

    def hazard(args):
        raise HazardError("race", 12, "two threads write the same word", "st.shared.b32 [%r1], %r2;")

    monkeypatch.setattr(cli, "cmd_info", hazard)
    assert main(["info"]) == 1
    err = capsys.readouterr().err
    assert "the simulator stopped the kernel" in err and "line 12" in err and "Traceback" not in err


def test_long_no_gpu_reason_drops_the_loader_message_whole():
    """`run` says why it simulates in one line: a long reason loses its trailing "(...)" whole,
    never half a word or an unbalanced parenthesis."""
    from ptxgen.cli.run import short_reason

    loader = ("no GPU: the CUDA driver library (libcuda) could not be loaded: no NVIDIA driver here "
              "(libcuda.so.1: cannot open (shared) object file: No such file or directory)")
    assert short_reason(loader) == "no GPU: the CUDA driver library (libcuda) could not be loaded: no NVIDIA driver here"
    assert short_reason("requested with --sim") == "requested with --sim"
    assert short_reason("z" * 120) == "z" * 87 + "..."
