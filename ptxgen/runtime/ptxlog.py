"""Parse assembler logs: per-function resource usage, and error locations.

Two log dialects reach us, often both in one nvJitLink log:

* ptxas (standalone, or embedded in nvJitLink's info log)::

      ptxas info    : Compiling entry function 'gemm' for 'sm_80'
      ptxas info    : Function properties for gemm
          112 bytes stack frame, 108 bytes spill stores, 108 bytes spill loads
      ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 360 bytes cmem[0]

* nvJitLink's own summary::

      info    : Function properties for 'gemm':
      info    : used 32 registers, used 11 barriers, 112 stack, 4096 bytes smem, 360 bytes cmem[0], 0 bytes lmem

The two can disagree slightly (nvJitLink's smem on sm_90 includes the 1 KiB the system
reserves; its stack is cumulative over callees), so ptxas numbers win where both exist and
nvJitLink's fill the gaps (stack: the larger; shared memory: ptxas's, 0 when it omits it;
constant memory: nvJitLink's when ptxas omits it, as it does for sm_90). Every number but the
register count defaults to 0.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import AssembleError


@dataclass(frozen=True)
class Resources:
    """What one kernel costs per thread/CTA, as the assembler reports it."""

    registers: int
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    shared_bytes: int = 0  # static shared memory declared by the kernel (not the dynamic part)
    stack_bytes: int = 0  # local-memory stack frame, including callees where reported
    constant_bytes: int = 0  # sum over cmem banks
    binary: str = ""  # what the last launch ran: "cubin for sm_90 from nvJitLink 13.5" or "PTX JIT ..."

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes

    def __str__(self) -> str:
        return (f"{self.registers} registers, {self.spill_store_bytes} B spill stores, "
                f"{self.spill_load_bytes} B spill loads, {self.shared_bytes} B static smem, "
                f"{self.stack_bytes} B stack, {self.constant_bytes} B cmem"
                + (f"; runs {self.binary}" if self.binary else ""))


_NAME = r"([A-Za-z_$%][\w$.]*)"
_PTXAS_ENTRY = re.compile(rf"Compiling entry function\s+'{_NAME}'")
_PROPS_QUOTED = re.compile(rf"Function properties for\s+'{_NAME}'")
_PROPS_PLAIN = re.compile(rf"Function properties for\s+{_NAME}")
_FRAME = re.compile(r"(\d+)\s+bytes stack frame,\s*(\d+)\s+bytes spill stores,\s*(\d+)\s+bytes spill loads")
_REGS = re.compile(r"\bused\s+(\d+)\s+registers", re.IGNORECASE)
_SMEM = re.compile(r"(\d+)\s+bytes\s+smem")
_CMEM = re.compile(r"(\d+)\s+bytes\s+cmem\[\d+\]")
_CUM_STACK = re.compile(r"(\d+)\s+bytes cumulative stack size")
_NVJ_STACK = re.compile(r"(\d+)\s+stack\b")
_NVJ_LINE = re.compile(r"^\s*info\s*:")
_ERROR = re.compile(r",\s*line\s+(\d+);\s*(error|fatal)\s*:\s*(.*)$")
_FATAL = re.compile(r"\b(error|fatal)\b\s*:\s*(.*)$", re.IGNORECASE)


def _parse_dialects(log: str) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Per-function numbers, split by dialect: (ptxas, nvjitlink)."""
    ptxas: dict[str, dict[str, int]] = {}
    nvj: dict[str, dict[str, int]] = {}
    cur_p: str | None = None
    cur_n: str | None = None
    for line in log.splitlines():
        if _NVJ_LINE.match(line):
            m = _PROPS_QUOTED.search(line)
            if m:
                cur_n = m.group(1)
                nvj.setdefault(cur_n, {})
                continue
            m = _REGS.search(line)
            if m and cur_n is not None:
                rec = nvj[cur_n]
                rec["registers"] = int(m.group(1))
                if (s := _SMEM.search(line)):
                    rec["shared_bytes"] = int(s.group(1))
                if (s := _NVJ_STACK.search(line)):
                    rec["stack_bytes"] = int(s.group(1))
                rec["constant_bytes"] = sum(int(x) for x in _CMEM.findall(line))
            continue
        m = _PTXAS_ENTRY.search(line) or _PROPS_QUOTED.search(line) or _PROPS_PLAIN.search(line)
        if m:
            cur_p = m.group(1)
            ptxas.setdefault(cur_p, {})
            continue
        if cur_p is None:
            continue
        rec = ptxas[cur_p]
        m = _FRAME.search(line)
        if m:
            rec["stack_bytes"] = max(rec.get("stack_bytes", 0), int(m.group(1)))
            rec["spill_store_bytes"] = int(m.group(2))
            rec["spill_load_bytes"] = int(m.group(3))
            continue
        m = _REGS.search(line)
        if m:
            rec["registers"] = int(m.group(1))
            if (s := _SMEM.search(line)):
                rec["shared_bytes"] = int(s.group(1))
            if (s := _CUM_STACK.search(line)):
                rec["stack_bytes"] = max(rec.get("stack_bytes", 0), int(s.group(1)))
            cmem = _CMEM.findall(line)
            if cmem:
                rec["constant_bytes"] = sum(int(x) for x in cmem)
    return ptxas, nvj


def functions_in_log(log: str) -> list[str]:
    """Names of every function the log reports on (for error messages)."""
    p, n = _parse_dialects(log)
    return sorted(set(p) | set(n))


def parse_resources(log: str, entry: str) -> Resources:
    """Resources of `entry` from an assembler log; AssembleError if its register count is missing."""
    ptxas, nvj = _parse_dialects(log)
    p = ptxas.get(entry, {})
    n = nvj.get(entry, {})
    if "registers" not in p and "registers" not in n:
        found = sorted(f for f in set(ptxas) | set(nvj))
        raise AssembleError(
            f"the assembler log has no register count for entry {entry!r} "
            f"(functions reported: {found or 'none'}); check that the entry name matches a "
            f"`.visible .entry` in the PTX and that the assembler ran with -v/-verbose",
            log=log)
    merged = {**n, **p}  # ptxas wins where both report a number
    merged["stack_bytes"] = max(p.get("stack_bytes", 0), n.get("stack_bytes", 0))
    if "registers" in p:
        # ptxas omits "0 bytes smem"; nvJitLink's figure would add the 1 KiB sm_90 reserves
        merged["shared_bytes"] = p.get("shared_bytes", 0)
    if not p.get("constant_bytes"):  # ptxas omits cmem for sm_90: take nvJitLink's
        merged["constant_bytes"] = n.get("constant_bytes", 0)
    return Resources(
        registers=merged["registers"],
        spill_store_bytes=merged.get("spill_store_bytes", 0),
        spill_load_bytes=merged.get("spill_load_bytes", 0),
        shared_bytes=merged.get("shared_bytes", 0),
        stack_bytes=merged.get("stack_bytes", 0),
        constant_bytes=merged.get("constant_bytes", 0),
    )


def parse_errors(log: str) -> tuple[list[int], str]:
    """(sorted unique PTX line numbers with errors, first error message) from an error log."""
    lines: set[int] = set()
    first = ""
    for line in log.splitlines():
        m = _ERROR.search(line)
        if m:
            lines.add(int(m.group(1)))
            if not first:
                first = f"line {m.group(1)}: {m.group(3).strip()}"
            continue
        if not first:
            m = _FATAL.search(line)
            if m and "aborted due to errors" not in m.group(2):
                first = m.group(2).strip()
    return sorted(lines), first
