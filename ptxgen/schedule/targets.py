"""Per-architecture facts the verifier and the PTX header need (docs/ptx_facts/module.md §10)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    arch: str
    ptx_version: tuple[int, int]
    #: Max shared memory per block with the dynamic opt-in, in bytes.
    smem_per_block: int
    #: Shared memory a block may use without the opt-in (static or dynamic).
    smem_default: int = 48 * 1024
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    #: SMs of the family's flagship part (A100, A10/RTX 3090-class, L40/RTX 4090-class, H100 SXM):
    #: the persistent Stream-K grid when neither the schedule nor a device says otherwise.
    sms: int = 108
    #: Hopper features the target string and PTX version give the lowering. wgmma and setmaxnreg
    #: exist only for the architecture-specific `sm_90a` target (PTX 8.0); TMA
    #: (cp.async.bulk.tensor), mbarrier expect_tx and multicast need PTX 8.0 too, so `sm_90`
    #: at `.version 7.8` (the mma.sync path, kept unchanged) has none of them
    #: (docs/ptx_facts/module.md §10, wgmma.md §9a, warp_specialisation.md §9g).
    wgmma: bool = False
    tma: bool = False
    setmaxnreg: bool = False
    #: CTAs a cluster may hold (the portable limit, clusters.md); 1 where the lowering makes none.
    max_cluster: int = 1


TARGETS: dict[str, Target] = {
    "sm_80": Target("sm_80", (7, 8), 163 * 1024, sms=108),
    "sm_86": Target("sm_86", (7, 8), 99 * 1024, sms=84),
    "sm_89": Target("sm_89", (7, 8), 99 * 1024, sms=128),
    "sm_90": Target("sm_90", (7, 8), 227 * 1024, sms=132),
    # The Hopper path (wgmma + TMA + mbarrier): 227 KB = 232 448 B per block with the opt-in.
    "sm_90a": Target("sm_90a", (8, 0), 227 * 1024, sms=132, wgmma=True, tma=True, setmaxnreg=True,
                     max_cluster=8),
    # Blackwell B200 (tcgen05 + TMEM + TMA + mbarrier): tcgen05 needs .target sm_100a and PTX 8.6
    # (docs/ptx_facts/tcgen05.md §12a); 227 KB per block with the opt-in of 228 KB per SM.
    "sm_100a": Target("sm_100a", (8, 6), 227 * 1024, sms=148, tma=True, setmaxnreg=True, max_cluster=8),
}

#: The targets that lower `instruction="wgmma"` schedules (the Hopper pipeline).
HOPPER_TARGETS = tuple(name for name, t in TARGETS.items() if t.wgmma)


def target(arch: str) -> Target:
    """The Target for an arch string, or a ValueError naming the supported ones."""
    try:
        return TARGETS[arch]
    except KeyError:
        raise ValueError(f"arch {arch!r} is not supported: use one of {', '.join(TARGETS)}") from None


def native_arch(capability: tuple[int, int]) -> str | None:
    """The target whose kernels a GPU of compute `capability` runs as they were assembled, the most
    capable first: its own architecture-specific target (sm_90a on 9.0, sm_100a on 10.0: wgmma and
    tcgen05 run nowhere else), else the newest plain target of its major at or below its minor
    (8.7 runs sm_86). None where ptxgen has none (10.3, 12.0: their driver assembles any plain
    target's PTX for them, e.g. sm_90's mma.sync kernels)."""
    major, minor = capability
    own = f"sm_{major}{minor}a"
    if own in TARGETS:
        return own
    plain = [(int(name[3:-1]), int(name[-1]), name) for name in TARGETS if name[-1].isdigit()]
    fits = [(mn, name) for mj, mn, name in plain if mj == major and mn <= minor]
    return max(fits)[1] if fits else None
