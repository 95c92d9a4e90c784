"""Report lines that fit a terminal: `info`, `run` and `tune` wrap lines longer than `WIDTH` at
word boundaries, continuing under the value column; `--wide` (or PTXGEN_WIDE=1) prints them whole,
for scripts that grep one line."""
from __future__ import annotations

import textwrap
from typing import TextIO

#: Longest report line printed without --wide.
WIDTH = 119
#: Continuation lines start under the value column ("kernel     ..." puts values at column 11).
INDENT = " " * 13


def wrap_line(line: str, width: int = WIDTH) -> str:
    if len(line) <= width:
        return line
    lead = len(line) - len(line.lstrip(" "))
    indent = INDENT if lead < len(INDENT) else " " * (lead + 2)
    return textwrap.fill(line, width=width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False, drop_whitespace=True)


class WrappingWriter:
    """A text stream that wraps each complete line it is given and passes it on to `out`."""

    def __init__(self, out: TextIO, width: int = WIDTH):
        self.out, self.width, self.pending = out, width, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.out.write(wrap_line(line, self.width) + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.out.write(wrap_line(self.pending, self.width))
            self.pending = ""
        self.out.flush()

    def __getattr__(self, name: str):  # isatty, fileno, encoding: the stream's own
        return getattr(self.out, name)
