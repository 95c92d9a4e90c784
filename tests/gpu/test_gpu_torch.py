"""ptxgen.torch on CUDA tensors: results against float64, PyTorch's current stream, a CUDA-graph
capture and replay, and the Python overhead per call against torch.matmul (recorded in the GPU
report). Needs a CUDA build of PyTorch on a GPU: under the stand-in driver PyTorch's CUDA runtime
cannot start (gpu_helpers.torch_on_gpu says why); tests/torch covers the operators on CPU tensors."""
from __future__ import annotations

import time

import pytest

import ptxgen
from ptxgen.check import compare, reference
from gpu_helpers import cuda_rand as rand, host_f64 as f64, record, require_gpu, torch_on_gpu

require_gpu()


@pytest.fixture
def torch():
    return torch_on_gpu()


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_linear_on_cuda_tensors_on_a_side_stream(torch, dtype_name):
    import ptxgen.torch as pt

    dtype = getattr(torch, dtype_name)
    x, w = rand(torch, 200, 136, dtype=dtype, seed=1), rand(torch, 72, 136, dtype=dtype, seed=2)
    bias = rand(torch, 72, dtype=torch.float32, seed=3)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = pt.linear(x, w, bias, "gelu")  # launched on `side`, PyTorch's current stream here
    side.synchronize()
    assert y.is_cuda and y.dtype == dtype and y.shape == (200, 72)
    out = {"float16": "f16", "bfloat16": "bf16"}[dtype_name]
    g = ptxgen.Gemm(200, 72, 136, dtype=out, out_dtype=out, b_layout="col",
                    epilogue=ptxgen.Epilogue(bias="col", activation="gelu"))
    result = compare(f64(y), reference(f64(x), f64(w).T, g.epi, bias=f64(bias)), g)
    assert result.ok, result


def test_cuda_graph_capture_and_replay(torch):
    import ptxgen.torch as pt

    x = rand(torch, 64, 128, dtype=torch.float16, seed=4)
    w = rand(torch, 96, 128, dtype=torch.float16, seed=5)
    bias = rand(torch, 96, dtype=torch.float16, seed=6)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compile, load the module, check the launch once
        pt.linear(x, w, bias, "relu")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = pt.linear(x, w, bias, "relu")
    x.copy_(rand(torch, 64, 128, dtype=torch.float16, seed=7))  # new input in the captured buffer
    y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    g = ptxgen.Gemm(64, 96, 128, dtype="f16", out_dtype="f16", b_layout="col",
                    epilogue=ptxgen.Epilogue(bias="col", activation="relu"))
    result = compare(f64(y), reference(f64(x), f64(w).T, g.epi, bias=f64(bias)), g)
    assert result.ok, result


def per_call_us(fn, calls: int = 2000) -> float:
    """Host time per call, issuing `calls` back to back (the GPU queues them), best of 3."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def test_python_overhead_per_call_against_torch_matmul(torch):
    import ptxgen.torch as pt

    a, w = rand(torch, 64, 64, dtype=torch.float16, seed=8), rand(torch, 64, 64, dtype=torch.float16, seed=9)
    wt = w.t()
    pt.gemm(a, wt)  # compile and check once
    torch.cuda.synchronize()
    matmul = per_call_us(lambda: torch.matmul(a, wt))
    torch.cuda.synchronize()
    ours = per_call_us(lambda: pt.gemm(a, wt))
    torch.cuda.synchronize()
    op = per_call_us(lambda: torch.ops.ptxgen.gemm(a, wt))
    torch.cuda.synchronize()
    record("torch_overhead_per_call", torch_matmul_us=matmul, ptxgen_gemm_us=ours, ptxgen_op_us=op,
           extra_us=ours - matmul, device=torch.cuda.get_device_name())
    # a call that went through kernel(a, b)'s full per-call checks instead would cost milliseconds
    assert ours < matmul + 200, f"ptxgen.torch.gemm costs {ours:.1f} us per call, torch.matmul {matmul:.1f} us"
