"""`ptxgen.torch.Linear`: a drop-in `torch.nn.Linear` whose forward is `ptxgen::linear`, and
`swap_linear`, which puts it in place of a model's Linear layers (sharing their parameters)."""
from __future__ import annotations

from typing import Callable

import torch

from ptxgen.torch.ops import ACTIVATIONS, linear


class Linear(torch.nn.Linear):
    """torch.nn.Linear computed by a ptxgen kernel, optionally with a fused activation.

    A subclass, so parameters, state_dict keys, initialisation and `isinstance(m, nn.Linear)` are
    torch's own. `activation` ("relu", "gelu" = tanh approximation, "silu") is applied in the
    kernel's epilogue."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 activation: str | None = None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}: use one of {ACTIVATIONS} or None")
        self.activation = activation

    @classmethod
    def from_linear(cls, layer: torch.nn.Linear, activation: str | None = None) -> "Linear":
        """A ptxgen Linear sharing `layer`'s weight and bias tensors (no copy)."""
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = layer.in_features, layer.out_features
        new.weight = layer.weight
        new.bias = layer.bias
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r}: use one of {ACTIVATIONS} or None")
        new.activation = activation
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        act = f", activation={self.activation!r}" if self.activation else ""
        return super().extra_repr() + act + ", ptxgen"


def swap_linear(model: torch.nn.Module,
                include: Callable[[str, torch.nn.Linear], bool] | None = None) -> torch.nn.Module:
    """Replace every `torch.nn.Linear` in `model` (in place; also `model` itself, which is then
    returned as the new module) by a `ptxgen.torch.Linear` sharing its parameters. `include(name,
    layer)` picks which (default: all). Returns the model."""
    if isinstance(model, torch.nn.Linear) and not isinstance(model, Linear):
        return Linear.from_linear(model) if include is None or include("", model) else model
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and not isinstance(child, Linear):
                full = f"{name}.{child_name}" if name else child_name
                if include is None or include(full, child):
                    setattr(module, child_name, Linear.from_linear(child))
    return model
