"""The module header rules ptxas enforces, so the simulator accepts no PTX the assembler rejects.

Every module starts with `.version X.Y`, then `.target sm_XX`, then (optionally, in PTX; required
here because the simulator models 64-bit addressing only) `.address_size 64`, before anything
else. The target must be one the simulator knows and the version at least the first PTX ISA that
supports it (docs/ptx_facts/module.md §10).
"""
from __future__ import annotations

import re

#: target -> first PTX ISA version that accepts it (docs/ptx_facts/module.md §10).
FIRST_ISA: dict[str, tuple[int, int]] = {
    "sm_70": (6, 0), "sm_72": (6, 1), "sm_75": (6, 3), "sm_80": (7, 0), "sm_86": (7, 1),
    "sm_87": (7, 4), "sm_89": (7, 8), "sm_90": (7, 8), "sm_90a": (8, 0),
    "sm_100": (8, 6), "sm_100a": (8, 6), "sm_120": (8, 7), "sm_120a": (8, 7),
}
#: PTX ISA versions the simulator knows: 6.0 up to 9.x (CUDA 13).
OLDEST_ISA, NEWEST_MAJOR = (6, 0), 9
#: Options that may follow the architecture on the .target line.
TARGET_OPTIONS = {"texmode_unified", "texmode_independent", "debug", "map_f64_to_f32"}
ORDER = (".version", ".target", ".address_size")
EXAMPLE = "`.version 7.8`, `.target sm_80`, `.address_size 64`"


class HeaderState:
    """Tracks which header directives were seen; each method returns an error text or None."""

    def __init__(self):
        self.seen: list[str] = []
        self.version: tuple[int, int] | None = None
        self.body_started = False

    def directive(self, word: str, args: list[str]) -> str | None:
        """A .version/.target/.address_size line, checked for its place and its value."""
        if word in self.seen:
            return f"{word} appears twice: a module has one header ({EXAMPLE}, in that order)"
        place = len(self.seen)
        if self.body_started or ORDER.index(word) != place:
            want = ORDER[place] if place < len(ORDER) and not self.body_started else None
            expected = f"expected {want} here" if want else "the header must come before everything else"
            return (f"{word} is out of order ({expected}): a module starts with {EXAMPLE}, in that "
                    "order, as ptxas requires")
        self.seen.append(word)
        text = " ".join(args)
        if word == ".version":
            return self._version(text)
        if word == ".target":
            return self._target(text)
        if text != "64":
            return f"`.address_size {text}`: the simulator models 64-bit addressing only; use `.address_size 64`"
        return None

    def _version(self, text: str) -> str | None:
        m = re.fullmatch(r"(\d+)\.(\d+)", text)
        if m is None:
            return f"`.version {text}` is not a PTX ISA version: write MAJOR.MINOR, e.g. `.version 7.8`"
        v = (int(m.group(1)), int(m.group(2)))
        if v < OLDEST_ISA or v[0] > NEWEST_MAJOR:
            return (f"PTX ISA version {text} is unknown to the simulator (it knows "
                    f"{OLDEST_ISA[0]}.{OLDEST_ISA[1]} to {NEWEST_MAJOR}.x): use e.g. `.version 7.8`")
        self.version = v
        return None

    def _target(self, text: str) -> str | None:
        words = [w for w in re.split(r"[\s,]+", text) if w]
        arch = words[0] if words else ""
        if arch not in FIRST_ISA:
            return (f"`.target {text}`: target {arch!r} is unknown to the simulator; use one of "
                    f"{', '.join(FIRST_ISA)}")
        extra = [w for w in words[1:] if w not in TARGET_OPTIONS]
        if extra:
            return f"`.target {text}`: unknown target option(s) {', '.join(extra)}"
        first = FIRST_ISA[arch]
        if self.version is not None and self.version < first:
            have = f"{self.version[0]}.{self.version[1]}"
            return (f"target {arch} needs PTX ISA {first[0]}.{first[1]} or newer but the module says "
                    f".version {have}: raise .version to at least {first[0]}.{first[1]}")
        return None

    def statement(self) -> str | None:
        """Anything else at module level: it must come after .version and .target."""
        self.body_started = True
        return self.missing()

    def missing(self) -> str | None:
        """The first required directive not yet seen (at a statement or at the end of the text)."""
        for word in ORDER:
            if word not in self.seen:
                if word == ".address_size":
                    return ("missing .address_size directive: without it PTX addresses are 32-bit, "
                            "and the simulator models 64-bit addressing only; add `.address_size 64` "
                            "right after .target")
                return (f"missing {word} directive: the assembler rejects PTX without it; start the "
                        f"module with {EXAMPLE}, in that order")
        return None
