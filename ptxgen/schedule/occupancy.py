"""Occupancy: how many CTAs of a kernel fit on one SM, what limits them, and how many waves a
grid takes. The per-SM limits are the CUDA occupancy calculator's for each target; `ptxgen info`
and bench/sass.py share them so that both say the same thing about the same kernel."""
from __future__ import annotations

from dataclasses import dataclass

from .targets import target


@dataclass(frozen=True)
class SmLimits:
    """One SM's resources (CUDA occupancy calculator values for the family's parts)."""

    registers: int        # 32-bit registers in the register file
    shared_bytes: int     # shared memory the CTAs may use (the largest carve-out)
    reserved_per_cta: int  # shared bytes the system reserves for each resident CTA (sm_80+)
    threads: int          # resident threads
    ctas: int             # resident CTAs
    #: Registers are allocated per warp in units of 256 (8 per thread); shared memory in 128 B.
    register_unit: int = 256
    shared_unit: int = 128


#: sm_80: A100; sm_86: A10/RTX 3090; sm_89: L40/RTX 4090; sm_90/sm_90a: H100/H200; sm_100a: B200.
SM_LIMITS: dict[str, SmLimits] = {
    "sm_80": SmLimits(65536, 167936, 1024, 2048, 32),
    "sm_86": SmLimits(65536, 102400, 1024, 1536, 16),
    "sm_89": SmLimits(65536, 102400, 1024, 1536, 24),
    "sm_90": SmLimits(65536, 233472, 1024, 2048, 32),
    "sm_90a": SmLimits(65536, 233472, 1024, 2048, 32),  # the same H100/H200 SM
    # B200: 228 KB shared per SM, 64K registers, 2048 threads, 32 CTAs (CUDA C++ Programming Guide,
    # compute capability 10.0 in the "Technical Specifications per Compute Capability" table)
    "sm_100a": SmLimits(65536, 233472, 1024, 2048, 32),
}


@dataclass(frozen=True)
class Occupancy:
    ctas_per_sm: int
    limiter: str                 # "registers", "shared memory", "threads" or "CTA slots"
    limits: dict[str, int]       # CTAs per SM each resource alone allows
    sms: int                     # SMs of the target's flagship part
    warps_per_sm: int

    def waves(self, ctas: int) -> float:
        """Grid size over the CTAs the whole GPU holds at once (1.0 = one full wave)."""
        return ctas / (self.ctas_per_sm * self.sms) if self.ctas_per_sm else float("inf")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(arch: str, registers: int, smem_bytes: int, threads: int, sms: int | None = None) -> Occupancy:
    """Resident CTAs per SM for `threads`-thread CTAs using `registers` per thread and `smem_bytes`
    of shared memory (static + dynamic), and the resource that limits them (ties name the first
    of registers, shared memory, threads, CTA slots)."""
    lim = SM_LIMITS[arch]
    warps = -(-threads // 32)
    per_warp = _round_up(max(registers, 1) * 32, lim.register_unit)
    smem = _round_up(smem_bytes, lim.shared_unit) + lim.reserved_per_cta
    limits = {"registers": lim.registers // (per_warp * warps), "shared memory": lim.shared_bytes // smem,
              "threads": lim.threads // 32 // warps, "CTA slots": lim.ctas}
    limiter = min(limits, key=limits.get)
    ctas = limits[limiter]
    return Occupancy(ctas, limiter, limits, sms or target(arch).sms, ctas * warps)
