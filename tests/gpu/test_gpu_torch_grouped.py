"""ptxgen.torch.grouped_mm and block-scaled scaled_mm on CUDA tensors: the counts read on the
device (new offs rerun one kernel with no recompile), masked slots, block scales in DeepGEMM's
M-contiguous storage, each against float64 on PyTorch's current stream. Needs a CUDA build of
PyTorch on a GPU (gpu_helpers.torch_on_gpu); tests/torch covers the operators on CPU tensors."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen.check import compare, reference, untouched_rows
from ptxgen.schedule.block_scale import scaled_product
from gpu_helpers import cuda_rand as rand, host_f64 as f64, require_gpu, torch_on_gpu

require_gpu()


@pytest.fixture
def torch():
    return torch_on_gpu()


def test_grouped_mm_contiguous_and_masked_on_cuda(torch):
    import ptxgen.torch as pt

    a = rand(torch, 300, 136, dtype=torch.bfloat16, seed=1)
    b = rand(torch, 5, 136, 72, dtype=torch.bfloat16, seed=2)
    pt.clear_caches()
    for ends in ([0, 40, 40, 171, 290], [300, 300, 300, 300, 300], [1, 2, 3, 4, 5]):
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
        got = pt.grouped_mm(a, b, offs, out_dtype=torch.float32)
        torch.cuda.synchronize()
        g = pt.cached_kernels()[-1].gemm
        kw = {"offs": np.array(ends, np.int32)}
        result = compare(f64(got), reference(f64(a), f64(b), c=np.zeros((300, 72)), **kw), g,
                         untouched=untouched_rows(g, **kw))
        assert result.ok, (ends, result)
    assert len(pt.cached_kernels()) == 1  # offs read on the device: one kernel for every size
    am = rand(torch, 5, 64, 136, dtype=torch.float16, seed=3)
    counts = [0, 64, 17, 1, 40]
    got = pt.grouped_mm(am, b.half().transpose(1, 2).contiguous().transpose(1, 2),
                        masked_m=torch.tensor(counts, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    g = pt.cached_kernels()[-1].gemm
    kw = {"masked_m": np.array(counts, np.int32)}
    result = compare(f64(got), reference(f64(am), f64(b), c=np.zeros((5, 64, 72)), **kw), g,
                     untouched=untouched_rows(g, **kw))
    assert result.ok, result


def test_block_scaled_scaled_mm_on_cuda(torch):
    import ptxgen.torch as pt

    m, n, k = 200, 264, 464  # K: three full 128-wide blocks and a partial one
    a = rand(torch, m, k, dtype=torch.float8_e4m3fn, seed=4)
    b = rand(torch, n, k, dtype=torch.float8_e4m3fn, seed=5).t()
    gen = torch.Generator().manual_seed(6)
    sa_storage = (torch.rand(4, m, generator=gen) * 4 + 0.25).cuda()  # (ceil(K/128), M): M contiguous
    sb = (torch.rand(4, 3, generator=gen) * 4 + 0.25).cuda()
    got = pt.scaled_mm(a, b, sa_storage.t(), sb, torch.bfloat16)
    torch.cuda.synchronize()
    g = pt.cached_kernels()[-1].gemm
    assert g.block_scale is not None
    want = scaled_product(f64(a), f64(b), g.block_scale, f64(sa_storage).T, f64(sb))
    result = compare(f64(got), want, g)
    assert result.ok, result
