"""Every refusal the CLI can print gives a fix that works: each case below is refused (exit 2),
the first fix its message suggests is applied to the command line as a user would, and the new
command must then be accepted (exit 0).

The cases cover the CLI's own errors (argparse types and choices, flag combinations, flags that
would have no effect, the output file) and the verifier's refusals as the CLI words them;
tests/schedule/test_fixes_work.py follows the Python fixes of every rule in the verifier's table.
"""
from __future__ import annotations

import re

import pytest

from ptxgen.cli.app import main

SMALL = ["--shape", "256x256x128"]
#: (id, argv): each is refused; `follow` turns its message into the next command line.
REFUSED = [
    ("block over shared memory, stages defaulted", ["info", *SMALL, "--block", "512x512x64"]),
    ("stages over shared memory", ["info", *SMALL, "--stages", "9", "--block", "128x128x64"]),
    ("BK not a multiple of k", ["info", *SMALL, "--block", "128x128x24"]),
    ("too many warps", ["info", *SMALL, "--warps", "8x8"]),
    ("warps do not divide the block", ["info", *SMALL, "--block", "96x128x32", "--warps", "4x2"]),
    ("split-k over the k-tiles", ["info", *SMALL, "--split-k", "64", "--block", "128x128x32"]),
    ("split-k-mode without split-k", ["info", *SMALL, "--block", "128x128x32", "--split-k-mode", "atomic"]),
    ("group-m without grouped raster", ["info", *SMALL, "--block", "128x128x32", "--group-m", "4"]),
    ("sms without stream-k", ["info", *SMALL, "--block", "128x128x32", "--sms", "8"]),
    ("int output from f16", ["info", *SMALL, "--block", "128x128x32", "--out", "s8"]),
    ("f16 accumulation into f32", ["info", *SMALL, "--block", "128x128x32", "--acc", "f16"]),
    ("bias dtype of another output", ["info", *SMALL, "--block", "128x128x32", "--epilogue", "bias=col",
                                      "--bias-dtype", "f16"]),
    ("rows break the stated alignment", ["info", "--shape", "256x256x1020", "--align", "16", "--block",
                                         "128x128x32"]),
    ("batch zero", ["info", *SMALL, "--block", "128x128x32", "--batch", "0"]),
    ("stages zero", ["info", *SMALL, "--block", "128x128x32", "--stages", "0"]),
    ("int8 split-k into 8-bit output", ["info", *SMALL, "--dtype", "u8", "--out", "u8", "--split-k", "2",
                                        "--block", "128x128x64"]),
    ("fp8 not K-major on sm_90a", ["info", *SMALL, "--arch", "sm_90a", "--dtype", "e4m3", "--layout", "nn"]),
    ("fp8 both operands wrong", ["info", *SMALL, "--arch", "sm_90a", "--dtype", "e4m3", "--layout", "nt"]),
    ("fp8 on the mma.sync path", ["info", *SMALL, "--arch", "sm_90", "--dtype", "e4m3", "--block", "128x128x32"]),
    ("hopper flag without wgmma", ["info", *SMALL, "--block", "128x128x64", "--consumers", "2"]),
    ("layout and a-layout disagree", ["info", *SMALL, "--block", "128x128x32", "--layout", "nn", "--a-layout",
                                      "row"]),
    ("negative shape, space", ["info", "--block", "128x128x32", "--shape", "-4x8x8"]),
    ("negative shape, equals", ["info", "--block", "128x128x32", "--shape=-4x8x8"]),
    ("dtype not a choice", ["info", *SMALL, "--block", "128x128x32", "--dtype", "f8"]),
    ("epilogue value not a choice", ["info", *SMALL, "--block", "128x128x32", "--epilogue", "scale=diag"]),
    ("unknown epilogue field", ["info", *SMALL, "--block", "128x128x32", "--epilogue", "zoom=2"]),
    ("warp tile over the registers", ["info", *SMALL, "--block", "128x128x32", "--warps", "1x1"]),
    ("512 threads over the registers", ["info", *SMALL, "--block", "256x256x32", "--warps", "4x4"]),
    ("copies do not split over the threads", ["info", *SMALL, "--block", "64x64x32", "--warps", "4x4"]),
    ("warp tile not a multiple of the mma", ["info", *SMALL, "--block", "40x128x32", "--warps", "1x2"]),
    ("unsupported arch", ["info", *SMALL, "--block", "128x128x32", "--arch", "sm_75"]),
    ("seed negative", ["info", *SMALL, "--block", "128x128x32", "--seed", "-1"]),
]
REFUSED[-1] = ("seed negative", ["run", "--shape", "64x64x32", "--block", "64x64x32", "--seed", "-1"])


