"""The CLI's --block-scale (Gemm.block_scale): info/emit name the block-scaled promotion and its
parameters, run draws random scales and passes on the simulator, and the combinations not built
are refused in one line naming what is."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import main

FP8 = ["--arch", "sm_90a", "--instruction", "wgmma", "--dtype", "e4m3", "--out", "bf16"]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's refusal of a flag value
        status = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return status, out, err


def test_info_and_emit_name_the_block_scaled_promotion(capsys):
    argv = [*FP8, "--shape", "256x256x512", "--block-scale", "1x128,128x128"]
    status, out, err = _run(capsys, ["info", *argv])
    assert status == 0, err
    text = " ".join(out.split())
    assert "block-scaled fp8 promotion" in text and "for the block scales" in text
    status, out, err = _run(capsys, ["emit", *argv])
    assert status == 0, err
    assert "block-scaled fp8 promotion" in out.splitlines()[1] and ".param .u64 scale_a" in out


@pytest.mark.parametrize("scales", ["1x128,128x128", "1x128,128x128,ue8m0"])
def test_run_draws_scales_and_passes_on_the_simulator(capsys, scales):
    status, out, err = _run(capsys, ["run", *FP8, "--shape", "136x128x272", "--block", "64x64x128",
                                     "--block-scale", scales, "--sim"])
    assert status == 0, out + err
    assert "PASS" in out


@pytest.mark.parametrize("argv, words", [
    (["--block-scale", "1x128,128x1"], "built: --block-scale 1x128,128x128"),
    (["--block-scale", "1x128"], "e.g. 1x128,128x128"),
    (["--block-scale", "1x128,128x128", "--fast-accum"], "drop --fast-accum"),
    (["--block-scale", "1x128,128x128", "--dtype", "f16"], "--dtype e4m3"),
])
def test_combinations_not_built_are_refused_in_one_line(capsys, argv, words):
    status, out, err = _run(capsys, ["info", *FP8, "--shape", "256x256x512", *argv])
    assert status != 0
    assert words in err and len([line for line in err.strip().splitlines() if "usage" not in line]) <= 2, err
