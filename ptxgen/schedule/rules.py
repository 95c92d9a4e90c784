"""The seam through which the schedule layer asks a target about the schedules it lowers.

The schedule layer (problem, schedule, geometry, verification) sits below the target backends
and imports none of them. What only a target knows about its own schedules (the defaults of its
fields, a persistent grid, its verifier rules, what it has built) it registers here, keyed by
`Schedule.instruction`; `ptxgen.targets.registry` registers every backend when ptxgen is
imported, so a new target adds no branch here (docs/architecture.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from .problem import Gemm
    from .schedule import Schedule


class ScheduleRules(Protocol):
    """What the schedule layer asks of the backend that lowers an instruction."""

    #: Whether tf32 inputs may give f16/bf16 outputs (an epilogue that casts the f32 it reads).
    tf32_narrow_outputs: bool

    def fill_defaults(self, s: "Schedule") -> None:
        """Set the target's fields the caller left None (the Schedule is frozen: object.__setattr__)."""

    def grid(self, g: "Gemm", s: "Schedule", sms: int) -> tuple[int, int, int] | None:
        """The target's own launch grid for `s` (e.g. a persistent one), or None for the tile grid."""

    def verify(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise ScheduleError for the first of the target's rules (g, s) breaks on `arch`."""

    def check_built(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise LoweringNotBuilt for a legal schedule the target cannot lower yet."""


_RULES: dict[str, ScheduleRules] = {}
_PAIRING: list[Callable[["Gemm", "Schedule", str], None]] = []


def register(instructions: tuple[str, ...], rules: ScheduleRules,
             pairing: Callable[["Gemm", "Schedule", str], None] | None = None) -> None:
    """Make `rules` answer for schedules of `instructions`; `pairing` (optional) checks every
    (Gemm, Schedule, arch) for what this target reserves (its arch, dtypes and fields)."""
    for name in instructions:
        _RULES[name] = rules
    if pairing is not None and pairing not in _PAIRING:
        _PAIRING.append(pairing)


def rules_for(instruction: object) -> ScheduleRules | None:
    """The rules registered for an instruction name; None for a name no target lowers (the
    verifier names it)."""
    return _RULES.get(instruction) if isinstance(instruction, str) else None


def check_pairing(g: "Gemm", s: "Schedule", arch: str) -> None:
    """Every registered target's check of what it reserves, in registration order."""
    for check in _PAIRING:
        check(g, s, arch)
