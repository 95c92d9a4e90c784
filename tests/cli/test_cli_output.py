"""The CLI's report reads well: lines of at most 119 characters unless --wide, times in the unit
that fits (µs/ms/s, never "1818389.8 us"), counted nouns in the right number ("1 CTA/SM")."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import main
from ptxgen.schedule.units import counted, seconds_text

INFO = ["info", "--shape", "4096x4096x4096"]


def test_report_lines_fit_119_characters_unless_wide(monkeypatch, capsys):
    monkeypatch.delenv("PTXGEN_WIDE")
    assert main(INFO) == 0
    wrapped = capsys.readouterr().out.splitlines()
    assert max(map(len, wrapped)) <= 119
    assert main([*INFO, "--wide"]) == 0
    whole = capsys.readouterr().out.splitlines()
    assert max(map(len, whole)) > 119 and len(whole) < len(wrapped)
    assert " ".join(" ".join(wrapped).split()) == " ".join(" ".join(whole).split())  # same words


@pytest.mark.parametrize("seconds,text", [(5.1e-6, "5.1 µs"), (491.5e-6, "492 µs"), (1.8183898, "1.82 s"),
                                          (1.82e-3, "1.82 ms"), (75.0, "75 s")])
def test_times_are_scaled(seconds, text):
    assert seconds_text(seconds) == text


def test_counts_take_the_right_number(capsys):
    assert counted(1, "CTA") == "1 CTA" and counted(2, "CTA") == "2 CTAs"
    assert main(INFO) == 0
    out = capsys.readouterr().out
    assert " us " not in out and " us," not in out and "1 CTAs" not in out and "1 warps" not in out
    assert main(["info", "--shape", "4096x4096x4096", "--block", "256x128x32", "--warps", "4x2"]) == 0
    assert "occupancy  1 CTA/SM (8 warps)" in capsys.readouterr().out


def test_the_no_gpu_reason_is_given_in_full_once(monkeypatch, tmp_path, capsys):
    """The first run on a machine says why there is no GPU; later runs say only that there is none
    (the reason is remembered in the cache directory, and given again if it changes)."""
    from ptxgen.runtime.driver import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present: run does not simulate")
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path))
    argv = ["run", "--shape", "64x64x32", "--block", "64x64x32"]
    assert main(argv) == 0
    assert "on the CPU simulator (no GPU: " in capsys.readouterr().out
    assert main(argv) == 0
    assert "on the CPU simulator (no GPU, as before): " in capsys.readouterr().out
