"""Per-architecture facts the verifier and the PTX header need (ptx_facts.md §10)."""
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


TARGETS: dict[str, Target] = {
    "sm_80": Target("sm_80", (7, 8), 163 * 1024, sms=108),
    "sm_86": Target("sm_86", (7, 8), 99 * 1024, sms=84),
    "sm_89": Target("sm_89", (7, 8), 99 * 1024, sms=128),
    "sm_90": Target("sm_90", (7, 8), 227 * 1024, sms=132),
}


def target(arch: str) -> Target:
    """The Target for an arch string, or a ValueError naming the supported ones."""
    try:
        return TARGETS[arch]
    except KeyError:
        raise ValueError(f"arch {arch!r} is not supported: use one of {', '.join(TARGETS)}") from None
