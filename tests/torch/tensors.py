"""Test tensors for tests/torch: never-zero values in [0.5, 1] with random signs, exact in the dtype
(so a product's error is the kernel's, not the inputs'), and their float64 views for the reference."""
from __future__ import annotations

import numpy as np
import torch


def rand(*shape: int, dtype: torch.dtype, seed: int, grad: bool = False) -> torch.Tensor:
    """Never-zero values in [0.5, 1] with random signs, exactly representable in `dtype`."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.rand(*shape, generator=g) * 0.5 + 0.5
    sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
    return (mag * sign).to(dtype).requires_grad_(grad)


def fp8(*shape: int, seed: int) -> torch.Tensor:
    """`rand` as float8_e4m3fn (every value in [0.5, 1] is exact there to 3 mantissa bits)."""
    return rand(*shape, dtype=torch.float8_e4m3fn, seed=seed)


def f64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()
