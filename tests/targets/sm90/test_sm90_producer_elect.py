"""The warp-specialised producer's issuing thread is chosen by elect.sync (issue 21, point 5):
warps 1..3 of the producer warpgroup exit, then one lane of warp 0 is elected and the others exit.
Chosen by `tid == 128 * consumers` instead, ptxas wrapped each UTMALDG in a small loop electing
the active lanes one by one (two such loops in the producer's k-loop, 36 SASS; 26 with elect.sync,
ptxas 13.0.88)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import ptxgen
from ptxgen import Gemm, Schedule, sim

from .test_sm90_gemm import tn

ARCH = "sm_90a"


def _producer_prologue(ptx: str) -> str:
    start = ptx.index("setmaxnreg.dec.sync")
    return ptx[start:ptx.index("prefetch.tensormap", start)]


@pytest.mark.parametrize("consumers", [1, 2])
def test_the_producer_thread_is_elected_with_elect_sync(consumers):
    k = ptxgen.compile(tn(256, 256, 256), Schedule(block=(128, 128, 64), instruction="wgmma", stages=4,
                                                   consumers=consumers), arch=ARCH)
    head = _producer_prologue(k.ptx)
    assert re.search(rf"setp\.lt\.u32 (%p\d+), %r\d+, {128 * consumers + 32};\s*\n\s*@!\1 ret;", head), head
    m = re.search(r"elect\.sync _\|(%p\d+), 0xffffffff;.*\n\s*@!\1 ret;", head)
    assert m, head
    assert "setp.eq.u32" not in head, "no tid test chooses the producer thread any more"


def test_electing_a_lane_of_a_warp_that_is_not_whole_is_caught():
    """elect.sync's mask names all 32 lanes: every one must execute it. Moving it above the
    `warps 1..3 exit` return keeps it legal; running it after only lane 0 survives is divergence."""
    g, s = tn(64, 64, 64), Schedule(block=(64, 64, 64), instruction="wgmma", stages=2)
    k = ptxgen.compile(g, s, arch=ARCH)
    lines = k.ptx.split("\n")
    first = next(i for i, line in enumerate(lines) if "warps 1..3 of the producer exit" in line)
    setp = first - 1
    assert "setp.lt.u32" in lines[setp]
    bad = lines[setp].replace("setp.lt.u32", "setp.eq.u32").replace(", 160;", ", 128;")   # tid == 128 only
    assert bad != lines[setp]
    lines[setp] = bad
    from .test_sm90_ws import _run
    with pytest.raises(sim.HazardError) as e:
        _run("\n".join(lines), k)
    assert e.value.kind == "divergence" and "elect.sync" in str(e.value), e.value


def test_no_utmaldg_is_wrapped_in_an_elect_loop_by_ptxas(monkeypatch):
    """Whole-program ptxas: the producer's k-loop holds its two UTMALDG and no inner loop around
    either (bench/sass_hopper.py finds the loops)."""
    from ptxgen.runtime import assemble as asm

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from sass import cuobjdump, sass_text
    from sass_cfg import find_loops, parse_functions
    from sass_hopper import analyse_sass

    tool = cuobjdump()
    if tool is None or asm._ptxas_path() is None:
        pytest.skip("needs ptxas and cuobjdump")
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "ptxas")
    g = Gemm(4096, 4096, 4096, dtype="f16", out_dtype="f16", a_layout="row", b_layout="col")
    k = ptxgen.compile(g, Schedule(block=(128, 128, 64), instruction="wgmma", stages=4), arch=ARCH)
    text = sass_text(k.cubin, tool)
    h = next(x for x in analyse_sass(text) if x.function == k.entry)
    assert h.producer is not None and h.producer.classes["tma_load"] == 2
    loops = find_loops(parse_functions(text)[k.entry])
    wrapped = [lp for lp in loops if lp.classes["tma_load"] and lp.blocks < h.producer.blocks]
    assert not wrapped, [lp.total for lp in wrapped]
    assert h.producer.total <= 30, h.producer.total
