"""Occupancy as the stand-in driver answers it: CTAs per SM, clusters at once, and whether a
cooperative grid fits, all from the device model (models.py).

Why the stand-in needs these: ptxgen's runtime sizes the persistent cluster grid from
cuOccupancyMaxActiveClusters and refuses a Stream-K grid that cannot be resident at once (its
fix-up waits on flags other CTAs set) before launching it cooperatively. Tests of those paths need a
driver that answers the queries and enforces the cooperative rule the way a GPU does.

The rules (CUDA C++ Programming Guide, "Compute Capabilities" and the occupancy calculator):
  * CTAs per SM: the fewest of 32 CTAs, 2048 threads, 65,536 registers (allocated per warp in
    units of 256) and the SM's shared memory, of which each CTA also takes 1 KB the system reserves;
  * clusters: all CTAs of a cluster run on one GPC, so a GPC of S SMs holds floor(S x CTAs per SM /
    cluster size) of them, and the device the sum over its GPCs (`DeviceModel.gpc_sms`);
  * a cooperative launch of more CTAs than SMs x CTAs per SM fails with
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
What it leaves out: other work on the device (MPS, green contexts, concurrent kernels), which on
hardware lowers what fits; a model answer is what an idle device of this layout would say.
"""
from __future__ import annotations

from .models import DeviceModel

__all__ = ["RESERVED_SMEM_PER_CTA", "ctas_per_sm", "active_clusters", "OccupancyRefused"]

RESERVED_SMEM_PER_CTA = 1024   # shared memory the system reserves per CTA (sm_80 and later)
MAX_CTAS_PER_SM = 32
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536
REGISTER_UNIT_PER_WARP = 256   # registers are allocated to a warp in units of 256
INVALID_VALUE, INVALID_CLUSTER_SIZE, NOT_SUPPORTED = 1, 912, 801


class OccupancyRefused(Exception):
    """A query the driver refuses: the CUresult and why."""

    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status


def ctas_per_sm(model: DeviceModel, threads: int, registers: int, smem: int) -> int:
    """CTAs of `threads` threads, `registers` per thread (0: unknown, not limiting) and `smem` bytes
    of shared memory (static + dynamic) that one SM of `model` holds at once (0 if none fits)."""
    if threads < 1:
        raise OccupancyRefused(INVALID_VALUE, f"a CTA of {threads} threads")
    warps = -(-threads // 32)
    limits = [MAX_CTAS_PER_SM, MAX_THREADS_PER_SM // (warps * 32)]
    if registers:
        per_warp = -(-registers * 32 // REGISTER_UNIT_PER_WARP) * REGISTER_UNIT_PER_WARP
        limits.append(REGISTERS_PER_SM // per_warp // warps)
    limits.append(model.smem_per_sm // (smem + RESERVED_SMEM_PER_CTA))
    return max(0, min(limits))


def active_clusters(model: DeviceModel, cluster: tuple[int, int, int], per_sm: int) -> int:
    """Clusters of `cluster` CTAs that `model` runs at once when an SM holds `per_sm` CTAs: each GPC
    holds floor(SMs x per_sm / size), since a cluster's CTAs share one GPC."""
    if not model.cluster_launch or not model.gpc_sms:
        raise OccupancyRefused(NOT_SUPPORTED, f"{model.name} has no thread block clusters")
    if min(cluster) < 1:
        raise OccupancyRefused(INVALID_CLUSTER_SIZE, f"cluster {cluster} has a zero dimension")
    size = cluster[0] * cluster[1] * cluster[2]
    return sum(sms * per_sm // size for sms in model.gpc_sms)
