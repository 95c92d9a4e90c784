"""The CLI's Blackwell flags (--cta-group, --tile-scheduler, and --cluster with --instruction
tcgen05): the sm_100a chooser's printed `chosen` and `runner-up` lines round-trip (pasting their
flags builds the same Schedule and the same PTX), CTA pairs, multicast clusters and cluster launch
control run correct on the simulator, and misuse is one line naming the fix."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import _parser, build, main
from ptxgen.cli.flags import flag_text
from ptxgen.tune.choose import describe_schedule

ARCH = "sm_100a"
SMALL = ["--arch", ARCH, "--shape", "200x136x96", "--dtype", "bf16", "--instruction", "tcgen05"]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return status, out, err


def _kernel(argv: list[str]):
    """The kernel `ptxgen info ARGV` reports (built as the CLI builds it)."""
    return build(_parser().parse_args(["info", *argv]), (4096, 4096, 4096))


def _printed_schedules(out: str) -> list[str]:
    """The flags of every `chosen` and `runner-up N` line of `info --wide`."""
    flags = []
    for line in out.splitlines():
        words = line.split()
        if line.startswith("chosen "):
            flags.append(line[len("chosen "):].split(", by the ")[0].strip())
        elif len(words) > 2 and words[0] == "runner-up" and words[1].isdigit():
            flags.append(line.split(f"runner-up {words[1]} ", 1)[1].split(": ")[0])
    return flags


# (problem flags, what the chooser picks there: cta_group, cluster); the picks are asserted so a
# cost-model change that moves them shows here rather than silently narrowing the round trip.
CHOSEN = [
    (["--shape", "8192x8192x8192", "--dtype", "bf16", "--out", "bf16"], (2, (2, 1))),  # a CTA pair
    (["--shape", "2048x256x8192", "--dtype", "e4m3", "--out", "bf16"], (1, (2, 1))),  # a multicast cluster
    (["--shape", "512x512x4096", "--dtype", "bf16"], (1, (1, 1))),                    # one CTA
    (["--shape", "4096x4096x4096", "--dtype", "e2m1", "--block-scale", "1x16,16x1,ue4m3", "--out", "bf16"],
     (2, (2, 1))),                                                                     # NVFP4 on a CTA pair
]


@pytest.mark.parametrize("problem, picked", CHOSEN,
                         ids=["bf16-8192-pair", "e4m3-cluster", "bf16-single", "nvfp4-pair"])
def test_every_printed_sm100_schedule_round_trips(capsys, problem, picked):
    status, out, err = _run(capsys, ["info", "--arch", ARCH, *problem, "--wide"])
    assert status == 0, err
    chosen = _kernel(["--arch", ARCH, *problem])
    assert (chosen.schedule.cta_group, chosen.schedule.cluster) == picked
    printed = _printed_schedules(out)
    ranked = [chosen.choice.schedule, *(r.schedule for r in chosen.choice.runners_up)]
    assert printed == [describe_schedule(s) for s in ranked] and len(printed) >= 2
    for flags, schedule in zip(printed, ranked):
        pasted = _kernel([*problem, *flags.split()])
        assert pasted.schedule == schedule, flags
    # the chosen line pasted gives the very kernel: its name in `info` and its PTX
    again = _kernel([*problem, *printed[0].split()])
    assert again.entry == chosen.entry and again.ptx == chosen.ptx
    status, out2, err = _run(capsys, ["info", *problem, *printed[0].split(), "--wide"])
    assert status == 0, err
    assert next(line for line in out2.splitlines() if line.startswith("kernel ")) == \
        next(line for line in out.splitlines() if line.startswith("kernel "))


def test_clc_schedule_prints_and_round_trips_its_tile_scheduler():
    k = _kernel([*SMALL, "--block", "128x64x64", "--tile-scheduler", "clc"])
    text = describe_schedule(k.schedule)
    assert text.endswith("--tile-scheduler clc")
    assert _kernel(["--shape", "200x136x96", "--dtype", "bf16", *text.split()]).schedule == k.schedule


def test_blackwell_flags_set_the_tcgen05_fields():
    pair = _kernel([*SMALL, "--block", "256x128x64", "--cta-group", "2"]).schedule
    assert (pair.cta_group, pair.cluster, pair.tile_scheduler) == (2, (2, 1), "static")  # the pair is the cluster
    cluster = _kernel([*SMALL, "--block", "128x64x64", "--cluster", "1x2"]).schedule
    assert (cluster.cta_group, cluster.cluster) == (1, (1, 2))


@pytest.mark.parametrize("flags, tiles", [
    (["--block", "256x128x64", "--cta-group", "2"], "checked 2 of 2 tiles"),
    (["--block", "128x64x64", "--cluster", "2x1", "--cta-group", "1"], "checked 6 of 6 tiles"),
    (["--block", "128x64x64", "--cluster", "1x2"], "checked 6 of 6 tiles"),
    (["--block", "128x64x64", "--tile-scheduler", "clc"], "checked 6 of 6 tiles"),
    (["--block", "128x64x64", "--sms", "2"], "grid (2, 1, 1)"),  # 2 persistent CTAs walk the 6 tiles
], ids=["pair", "cluster-2x1", "cluster-1x2", "clc", "sms-2"])
def test_run_blackwell_schedules_pass_on_the_simulator(capsys, flags, tiles):
    status, out, err = _run(capsys, ["run", *SMALL, *flags, "--sim", "--wide"])
    assert status == 0, err
    assert "PASS" in out and tiles in out and "executed   on the CPU simulator" in out
    assert "checked 6 of 6 tiles" in out or "checked 2 of 2 tiles" in out  # every tile, not a sample


@pytest.mark.parametrize("flags, named, fix", [
    (["--cta-group", "2"], "--cta-group only applies to --instruction tcgen05 (--arch sm_100a)",
     "add --instruction tcgen05 --arch sm_100a, or drop --cta-group"),
    (["--arch", "sm_90a", "--instruction", "wgmma", "--tile-scheduler", "clc"],
     "--tile-scheduler only applies to --instruction tcgen05 (--arch sm_100a), not --instruction wgmma",
     "or drop --tile-scheduler"),
    (["--arch", ARCH, "--instruction", "tcgen05", "--consumers", "1"],
     "--consumers only applies to --instruction wgmma (--arch sm_90a), not --instruction tcgen05",
     "or drop --consumers"),
    (["--cluster", "2x1"], "--cluster only applies to --instruction wgmma (--arch sm_90a) or --instruction "
     "tcgen05 (--arch sm_100a)", "or drop --cluster"),
    (["--cta-group", "2", "--tile-scheduler", "clc"], "--cta-group, --tile-scheduler only apply to --instruction "
     "tcgen05", "or drop --cta-group, --tile-scheduler"),
    (["--consumers", "1", "--cta-group", "2"], "--consumers, --cta-group belong to different instructions",
     "keep the flags of one instruction"),
])
def test_blackwell_flags_elsewhere_are_one_line_usage_errors(capsys, flags, named, fix):
    status, out, err = _run(capsys, ["info", *flags])
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert named in lines[0] and fix in lines[0]


def test_bad_blackwell_flag_values_are_argparse_errors(capsys):
    for flags in (["--cta-group", "4"], ["--tile-scheduler", "dynamic"]):
        with pytest.raises(SystemExit) as e:
            main(["info", *SMALL, *flags])
        assert e.value.code == 2
        assert "invalid choice" in capsys.readouterr().err


def test_schedule_errors_name_the_blackwell_flags(capsys):
    status, out, err = _run(capsys, ["info", *SMALL, "--block", "128x64x64", "--tile-scheduler", "clc",
                                     "--cluster", "2x1"])
    assert status == 2
    assert "--tile-scheduler clc" in err and "--cluster 1x1 and --cta-group 1" in err
    assert "tile_scheduler" not in err and "cta_group" not in err  # flags, not Python fields
    assert flag_text("cta_group=2") == "--cta-group 2" and flag_text("tile_scheduler='clc'") == "--tile-scheduler clc"


@pytest.mark.parametrize("arch, instruction", [("sm_100a", "tcgen05"), ("sm_90a", "wgmma"), ("sm_80", "m16n8k16")])
def test_schedule_flags_without_instruction_take_the_archs_own(arch, instruction):
    """--block with --arch sm_100a means a tcgen05 schedule (the only one sm_100a lowers), as
    --instruction tcgen05 would; sm_90a's is wgmma, the other archs' mma.sync."""
    argv = ["--arch", arch, "--shape", "256x256x128", "--dtype", "bf16", "--block", "128x128x64", "--stages", "2"]
    k = _kernel(argv)
    assert (k.arch, k.schedule.instruction) == (arch, instruction)
    assert k.ptx == _kernel([*argv, "--instruction", instruction]).ptx


def test_a_flag_of_another_instruction_names_the_archs_default(capsys):
    status, _, err = _run(capsys, ["info", "--arch", ARCH, "--shape", "256x256x128", "--dtype", "bf16",
                                   "--block", "128x128x64", "--consumers", "2"])
    assert status == 2 and "not --instruction tcgen05 (the default for --arch sm_100a)" in err
