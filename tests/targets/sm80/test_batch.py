"""Batched GEMM: (batch, M, K) @ (batch, K, N) with any batch strides; 0 broadcasts."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.check import random_operands
from tests import harness

S = Schedule(block=(64, 64, 32), stages=2)


@pytest.mark.parametrize("g", [
    Gemm(64, 64, 32, batch=3),
    Gemm(70, 50, 33, batch=2, a_layout="col", b_layout="row", out_dtype="bf16",
         epilogue=Epilogue(beta=0.5, bias="col", activation="relu")),
    Gemm(17, 129, 16, batch=2, out_dtype="f16", acc_dtype="f16", dtype="f16"),
], ids=["plain", "layouts-epilogue-edges", "f16acc"])
def test_batched_matches_numpy(g):
    k = ptxgen.compile(g, S)
    assert k.grid[2] == g.batch and "%ctaid.z" in k.ptx
    ops = harness.check(k, bound=False).ops
    assert ops.a.shape == (g.batch, g.m, g.k) and ops.b.shape == (g.batch, g.k, g.n)


def test_batch_stride_zero_broadcasts_an_operand():
    g = Gemm(64, 64, 32, batch=4)
    k = ptxgen.compile(g, S)
    a, b = random_operands(g)
    shared = np.broadcast_to(b[:1], b.shape)  # one B for every batch, batch stride 0
    harness.check(k, ops=harness.Operands(a, shared), bound=False)


def test_strided_batch_views():
    g = Gemm(32, 48, 32, batch=3, lda=40, ldc=64)
    k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    a_big = random_operands(Gemm(32, 40, 32, batch=6))[0]  # (6, 32, 40): every other batch, 40-wide rows
    a = a_big[::2, :, :32]
    _, b = random_operands(g)
    c_big = np.full((3, 32, 64), 7.0, np.float32)
    c = c_big[:, :, :48]
    out = k.simulate(a, b, c=c)
    assert np.shares_memory(out, c_big) and (c_big[:, :, 48:] == 7.0).all()
    _, result = harness.judge(g, c, harness.Operands(a, b), bound=False)
    assert result.ok, str(result)


def test_batched_operand_errors():
    g = Gemm(64, 64, 32, batch=2)
    k = ptxgen.compile(g, S)
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="shape \\(2, 64, 32\\)"):
        k.simulate(a[0], b)
    c = np.broadcast_to(np.zeros((1, 64, 64), np.float32), (2, 64, 64))
    with pytest.raises(ValueError, match="batch stride 0|read-only"):
        k.simulate(a, b, c=c)
    with pytest.raises(ScheduleError):
        ptxgen.verify(Gemm(64, 64, 32, batch=0), S)
    with pytest.raises(ScheduleError, match="z limit"):
        ptxgen.verify(Gemm(64, 64, 32, batch=70000), S)


def test_simulator_shares_the_runtime_batch_stride_checks():
    g = Gemm(64, 64, 32, batch=2)
    k = ptxgen.compile(g, S)
    a, b = random_operands(g)
    with pytest.raises(ValueError, match="A's batch stride is negative"):
        k.simulate(a[::-1], b)
    flat = np.zeros(2 * (64 * 32 + 4), a.dtype)
    skewed = np.lib.stride_tricks.as_strided(flat, a.shape, ((64 * 32 + 4) * 2, 64, 2))
    with pytest.raises(ValueError, match="batch stride is 2052 elements .* not a multiple of 16 bytes"):
        k.simulate(skewed, b)
    with pytest.raises(ValueError, match=r"got 3 matrices.*Gemm\(batch=3\)"):
        k.simulate(np.concatenate([a, a[:1]]), b)

    class OnDevice:  # a CUDA array as seen through the CUDA array interface
        __cuda_array_interface__ = {"shape": a.shape, "typestr": "<f2", "data": (0x7F0000000000, False),
                                    "strides": None, "version": 3}

    with pytest.raises(TypeError, match="Kernel.simulate takes numpy arrays; copy A to the host"):
        k.simulate(OnDevice(), b)
