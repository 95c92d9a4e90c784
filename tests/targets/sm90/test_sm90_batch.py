"""Batched sm_90a GEMMs (targets/sm90/batch.py): A and B through 3-D tensor maps (batch outermost,
the operand's batch stride), the batch index the TMA copies' third coordinate, C moved by
batch_stride_c. Proven on the simulator against float64 numpy per batch with a poisoned C; a
planted bug (the batch coordinate dropped) must be caught; a batch stride TMA cannot describe is
refused with the fix."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule
from ptxgen.check import random_operands, random_epilogue_operands, random_scale, reference, tolerance
from ptxgen.targets.sm90 import batch as sm90_batch
from ptxgen.targets.sm90.plan import WGMMA_N
from tests import harness

ARCH = "sm_90a"


def simple(block, stages=2, consumers=1, **kw) -> Schedule:
    return Schedule(block=block, instruction="wgmma", stages=stages, warp_specialized=False, persistent=False,
                    consumers=consumers, **kw)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batched_sm90_gemms_match_numpy_per_batch(data):
    batch = data.draw(st.integers(1, 4), label="batch")
    dtype = data.draw(st.sampled_from(("f16", "bf16")), label="dtype")
    out = data.draw(st.sampled_from(("f32", "f16", "bf16")), label="out_dtype")
    a_layout, b_layout = (data.draw(st.sampled_from(("row", "col")), label=x) for x in ("a_layout", "b_layout"))
    m, n = (data.draw(st.integers(1, 140), label=x) for x in ("M", "N"))
    k = data.draw(st.integers(1, 24), label="K/8") * 8                 # 16-byte aligned rows (TMA)
    if a_layout == "col":
        m = -(-m // 8) * 8                                              # A's rows run along M
    if b_layout == "row":
        n = -(-n // 8) * 8
    epi = None
    if data.draw(st.booleans(), label="epilogue?"):
        epi = Epilogue(alpha=data.draw(st.sampled_from((1.0, 0.5)), label="alpha"),
                       beta=data.draw(st.sampled_from((0.0, 1.0)), label="beta"),
                       bias=data.draw(st.sampled_from((None, "col", "row")), label="bias"),
                       scale=data.draw(st.sampled_from((None, "col", "row")), label="scale"))
    g = Gemm(m, n, k, dtype=dtype, out_dtype=out, a_layout=a_layout, b_layout=b_layout, batch=batch, epilogue=epi)
    bn = data.draw(st.sampled_from([x for x in (16, 32, 64, 128) if x in WGMMA_N[dtype]]), label="BN")
    bk = data.draw(st.sampled_from((32, 64)), label="BK")
    s = simple((64, bn, bk), data.draw(st.integers(1, 3), label="stages"),
               raster=data.draw(st.sampled_from(("row", "grouped")), label="raster"))
    kern = ptxgen.compile(g, s, arch=ARCH)
    assert kern.grid[2] == batch
    assert all(len(t.box) == (3 if batch > 1 else 2) for t in kern.tensor_maps)
    harness.check(kern, seed=batch)


@pytest.mark.parametrize("g, s", [
    (Gemm(130, 72, 200, batch=4, a_layout="row", b_layout="col"), simple((128, 64, 64), 3, consumers=2)),
    (Gemm(64, 64, 64, batch=2, dtype="bf16", a_layout="col", b_layout="row", out_dtype="bf16"), simple((64, 64, 64))),
], ids=["4-batches-2wg-edges", "mn-major-bf16"])
def test_batched_edges_and_majors(g, s):
    harness.check(g, s, ARCH, seed=3)


def test_the_batch_is_the_third_tma_coordinate_and_moves_c():
    g = Gemm(64, 64, 64, batch=3, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, simple((64, 64, 64)), arch=ARCH)
    assert "cp.async.bulk.tensor.3d" in k.ptx and "cp.async.bulk.tensor.2d" not in k.ptx
    assert ".param .u64 batch_stride_c" in k.ptx and "%ctaid.z" in k.ptx
    assert [t.box for t in k.tensor_maps] == [(1, 64, 64), (1, 64, 64)]
    assert "3-D, batch outermost" in k.ptx


def test_dropping_the_batch_coordinate_is_caught(monkeypatch):
    """Planted bug: every TMA copy reads batch 0 (the coordinate a zero register); C still moves by
    batch, so batches 1.. get batch 0's product, and the elementwise comparison must see it."""
    g = Gemm(64, 64, 64, batch=3, a_layout="row", b_layout="col")
    s = simple((64, 64, 64))
    harness.check(g, s, ARCH, seed=1)
    real = sm90_batch.tma_batch_coordinate

    def batch_zero(lw, z):
        coord = real(lw, z)
        return tuple(lw.u32("mov.u32", ptxgen.ir.Imm("0")) for _ in coord)

    monkeypatch.setattr(sm90_batch, "tma_batch_coordinate", batch_zero)
    bad = ptxgen.compile(g, s, arch=ARCH)
    assert not harness.run(bad, seed=1).ok


def test_a_broadcast_operand_is_refused_with_the_fix():
    """A batch stride of 0 is not a stride TMA can describe (positive multiples of 16 bytes)."""
    g = Gemm(64, 64, 64, batch=2, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, simple((64, 64, 64)), arch=ARCH)
    a, b = random_operands(g, 0)
    with pytest.raises(ValueError, match="batch stride is 0.*3-D tensor map.*arch='sm_90'"):
        k.simulate(np.broadcast_to(a[0], a.shape), b)
    sm80 = ptxgen.compile(g, Schedule(block=(64, 64, 32)), arch="sm_90")   # the fix named works
    harness.check(sm80, ops=harness.Operands(np.broadcast_to(a[0], a.shape), b))


def test_a_strided_batch_view_reads_the_right_matrices():
    """Matrices further apart than dense (a slice of a wider allocation): the map's batch stride is
    the view's, not rows x cols."""
    g = Gemm(64, 48, 64, batch=2, a_layout="row", b_layout="col")
    k = ptxgen.compile(g, simple((64, 48, 64)), arch=ARCH)
    a, b = random_operands(g, 2)
    wide = np.zeros((4, 64, 64), a.dtype)
    wide[::2] = a
    harness.check(k, ops=harness.Operands(wide[::2], b))
