"""Errors the simulator reports: a HazardError names the PTX line that broke a rule."""
from __future__ import annotations

HAZARD_KINDS = frozenset(
    {"race", "async-pending", "out-of-bounds", "misaligned", "divergence", "unsupported"}
)


class HazardError(Exception):
    """A PTX program broke a rule the hardware relies on (or used something the simulator lacks).

    `kind` is one of HAZARD_KINDS, `line` the 1-based PTX line, `line_text` that line's text and
    `detail` the explanation without the quoted line.
    """

    def __init__(self, kind: str, line: int, detail: str, line_text: str = ""):
        if kind not in HAZARD_KINDS:
            raise ValueError(f"unknown hazard kind {kind!r}")
        self.kind, self.line, self.detail, self.line_text = kind, line, detail, line_text.strip()
        super().__init__(f"{kind} at PTX line {line}: {detail}\n    {line}| {self.line_text}")


class Fault(Exception):
    """Raised inside an executor, which does not know its line; the caller turns it into a HazardError."""

    def __init__(self, kind: str, detail: str):
        if kind not in HAZARD_KINDS:
            raise ValueError(f"unknown hazard kind {kind!r}")
        self.kind, self.detail = kind, detail
        super().__init__(f"{kind}: {detail}")
