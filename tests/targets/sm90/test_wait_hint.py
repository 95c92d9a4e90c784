"""Issue 21 point 5: every mbarrier wait of an sm_90a kernel passes try_wait's suspend-time hint
(mbarrier_isa.SUSPEND_TIME_HINT_NS, CUTLASS's 10 ms), and the simulator runs the hinted kernel."""
from __future__ import annotations

import re

import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.emit import mbarrier_isa as mb
from ptxgen.ir import Addr, Builder, Sym
from tests import harness

ARCH = "sm_90a"


@pytest.mark.parametrize("schedule", [
    Schedule(block=(128, 128, 64), instruction="wgmma", stages=3),
    Schedule(block=(128, 64, 64), instruction="wgmma", stages=2, warp_specialized=False, persistent=False),
])
def test_every_try_wait_carries_the_suspend_hint_and_runs(schedule):
    g = Gemm(256, 128, 192, dtype="f16", out_dtype="f32", a_layout="row", b_layout="col")
    ptx = ptxgen.compile(g, schedule, arch=ARCH).ptx
    waits = re.findall(r"mbarrier\.try_wait\.parity[^;]*;", ptx)
    assert waits and all(w.endswith(f", {mb.SUSPEND_TIME_HINT_NS};") for w in waits), waits
    assert harness.run(g, schedule, ARCH, seed=3).result.ok


def test_hint_is_optional_and_checked():
    b = Builder("k", [])
    p = b.reg("b32")
    mb.try_wait_parity(b, Addr(Sym("bar")), p, suspend_hint_ns=None)
    assert len(b.body[-1].operands) == 3
    with pytest.raises(ValueError, match="suspendTimeHint"):
        mb.try_wait_parity(b, Addr(Sym("bar")), p, suspend_hint_ns=0)
