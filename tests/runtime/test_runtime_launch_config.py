"""Occupancy-driven launches through the simulator-backed stand-in driver (runtime/launch_config.py,
simdriver/occupancy.py): the cluster grid sized by cuOccupancyMaxActiveClusters, Stream-K launched
cooperatively or refused before the launch with the fix, and the stand-in answering both queries
from its device model (the H100 model's GPCs hold 18, 18, 18, 18, 16, 16, 14 and 14 SMs)."""
from __future__ import annotations

import numpy as np
import pytest

import ptxgen
from ptxgen import Gemm, Schedule
from ptxgen.check import compare, random_operands, reference
from ptxgen.runtime import driver as drv
from ptxgen.runtime.launch import load_function
from ptxgen.runtime.launch_config import CoResidencyError, cluster_slots, co_resident_ctas, launch_config
from ptxgen.runtime.simdriver.models import MODELS
from ptxgen.runtime.simdriver.occupancy import active_clusters, ctas_per_sm

COOPERATIVE_LAUNCH_TOO_LARGE = 720
H100 = MODELS["h100"]

TINY = """.version 8.0
.target sm_90
.address_size 64
.visible .entry tiny(.param .u64 out)
{
    ret;
}
"""


def test_the_model_fits_fewer_large_clusters_than_sms_over_the_cluster_size():
    assert sum(H100.gpc_sms) == H100.sms == 132
    assert active_clusters(H100, (2, 1, 1), 1) == 66 == 132 // 2
    assert active_clusters(H100, (4, 1, 1), 1) == 30 < 132 // 4
    assert active_clusters(H100, (8, 1, 1), 1) == 14 < 132 // 8
    assert active_clusters(H100, (8, 1, 1), 2) == 30  # two CTAs per SM: GPCs of 36, 32 and 28 slots hold 4, 4, 3
    # CTAs per SM: shared memory (with the 1 KB reserved per CTA), threads, registers per warp
    assert ctas_per_sm(H100, 384, 168, 133120) == 1
    assert ctas_per_sm(H100, 128, 0, 16384) == 13            # 228 KB / 17 KB
    assert ctas_per_sm(H100, 1024, 0, 0) == 2 and ctas_per_sm(H100, 32, 0, 0) == 32
    assert ctas_per_sm(H100, 256, 255, 0) == 1               # 256 x 256 registers of 65,536


def _cluster_kernel(cluster=(2, 1), g=Gemm(256, 256, 64, dtype="f16", out_dtype="f32")) -> ptxgen.Kernel:
    return ptxgen.compile(g, Schedule(block=(128, 64, 64), instruction="wgmma", stages=2, cluster=cluster),
                          arch="sm_90a")


def test_cluster_occupancy_comes_from_the_device_model(standin):
    k = _cluster_kernel((2, 2))
    fn = load_function(k.cubin, k.entry, k.ptx, k.smem_bytes, "")
    per_sm = ctas_per_sm(H100, k.block[0], k.resources.registers, k.smem_bytes)
    assert per_sm == 1
    slots, source = cluster_slots(fn, k.block, k.smem_bytes, (4, 1, 1))
    assert slots == 30 * 4 and "cuOccupancyMaxActiveClusters: 30 clusters of 4" in source
    # the entry requires its cluster (.reqnctapercluster): a config with another is refused, none is fine
    d = drv._driver()
    cfg = launch_config((8, 1, 1), k.block, k.smem_bytes, 0, (8, 1, 1))
    err, _ = d.cuOccupancyMaxActiveClusters(fn.handle, cfg)
    assert int(err) == 912 and "requires" in standin.last_error
    err, n = d.cuOccupancyMaxActiveClusters(fn.handle, launch_config((4, 1, 1), k.block, k.smem_bytes, 0))
    assert int(err) == 0 and n == 30
    # the grid a big problem gets on this device: 30 whole clusters, not floor(132 / 4) = 33
    big = _cluster_kernel((2, 2), Gemm(4096, 4096, 64, dtype="f16", out_dtype="f32"))
    assert big.grid == (132, 1, 1)                                   # the compile-time plan
    assert "floor(SMs / 4)" in big.grid_source
    assert big.launch_grid(132, cluster_slots=slots) == (120, 1, 1)


