"""The simulator path refuses an output that overlaps an input (the GPU path's rule, shared in
runtime.operands), keeps C-in-place with beta, and hands the kernel its inputs read-only."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from tests import harness

SCHEDULE = Schedule(block=(64, 64, 32), warps=(2, 2), stages=2)


def _operands(host: np.ndarray, g: Gemm):
    """A (row-major, columns 0..63) and B (column-major, columns 64..127) as views of `host`."""
    rng = np.random.default_rng(3)
    host[...] = (rng.uniform(0.5, 1.5, host.shape) * rng.choice([-1, 1], host.shape)).astype(host.dtype)
    return host[:, :g.k], host[:, 64:64 + g.n].T.copy().T


def test_output_overlapping_an_input_is_refused_by_simulate():
    # An f16 bias kernel reads the bias array itself (an f32-bias kernel would get a widened copy).
    g = Gemm(64, 64, 64, out_dtype="f16", bias_dtype="f16", epilogue=Epilogue(bias="col"))
    k = ptxgen.compile(g, SCHEDULE)
    host = np.zeros((64, 256), np.float16)
    a, b = _operands(host, g)
    bias = np.full(64, 0.25, np.float16)
    with pytest.raises(ValueError, match=r"C overlaps A in memory .*Pass a separate array for C.*a\.copy\(\)"):
        k.simulate(a, b, c=host[:, 32:96], bias=bias)
    with pytest.raises(ValueError, match="C overlaps bias"):
        k.simulate(a, b, c=host[:, 128:192], bias=host[5, 150:214])
    before = host.copy()
    c = k.simulate(a, b, c=host[:, 128:192], bias=bias)  # interleaved with A, no shared element
    _, result = harness.judge(g, c, harness.Operands(a, b, bias=bias), bound=False)
    assert result.ok, str(result)
    assert np.array_equal(host[:, :128], before[:, :128]), "A's columns are untouched"


def test_c_updated_in_place_with_beta_is_allowed():
    """C is the beta input and the output: each element is read, then written, by one thread."""
    g = Gemm(64, 64, 64, out_dtype="f32", epilogue=Epilogue(alpha=0.5, beta=2.0))
    k = ptxgen.compile(g, SCHEDULE)
    a, b = _operands(np.zeros((64, 128), np.float16), g)
    c0 = np.random.default_rng(1).uniform(-1, 1, (64, 64)).astype(np.float32)
    c = c0.copy()
    out = k.simulate(a, b, c=c)
    _, result = harness.judge(g, c, harness.Operands(a, b, c0), bound=False)
    assert np.shares_memory(out, c) and result.ok, str(result)


def test_a_kernel_storing_into_an_input_is_reported():
    """Kernel.simulate passes A and B read-only: a kernel whose epilogue stores into A (here: C's
    pointer parameter swapped for A's) is a hazard, not a silently corrupted input."""
    g = Gemm(64, 64, 64, out_dtype="f16")
    k = ptxgen.compile(g, SCHEDULE)
    broken = re.sub(r"ld\.param\.u64 (%rd\d+), \[C\];", r"ld.param.u64 \1, [A];", k.ptx)
    assert broken.count("[A];") == 2
    a, b = _operands(np.zeros((64, 128), np.float16), g)
    k = dataclasses.replace(k, ptx=broken)
    with pytest.raises(ptxgen.sim.HazardError, match="read-only argument"):
        k.simulate(a, b, c=np.zeros((64, 64), np.float16))
