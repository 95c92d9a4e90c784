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


def test_an_old_driver_gets_a_cubin_from_a_ptxas_it_reads_else_the_jit(fake, monkeypatch):
    """nvJitLink 13 writes CUDA 13 cubins; a 12.4 driver gets ptxas 12.4's (relabelled here: no
    ptxas on this machine), or the PTX JIT when PTXGEN_ASSEMBLER=nvjitlink rules ptxas out."""
    from ptxgen.runtime import assemble as A
    from ptxgen.runtime import modules

    fake.driver_version = 12040
    kern = _stream_k_kernel()
    own = kern.assemble()
    monkeypatch.setattr(A, "available_assemblers",
                        lambda: {"nvjitlink": ("nvJitLink 13.5", "id"), "ptxas": ("ptxas 12.4", "id")})
    backends = []

    def assemble(ptx, arch, entry, backend=None):
        backends.append(backend)
        return dataclasses.replace(own, assembler="ptxas 12.4" if backend == "ptxas" else own.assembler,
                                   whole_program=backend == "ptxas")
    monkeypatch.setattr(A, "assemble", assemble)
    monkeypatch.setattr(type(kern), "assemble", lambda self: dataclasses.replace(own, assembler="nvJitLink 13.5"))
    cubin, runs, why = modules.kernel_binary(kern, drv.context())
    assert backends == ["ptxas"] and cubin == own.cubin and runs == "cubin for sm_90 from ptxas 12.4 (whole-program)" and not why
    monkeypatch.setenv("PTXGEN_ASSEMBLER", "nvjitlink")
    with pytest.warns(RuntimeWarning, match="using the driver's PTX JIT"):
        cubin, runs, why = modules.kernel_binary(kern, drv.context())
    assert cubin is None and why == "driver 12.4 cannot read cubins from nvJitLink 13.5 (CUDA 13 format)"
    fake.driver_version = 13000
    modules._driver_version.cache_clear()
    assert modules.kernel_binary(kern, drv.context())[1] == "cubin for sm_90 from nvJitLink 13.5 (relocatable)"
