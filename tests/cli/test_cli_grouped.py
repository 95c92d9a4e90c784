"""`--groups G --grouping contiguous|masked` on emit, info and run; refusals name the flag to use."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import main

SMALL = ["--shape", "90x40x40", "--block", "32x32x32", "--groups", "5"]


@pytest.mark.parametrize("grouping", ["contiguous", "masked"])
def test_run_draws_sizes_and_checks_every_group(grouping, capsys):
    assert main(["run", *SMALL, "--grouping", grouping, "--seed", "2"]) == 0
    out = capsys.readouterr().out
    name = "offs" if grouping == "contiguous" else "masked_m"
    assert f"groups     {name} = [" in out and "executed   on the CPU simulator: every CTA" in out
    assert "PASS" in out and "rows outside the groups left untouched" in out


def test_info_and_emit_describe_the_grouping(capsys):
    assert main(["info", *SMALL, "--grouping", "contiguous"]) == 0
    out = capsys.readouterr().out
    assert "grouped    5 groups, contiguous" in out and "m = M_total = 90" in out
    assert main(["emit", *SMALL, "--grouping", "masked"]) == 0
    ptx = capsys.readouterr().out
    assert ".param .u64 masked_m" in ptx and "%ctaid.z" in ptx and "grouped: 5 groups, masked" in ptx


@pytest.mark.parametrize("extra, says", [
    ([], "add --grouping contiguous"),
    (["--grouping", "masked", "--split-k", "2"], "use --split-k 1"),
    (["--grouping", "masked", "--stream-k", "hybrid"], "no --stream-k"),
    (["--grouping", "contiguous", "--raster", "grouped"], "use --raster row"),
    (["--grouping", "contiguous", "--batch", "2"], "use --batch 1"),
    (["--grouping", "contiguous", "--dtype", "s8"], "use --dtype f16"),
    (["--grouping", "contiguous", "--a-layout", "col"], "use --a-layout row"),
])
def test_unbuilt_combinations_are_refused_with_a_fix(extra, says, capsys):
    assert main(["info", *SMALL, *extra]) == 2
    err = capsys.readouterr().err
    assert says in err, err


def test_run_and_info_k_contiguous_groups(capsys):
    """--grouping k-contiguous: random offs along K, every group's C checked; A column-major and B
    row-major by default (its only layouts); a row-major A is refused with the layout to use."""
    assert main(["run", "--shape", "40x24x70", "--block", "32x32x32", "--groups", "4", "--grouping",
                 "k-contiguous", "--dtype", "bf16", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "groups     offs = [" in out and "PASS" in out and "checked every group's C" in out
    assert main(["info", "--shape", "40x24x70", "--groups", "4", "--grouping", "k-contiguous"]) == 0
    assert "4 groups, k-contiguous" in capsys.readouterr().out
    assert main(["info", "--shape", "40x24x70", "--groups", "4", "--grouping", "k-contiguous",
                 "--a-layout", "row"]) == 2
    assert "--a-layout col" in capsys.readouterr().err
