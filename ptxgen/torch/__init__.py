"""ptxgen kernels as PyTorch operators: `torch.ops.ptxgen.gemm`, `.linear`, `.scaled_mm` and `.grouped_mm`.

    import ptxgen.torch as pt
    y = pt.linear(x, weight, bias, activation="gelu")   # as F.linear, activation fused
    model = pt.swap_linear(model)                        # every nn.Linear -> ptxgen.torch.Linear
    y = pt.grouped_mm(x, experts, offs=offs)             # as torch._grouped_mm (MoE); masked_m= too
    y = pt.scaled_mm(a8, b8, sa, sb, torch.bfloat16)     # fp8, per-tensor/channel or 1x128/128x128 block scales

The operators are `torch.library.custom_op`s with fake (shape-only) implementations, so
`torch.compile(fullgraph=True)` captures each as one graph node (symbolic M included), and with
autograd formulas whose backward GEMMs are ptxgen kernels too. CUDA tensors run on the GPU on
PyTorch's current stream, into outputs PyTorch allocates; CPU tensors run on ptxgen's CPU
simulator, which is slow (seconds for small shapes) and meant for tests and CI.

Importing this needs PyTorch (`pip install -e ".[torch]"`); `import ptxgen` does not.
"""
from __future__ import annotations

from ptxgen.torch import autograd as _autograd
from ptxgen.torch.dispatch import cached_kernels, clear_caches, kernel_for
from ptxgen.torch.linear import Linear, swap_linear
from ptxgen.torch.ops import gemm, linear, scaled_mm
from ptxgen.torch.grouped import grouped_mm

_autograd.register()

__all__ = ["gemm", "linear", "scaled_mm", "grouped_mm", "Linear", "swap_linear", "kernel_for", "cached_kernels", "clear_caches"]
