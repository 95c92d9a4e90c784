"""Exceptions users catch. Each message names the problem and how to fix it."""
from __future__ import annotations


class ScheduleError(ValueError):
    """A schedule or problem that ptxgen cannot lower correctly (raised before any PTX exists)."""

    def __init__(self, field: str, value: object, rule: str, fix: str):
        self.field, self.value, self.rule, self.fix = field, value, rule, fix
        super().__init__(f"{field}={value!r}: {rule}: {fix}")


class AssembleError(RuntimeError):
    """PTX that the assembler rejected; carries the log, the offending lines and a repro command."""

    def __init__(self, message: str, log: str = "", lines: list[tuple[int, str]] | None = None,
                 command: str = ""):
        self.log, self.lines, self.command = log, lines or [], command
        parts = [message]
        for no, text in self.lines:
            parts.append(f"  line {no}: {text.strip()}")
        if command:
            parts.append(f"reproduce with: {command}")
        if log:
            parts.append("assembler log:\n" + log.rstrip())
        super().__init__("\n".join(parts))


class ScheduleTypeError(ScheduleError, TypeError):
    """A Gemm, Epilogue or Schedule field of the wrong type (a str where a bool belongs, a float
    shape). Both a ScheduleError, so one `except` catches every bad input, and a TypeError."""


class LoweringNotBuilt(ScheduleError, NotImplementedError):
    """A schedule every rule accepts but whose lowering ptxgen does not have yet (the sm_90a
    wgmma pipeline). A ScheduleError too, so code that skips unlowerable schedules skips it,
    and a NotImplementedError, which is what it is; the message says what to use instead."""
