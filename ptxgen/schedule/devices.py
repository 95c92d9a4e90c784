"""Device models the static cost model prices schedules on: one flagship part per arch.

Why a table and not a query: the model must rank schedules with no GPU present (`ptxgen info` on a
laptop, CI), and the same numbers must give the same choice everywhere. Each figure cites where it
comes from; the ones that are estimates say so (they are the model's weak spots).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .targets import target


@dataclass(frozen=True)
class DeviceModel:
    """Peak rates of one GPU, per SM where the model works per SM."""

    name: str
    arch: str
    sms: int
    clock_hz: float                     # boost clock the datasheet peaks are quoted at
    #: Dense tensor-core flops per clock per SM, by input dtype (2 per multiply-add).
    tensor_flops_per_clk_sm: dict[str, int]
    #: Share of that peak mma.sync can issue (1.0 on Ampere; Hopper's full rate needs wgmma).
    mma_sync_share: float
    dram_bytes_per_s: float
    l2_bytes: int
    l2_bytes_per_clk: int               # whole-chip L2 -> SM read bandwidth
    smem_bytes_per_clk_sm: int = 128    # 32 banks x 4 B
    schedulers_per_sm: int = 4          # warp schedulers (sub-partitions), one issue per clock each
    #: A global load that misses L2 under load (queues included), in clocks. With the pipeline depth
    #: it bounds a CTA's bytes in flight (Little's law), so a grid of few CTAs cannot reach the
    #: DRAM bandwidth: the reason split-K pays for decode shapes.
    dram_latency_clk: int = 1000
    launch_s: float = 3e-6              # launch + teardown of one kernel, as a kernel sees it
    #: Tensor memory per SM (Blackwell: 128 lanes x 512 columns of 32 bits); 0 where there is none.
    tmem_columns: int = 0
    #: Bytes per clock per SM the epilogue warps read from tensor memory with tcgen05.ld (0: none).
    tmem_read_bytes_per_clk_sm: int = 0

    def peak_flops(self, dtype: str, instruction_share: bool = True) -> float:
        """Dense tensor flops/s for `dtype` (times mma.sync's share when `instruction_share`)."""
        share = self.mma_sync_share if instruction_share else 1.0
        return self.tensor_flops_per_clk_sm[dtype] * self.sms * self.clock_hz * share


#: A100 SXM4 80 GB. Sources: NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), table 3
#: and "L2 cache": 108 SMs, 1410 MHz boost, 312 TFLOPS dense FP16/BF16 (= 108 x 1410 MHz x 2048
#: flop/clk/SM), 156 TF32, 624 INT8 TOPS; 40 MB L2 with 5120 B/clk read bandwidth; A100 80 GB
#: datasheet: 2039 GB/s HBM2e. The loaded DRAM latency (1000 clocks, about 700 ns) is an estimate:
#: unloaded latencies in published Ampere microbenchmarks are a few hundred ns and grow under load.
A100 = DeviceModel(
    name="A100-SXM4-80GB", arch="sm_80", sms=108, clock_hz=1.41e9,
    tensor_flops_per_clk_sm={"f16": 2048, "bf16": 2048, "tf32": 1024, "s8": 4096, "u8": 4096},
    mma_sync_share=1.0, dram_bytes_per_s=2.039e12, l2_bytes=40 * 2**20, l2_bytes_per_clk=5120)

#: H100 SXM5 80 GB. Sources: NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022) and the
#: H100 datasheet: 132 SMs, 989 TFLOPS dense FP16/BF16 (= 132 x 1830 MHz x 4096 flop/clk/SM),
#: 495 TF32, 1979 INT8 TOPS; 3.35 TB/s HBM3; 50 MB L2. Estimates (weak spots): the L2 bandwidth
#: (no NVIDIA figure; taken as A100's bytes per clock per SM scaled to 132 SMs), and mma.sync's
#: share of the peak: the peak needs wgmma, and public microbenchmarks of mma.sync/wmma on H100
#: report about half of it (e.g. r/CUDA "WGMMA has 2x throughput of WMMA in H100"), so 0.5.
H100 = DeviceModel(
    name="H100-SXM5-80GB", arch="sm_90", sms=132, clock_hz=1.83e9,
    tensor_flops_per_clk_sm={"f16": 4096, "bf16": 4096, "tf32": 2048, "s8": 8192, "u8": 8192},
    mma_sync_share=0.5, dram_bytes_per_s=3.35e12, l2_bytes=50 * 2**20, l2_bytes_per_clk=6258,
    dram_latency_clk=1200)  # the same ~700 ns as A100's estimate, at 1830 MHz

#: RTX A6000 (sm_86, 84 SMs as `Target.sms`). Source: NVIDIA RTX A6000 datasheet: 1800 MHz boost,
#: 309.7 TFLOPS FP16 tensor with sparsity (154.8 dense = 84 x 1800 MHz x 1024), 768 GB/s GDDR6;
#: GA102 whitepaper: 6 MB L2. L2 bandwidth is an estimate (A100's per-SM bytes per clock).
A6000 = DeviceModel(
    name="RTX-A6000", arch="sm_86", sms=84, clock_hz=1.8e9,
    tensor_flops_per_clk_sm={"f16": 1024, "bf16": 1024, "tf32": 512, "s8": 2048, "u8": 2048},
    mma_sync_share=1.0, dram_bytes_per_s=768e9, l2_bytes=6 * 2**20, l2_bytes_per_clk=3982)

#: RTX 4090 (sm_89, 128 SMs as `Target.sms`). Source: NVIDIA Ada Lovelace architecture
#: whitepaper, appendix table: 2520 MHz boost, 165.2 TFLOPS dense FP16 with FP32 accumulation
#: (= 128 x 2520 MHz x 512), 82.6 TF32, 660.6 INT8 TOPS, 1008 GB/s GDDR6X, 72 MB L2. L2 bandwidth
#: is an estimate (A100's per-SM bytes per clock).
RTX4090 = DeviceModel(
    name="RTX-4090", arch="sm_89", sms=128, clock_hz=2.52e9,
    tensor_flops_per_clk_sm={"f16": 512, "bf16": 512, "tf32": 256, "s8": 2048, "u8": 2048},
    mma_sync_share=1.0, dram_bytes_per_s=1.008e12, l2_bytes=72 * 2**20, l2_bytes_per_clk=6068)

#: The same H100 SXM5 as `H100`, as the sm_90a (wgmma) schedules use it. The tensor peak is the
#: same 989 TFLOPS dense FP16/BF16 (H100 whitepaper / datasheet): that figure is wgmma's rate, so
#: the sm_90a cost model prices wgmma at the full `tensor_flops_per_clk_sm` and reports efficiency
#: against `peak_flops(dtype, instruction_share=False)`. `mma_sync_share` keeps its meaning (what
#: mma.sync reaches on this SM, 0.5): an mma.sync schedule compiled for sm_90a runs at that share.
#: fp8 (wgmma only): 1979 TFLOPS dense FP8 in the same whitepaper, twice the 16-bit rate.
H100_WGMMA = replace(H100, arch="sm_90a",
                     tensor_flops_per_clk_sm={**H100.tensor_flops_per_clk_sm, "e4m3": 8192, "e5m2": 8192})

#: B200 (sm_100a, tcgen05). Sources: NVIDIA Blackwell architecture technical brief and the DGX/HGX
#: B200 datasheet: 148 SMs, 2.25 PFLOPS dense FP16/BF16 per GPU (4.5 with sparsity), 1.1 PF TF32,
#: 4.5 PF dense FP8 (and MXFP8), 4.5 POPS dense INT8, 9 PF dense FP4 (NVFP4/MXFP4), 8 TB/s HBM3e;
#: 228 KB shared memory per SM (CUDA C++ Programming Guide, compute capability 10.0 table: 227 KB
#: per block with the opt-in); tensor memory of 128 lanes x 512 32-bit columns per SM (PTX ISA 8.7+,
#: "Tensor Memory", docs/ptx_facts/tcgen05.md §12b). The tensor rate per SM is taken as twice
#: Hopper's (8192 flop/clk/SM for 16-bit inputs), which with 148 SMs gives the 2.25 PF at a 1.856 GHz
#: clock (derived, not a published boost clock); the other kinds scale with the datasheet's ratios
#: (tf32 1/2, fp8/int8 2x, fp4 4x: 9 PF = 148 x 1.856 GHz x 32768). Keys: input dtypes, with
#: "mxf8" and "nvf4"/"mxf4" for the block-scaled kinds (kind::mxf8f6f4, kind::mxf4nvf4).
#: Estimates (weak spots): the L2 size (126 MB, as commonly reported for the two-die part), its
#: bandwidth (H100's bytes per clock per SM scaled to 148 SMs), the shared-memory bandwidth (128 B/clk
#: per SM as on Hopper: tcgen05 reads A and B from it), tcgen05.ld's rate (4 sub-partitions x 32 lanes
#: x 4 B per clock), and mma.sync's share (H100's 0.5; the full rate needs tcgen05).
B200 = DeviceModel(
    name="B200", arch="sm_100a", sms=148, clock_hz=1.856e9,
    tensor_flops_per_clk_sm={"f16": 8192, "bf16": 8192, "tf32": 4096, "s8": 16384, "u8": 16384,
                             "e4m3": 16384, "e5m2": 16384, "mxf8": 16384, "e2m1": 32768, "nvf4": 32768,
                             "mxf4": 32768},
    mma_sync_share=0.5, dram_bytes_per_s=8.0e12, l2_bytes=126 * 2**20, l2_bytes_per_clk=7017,
    dram_latency_clk=1300,  # the same ~700 ns as the others' estimate, at 1856 MHz
    tmem_columns=512, tmem_read_bytes_per_clk_sm=512)

DEVICES: dict[str, DeviceModel] = {"sm_80": A100, "sm_86": A6000, "sm_89": RTX4090, "sm_90": H100,
                                   "sm_90a": H100_WGMMA, "sm_100a": B200}


def device_model(arch: str) -> DeviceModel:
    """The flagship model for `arch`; a ValueError naming the modelled archs for any other."""
    target(arch)  # an unknown arch gets the targets' message
    try:
        return DEVICES[arch]
    except KeyError:
        raise ValueError(f"arch {arch!r} has no device model for choosing a schedule: give a "
                         f"schedule, or use one of {', '.join(DEVICES)}") from None
