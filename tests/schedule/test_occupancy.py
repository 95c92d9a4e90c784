"""Occupancy against hand-computed CUDA occupancy calculator cases, one per limiting resource."""
from __future__ import annotations

import pytest

from ptxgen.schedule.occupancy import occupancy


@pytest.mark.parametrize("arch,regs,smem,threads,ctas,limiter", [
    # 232 regs -> 7424 per warp, x4 warps = 29696: 2 by registers; 98304 + 1 KB reserved: 1 by smem
    ("sm_80", 232, 98304, 128, 1, "shared memory"),
    # 128 regs x 32 x 8 warps = 32768: 2 by registers; smem 0: 164; threads 2048/256 = 8
    ("sm_90", 128, 0, 256, 2, "registers"),
    # 1024 threads on a 1536-thread SM: 1 by threads (registers: 32 x 32 x 32 = 32768 -> 2)
    ("sm_86", 32, 0, 1024, 1, "threads"),
    # a single warp with 16 regs: registers 128, threads 48: the 24 CTA slots of sm_89 bind
    ("sm_89", 16, 0, 32, 24, "CTA slots"),
    # registers round up to 8 per thread: 121 -> 128 regs, 4096 per warp, 4 warps: 4 CTAs
    ("sm_80", 121, 0, 128, 4, "registers"),
    # shared memory rounds up to 128 B: 40000 -> 40064 + 1024 = 41088: 167936 // 41088 = 4
    ("sm_80", 32, 40000, 128, 4, "shared memory"),
])
def test_occupancy_matches_the_calculator(arch, regs, smem, threads, ctas, limiter):
    occ = occupancy(arch, regs, smem, threads)
    assert (occ.ctas_per_sm, occ.limiter) == (ctas, limiter)
    assert occ.warps_per_sm == ctas * -(-threads // 32)


def test_waves():
    occ = occupancy("sm_80", 232, 69632, 128)  # 2 CTAs/SM on 108 SMs: 216 CTAs a wave
    assert occ.sms == 108 and occ.waves(216) == 1.0 and occ.waves(1024) == pytest.approx(1024 / 216)


def test_info_reports_occupancy_and_waves(capsys):
    from ptxgen.cli.app import main

    assert main(["info", "--shape", "4096x4096x4096", "--arch", "sm_90", "--block", "128x128x32"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("occupancy"))
    assert "CTAs/SM" in line and "limited by" in line and "registers" in line and "CTA slots 32" in line
    assert "1024 CTAs over 132 SMs" in out and "waves" in out
