"""With beta != 0 the warp-specialised kernel's producer warpgroup loads C (issue 21, point 5):
one elected lane of its warp 1 walks the CTA's tiles and loads each C box by TMA into the TMA
epilogue's C buffers once the consumers have freed them (epilogue_c_load.py), as CUTLASS's sm90
TMA warp-specialised epilogue does, instead of the consumers' leader loading C when its epilogue
starts. Proven on the simulator against float64 numpy (C is an input with beta: random, never
zero, not poisoned) with one CTA walking several tiles and with several CTAs; planted bugs (a C
buffer never handed back, a C box loaded before its buffer was freed) are caught."""
from __future__ import annotations

import re

import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, sim
from ptxgen.errors import ScheduleError
from ptxgen.schedule.verify import verify
from ptxgen.targets.sm90.plan import MBARRIER_BYTES, hopper_plan

from tests import harness

from .test_sm90_ws import _run

ARCH = "sm_90a"
BETA = Epilogue(alpha=0.5, beta=1.5)


def tn(m: int, n: int, k: int, dtype: str = "f16", out: str = "f32", epilogue: Epilogue | None = None) -> Gemm:
    return Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout="row", b_layout="col", epilogue=epilogue)


def ws(block, stages=3, consumers=1, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, consumers=consumers, **kw)


def _split(ptx: str) -> tuple[str, str, str]:
    """(main-loop producer, C loader, consumers) of a warp-specialised kernel's text."""
    loader, consumer = ptx.index("$L_c_loader:"), ptx.index("$L_consumer_start:")
    producer = ptx.index("setmaxnreg.dec.sync")
    assert producer < loader < consumer
    return ptx[producer:loader], ptx[loader:consumer], ptx[consumer:]


def test_the_producer_loads_c_and_the_consumers_only_read_it():
    g = tn(256, 512, 128, "bf16", "bf16", epilogue=BETA)
    k = ptxgen.compile(g, ws((128, 256, 64), 3, consumers=2), arch=ARCH)
    tile = hopper_plan(g, k.schedule).epilogue_tile
    assert tile is not None and tile.chunks == 4
    producer, loader, consumer = _split(k.ptx)
    assert "warps 2..3 of the producer exit" in producer and re.search(r"@%p\d+ bra \$L_c_loader;", producer)
    tma_loads = [line for line in loader.splitlines() if "cp.async.bulk.tensor.2d" in line]
    assert len(tma_loads) == tile.chunks * 2, "one box per chunk and consumer warpgroup, per tile"
    assert loader.count("mbarrier.try_wait.parity") == tile.chunks * 2 and "C-free" in loader
    assert "mbarrier::complete_tx" not in consumer, "no TMA load from the consumers"
    frees = [line for line in consumer.splitlines() if "back to the producer" in line]
    assert len(frees) == tile.chunks and all("mbarrier.arrive.shared::cta.b64" in f for f in frees)


def test_without_warp_specialisation_the_leader_still_loads_c():
    g = tn(128, 128, 64, "f16", "f16", epilogue=BETA)
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64), instruction="wgmma", stages=2, warp_specialized=False,
                                   persistent=False), arch=ARCH)
    assert "$L_c_loader" not in k.ptx and "the warpgroup leader loads C's first boxes" in k.ptx


@pytest.mark.parametrize("g, s", [
    (tn(200, 520, 136, "bf16", "bf16", epilogue=BETA), ws((128, 256, 64), 3, consumers=2, persistent=True, sms=1)),
    (tn(300, 200, 136, epilogue=BETA), ws((64, 64, 64), 2, persistent=True, sms=3)),            # f32, 2 chunks
    (Gemm(200, 136, 200, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col",
          epilogue=Epilogue(alpha=0.5, beta=-1.0, bias="col", scale="row", activation="gelu")),
     ws((128, 128, 32), 4, consumers=2, persistent=True, sms=2)),
    (tn(136, 200, 72, "f16", "f32", epilogue=BETA), ws((64, 128, 64), 2, persistent=False)),     # one tile per CTA
    (tn(264, 136, 136, "f16", "f16", epilogue=BETA), ws((128, 64, 64), 3, cluster=(2, 1), sms=4)),
], ids=["one-cta-4-chunks-2c", "three-ctas-f32", "two-ctas-gelu-2c", "not-persistent", "cluster-2x1"])
def test_producer_loaded_c_matches_numpy(g, s):
    harness.check(g, s, ARCH, seed=g.m + g.n)


#: one CTA, 6 tiles of 4 chunks (f32: 32-column boxes); `_run` poisons C, which is fine for hazards
SEVERAL = (tn(136, 264, 72, epilogue=BETA), ws((64, 128, 64), 2, persistent=True, sms=1))


def test_a_c_buffer_never_handed_back_deadlocks():
    k = ptxgen.compile(*SEVERAL, arch=ARCH)
    bad = "\n".join(line for line in k.ptx.split("\n") if "back to the producer" not in line)
    assert bad != k.ptx
    with pytest.raises(sim.HazardError) as e:
        _run(bad, k)
    assert e.value.kind == "deadlock", e.value


def test_a_c_box_loaded_before_the_consumers_freed_its_buffer_is_caught():
    """The C loader's wait on C-free dropped: the next tile's box lands while the consumers still
    read the buffer's previous box."""
    k = ptxgen.compile(*SEVERAL, arch=ARCH)
    lines = k.ptx.split("\n")
    bad = [line for line in lines if not ("C-free" not in line and "wait_c_free" in line)
           and "has read C buffer" not in line]
    assert len(bad) < len(lines)
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(bad), k)
    assert e.value.kind in ("race", "async-pending"), e.value


def test_shared_memory_plan_counts_the_c_buffers_and_their_free_barriers():
    g = tn(4096, 4096, 4096, "bf16", "bf16")
    s = ws((128, 256, 64), 3, consumers=2)
    plain, beta = hopper_plan(g, s).smem, hopper_plan(tn(4096, 4096, 4096, "bf16", "bf16", epilogue=BETA), s).smem
    assert plain.epilogue_load == 0 and beta.epilogue_load == beta.epilogue_store == 2 * 2 * 64 * 128
    # the ring's full + empty barriers and, per consumer, two C-load and two C-free barriers
    assert beta.barriers == MBARRIER_BYTES * (2 * 3 + 4 * 2)
    k = ptxgen.compile(tn(256, 512, 128, "bf16", "bf16", epilogue=BETA), s, arch=ARCH)
    assert k.smem_bytes >= beta.total - beta.align_slack


def test_c_buffers_that_do_not_fit_are_refused_with_the_fix():
    """128x256x64 with 4 stages fits 227 KB with its store staging, not with C's buffers as well."""
    s = ws((128, 256, 64), 4, consumers=2)
    verify(tn(4096, 4096, 4096, "bf16", "bf16"), s, ARCH)
    with pytest.raises(ScheduleError) as e:
        verify(tn(4096, 4096, 4096, "bf16", "bf16", epilogue=BETA), s, ARCH)
    assert "C staging" in str(e.value) and "stages <= 3" in str(e.value) and "epilogue_via_smem=False" in str(e.value)
