"""Review fixes that need several devices or contexts, which the one-device stand-in driver
cannot provide, so they run on the fake driver (fake_driver.py)."""
from __future__ import annotations

import dataclasses
import sys

import pytest

import ptx_samples as S
from ptxgen.kernel import Kernel
from ptxgen.runtime import driver as drv
from ptxgen.runtime.launch import _split_k_scratch
from ptxgen.schedule.geometry import grid_for
from ptxgen.schedule.problem import Gemm
from ptxgen.schedule.schedule import Schedule


def _stream_k_kernel() -> Kernel:
    g = Gemm(512, 512, 256)
    s = Schedule(block=(64, 64, 32), decomposition="stream-k", sms=8)
    ptx = S.gemm_stub().replace(".param .u32 ldc", ".param .u32 ldc, .param .u64 workspace, .param .u64 counters")
    return Kernel(gemm=g, schedule=s, arch="sm_90", ptx=ptx, entry="gemm", grid=grid_for(g, s, 108),
                  block=(128, 1, 1), smem_bytes=16384, function=None, allocation=None, smem_plan=None)


def test_split_k_workspace_is_per_device_and_context(fake, monkeypatch):
    kern = _stream_k_kernel()
    ctx = drv.context()
    grid = kern.launch_grid(ctx.sm_count)
    first = _split_k_scratch(kern, grid, 0)
    assert _split_k_scratch(kern, grid, 0) is first  # reused within one context
    for other in (dataclasses.replace(ctx, handle=0xBEEF, modules={}),            # another context
                  dataclasses.replace(ctx, ordinal=1, handle=0xF00D, modules={})):  # another device
        monkeypatch.setattr(drv, "context", lambda other=other: other)
        mine = _split_k_scratch(kern, grid, 0)
        assert mine is not first and mine[0].ptr != first[0].ptr, "workspace shared across contexts"
        assert mine[0].ctx is other


class _TorchStandIn:
    """Just enough of the `torch` module for `_alloc_like` (torch is not installed here): it
    records which dtype ptxgen asks for. On GPU machines with torch, tests/gpu checks real tensors."""

    float32, float16, bfloat16, int32, int8, uint8 = "float32", "float16", "bfloat16", "int32", "int8", "uint8"

    def __init__(self):
        self.asked: list = []

    def empty(self, shape, dtype, device):
        self.asked.append((tuple(shape), dtype, device))
        return ("tensor", dtype)


class _TorchTensor:
    device = "cuda:0"


_TorchTensor.__module__ = "torch"


@pytest.mark.parametrize("out_dtype,want", [("s32", "int32"), ("s8", "int8"), ("u8", "uint8"), ("f16", "float16")])
def test_torch_inputs_get_torch_outputs_for_every_output_dtype(monkeypatch, out_dtype, want):
    from ptxgen.runtime.launch import _alloc_like

    torch = _TorchStandIn()
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert _alloc_like(_TorchTensor(), (4, 8), out_dtype) == ("tensor", want)
    assert torch.asked == [((4, 8), want, "cuda:0")]
