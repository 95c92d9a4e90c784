"""tcgen05.mma.ws (weight-stationary) against numpy: M = 32, 64, 128 with their D layouts, and the B
collector buffers (docs/ptx_facts/tcgen05.md §12c2; PTX ISA §9.7.16.10.9.3)."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from tcgen05_util import gemm_kernel, idesc, image_kmajor, run_gemm, smem_desc


def _f16(rng, shape) -> np.ndarray:
    return (rng.integers(1, 4, shape) * rng.choice([-1, 1], shape)).astype(np.float16)


def _ws(ptx: str, collectors: list) -> str:
    """Turn gemm_kernel's MMAs into .ws ones, the i-th with collectors[i] ('' = none)."""
    parts = ptx.split("tcgen05.mma.cta_group::1.kind::f16")
    out = parts[0]
    for i, rest in enumerate(parts[1:]):
        collector = f".collector::{collectors[i]}" if collectors[i] else ""
        out += "tcgen05.mma.ws.cta_group::1.kind::f16" + collector + rest
    return out


def _d_from_cells(cells: np.ndarray, m: int, n: int) -> np.ndarray:
    """D[row][col] from the 128 lanes the warps read: lane row + m * (col // (n*m/128)), column
    col % (n*m/128) (CuTe tmem_frg_ws: 1x4 datapath for M = 32, 2x2 for M = 64)."""
    width = n * m // 128
    d = np.empty((m, n), np.float32)
    for r in range(m):
        for c in range(n):
            d[r, c] = cells[r + m * (c // width), c % width]
    return d


@pytest.mark.parametrize("m", [32, 64, 128])
def test_ws_d_layout_per_m(m):
    rng = np.random.default_rng(m)
    n = 64
    a, b = _f16(rng, (m, 16)), _f16(rng, (n, 16))
    ia, _, sbo = image_kmajor(np.concatenate([a, np.zeros((128 - m, 16), np.float16)]), "32B", 4096)
    ib, _, _ = image_kmajor(b, "32B", 2048)
    ptx = _ws(gemm_kernel(n, "f16", 1, idesc(1, 0, 0, m, n), 32, ia.size, ib.size), [""])
    cells = run_gemm(ptx, n, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "32B"),
                     smem_desc(ia.size, 16, sbo, "32B")).view(np.float32)
    np.testing.assert_array_equal(_d_from_cells(cells, m, n), a.astype(np.float64) @ b.astype(np.float64).T)


def _steps(collectors: list, keep_b: bool = True):
    """One K = 16 MMA per collector entry into one D (M = 64, N = 64); B's descriptor stays put when
    keep_b (the weights are stationary), A's advances to the next 16 columns each step."""
    rng = np.random.default_rng(7)
    steps = len(collectors)
    a, b = _f16(rng, (64, 16 * steps)), _f16(rng, (64, 16 * steps))
    ia, _, sbo = image_kmajor(np.concatenate([a, np.zeros((64, 16 * steps), np.float16)]), "128B", 16384)
    ib, _, _ = image_kmajor(b, "128B", 8192)
    ptx = gemm_kernel(64, "f16", steps, idesc(1, 0, 0, 64, 64), 32, ia.size, ib.size)
    if keep_b:
        ptx = ptx.replace("add.s64 %rd11, %rd11, 2;", "")
    cells = run_gemm(_ws(ptx, collectors), 64, np.concatenate([ia, ib]), smem_desc(0, 16, sbo, "128B"),
                     smem_desc(ia.size, 16, sbo, "128B")).view(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return _d_from_cells(cells, 64, 64), a64 @ np.tile(b64[:, :16], (1, steps)).T


def test_collector_fill_then_lastuse_keeps_the_weights():
    got, ref = _steps(["b1::fill", "b1::lastuse"])
    np.testing.assert_array_equal(got, ref)


def test_collector_use_without_fill_is_reported():
    with pytest.raises(sim.HazardError, match="without a valid ::fill") as e:
        _steps(["b2::fill", "b1::use"])
    assert e.value.kind == "tmem"


@pytest.mark.parametrize("collectors", [["b0::fill", "", "b0::use"], ["b0::fill", "b0::discard", "b0::lastuse"],
                                        ["b2::fill", "b2::lastuse", "b2::use"]])
def test_collector_use_after_discard_or_lastuse_is_reported(collectors):
    """No qualifier means .collector::b0::discard (the ISA); discard and lastuse free the buffer."""
    with pytest.raises(sim.HazardError, match="without a valid ::fill"):
        _steps(collectors)


def test_collector_three_uses_of_one_fill():
    got, ref = _steps(["b1::fill", "b1::use", "b1::lastuse"])
    np.testing.assert_array_equal(got, ref)


def test_collector_use_with_other_b_in_shared_memory_is_reported():
    with pytest.raises(sim.HazardError, match="differs from") as e:
        _steps(["b3::fill", "b3::use"], keep_b=False)
    assert e.value.kind == "race"


@pytest.mark.parametrize("form,msg", [
    ("tcgen05.mma.ws.cta_group::2.kind::f16 [%r10], %rd10, %rd11, 0, %p7;", "cta_group::1 only"),
    ("tcgen05.mma.ws.cta_group::1.kind::f16 [%r10], %rd10, %rd11, 0, %p7, %rd10;", "zero-column-mask"),
    ("tcgen05.mma.ws.cta_group::1.kind::mxf8f6f4 [%r10], %rd10, %rd11, 0, %p7;", "kind::<f16"),
])
def test_unsimulated_ws_forms_are_refused(form, msg):
    ptx = gemm_kernel(64, "f16", 1, 0, 32, 4096, 2048)
    ptx = ptx.replace(ptx[ptx.index("tcgen05.mma.cta_group"):].split("\n")[0], form)
    with pytest.raises(sim.HazardError, match=msg) as e:
        run_gemm(ptx, 64, np.zeros(6144, np.uint8), 0, 0)
    assert e.value.kind == "unsupported"
