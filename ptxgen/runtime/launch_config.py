"""How a ptxgen kernel goes to the driver when a plain cuLaunchKernel is not enough, and the
occupancy questions asked first.

* Cluster kernels launch through cuLaunchKernelEx with the cluster-dimension attribute (the
  dimensions their .reqnctapercluster also states: docs/ptx_facts/clusters.md). Their persistent
  grid (`sms=None`) is as many whole clusters as the device runs at once: cuOccupancyMaxActiveClusters,
  which counts clusters per GPC (a cluster's CTAs share one GPC), so it can be fewer than
  floor(SMs / cluster size) on a die whose GPCs hold an odd number of SMs or fewer than a cluster's
  worth past the last whole one. A grid of floor(SMs / size) CTAs there leaves its last clusters
  waiting a whole wave.
* Stream-K's fix-up spins on flags other CTAs set, so every CTA of its grid must be resident at
  once. It launches with CU_LAUNCH_ATTRIBUTE_COOPERATIVE, which makes the driver guarantee that or
  fail, and before that the grid is checked against cuOccupancyMaxActiveBlocksPerMultiprocessor x
  SMs, so a grid that cannot fit is refused with the fix instead of a bare driver error. (MPS
  limits, green contexts and concurrent kernels can shrink what fits below the occupancy answer; the
  cooperative launch still fails cleanly then.)
"""
from __future__ import annotations

from typing import Any

from . import driver as drv

__all__ = ["launch_config", "cluster_slots", "co_resident_ctas", "check_co_resident", "CoResidencyError"]


class CoResidencyError(ValueError):
    """A grid that must be resident at once (Stream-K) but does not fit on the device."""


def launch_config(grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, stream: int,
                  cluster: tuple[int, int, int] = (1, 1, 1), cooperative: bool = False) -> Any:
    """A CUlaunchConfig for cuLaunchKernelEx with the cluster-dimension attribute (a cluster other
    than (1, 1, 1)) and the cooperative attribute (`cooperative`)."""
    d = drv._driver()
    cfg = d.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes, cfg.hStream = int(smem), d.CUstream(stream)
    attrs = []
    if cluster != (1, 1, 1):
        attr = d.CUlaunchAttribute()
        attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        attrs.append(attr)
    if cooperative:
        attr = d.CUlaunchAttribute()
        attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        attr.value.cooperative = 1
        attrs.append(attr)
    cfg.attrs, cfg.numAttrs = attrs, len(attrs)
    return cfg


def cluster_slots(fn: Any, block: tuple[int, int, int], smem: int,
                  cluster: tuple[int, int, int]) -> tuple[int | None, str]:
    """(CTAs in the whole clusters the device runs at once, how that was found): the clusters
    cuOccupancyMaxActiveClusters counts times the cluster size, or (None, why not) where the driver
    cannot answer (the caller keeps floor(SMs / cluster size) then)."""
    size = cluster[0] * cluster[1] * cluster[2]
    config = launch_config((size, 1, 1), block, smem, 0, cluster)
    try:
        clusters = int(drv._call("cuOccupancyMaxActiveClusters", fn.handle, config))
    except (drv.DriverError, AttributeError, TypeError) as e:
        return None, f"floor(SMs / {size}): cuOccupancyMaxActiveClusters could not answer ({e})"
    if clusters < 1:
        return None, f"floor(SMs / {size}): cuOccupancyMaxActiveClusters says no {size}-CTA cluster fits"
    return clusters * size, f"cuOccupancyMaxActiveClusters: {clusters} clusters of {size} at once"


def co_resident_ctas(fn: Any, block: tuple[int, int, int], smem: int, sm_count: int) -> int:
    """CTAs of `fn` the device holds at once: cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs."""
    threads = block[0] * block[1] * block[2]
    per_sm = int(drv._call("cuOccupancyMaxActiveBlocksPerMultiprocessor", fn.handle, threads, int(smem)))
    return per_sm * sm_count


def check_co_resident(grid: tuple[int, int, int], fn: Any, block: tuple[int, int, int], smem: int,
                      sm_count: int) -> None:
    """Refuse, before launching, a Stream-K grid that cannot be resident at once, naming the fix."""
    ctas = grid[0] * grid[1] * grid[2]
    fits = co_resident_ctas(fn, block, smem, sm_count)
    if ctas > fits:
        raise CoResidencyError(
            f"Stream-K launches {ctas} CTAs, but this device holds at most {fits} of this kernel at once "
            f"({fits // max(sm_count, 1)} per SM x {sm_count} SMs), and its fix-up waits on flags other CTAs set, "
            f"so every CTA must be resident (a cooperative launch): compile with Schedule(sms=<= {fits}) "
            f"(or sms=None to fill this device), or use a split-K schedule "
            f"(decomposition='tiles', split_k=...), which needs no co-residency")
