"""Issue 21 point 2: every sm_90a kernel family initialises its mbarriers with
fence.mbarrier_init.release.cluster after the inits and before the barrier that publishes them
(and so before any use), and again after each re-init (Stream-K's mbarrier.inval + init between
work units), as CUTLASS's PipelineTmaAsync does (MbarrierRing.publish)."""
from __future__ import annotations

import re

import pytest

import ptxgen
from tests.emit_golden.cases import CASES

FAMILIES = ("h_ws_128x128_s4", "h_nonws_tile", "h_batch_nonws", "h_splitk", "h_streamk", "h_streamk_pure",
            "h_cluster_2x1", "h_ws_tma_store_beta")
_USE = re.compile(r"mbarrier\.(try_wait|arrive|test_wait)|cp\.async\.bulk")
_PUBLISH = re.compile(r"\bbar\.sync\b|barrier\.sync|barrier\.cluster\.arrive")


def _ptx(name: str) -> str:
    for n, g, s, arch in CASES:
        if n == name:
            return ptxgen.compile(g, s, arch).ptx
    raise KeyError(name)


def init_runs(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line of each run of mbarrier.init (and .inval) instructions."""
    runs, start = [], None
    for i, line in enumerate(lines):
        is_init = "mbarrier.init." in line or "mbarrier.inval." in line
        if is_init and start is None:
            start = i
        if not is_init and start is not None and not line.strip().startswith("//"):
            runs.append((start, i - 1))
            start = None
    return runs


def check_fenced(ptx: str) -> int:
    """Each init run is followed by the fence before the next publishing barrier and before any
    use of a barrier; returns the number of runs checked."""
    lines = ptx.splitlines()
    runs = init_runs(lines)
    for first, last in runs:
        after = lines[last + 1:]
        fence = next(i for i, line in enumerate(after) if "fence.mbarrier_init.release.cluster" in line)
        use = next((i for i, line in enumerate(after) if _USE.search(line)), len(after))
        publish = next((i for i, line in enumerate(after) if _PUBLISH.search(line)), len(after))
        assert fence < min(use, publish), (lines[first], after[fence], after[min(use, publish) - 1:][:1])
    return len(runs)


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_fences_its_mbarrier_inits(name):
    ptx = _ptx(name)
    runs = check_fenced(ptx)
    assert runs >= 1
    if "streamk" in name:   # the initial init and the re-init after every unit
        assert runs >= 2 and ptx.count("mbarrier.inval") > 0


def test_a_missing_fence_is_caught():
    ptx = _ptx("h_streamk")
    lines = ptx.splitlines()
    last = max(i for i, line in enumerate(lines) if "fence.mbarrier_init" in line)
    planted = "\n".join(lines[:last] + lines[last + 1:])
    with pytest.raises((AssertionError, StopIteration)):
        check_fenced(planted)
