"""The CLI's Hopper flags (--consumers, --[no-]warp-specialized, --[no-]persistent, --cluster,
--swizzle): the built sm_90a slice runs on the simulator and passes, `info` reports warpgroups,
TMA boxes and the ring (not sm_80's warp grid), misuse is a one-line usage error naming the fix,
and refusals of the parts not built name the flags that select the built slice."""
from __future__ import annotations

import pytest

from ptxgen.cli.app import main

BUILT = ["--arch", "sm_90a", "--instruction", "wgmma", "--block", "128x128x64",
         "--no-warp-specialized", "--no-persistent", "--shape", "200x136x104"]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return status, out, err


def test_run_built_slice_passes_on_the_simulator(capsys):
    status, out, err = _run(capsys, ["run", *BUILT, "--sim"])
    assert status == 0, err
    assert "PASS" in out and "executed   on the CPU simulator" in out
    assert "checked 4 of 4 tiles" in out


def test_run_one_consumer_swizzle_32_mn_major_passes(capsys):
    argv = ["run", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "64x48x64", "--consumers", "1",
            "--swizzle", "32", "--cluster", "1x1", "--no-warp-specialized", "--no-persistent",
            "--shape", "72x48x136", "--layout", "nn", "--sim"]
    status, out, err = _run(capsys, argv)
    assert status == 0, err
    assert "PASS" in out and "32B swizzle" in out and "MN-major" in out


def test_info_reports_the_wgmma_kernel(capsys):
    status, out, err = _run(capsys, ["info", *BUILT])
    assert status == 0, err
    assert "2 warpgroups (not warp-specialised" in out and "wgmma m64n128k16" in out
    assert "one CTA per output tile" in out and "stages 3" in out
    assert "tmapA: A box 128x64, 128B swizzle, K-major" in out
    assert "tmapB: B box 128x64, 128B swizzle, K-major" in out
    assert "tmapC: C box 64x32, 128B swizzle, row-major" in out           # the TMA-store epilogue's map
    assert "TMA stores clipped at M and N" in out and "staging" in out
    assert "registers/thread" in out  # the assembler's count
    # the sm_80 structures a wgmma kernel does not have
    assert "ldmatrix" not in out and "warp tile" not in out and "cp.async" not in out
    # the ring's arithmetic adds up to the launch's dynamic shared memory
    smem = next(line for line in out.splitlines() if line.startswith("smem"))
    launch = next(line for line in out.splitlines() if line.startswith("launch"))
    total = int(smem.rsplit("=", 1)[1].split()[0])
    assert f"{total} B dynamic shared memory" in launch


def test_info_reports_the_producer_and_consumer_roles(capsys):
    status, out, err = _run(capsys, ["info", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "128x128x64",
                                     "--shape", "200x136x104"])
    assert status == 0, err
    assert "1 producer (warpgroup 2: one thread issues the TMA copies, setmaxnreg.dec 40)" in out
    assert "2 consumer warpgroups (wgmma + epilogue, setmaxnreg.inc 232; launch cap .maxnreg 168)" in out
    assert "persistent (one CTA per SM walks the tiles)" in out and "block (384, 1, 1)" in out
    assert "full + empty mbarriers" in out and "empty mbarrier (one arrival per consumer warp)" in out


@pytest.mark.parametrize("flags, named", [
    (["--consumers", "2"], "--consumers"),
    (["--no-persistent"], "--persistent/--no-persistent"),
    (["--warp-specialized"], "--warp-specialized/--no-warp-specialized"),
    (["--cluster", "2x1"], "--cluster"),
    (["--swizzle", "64", "--instruction", "wmma"], "--swizzle"),
])
def test_hopper_flags_without_wgmma_are_a_usage_error(capsys, flags, named):
    status, out, err = _run(capsys, ["info", *flags])
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert named in lines[0] and "add --instruction wgmma --arch sm_90a" in lines[0]


def test_persistent_without_warp_specialisation_is_refused_with_the_flags(capsys):
    argv = [a for a in BUILT if a != "--no-persistent"]
    status, out, err = _run(capsys, ["info", *argv])
    assert status == 2
    # --persistent is a default here, so the flags typed are named and the default said to be one
    assert err.startswith("ptxgen: not built yet: --block 128x128x64 --instruction wgmma --no-warp-specialized")
    assert "(with the default --persistent)" in err and "set --warp-specialized, or --no-persistent" in err
    assert "_specialized=" not in err and "persistent=" not in err  # flags, not Python fields


def test_run_default_warp_specialized_persistent_kernel_passes(capsys):
    """No --no-* flags: the Schedule's defaults (warp-specialised, persistent); --sms 2 makes each
    CTA walk several of the 9 tiles."""
    argv = ["run", "--arch", "sm_90a", "--instruction", "wgmma", "--block", "128x64x64", "--sms", "2",
            "--shape", "300x136x104", "--sim"]
    status, out, err = _run(capsys, argv)
    assert status == 0, err
    assert "PASS" in out and "checked 9 of 9 tiles" in out


def test_cluster_refusal_names_the_cluster_flag(capsys):
    status, out, err = _run(capsys, ["info", *BUILT, "--cluster", "2x1"])
    assert status == 2
    assert "--cluster 2x1" in err and "set --cluster 1x1" in err


@pytest.mark.parametrize("flags, message", [
    (["--consumers", "3"], "invalid choice"),
    (["--swizzle", "16"], "invalid choice"),
    (["--cluster", "2"], "e.g. 2x1"),
])
def test_bad_hopper_flag_values_are_argparse_errors(capsys, flags, message):
    with pytest.raises(SystemExit) as e:
        main(["info", *BUILT, *flags])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
