"""The register budget of every sm_90a kernel, read from its emitted PTX (issue 21, point 6): the
warpgroups' setmaxnreg counts must fit the pool the CTA launches with, `.maxnreg` x `.maxntid`
registers (warp_specialisation.md §9g: `setmaxnreg.dec` releases registers to a per-CTA pool,
`.inc` blocks until the pool has them, so an overdraw hangs the consumers on hardware; ptxas 13.5
assembles it without a warning). Checked on the text, apart from the verifier's rule
(targets/sm90/verify.py) and from the plan that chose the counts, so a wrong count emitted by
the lowering is caught even where the verifier accepted the schedule."""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

import ptxgen
from ptxgen import Gemm, Schedule

ARCH = "sm_90a"
WARPGROUP = 128
_CODE = re.compile(r"//.*$")


@dataclass(frozen=True)
class Budget:
    """Registers per thread of each warpgroup after its setmaxnreg, and the launch's pool."""
    counts: tuple[int, ...]
    launch_regs: int
    threads: int

    @property
    def used(self) -> int:
        return sum(self.counts) * WARPGROUP

    @property
    def pool(self) -> int:
        return self.launch_regs * self.threads


def _lines(ptx: str) -> list[str]:
    return [line for raw in ptx.splitlines() if (line := _CODE.sub("", raw).strip())]


def register_budget(ptx: str) -> Budget | None:
    """None without setmaxnreg (every thread keeps what it launched with). Else each warpgroup's count: the launch's `.maxnreg` unless it runs a setmaxnreg. The roles split
    at `setp.lt.u32 %p, %wg, C; @%p bra L` with %wg = %tid.x >> 7 (or its warp-uniform copy,
    `shfl.sync.idx.b32 %u, %wg, 0, ...`): warpgroups below C continue at L (their first setmaxnreg
    after L), the others fall through (their first before L)."""
    lines = _lines(ptx)
    sets = [i for i, line in enumerate(lines) if line.startswith("setmaxnreg.")]
    if not sets:
        return None
    threads = int(re.search(r"^\.maxntid (\d+), 1, 1$", ptx, re.M).group(1))
    launch = int(re.search(r"^\.maxnreg (\d+)$", ptx, re.M).group(1))
    groups = threads // WARPGROUP
    tid = next(m.group(1) for line in lines if (m := re.match(r"mov\.u32 (%r\d+), %tid\.x;", line)))
    wg = next(m.group(1) for line in lines if (m := re.match(rf"shr\.u32 (%r\d+), {tid}, 7;", line)))
    wgs = {wg} | {m.group(1) for line in lines if (m := re.match(rf"shfl\.sync\.idx\.b32 (%r\d+), {wg}, 0,", line))}
    for i, line in enumerate(lines):
        m = re.match(rf"setp\.lt\.u32 (%p\d+), ({'|'.join(wgs)}), (\d+);", line)
        b = m and re.match(rf"@{m.group(1)} bra (\S+);", lines[i + 1])
        if b:
            split, below, label = i + 1, int(m.group(3)), b.group(1)
            break
    else:
        raise AssertionError("no role split on the warpgroup index (setp.lt.u32 + bra) before the setmaxnreg")
    target = lines.index(f"{label}:")

    def first_count(lo: int, hi: int) -> int:
        found = [int(re.search(r"(\d+);$", lines[j]).group(1)) for j in sets if lo < j < hi]
        return found[0] if found else launch

    upper, lower = first_count(split, target), first_count(target, len(lines))
    return Budget((lower,) * below + (upper,) * (groups - below), launch, threads)


def ws(block, consumers, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=3, consumers=consumers, **kw)


def simple(block, consumers=1, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=3, consumers=consumers, warp_specialized=False,
                    **{"persistent": False, **kw})


G = Gemm(1024, 1024, 512, dtype="bf16", out_dtype="bf16", a_layout="row", b_layout="col")
DESIGNS = {
    "ws-1c": (G, ws((128, 128, 64), 1)),
    "ws-2c": (G, ws((128, 256, 64), 2)),
    "ws-2c-regs-at-the-pool": (G, ws((128, 128, 64), 2, producer_regs=40, consumer_regs=232)),
    "ws-2c-small-producer": (G, ws((128, 128, 64), 2, producer_regs=24, consumer_regs=240)),
    "ws-not-persistent": (G, ws((128, 128, 64), 2, persistent=False)),
    "ws-cluster-2x1": (G, ws((128, 128, 64), 2, cluster=(2, 1))),
    "ws-cluster-1x2": (G, ws((128, 64, 64), 2, cluster=(1, 2))),
    "ws-batch": (Gemm(256, 256, 128, batch=3, a_layout="row", b_layout="col"), ws((128, 128, 64), 2)),
    "ws-fp8": (Gemm(512, 512, 512, dtype="e4m3", out_dtype="bf16", fast_accum=True), ws((128, 256, 128), 2)),
    "ws-fp8-promoted": (Gemm(512, 512, 512, dtype="e4m3", out_dtype="bf16"), ws((128, 192, 128), 2)),
    "ws-s8": (Gemm(512, 512, 512, dtype="s8", out_dtype="s32"), ws((128, 128, 128), 1)),
    "ws-tf32": (Gemm(512, 512, 512, dtype="tf32"), ws((128, 128, 32), 2)),
    "simple": (G, simple((128, 128, 64))),
    "simple-2c": (G, simple((128, 256, 64), 2)),
    "split-k": (G, simple((128, 128, 64), split_k=2)),
    "stream-k": (G, simple((128, 128, 64), decomposition="stream-k", sms=8, persistent=None)),
}


@pytest.mark.parametrize("name", list(DESIGNS))
def test_setmaxnreg_counts_fit_the_launch_pool(name):
    g, s = DESIGNS[name]
    k = ptxgen.compile(g, s, arch=ARCH)
    budget = register_budget(k.ptx)
    if not k.schedule.warp_specialized:   # no producer to take registers from: no setmaxnreg at all
        assert budget is None
        return
    assert budget is not None and budget.threads == k.block[0] and len(budget.counts) * WARPGROUP == budget.threads
    assert budget.used <= budget.pool, (name, budget)
    assert min(budget.counts) < budget.launch_regs < max(budget.counts), budget


@pytest.mark.parametrize("planted, count", [("setmaxnreg.inc.sync.aligned.u32 232;", 248),
                                            ("setmaxnreg.dec.sync.aligned.u32 40;", 56)])
def test_a_planted_overdraw_in_the_ptx_is_caught(planted, count):
    """The issue's plant: consumers raised to 248 with a 40-register producer, (40 + 2 x 248) x 128
    = 68,608 registers asked of 64,512; and a producer that gives back too few."""
    k = ptxgen.compile(*DESIGNS["ws-2c-regs-at-the-pool"], arch=ARCH)
    good = register_budget(k.ptx)
    assert good is not None and good.used == good.pool == 64512                      # exactly the pool: (40 + 2 x 232) x 128
    assert planted in k.ptx
    bad = register_budget(k.ptx.replace(planted, planted.replace(planted.split()[-1], f"{count};")))
    assert bad is not None and bad.used > bad.pool
