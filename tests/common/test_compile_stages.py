"""`compile` is a list of named stages whose outputs the Kernel keeps (issue 13 item 0)."""
from __future__ import annotations

import pytest

import ptxgen
from ptxgen.compile import STAGES
from ptxgen.ir import Function
from ptxgen.regalloc import Allocation, SmemPlan
from ptxgen.schedule.targets import Target


def test_kernel_keeps_every_stage_output_in_order():
    k = ptxgen.compile(ptxgen.Gemm(256, 256, 128), ptxgen.Schedule(block=(128, 128, 32)), "sm_86")
    assert list(k.stages) == [s.name for s in STAGES] == ["verify", "plan_shared", "lower", "allocate", "launch",
                                                         "render"]
    assert isinstance(k.stages["verify"], Target) and k.stages["verify"].arch == "sm_86"
    assert isinstance(k.stages["plan_shared"], SmemPlan) and k.stages["plan_shared"] is k.smem_plan
    assert isinstance(k.stages["lower"], Function) and k.stages["lower"] is k.function
    assert isinstance(k.stages["allocate"], Allocation) and k.stages["allocate"] is k.allocation
    launch = k.stages["launch"]
    assert (launch.grid, launch.block, launch.smem_bytes) == (k.grid, k.block, k.smem_bytes)
    assert k.stages["render"] == k.ptx and ".target sm_86" in k.ptx


def test_a_refused_schedule_stops_at_the_verify_stage():
    with pytest.raises(ptxgen.ScheduleError):
        ptxgen.compile(ptxgen.Gemm(256, 256, 128), ptxgen.Schedule(block=(128, 128, 32), stages=0))
