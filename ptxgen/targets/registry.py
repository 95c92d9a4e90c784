"""Which backend lowers a schedule: picked from the arch and `Schedule.instruction`.

A new target is one package under `ptxgen/targets/` with a `Backend` and one line in BACKENDS
(docs/architecture.md). Importing this module registers every backend's schedule rules with
`ptxgen.schedule.rules` (defaults, persistent grid, verifier rules, what is built), which the
schedule layer reads without importing the targets.
"""
from __future__ import annotations

from ..schedule import rules
from ..schedule.targets import TARGETS
from .base import Backend
from .sm80.backend import Sm80Backend
from .sm90.backend import Sm90Backend
from .sm100.backend import Sm100Backend

#: Every backend, one line each; `backend_for` takes the one that lowers the instruction.
BACKENDS: tuple[Backend, ...] = (
    Sm80Backend(),
    Sm90Backend(),
    Sm100Backend(),
)

for _backend in BACKENDS:
    rules.register(_backend.instructions, _backend, _backend.check_pairing)


def backend_for_instruction(instruction: str) -> Backend:
    """The backend that lowers `instruction`; a ValueError naming the known ones otherwise."""
    for backend in BACKENDS:
        if instruction in backend.instructions:
            return backend
    known = ", ".join(i for b in BACKENDS for i in b.instructions)
    raise ValueError(f"instruction {instruction!r} is lowered by no target: use one of {known}")


def backend_for(arch: str, instruction: str) -> Backend:
    """The backend for (arch, instruction), once the verifier has accepted the pair; a ValueError
    when the backend of `instruction` does not lower for `arch`."""
    backend = backend_for_instruction(instruction)
    if arch not in backend.archs:
        raise ValueError(f"instruction {instruction!r} is lowered for {', '.join(backend.archs)}, not {arch!r}")
    return backend


def default_backend(arch: str) -> Backend:
    """The backend whose schedules `compile(gemm, arch=arch)` chooses among for `arch`."""
    for backend in BACKENDS:
        if arch in backend.archs:
            return backend
    raise ValueError(f"arch {arch!r} is not supported: use one of {', '.join(TARGETS)}")
