"""The seam through which the schedule layer asks a target about the schedules it lowers.

The schedule layer (problem, schedule, geometry, verification) sits below the target backends
and imports none of them. What only a target knows about its own schedules (the defaults of its
fields, a persistent grid, its verifier rules, what it has built) it registers here, keyed by
`Schedule.instruction`; `ptxgen.targets.registry` registers every backend when ptxgen is
imported, so a new target adds no branch here (docs/architecture.md).
"""
from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from .problem import Gemm
    from .schedule import Schedule


class TargetOptions(Protocol):
    """A target's own schedule fields: a frozen dataclass whose fields default to None (None
    picks the target's default, `ScheduleRules.fill_defaults`). `Schedule` holds one in
    `Schedule.options` and reads its fields flat (`s.consumers`)."""

    @property
    def producer_warpgroups(self) -> int:
        """Warpgroups the CTA runs besides its warp grid (a TMA producer), 0 for none."""

    def verify_types(self) -> None:
        """Raise ScheduleTypeError naming a field of the wrong type."""


class ScheduleRules(Protocol):
    """What the schedule layer asks of the backend that lowers an instruction."""

    #: Whether tf32 inputs may give f16/bf16 outputs (an epilogue that casts the f32 it reads).
    tf32_narrow_outputs: bool
    #: Whether it builds block-scaled fp8 (Gemm.block_scale, schedule/block_scale.py).
    block_scaled: bool
    #: The target's options class (its own schedule fields), or None when it has none.
    options: "type[TargetOptions] | None"

    def fill_defaults(self, s: "Schedule") -> None:
        """Set the target's fields the caller left None: its `options` (built when None) and the
        shared fields whose default is the target's (the Schedule is frozen: object.__setattr__,
        from its constructor only)."""

    def grid(self, g: "Gemm", s: "Schedule", sms: int) -> tuple[int, int, int] | None:
        """The target's own launch grid for `s` (e.g. a persistent one), or None for the tile grid."""

    def verify(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise ScheduleError for the first of the target's rules (g, s) breaks on `arch`."""

    def check_built(self, g: "Gemm", s: "Schedule", arch: str) -> None:
        """Raise LoweringNotBuilt for a legal schedule the target cannot lower yet."""


_RULES: dict[str, ScheduleRules] = {}
_PAIRING: list[Callable[["Gemm", "Schedule", str], None]] = []
_OPTIONS: "list[type[TargetOptions]]" = []


def register(instructions: tuple[str, ...], rules: ScheduleRules,
             pairing: Callable[["Gemm", "Schedule", str], None] | None = None) -> None:
    """Make `rules` answer for schedules of `instructions` (its `options` class holds their own
    fields); `pairing` (optional) checks every (Gemm, Schedule, arch) for what this target
    reserves (its arch, dtypes and fields)."""
    for name in instructions:
        _RULES[name] = rules
    if rules.options is not None and rules.options not in _OPTIONS:
        _OPTIONS.append(rules.options)
    if pairing is not None and pairing not in _PAIRING:
        _PAIRING.append(pairing)


def registered_instructions() -> tuple[str, ...]:
    """Every instruction name a registered target lowers, in registration order."""
    return tuple(_RULES)


def rules_for(instruction: object) -> ScheduleRules | None:
    """The rules registered for an instruction name; None for a name no target lowers (the
    verifier names it)."""
    return _RULES.get(instruction) if isinstance(instruction, str) else None


def options_class(instruction: object) -> "type[TargetOptions] | None":
    """The options class of the target that lowers `instruction` (None: none, or no target)."""
    rules = rules_for(instruction)
    return rules.options if rules is not None else None


def target_fields() -> tuple[str, ...]:
    """Every registered target's own field names, in registration order (how they print)."""
    return tuple(_owners(tuple(_OPTIONS)))


def options_owning(name: str) -> "type[TargetOptions] | None":
    """The registered options class with a field `name`, or None (read on every `s.consumers`)."""
    return _owners(tuple(_OPTIONS)).get(name)


@lru_cache(maxsize=8)
def _owners(classes: "tuple[type[TargetOptions], ...]") -> "dict[str, type[TargetOptions]]":
    """field name -> the first of `classes` that has it, in order."""
    out: "dict[str, type[TargetOptions]]" = {}
    for cls in classes:
        for f in fields(cls):  # type: ignore[arg-type]
            out.setdefault(f.name, cls)
    return out


def check_pairing(g: "Gemm", s: "Schedule", arch: str) -> None:
    """Every registered target's check of what it reserves, in registration order."""
    for check in _PAIRING:
        check(g, s, arch)
