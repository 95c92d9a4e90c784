"""The info log the stand-in's PTX JIT writes (CU_JIT_INFO_LOG_BUFFER), modelled on whole-program ptxas.

Why model it: ptxgen reads the driver JIT's log to report whether a kernel's `setmaxnreg` register
split was kept, so the stand-in must say what the real JIT says for the rules it can decide from the
PTX alone. The driver compiles a PTX module as a whole program, so C7504 (relocatable code) never
appears; C7508 does, printed with or without CU_JIT_LOG_VERBOSE, when a kernel using setmaxnreg has no
register cap at entry (`.maxnreg`, `.maxntid` or `.reqntid`; measured with ptxas 13.0,
docs/ptx_facts/warp_specialisation.md §9g). With CU_JIT_LOG_VERBOSE each entry gets ptxas's
"Compiling entry function" line; no register or spill lines, since the simulator compiles no SASS.
"""
from __future__ import annotations

import re

__all__ = ["jit_info_log"]

_C7508 = ("ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to "
          "determine register count at entry.")
_CAP = re.compile(r"\.(?:maxnreg|maxntid|reqntid)\b")
_SETMAXNREG = re.compile(r"^\s*(?:@!?%\w+\s+)?setmaxnreg\.", re.MULTILINE)


def _entry_parts(ptx: str, entry: str) -> tuple[str, str]:
    """(directives between the parameter list and the body, the body) of `entry`."""
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", ptx)
    if m is None:
        return "", ""
    close = ptx.find(")", m.end())
    brace = ptx.find("{", close)
    if close < 0 or brace < 0:
        return "", ""
    depth, i = 0, brace
    while i < len(ptx):  # the body ends at its matching brace
        depth += {"{": 1, "}": -1}.get(ptx[i], 0)
        if depth == 0:
            break
        i += 1
    return ptx[close + 1:brace], ptx[brace:i + 1]


def jit_info_log(ptx: str, entries: list[str], arch: str, verbose: bool) -> str:
    """The info log for a PTX module the JIT accepted."""
    lines = []
    for entry in entries:
        directives, body = _entry_parts(ptx, entry)
        if _SETMAXNREG.search(body) and not _CAP.search(re.sub(r"//[^\n]*", "", directives)):
            lines.append(_C7508)
        if verbose:
            lines.append(f"ptxas info    : Compiling entry function '{entry}' for '{arch}'")
    return "\n".join(lines)
