"""mbarrier on the simulator: phases, counts, transaction counts, tokens and parities against
hand-computed cases, and each hazard (over-arrival, a wait that can never complete, use before the
init is visible, use after inval) planted next to its fixed twin."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def kernel(body: str, shared: str = ".shared .align 8 .b64 bar;\n") -> str:
    """One entry; %r1 holds the barrier's shared address, %p0 is true for thread 0 only, and
    `OUT(reg)` lines store a .b32 register to out[slot] (slot counts up) for thread 0."""
    lines, slot = [], 0
    for line in body.strip("\n").split("\n"):
        if line.strip().startswith("OUT("):
            reg = line.strip()[4:-1]
            lines.append(f"    @%p0 st.global.u32 [%rd0+{4 * slot}], {reg};")
            slot += 1
        else:
            lines.append(line)
    return (HEADER + shared + ".visible .entry k(.param .u64 pOut)\n{\n"
            "    .reg .pred %p<8>;\n    .reg .b32 %r<32>;\n    .reg .b64 %rd<16>;\n"
            "    ld.param.u64 %rd0, [pOut];\n    mov.u32 %r0, %tid.x;\n    mov.u32 %r1, bar;\n"
            "    setp.eq.u32 %p0, %r0, 0;\n" + "\n".join(lines) + "\n    ret;\n}\n")


def run(body: str, block: int = 32, nout: int = 16) -> np.ndarray:
    out = np.full(nout, 0xDEAD, dtype=np.uint32)
    sim.launch(kernel(body), "k", block=(block,), args=[out])
    return out


def pred(p: str, r: str) -> str:
    return f"    selp.u32 {r}, 1, 0, {p};\nOUT({r})"


def test_all_threads_arrive_completes_the_phase_and_parity_and_token_report_it():
    out = run("""
    @%p0 mbarrier.init.shared::cta.b64 [%r1], 32;
    bar.sync 0;
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r2") + """
    mbarrier.arrive.shared::cta.b64 %rd1, [%r1];
    mbarrier.test_wait.shared::cta.b64 %p2, [%r1], %rd1;
""" + pred("%p2", "%r3") + """
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r1], 0;
""" + pred("%p3", "%r4") + """
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r1], 1;
""" + pred("%p4", "%r5") + """
    cvt.u32.u64 %r6, %rd1;
OUT(%r6)
""")
    # before: phase 0 open -> false; token of phase 0 done; parity 0 done, parity 1 (current) not; token 0
    assert out[:5].tolist() == [0, 1, 1, 0, 0]


def test_arrive_with_count_and_second_phase():
    out = run("""
    @%p0 mbarrier.init.shared.b64 [%r1], 5;
    @%p0 mbarrier.arrive.release.cta.shared::cta.b64 %rd1, [%r1], 3;
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r2") + """
    @%p0 mbarrier.arrive.shared::cta.b64 %rd2, [%r1], 2;
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r3") + """
    @%p0 mbarrier.arrive.shared::cta.b64 %rd3, [%r1], 5;
    @%p0 mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r4") + """
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 1;
""" + pred("%p1", "%r5") + """
    cvt.u32.u64 %r6, %rd2;
OUT(%r6)
    cvt.u32.u64 %r7, %rd3;
OUT(%r7)
    @%p0 mbarrier.test_wait.shared::cta.b64 %p1, [%r1], %rd2;
""" + pred("%p1", "%r8"), block=1)
    # 3 of 5: open; +2: phase 0 done; +5: phase 1 done, so phase 2 (parity 0) is open and parity 1 done
    assert out[:7].tolist() == [0, 1, 0, 1, 0, 1, 1]


def test_transaction_count_must_reach_zero_too():
    out = run("""
    @%p0 mbarrier.init.shared::cta.b64 [%r1], 1;
    @%p0 mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], 64;
    @%p0 mbarrier.arrive.shared::cta.b64 _, [%r1];
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r2") + """
    @%p0 mbarrier.complete_tx.shared::cta.b64 [%r1], 48;
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r3") + """
    @%p0 mbarrier.complete_tx.shared::cta.b64 [%r1], 16;
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
""" + pred("%p1", "%r4") + """
    @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 32;
    @%p0 mbarrier.complete_tx.shared::cta.b64 [%r1], 32;
    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 1;
