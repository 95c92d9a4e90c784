"""Split-K and Stream-K kernels relaunched on the simulator with the same workspace and counters:
the last CTA of each tile resets its counter, so a second launch (as a training loop does) needs
no memset and gives the right answer.

Split-K's reduction order is a contract: the workspace mode sums the S partial tiles in split
order 0..S-1 whichever CTA arrives last (emit/splitk.py), so the result is deterministic bit for
bit. It is tested here against that sum done in numpy f32 from each split's own partial.
"""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import poisoned, random_epilogue_operands, random_operands
from ptxgen.simulate import run_simulation
from tests import harness


def first_launch_args(monkeypatch, k: ptxgen.Kernel, a, b, c0=None, bias=None):
    """Run the kernel once through run_simulation and keep the exact argument list it launched
    with (its C buffer, workspace and counters) to launch again."""
    seen = {}
    real = ptxgen.sim.launch

    def spy(*args, **kw):
        seen["args"] = kw["args"]
        return real(*args, **kw)

    monkeypatch.setattr(ptxgen.sim, "launch", spy)
    c, _ = run_simulation(k, a, b, c=None if c0 is None else c0.copy(), bias=bias)
    monkeypatch.setattr(ptxgen.sim, "launch", real)
    return c, seen["args"]


CASES = {
    "split-k workspace": (Gemm(96, 80, 300, epilogue=Epilogue(alpha=0.5, beta=1.0, bias="col")),
                          Schedule(block=(64, 64, 32), split_k=3)),
    "split-k f16 out": (Gemm(64, 64, 256, out_dtype="f16"), Schedule(block=(64, 64, 32), split_k=4, stages=2)),
    "stream-k": (Gemm(128, 96, 256, epilogue=Epilogue(bias="row")),
                 Schedule(block=(64, 32, 32), decomposition="stream-k", sms=5)),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_relaunch_resets_counters_and_is_correct(monkeypatch, case):
    g, s = CASES[case]
    k = ptxgen.compile(g, s)
    assert k.counter_count > 0
    a, b = random_operands(g)
    c0, bias = random_epilogue_operands(g)
    ops = harness.Operands(a, b, c0, bias)
    first, args = first_launch_args(monkeypatch, k, a, b, c0, bias)
    counters = args[-1]
    assert counters.dtype == np.uint32 and len(counters) == k.counter_count
    _, result = harness.judge(g, first, ops, bound=False)
    assert result.ok, str(result)
    assert not counters.any(), f"counters left at {counters.tolist()} after the first launch"
    # second launch, same workspace and counters, C reset to poison (or C0 for beta != 0)
    first_copy = first.copy()
    first[...] = poisoned(first.shape, g.out_dtype) if c0 is None else c0
    ptxgen.sim.launch(k.ptx, k.entry, grid=k.grid, block=k.block, args=args, dynamic_smem=k.smem_bytes)
    assert not counters.any(), f"counters left at {counters.tolist()} after the second launch"
    _, result = harness.judge(g, first, ops, bound=False)
    assert result.ok, str(result)
    assert np.array_equal(first.view(np.uint8), first_copy.view(np.uint8)), "the relaunch differs"


def test_split_k_sums_partials_in_split_order_bit_for_bit():
    """C = ((P0 + P1) + P2) + P3 in f32, where Pz is split z's partial (the same mma sequence as a
    split_k=1 kernel over its K range), whichever CTA arrives last."""
    g, s = Gemm(64, 64, 256), Schedule(block=(64, 64, 32), split_k=4)
    a, b = random_operands(g, seed=5)
    k = ptxgen.compile(g, s)
    part_gemm = Gemm(64, 64, 64)
    part_kernel = ptxgen.compile(part_gemm, Schedule(block=(64, 64, 32)))
    parts = [run_simulation(part_kernel, np.ascontiguousarray(a[:, z * 64:(z + 1) * 64]),
                            np.asfortranarray(b[z * 64:(z + 1) * 64]))[0] for z in range(4)]
    in_order = parts[0]
    for p in parts[1:]:
        in_order = (in_order + p).astype(np.float32)
    reversed_order = parts[3]
    for p in parts[2::-1]:
        reversed_order = (reversed_order + p).astype(np.float32)
    assert not np.array_equal(in_order, reversed_order), "the data must tell the orders apart"
    for order in (range(4), [3, 2, 1, 0], [2, 0, 3, 1]):
        c, _ = run_simulation(k, a, b, ctas=[(0, 0, z) for z in order])
        assert np.array_equal(c.view(np.uint32), in_order.view(np.uint32)), f"arrival order {list(order)}"
