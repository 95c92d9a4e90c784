"""The CLI's --fast-accum (Gemm.fast_accum): fp8 on sm_90a's wgmma promotes by default and the flag
selects the single-level kernel; `info` and the PTX header say which; where the flag would change
nothing it is refused in one line naming the fix, and a promoted tile too wide for the consumer's
registers names --fast-accum as a fix (in flag spelling, not field names)."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import main

FP8 = ["--arch", "sm_90a", "--dtype", "e4m3", "--out", "bf16", "--shape", "256x128x512"]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return status, out, err


@pytest.mark.parametrize("fast, words", [(False, "f32 accumulation with fp8 promotion"),
                                          (True, "single-level f32 accumulation in the fp8 wgmma")])
def test_info_and_the_ptx_header_name_the_accumulation(capsys, fast, words):
    flag = ["--fast-accum"] if fast else []
    status, out, err = _run(capsys, ["info", *FP8, *flag])
    assert status == 0, err
    assert words in " ".join(out.split())
    status, out, err = _run(capsys, ["emit", *FP8, *flag])
    assert status == 0, err
    assert words in out.splitlines()[1] and (out.count("// fp8 promotion (") > 0) != fast


def test_run_fast_accum_passes_on_the_simulator(capsys):
    status, out, err = _run(capsys, ["run", *FP8, "--fast-accum", "--sim"])
    assert status == 0, err
    assert "PASS" in out


@pytest.mark.parametrize("argv, words", [
    (["--dtype", "f16", "--arch", "sm_90a"], "drop --fast-accum (it applies to fp8 inputs, --dtype e4m3"),
    (["--dtype", "e4m3"], "multiplied only by wgmma"),   # fp8's own refusal off sm_90a, not the flag's
], ids=["not-fp8", "not-wgmma"])
def test_fast_accum_without_effect_is_refused(capsys, argv, words):
    status, out, err = _run(capsys, ["emit", "--shape", "256x256x256", *argv, "--fast-accum"])
    assert status != 0 and words in err and "fast_accum" not in err


def test_a_promoted_tile_too_wide_names_the_fixes_as_flags(capsys):
    argv = ["emit", *FP8, "--instruction", "wgmma", "--block", "128x256x128", "--consumers", "2"]
    status, out, err = _run(capsys, argv)
    assert status != 0 and "BN (<= 192)" in err and "or --fast-accum" in err and "fast_accum" not in err
    status, out, err = _run(capsys, [*argv, "--fast-accum"])
    assert status == 0, err
