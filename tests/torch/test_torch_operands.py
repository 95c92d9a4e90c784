"""What ptxgen's runtime reads from torch tensors on the CUDA path, without a GPU: fp8 tensors,
which torch's __cuda_array_interface__ refuses, go through DLPack (kDLFloat8_e4m3fn / _e5m2)."""
from __future__ import annotations

import pytest
import torch

from ptxgen.runtime.operands import check_operand, normalize_dtype


class CudaDLPack:
    """A CPU tensor's DLPack capsule presented as a CUDA device's (device type 2)."""

    def __init__(self, t: torch.Tensor):
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.parametrize("dtype, name", [(torch.float8_e4m3fn, "e4m3"), (torch.float8_e5m2, "e5m2")])
def test_fp8_tensors_read_through_dlpack(dtype, name):
    t = torch.zeros(16, 32, dtype=dtype)
    assert normalize_dtype(dtype) == name
    v = check_operand(CudaDLPack(t), name="A", shape=(16, 32), dtype=name, layout="row")
    assert (v.kind, v.itemsize, v.ld, v.device_ptr) == ("dlpack", 1, 32, t.data_ptr())
    other = "e5m2" if name == "e4m3" else "e4m3"
    with pytest.raises(TypeError, match=f"A must have dtype {other}"):
        check_operand(CudaDLPack(t), name="A", shape=(16, 32), dtype=other, layout="row")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float32])
def test_a_permuted_cpu_tensor_is_a_view_over_one_dense_buffer(dtype):
    """convert.as_numpy: a (G, K, N) view of (G, N, K) storage, neither C- nor F-contiguous, shares
    the tensor's memory and strides, and its base chain ends in a dense buffer (the simulator's
    global memory and 3-D tensor maps need one: numpy's own view of it has no ndarray base)."""
    import numpy as np

    from ptxgen.torch.convert import as_numpy

    big = (torch.arange(2 * 5 * 48, dtype=torch.float32).reshape(2, 5, 48) % 7).to(dtype)
    t = big[:, 1:, :].transpose(1, 2)  # (2, 48, 4), strides (240, 1, 48), storage offset 48
    x = as_numpy(t)
    assert x.shape == (2, 48, 4) and x.strides == tuple(s * t.element_size() for s in t.stride())
    assert np.array_equal(x.astype(np.float64), t.double().numpy())
    root = x
    while isinstance(root.base, np.ndarray):
        root = root.base
    assert root.flags.c_contiguous and root.nbytes == big.untyped_storage().nbytes()
    x[1, 0, 0] = x[0, 0, 1]  # writes show in the tensor
    assert t[1, 0, 0].double() == t[0, 0, 1].double()
