"""tests/torch: ptxgen's PyTorch operators on CPU tensors, which run on ptxgen's CPU simulator
(so every test runs without a GPU). They need PyTorch: the README's install names the `torch`
extra, so CI runs them; elsewhere they skip with the reason."""
from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed: pip install -e \".[torch]\" (the README's "
                                    "install command includes it)")
