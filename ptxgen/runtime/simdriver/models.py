"""Device models the stand-in driver reports: the limits its rules are checked against.

Why a model rather than "anything goes": a kernel that asks for more shared memory per block
than an H100 (or A100) allows, or forgets the 48 KB opt-in, must fail here as it would there.
Numbers are from NVIDIA's published specifications of the SXM parts.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

__all__ = ["DeviceModel", "MODELS", "chosen_model", "chosen_driver_version", "CDeviceModel"]

#: The PTX ISA a driver of each CUDA version can JIT (driver version -> highest .version).
PTX_ISA_OF_DRIVER = {12000: (8, 0), 12010: (8, 1), 12020: (8, 2), 12030: (8, 3), 12040: (8, 4),
                     12050: (8, 5), 12060: (8, 5), 12080: (8, 7), 12090: (8, 8), 13000: (9, 0),
                     13010: (9, 1)}
#: The first driver that reads CUDA 13's cubin ELF format (EI_ABIVERSION 8): R580 = CUDA 13.0.
FIRST_DRIVER_WITH_ABI8 = 13000


@dataclass(frozen=True)
class DeviceModel:
    key: str
    name: str
    cc: tuple[int, int]
    sms: int
    smem_per_block: int        # without opt-in (48 KB)
    smem_per_block_optin: int  # the most one block may opt in to
    smem_per_sm: int
    regs_per_block: int
    total_mem: int
    cluster_launch: bool
    #: SMs per GPC, the unit a thread-block cluster is scheduled on (all its CTAs on one GPC): what
    #: cuOccupancyMaxActiveClusters counts (simdriver/occupancy.py). () for a device without clusters.
    gpc_sms: tuple[int, ...] = ()

    def attributes(self) -> dict[str, int]:
        """CU_DEVICE_ATTRIBUTE_<name> -> value."""
        return {
            "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
            "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
            "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK": self.smem_per_block,
            "TOTAL_CONSTANT_MEMORY": 65536, "WARP_SIZE": 32, "MAX_REGISTERS_PER_BLOCK": self.regs_per_block,
            "MULTIPROCESSOR_COUNT": self.sms, "COMPUTE_CAPABILITY_MAJOR": self.cc[0],
            "COMPUTE_CAPABILITY_MINOR": self.cc[1], "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": self.smem_per_block_optin,
            "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": self.smem_per_sm, "MAX_THREADS_PER_MULTIPROCESSOR": 2048,
            "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "UNIFIED_ADDRESSING": 1, "CONCURRENT_KERNELS": 1,
            "CLUSTER_LAUNCH": int(self.cluster_launch), "MAX_BLOCKS_PER_MULTIPROCESSOR": 32,
        }


#: The H100 SXM5's 132 SMs are 66 TPCs over 8 GPCs (NVIDIA H100 whitepaper: the full GH100 has 8 GPCs
#: of 9 TPCs, 2 SMs each, and the SXM5 part enables 66 TPCs). Which TPCs are fused off differs from
#: die to die and is not published, so this layout is an assumption: as uneven as (9, 9, 9, 9, 8, 8,
#: 7, 7) TPCs, where 8-CTA clusters fit 14 at once and 4-CTA clusters 30, fewer than 132 / 8 = 16
#: and 132 / 4 = 33 (the case a grid of floor(SMs / cluster size) CTAs gets wrong). A real GPU
#: answers cuOccupancyMaxActiveClusters with its own count; this model only has to be one a GPU
#: could have.
H100_GPC_SMS = (18, 18, 18, 18, 16, 16, 14, 14)
#: The B200's 148 SMs: two dies of 4 GPCs, each GPC 10 TPCs of 2 SMs (160 SMs in all; Cornell
#: Virtual Workshop, "Blackwell Chip Diagram"), with 74 SMs (37 TPCs) enabled per die. Which TPCs
#: are fused off is not published, so this layout, (10, 9, 9, 9) TPCs per die, is an assumption as
#: H100_GPC_SMS is: one a GPU could have, so cluster grids are sized from a per-GPC count.
B200_GPC_SMS = (20, 18, 18, 18, 20, 18, 18, 18)

MODELS = {
    "h100": DeviceModel("h100", "NVIDIA H100 80GB HBM3 (ptxgen simulated)", (9, 0), 132, 48 * 1024,
                        227 * 1024, 228 * 1024, 65536, 80 << 30, True, H100_GPC_SMS),
    "a100": DeviceModel("a100", "NVIDIA A100-SXM4-80GB (ptxgen simulated)", (8, 0), 108, 48 * 1024,
                        163 * 1024, 164 * 1024, 65536, 80 << 30, False),
    # B200 (sm_100a kernels): 148 SMs, 228 KB shared memory per SM of which 227 KB per block with
    # the opt-in, 64K registers per block (CUDA C++ Programming Guide, compute capability 10.0;
    # schedule/devices.py `B200`), 180 GB HBM3e, thread-block clusters
    "b200": DeviceModel("b200", "NVIDIA B200 (ptxgen simulated)", (10, 0), 148, 48 * 1024,
                        227 * 1024, 228 * 1024, 65536, 180 << 30, True, B200_GPC_SMS),
}


def chosen_model() -> DeviceModel:
    """PTXGEN_SIM_DEVICE=h100 (default), a100 or b200."""
    raw = os.environ.get("PTXGEN_SIM_DEVICE", "h100").strip().lower() or "h100"
    if raw not in MODELS:
        raise ValueError(f"PTXGEN_SIM_DEVICE={raw!r} is not a simulated device: use one of "
                         f"{sorted(MODELS)}")
    return MODELS[raw]


def chosen_driver_version() -> int:
    """PTXGEN_SIM_DRIVER_VERSION (e.g. 12040 for a CUDA 12.4 driver), default 13000 (R580)."""
    raw = os.environ.get("PTXGEN_SIM_DRIVER_VERSION", "13000").strip() or "13000"
    if not raw.isdigit() or int(raw) not in PTX_ISA_OF_DRIVER:
        raise ValueError(f"PTXGEN_SIM_DRIVER_VERSION={raw!r} is not a known driver version: use one "
                         f"of {sorted(PTX_ISA_OF_DRIVER)} (1000*major + 10*minor)")
    return int(raw)


class CDeviceModel(ctypes.Structure):
    """The C side's DeviceModel (simcuda.c)."""
    _fields_ = [("name", ctypes.c_char * 128), ("attrs", ctypes.c_int * 160),
                ("total_mem", ctypes.c_uint64), ("driver_version", ctypes.c_int)]

    @classmethod
    def of(cls, model: DeviceModel, driver_version: int, attribute_ids: dict[str, int]) -> "CDeviceModel":
        c = cls()
        c.name = model.name.encode()[:127]
        for name, value in model.attributes().items():
            c.attrs[attribute_ids[name]] = value
        c.total_mem = model.total_mem
        c.driver_version = driver_version
        return c
