"""Debug information in PTX text: `.file`, `.loc` and DWARF `.section` blocks.

Compilers emit these for line info (Triton and nvcc with -lineinfo); ptxas takes them, and they
change nothing a kernel computes. They are not ';'-terminated statements, so before parsing they
are blanked out, line for line, keeping every other line's number for error messages.
"""
from __future__ import annotations

DIRECTIVES = (".file", ".loc")


def _code(line: str) -> str:
    """The line without its // comment (debug sections hold no strings with '//')."""
    return line.split("//", 1)[0]


def strip_debug_info(text: str) -> str:
    """`text` with `.file`/`.loc` lines and `.section` blocks replaced by empty lines."""
    out: list[str] = []
    depth = 0          # braces open inside the current .section block
    in_section = False
    for line in text.split("\n"):
        code = _code(line).strip()
        if in_section:
            depth += code.count("{") - code.count("}")
            out.append("")
            if depth <= 0 and "}" in code:
                in_section = False
            continue
        word = code.split(None, 1)[0] if code else ""
        if word == ".section":
            depth = code.count("{") - code.count("}")
            in_section = not ("{" in code and depth <= 0)  # open, or its block starts on a later line
            out.append("")
            continue
        if word in DIRECTIVES:
            out.append("")
            continue
        out.append(line)
    return "\n".join(out)
