"""`ptxgen run` and `info` on the grouped kernels of sm_90a (wgmma) and sm_100a (tcgen05): a run
on the simulator passes with the rows outside the groups untouched, and `info` describes the
device-side group walk and its guarded stores."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import main


@pytest.mark.parametrize("arch, grouping, extra, described", [
    ("sm_90a", "contiguous", ["--dtype", "bf16", "--b-layout", "row"], []),
    ("sm_90a", "masked", ["--dtype", "e4m3", "--out", "bf16", "--block-scale", "1x128,128x128"], []),
    ("sm_100a", "contiguous", ["--dtype", "bf16", "--b-layout", "row"], ["tcgen05", "guarded by the group's end row"]),
    ("sm_100a", "masked", ["--dtype", "e4m3", "--out", "bf16"], ["tcgen05", "guarded by the group's end row"]),
])
def test_cli_runs_and_describes_the_grouped_kernel(capsys, arch, grouping, extra, described):
    argv = ["--arch", arch, "--shape", "100x64x208", "--groups", "5", "--grouping", grouping, *extra]
    assert main(["run", *argv, "--sim", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "rows outside the groups left untouched" in out and "persistent grid of" in out
    assert main(["info", *argv]) == 0
    out = capsys.readouterr().out
    assert f"grouped    5 groups, {grouping}" in out and "every role sums the 5 groups' m-tiles" in out
    assert all(words in out for words in described), out
