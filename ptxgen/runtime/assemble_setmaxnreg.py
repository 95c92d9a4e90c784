"""Whether a kernel's `setmaxnreg` register split survived assembly, read from the assembler's log.

Why this matters: ptxas keeps `setmaxnreg` only when it compiles the whole program. nvJitLink
always compiles PTX as relocatable code (`ptxas -c`), where every setmaxnreg is dropped with
C7504; a kernel without a register cap at entry has it dropped with C7508 (docs/ptx_facts/
warp_specialisation.md §9g). The kernel is correct either way, only slower without the split, so
the report must say which happened rather than let a user read nvJitLink's numbers as the GPU's.
"""
from __future__ import annotations

import re

__all__ = ["uses_setmaxnreg", "setmaxnreg_status", "jit_cached_status", "KEPT", "NOT_USED", "C7504_NOTE"]

_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?setmaxnreg\.", re.MULTILINE)

NOT_USED = ""
KEPT = "setmaxnreg kept"
#: what a user is told where nvJitLink's report stands in for the binary that runs
C7504_NOTE = ("nvJitLink compiles PTX as relocatable code, where ptxas ignores setmaxnreg (C7504): "
              "these are the numbers without the producer/consumer register split")


def uses_setmaxnreg(ptx: str) -> bool:
    """True when an instruction line (not a comment) of `ptx` is a setmaxnreg."""
    return _INSTR.search(ptx) is not None


def setmaxnreg_status(ptx: str, log: str) -> str:
    """NOT_USED, KEPT, or 'setmaxnreg ignored (C75xx: why)' from an assembler's verbose log."""
    if not uses_setmaxnreg(ptx):
        return NOT_USED
    if "C7504" in log:
        return "setmaxnreg ignored: C7504, relocatable compilation"
    if "C7508" in log:
        return "setmaxnreg ignored: C7508, no register cap at entry"
    return KEPT


_CAP = re.compile(r"^\s*\.(maxnreg|maxntid)\b", re.MULTILINE)


def jit_cached_status(ptx: str) -> str:
    """The setmaxnreg fate when the driver's JIT wrote no log: it writes none for a module its
    compute cache served (a lent H200, driver 580: bench/results/2026-11-26-ablation-sm90-3eb197e/
    driver_jit_log.json). The JIT compiles whole-program, where the split is dropped only without
    a register cap at entry (C7508), so the PTX itself tells; the report says it was inferred."""
    if not uses_setmaxnreg(ptx):
        return NOT_USED
    if _CAP.search(ptx):
        return KEPT + " (inferred: the JIT cache served it without a log; the PTX caps registers at entry)"
    return "setmaxnreg ignored: C7508, no register cap at entry (inferred: the JIT cache served it without a log)"
