"""A two-layer MLP of ptxgen.torch.Linear: torch.compile(fullgraph=True) matches eager PyTorch
elementwise, its gradients match torch.nn.Linear's, and a varying M does not recompile.

Bounds: both models see the same f16 inputs and weights and accumulate in f32, so they differ by
the rounding of each layer's f16 output (one unit roundoff u = 2^-11 of |h| per element, two where
the two round a tie differently) carried through the next layer's |W| (and GELU's slope, at most
1.13), plus f32 accumulation (K * 2^-23 of the terms' magnitude). Every elementwise bound below is
that, times 4 for safety: a wrong layout, transpose or bias is off by the size of the terms."""
from __future__ import annotations

import torch

import ptxgen.torch as pt

U16 = 2.0 ** -11
K_TERMS = 64 * 2.0 ** -23  # f32 accumulation over K <= 64


def reference_mlp(dtype: torch.dtype) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(approximate="tanh"),
                               torch.nn.Linear(64, 32)).to(dtype)


class PtxgenMLP(torch.nn.Module):
    """The same layers as ptxgen.torch.Linear, GELU fused into the first one's epilogue."""

    def __init__(self, ref: torch.nn.Sequential):
        super().__init__()
        self.up = pt.Linear.from_linear(ref[0], activation="gelu")
        self.down = pt.Linear.from_linear(ref[2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.up(x))


def forward_bound(ref: torch.nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Elementwise |ptxgen - eager| allowed for the MLP's output (see the module docstring)."""
    w1, b1, w2, b2 = (p.detach().double().abs() for p in (ref[0].weight, ref[0].bias, ref[2].weight, ref[2].bias))
    xa = x.detach().double().abs()
    mag1 = xa @ w1.t() + b1
    h = ref[1](ref[0](x)).detach().double().abs()
    dh = 2 * U16 * h + 1.2 * K_TERMS * mag1
    mag2 = h @ w2.t() + b2
    y = ref(x).detach().double().abs()
    return 4 * (dh @ w2.t() + 2 * U16 * y + K_TERMS * mag2)


def test_compiled_mlp_matches_eager_and_swap_linear_swaps():
    ref = reference_mlp(torch.float16)
    mlp = PtxgenMLP(ref)
    x = (torch.rand(16, 32) - 0.5).to(torch.float16)
    compiled = torch.compile(mlp, fullgraph=True)
    got = compiled(x).double()
    want = ref(x).double()
    diff = (got - want).abs()
    bound = forward_bound(ref, x)
    assert torch.isfinite(got).all() and (diff <= bound).all(), f"max excess {(diff - bound).max().item():.3g}"
    swapped = pt.swap_linear(reference_mlp(torch.float16))
    assert all(isinstance(swapped[i], pt.Linear) for i in (0, 2))
    assert (swapped(x).double() - want).abs().le(bound).all()


def test_mlp_gradients_match_torch_nn_linear():
    ref = reference_mlp(torch.float16)
    mlp = PtxgenMLP(reference_mlp(torch.float16))  # the same initial values, separate parameters
    x = (torch.rand(16, 32) - 0.5).to(torch.float16)
    dy = (torch.rand(16, 32) - 0.5).to(torch.float16)
    ref(x).backward(dy)
    # aot_eager: AOTAutograd traces the registered backward (ptxgen::gemm nodes) without Inductor's
    # code generation, which the forward test already covers and which costs ~20 s more here
    torch.compile(mlp, fullgraph=True, backend="aot_eager")(x).backward(dy)
    # magnitudes of the gradients' terms, from absolute values (float64)
    w1, w2 = (p.detach().double().abs() for p in (ref[0].weight, ref[2].weight))
    xa, dya = x.double().abs(), dy.double().abs()
    h = ref[1](ref[0](x)).detach().double().abs()
    dz1 = 1.2 * dya @ w2  # |d h| times GELU's slope bound
    mags = {"up.weight": dz1.t() @ xa, "up.bias": dz1.sum(0), "down.weight": dya.t() @ (h + 4 * U16 * h),
            "down.bias": dya.sum(0)}
    names = {"up.weight": ref[0].weight, "up.bias": ref[0].bias, "down.weight": ref[2].weight, "down.bias": ref[2].bias}
    ours = dict(mlp.named_parameters())
    for name, mag in mags.items():
        got, want = ours[name].grad.double(), names[name].grad.double()
        bound = 16 * U16 * mag + 16 * U16 * want.abs()
        assert ((got - want).abs() <= bound).all(), f"{name}: max excess {((got - want).abs() - bound).max().item():.3g}"


def test_dynamic_m_compiles_once():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    mlp = PtxgenMLP(reference_mlp(torch.float16))
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(mlp, fullgraph=True, dynamic=True, backend=counter)
    for m in (8, 24, 40):
        x = (torch.rand(m, 32) - 0.5).to(torch.float16)
        assert compiled(x).shape == (m, 32)
    assert counter.frame_count == 1, f"compiled {counter.frame_count} times for 3 sizes of M"
