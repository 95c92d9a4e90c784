"""Numbers as a reader wants them: times in the unit that fits (µs, ms, s) and counted nouns with
their plural, for every report line (`ptxgen info`, `run`, `tune`)."""
from __future__ import annotations


def seconds_text(seconds: float) -> str:
    """`5.1 µs`, `491.5 µs`, `1.82 ms`, `1.82 s`: three significant figures in the largest unit
    that keeps the number at least 1 (never "1818389.8 us")."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return f"{seconds * 1e9:.3g} ns" if seconds > 0 else "0 s"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 CTA`, `2 CTAs` (`plural` where adding "s" is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