def test_a_cluster_launch_is_sized_by_the_query_and_says_so(standin):
    g = Gemm(256, 256, 64, dtype="f16", out_dtype="f32")
    k = _cluster_kernel((2, 1), g)
    a, b = random_operands(g)
    assert compare(k(a, b), reference(a, b), g.out_dtype).ok
    last = standin.launch_log[-1]
    assert last.cluster == (2, 1, 1) and not last.cooperative and last.grid == k.grid  # 8 tiles < 66 x 2
    assert "cuOccupancyMaxActiveClusters: 66 clusters of 2" in k.grid_source
    from ptxgen.cli.report import describe
    assert any("cuOccupancyMaxActiveClusters" in line for line in describe(k))


def _stream_k(sms: int | None, g: Gemm) -> ptxgen.Kernel:
    return ptxgen.compile(g, Schedule(block=(64, 64, 32), warps=(2, 2), stages=2, decomposition="stream-k-pure",
                                      sms=sms), arch="sm_90")


def test_stream_k_launches_cooperatively(standin):
    g = Gemm(128, 128, 256, dtype="f16", out_dtype="f32")
    k = _stream_k(3, g)
    a, b = random_operands(g)
    assert compare(k(a, b), reference(a, b), g.out_dtype).ok
    last = standin.launch_log[-1]
    assert last.kernel == k.entry and last.cooperative and last.grid == (3, 1, 1) and last.cluster == (1, 1, 1)
    # the prepared launch carries the attribute too
    da, db = drv.DeviceArray.from_host(a), drv.DeviceArray.from_host(np.asfortranarray(b))
    c = drv.DeviceArray((g.m, g.n), np.float32)
    from ptxgen.runtime.launch import prepare_launch
    prepare_launch(k, da, db, c)()
    assert standin.launch_log[-1].cooperative
    assert compare(c.to_host(), reference(a, b), g.out_dtype).ok


def test_sm90a_stream_k_launches_cooperatively_with_its_tensor_maps(standin):
    g = Gemm(128, 128, 192, dtype="bf16", out_dtype="f32")
    k = ptxgen.compile(g, Schedule(block=(64, 64, 64), instruction="wgmma", stages=2, warp_specialized=False,
                                   decomposition="stream-k-pure", sms=3), arch="sm_90a")
    a, b = random_operands(g)
    assert compare(k(a, b), reference(a, b), g.out_dtype).ok
    last = standin.launch_log[-1]
    assert last.cooperative and last.grid == (3, 1, 1)


def test_a_stream_k_grid_that_cannot_be_resident_is_refused_with_the_fix(standin):
    g = Gemm(256, 256, 8192, dtype="f16", out_dtype="f32")
    k = _stream_k(4096, g)   # 16 tiles x 256 k-tiles: every one of 4096 CTAs has work
    fn = load_function(k.cubin, k.entry, k.ptx, k.smem_bytes, "")
    fits = co_resident_ctas(fn, k.block, k.smem_bytes, H100.sms)
    assert k.grid == (4096, 1, 1) and fits < 4096
    before = standin.launches
    a, b = random_operands(g)
    with pytest.raises(CoResidencyError) as err:
        k(a, b)
    text = str(err.value)
    assert f"at most {fits}" in text and "sms=" in text and "split-K" in text
    assert standin.launches == before  # refused before anything ran


def test_the_standin_refuses_a_cooperative_grid_larger_than_the_device(standin):
    """The driver's own rule, behind the runtime's check: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE."""
    from ptxgen.runtime.assemble import assemble

    d = drv._driver()
    drv.context()
    fn = load_function(assemble(TINY, "sm_90", "tiny").cubin, "tiny", TINY, 0, "")
    out = drv.DeviceBuffer(64)
    slot = np.array([out.ptr], np.uint64)
    params = np.array([slot.ctypes.data], np.uint64)
    fits = 32 * H100.sms   # 32 threads: 32 CTAs per SM
    for grid, status in (((fits + 1, 1, 1), COOPERATIVE_LAUNCH_TOO_LARGE), ((fits, 1, 1), 0)):
        cfg = launch_config(grid, (32, 1, 1), 0, 0, cooperative=True)
        assert int(d.cuLaunchKernelEx(cfg, fn.handle, int(params.ctypes.data), 0)[0]) == status
    assert standin.launch_log[-1].cooperative and standin.launch_log[-1].grid == (fits, 1, 1)