""" + pred("%p1", "%r5"), block=1)
    assert out[:4].tolist() == [0, 0, 1, 1]


def test_cluster_and_generic_addressing_of_own_barrier():
    out = run("""
    @%p0 mbarrier.init.shared::cta.b64 [%r1], 32;
    bar.sync 0;
    mov.u64 %rd3, bar;
    cvta.shared.u64 %rd2, %rd3;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r1];
    mbarrier.try_wait.parity.b64 %p1, [%rd2], 0;
""" + pred("%p1", "%r2"))
    assert out[0] == 1


WAIT_LOOP = """
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    @!%p1 bra WAIT;
"""


@pytest.mark.parametrize("count, kind", [(32, None), (31, "race")])
def test_over_arrival_is_a_hazard(count, kind):
    body = f"""
    @%p0 mbarrier.init.shared::cta.b64 [%r1], {count};
    bar.sync 0;
    mbarrier.arrive.shared::cta.b64 _, [%r1];
""" + WAIT_LOOP
    if kind is None:
        run(body)
        return
    with pytest.raises(sim.HazardError) as e:
        run(body)
    assert e.value.kind == kind and "more arrivals than the phase expects" in e.value.detail


@pytest.mark.parametrize("arrive", [True, False])
def test_wait_that_can_never_complete_is_a_deadlock_naming_the_barrier(arrive):
    body = """
    @%p0 mbarrier.init.shared::cta.b64 [%r1], 32;
    bar.sync 0;
""" + ("    mbarrier.arrive.shared::cta.b64 _, [%r1];\n" if arrive else "") + WAIT_LOOP
    if arrive:
        run(body)
        return
    with pytest.raises(sim.HazardError) as e:
        run(body)
    assert e.value.kind == "deadlock" and "mbarrier at shared 0x0" in e.value.detail
    assert "32 of 32 arrivals pending" in e.value.detail and "try_wait" in e.value.line_text


@pytest.mark.parametrize("sync", [True, False])
def test_other_threads_need_a_barrier_after_init(sync):
    body = ("    @%p0 mbarrier.init.shared::cta.b64 [%r1], 32;\n" + ("    bar.sync 0;\n" if sync else "")
            + "    mbarrier.arrive.shared::cta.b64 _, [%r1];\n" + WAIT_LOOP)
    if sync:
        run(body)
        return
    with pytest.raises(sim.HazardError) as e:
        run(body)
    assert e.value.kind == "race" and "no bar.sync" in e.value.detail


@pytest.mark.parametrize("reinit", [True, False])
def test_inval_ends_the_barrier(reinit):
    body = """
    @%p0 mbarrier.init.shared::cta.b64 [%r1], 1;
    @%p0 mbarrier.inval.shared::cta.b64 [%r1];
""" + ("    @%p0 mbarrier.init.shared::cta.b64 [%r1], 1;\n" if reinit else "") + """
    @%p0 mbarrier.arrive.shared::cta.b64 _, [%r1];
"""
    if reinit:
        run(body)
        return
    with pytest.raises(sim.HazardError) as e:
        run(body)
    assert e.value.kind == "race" and "no initialised mbarrier" in e.value.detail


def test_misaligned_barrier_and_bad_parity_are_reported():
    with pytest.raises(sim.HazardError) as e:
        run("    add.u32 %r2, %r1, 4;\n    @%p0 mbarrier.init.shared::cta.b64 [%r2], 1;", block=1)
    assert e.value.kind == "misaligned"
    with pytest.raises(sim.HazardError) as e:
        run("    @%p0 mbarrier.init.shared::cta.b64 [%r1], 1;\n    mov.u32 %r2, 2;\n"
            "    @%p0 mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], %r2;", block=1)
    assert "phaseParity must be 0 or 1" in e.value.detail


@pytest.mark.parametrize("text", [
    "    mbarrier.arrive.noComplete.shared::cta.b64 %rd1, [%r1], 1;",
    "    mbarrier.pending_count.b64 %r2, %rd1;",
    "    mbarrier.init.shared::cta.b32 [%r1], 1;",
])
def test_unsupported_forms_are_rejected_before_running(text):
    with pytest.raises(sim.HazardError) as e:
        run(text, block=1)
    assert e.value.kind == "unsupported" and "mbarrier" in e.value.line_text
