"""ptxgen.BlockScale and Gemm.block_scale (schedule/block_scale.py): validated on construction,
the scale shapes, ue8m0's values, and the float64 block-by-block product the checks compare with."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import BlockScale, Gemm
from ptxgen.check import reference, reference_tile
from ptxgen.errors import ScheduleError, ScheduleTypeError
from ptxgen.schedule.block_scale import random_block_scales, scaled_product


@pytest.mark.parametrize("make, field", [
    (lambda: BlockScale(a=(128, 128)), "block_scale.a"),
    (lambda: BlockScale(b=(1, 128)), "block_scale.b"),
    (lambda: BlockScale(b=(128, 1)), "block_scale.b"),
    (lambda: BlockScale(dtype="f16"), "block_scale.dtype"),
    (lambda: Gemm(64, 64, 128, dtype="f16", block_scale=BlockScale()), "gemm.block_scale"),
    (lambda: Gemm(64, 64, 128, dtype="e4m3", fast_accum=True, block_scale=BlockScale()), "gemm.fast_accum"),
    (lambda: Gemm(64, 64, 128, dtype="e4m3", batch=2, block_scale=BlockScale()), "gemm.block_scale"),
])
def test_bad_block_scales_are_refused_on_construction(make, field):
    with pytest.raises(ScheduleError) as e:
        make()
    assert e.value.field == field and e.value.fix


def test_a_block_scale_of_the_wrong_type_is_a_type_error():
    with pytest.raises(ScheduleTypeError, match="BlockScale"):
        Gemm(64, 64, 128, dtype="e4m3", block_scale=(1, 128))


def test_lists_and_numpy_integers_are_accepted():
    bs = BlockScale(a=[1, np.int64(128)], b=np.array([128, 128]), dtype=np.str_("ue8m0"))
    assert bs == BlockScale(dtype="ue8m0") and hash(bs) == hash(BlockScale(dtype="ue8m0"))


def test_shapes_follow_the_logical_orientation():
    assert BlockScale().shapes(200, 300, 400) == ((200, 4), (4, 3))


def test_ue8m0_values_are_powers_of_two():
    assert list(BlockScale(dtype="ue8m0").values(np.array([127, 128, 120], np.uint8))) == [1.0, 2.0, 2.0 ** -7]


def test_the_product_is_the_block_by_block_sum():
    """Elementwise: C[i, j] = sum_k A[i, k] B[k, j] sa[i, k // 128] sb[k // 128, j // 128]."""
    rng = np.random.default_rng(0)
    m, n, k = 5, 260, 300
    a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    sa, sb = random_block_scales(BlockScale(), m, n, k)
    kk = np.arange(k)
    want = np.einsum("ik,kj,ik,kj->ij", a, b, sa[:, kk // 128].astype(np.float64),
                     sb[kk // 128][:, np.arange(n) // 128].astype(np.float64))
    assert np.allclose(scaled_product(a, b, BlockScale(), sa, sb), want, rtol=1e-12, atol=0)
    full = reference(a, b, scale_a=sa, scale_b=sb)
    tile = reference_tile(a, b, None, slice(1, 4), slice(100, 200), scale_a=sa, scale_b=sb)
    assert np.allclose(tile, full[1:4, 100:200], rtol=1e-12, atol=0)


def test_random_scales_are_never_zero_and_span_decades():
    sa, sb = random_block_scales(BlockScale(), 256, 256, 1024, decades=4.0)
    assert (sa > 0).all() and (sb > 0).all() and sa.max() / sa.min() > 100
    ea, eb = random_block_scales(BlockScale(dtype="ue8m0"), 64, 64, 512)
    assert ea.dtype == np.uint8 and ea.min() >= 1 and eb.max() <= 254
