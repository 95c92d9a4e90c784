"""The run-time arguments of a grouped kernel (runtime/grouped.py, schedule/grouping.check_counts):
each mistake refused before the launch, naming the fix."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.check import random_operands

S = Schedule(block=(32, 32, 32))
CONTIGUOUS = Gemm(64, 32, 32, groups=3, grouping="contiguous")
MASKED = Gemm(40, 32, 32, groups=3, grouping="masked")


@pytest.fixture(scope="module")
def kernels():
    return {g.grouping: ptxgen.compile(g, S) for g in (CONTIGUOUS, MASKED)}


@pytest.mark.parametrize("grouping, kw, error, match", [
    ("contiguous", {}, ValueError, r"needs offs=, an int32 array of 3"),
    ("contiguous", {"masked_m": np.zeros(3, np.int32)}, ValueError, r"masked_m= was given .* pass offs="),
    ("contiguous", {"offs": np.array([1, 2], np.int32)}, ValueError, r"1-D array of 3 int32 .* shape \(2,\)"),
    ("contiguous", {"offs": np.array([1, 2, 3], np.int64)}, TypeError, r"not int32: pass offs.astype\(np.int32\)"),
    ("contiguous", {"offs": [10, 20, 30]}, TypeError, r"not list: pass np.asarray\(offs, dtype=np.int32\)"),
    ("contiguous", {"offs": np.array([10, 5, 30], np.int32)}, ValueError, r"non-decreasing .* offs\[1\] = 5 .* np.cumsum"),
    ("contiguous", {"offs": np.array([-1, 5, 30], np.int32)}, ValueError, r"offs\[0\] = -1 is below 0"),
    ("contiguous", {"offs": np.array([10, 20, 65], np.int32)}, ValueError, r"offs\[-1\] = 65 .* Gemm\(m=65"),
    ("masked", {}, ValueError, r"needs masked_m="),
    ("masked", {"offs": np.zeros(3, np.int32)}, ValueError, r"offs= was given .* pass masked_m="),
    ("masked", {"masked_m": np.array([0, 41, 3], np.int32)}, ValueError, r"masked_m\[1\] = 41 .*np.clip"),
    ("masked", {"masked_m": np.array([0, -2, 3], np.int32)}, ValueError, r"masked_m\[1\] = -2"),
])
def test_bad_counts_are_refused_with_a_fix(kernels, grouping, kw, error, match):
    k = kernels[grouping]
    a, b = random_operands(k.gemm)
    with pytest.raises(error, match=match):
        k.simulate(a, b, **kw)


def test_operand_shapes_name_the_grouped_layout(kernels):
    k = kernels["contiguous"]
    a, b = random_operands(k.gemm)
    offs = np.array([10, 20, 64], np.int32)
    with pytest.raises(ValueError, match=r"batch=3\) must be a 3-D array of shape \(3, 32, 32\)"):
        k.simulate(a, b[0], offs=offs)  # one B for three groups
    with pytest.raises(ValueError, match=r"A"):
        k.simulate(a[:, :16], b, offs=offs)
    m = kernels["masked"]
    a, b = random_operands(m.gemm)
    with pytest.raises(ValueError, match=r"3-D array of shape \(3, 40, 32\)"):
        m.simulate(a[0], b, masked_m=np.zeros(3, np.int32))


def test_one_group_takes_a_3d_b():
    g = Gemm(40, 16, 32, groups=1, grouping="contiguous")
    k = ptxgen.compile(g, S)
    a, b = random_operands(g)
    assert b.shape == (1, 32, 16)
    with pytest.raises(ValueError, match=r"groups=1 must be a 3-D array of shape \(1, 32, 16\).*x\[None\]"):
        k.simulate(a, b[0], offs=np.array([40], np.int32))
    assert not np.isnan(k.simulate(a, b, offs=np.array([40], np.int32))).any()


def test_counts_given_to_an_ungrouped_kernel():
    k = ptxgen.compile(Gemm(32, 32, 32), S)
    a, b = random_operands(k.gemm)
    with pytest.raises(ValueError, match=r"not a grouped GEMM: compile with Gemm\(\.\.\., groups=G, grouping='contiguous'\)"):
        k.simulate(a, b, offs=np.array([32], np.int32))