def _strip(value: str) -> str:
    return value.strip("'\",;()")


def _set(argv: list[str], flag: str, value: str | None) -> list[str]:
    """argv with `flag value` replacing the flag's old value (or appended)."""
    out = [t for t in argv]
    for i, t in enumerate(out):
        if t == flag or t.startswith(flag + "="):
            del out[i:i + (1 if "=" in t or value is None and (i + 1 == len(out) or out[i + 1].startswith("-"))
                           else 2)]
            break
    return out + ([flag] if value is None else [flag, value])


def _drop(argv: list[str], flag: str) -> list[str]:
    out = list(argv)
    i = next(i for i, t in enumerate(out) if t == flag or t.startswith(flag + "="))
    del out[i:i + (1 if "=" in out[i] or i + 1 == len(out) or out[i + 1].startswith("--") else 2)]
    return out


def follow(argv: list[str], err: str, tmp_path) -> list[str]:
    """The command line after doing what the message's first fix says."""
    message = err.strip().removeprefix("ptxgen: ").split(" (`", 1)[0]
    flag_error = re.match(r"(--[a-z-]+): (.*)", message)
    if flag_error and "invalid choice" in message:  # argparse's choice list: take the first
        return _set(argv, flag_error.group(1), re.search(r"choose from '([^']+)'", message).group(1))
    example = re.search(r"e\.g\. (?:(--[a-z-]+) )?(\S+)$", message)
    if flag_error and example:  # "--shape: ... e.g. 4096x4096x4096", "--epilogue: ... e.g. --epilogue bias=col"
        return _set(argv, example.group(1) or flag_error.group(1), example.group(2))
    fix = message.rsplit(": ", 1)[1]
    first = re.split(r",? or |; or |, or ", fix)[0]
    first = re.sub(r"\([^)]*\)", "", first) if "--" in re.sub(r"\([^)]*\)", "", first) else first
    dropped = re.findall(r"drop (--[a-z-]+)", first)
    for flag in dropped:
        argv = _drop(argv, flag)
    pairs = re.findall(r"(--[a-z-]+)(?:[ =]((?!--)[^\s,;]+))?", re.sub(r"drop --[a-z-]+", "", first))
    assert pairs or dropped, f"no flag to follow in {first!r} ({message})"
    for flag, value in pairs:
        argv = _set(argv, flag, _strip(value) if value else None)
    return argv


def status_of(argv: list[str]) -> int:
    """main's exit status (argparse's own errors leave through SystemExit)."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("argv", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_following_the_suggested_fix_is_accepted(argv, capsys, tmp_path):
    assert status_of(argv) == 2, capsys.readouterr()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err and "None" not in err, err
    fixed = follow(argv, err, tmp_path)
    status = status_of(fixed)
    after = capsys.readouterr().err
    assert status == 0, f"{' '.join(argv)}\n  said: {err.strip()}\n  then: {' '.join(fixed)}\n  said: {after}"


def test_a_missing_output_folder_is_refused_with_a_fix_that_works(capsys, tmp_path):
    target = tmp_path / "new" / "dir" / "k.ptx"
    argv = ["emit", *SMALL, "--block", "128x128x32", "-o", str(target)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    command = re.search(r"\(mkdir -p (\S+)\)", err).group(1)
    import os

    os.makedirs(command)
    assert main(argv) == 0 and target.read_text().startswith("//")


def test_a_default_the_user_never_typed_is_not_blamed(capsys):
    assert main(["info", *SMALL, "--block", "512x512x64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ptxgen: invalid schedule: --block 512x512x64: ") and "(with the default --stages 3)" in err
    assert "use a smaller block" in err
