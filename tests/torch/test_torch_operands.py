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
