"""The same PTX through each assembler a user may have, side by side: every
ptxas given by path (e.g. the toolkit's 13.0 and the `nvidia-cuda-nvcc` 13.5 wheel's) compiling the
whole program, and nvJitLink's relocatable build (the path `ptxgen` takes in-process, and what a
driver JIT does with a relocatable unit). The consumer loop's SASS per k-tile differs between them
for the same PTX, so the lean-loop target is checked under each.

    PYTHONPATH=. python3 bench/sass.py --arch sm_90a --ptxas /usr/local/bin/ptxas --ptxas /path/to/13.5/ptxas
    PYTHONPATH=. python3 bench/sass_check.py --ptxas ... (the same columns after the gate)

A ptxas is chosen by putting its folder first on PATH for the one call (ptxgen.runtime.assemble
finds ptxas on PATH); its version comes from `ptxas --version`.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from sass_hopper import analyse_sass, perf_notes

NVJITLINK = "nvjitlink"


@contextlib.contextmanager
def ptxas_first(path: str) -> Iterator[None]:
    """`path` (a ptxas executable) is the ptxas ptxgen finds for the duration."""
    from ptxgen.runtime import assemble as asm

    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"--ptxas {path}: not an executable; give the path of a ptxas binary "
                                f"(e.g. .../nvidia/cu13/bin/ptxas from `pip install nvidia-cuda-nvcc`)")
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = str(Path(path).resolve().parent) + os.pathsep + old
    asm._ptxas_probe.cache_clear()
    try:
        yield
    finally:
        os.environ["PATH"] = old
        asm._ptxas_probe.cache_clear()


def version_of(which: str) -> str:
    """'ptxas 13.0.88' for a ptxas path, 'nvJitLink 13.5 (...)' for nvjitlink."""
    from ptxgen.runtime.assemble import available_assemblers

    if which == NVJITLINK:
        nv = available_assemblers()["nvjitlink"]
        return nv[1] if isinstance(nv, tuple) else f"nvJitLink unavailable: {nv}"
    out = subprocess.run([which, "--version"], capture_output=True, text=True).stdout
    tail = [w for w in out.split() if w.startswith("V")]
    return f"ptxas {tail[-1][1:] if tail else '?'} ({which})"


@dataclass(frozen=True)
class LoopUnder:
    """What one assembler made of one kernel: the consumer loop's SASS per k-tile (None without
    cuobjdump), registers, spill bytes and ptxas's C75xx codes."""

    total: int | None
    registers: int
    spill_bytes: int
    codes: tuple[str, ...]
    r2ur: int = 0

    def cell(self) -> str:
        loop = "-" if self.total is None else str(self.total)
        notes = ",".join(self.codes) or "-"
        return f"{loop:>4s} {self.registers:3d}r {self.spill_bytes:3d}s {notes}"


def assemble_under(kernel, arch: str, which: str):
    """`kernel`'s PTX assembled by `which` (a ptxas path: whole program; NVJITLINK: relocatable)."""
    from ptxgen.runtime.assemble import assemble

    if which == NVJITLINK:
        return assemble(kernel.ptx, arch, kernel.entry, backend="nvjitlink")
    with ptxas_first(which):
        return assemble(kernel.ptx, arch, kernel.entry, backend="ptxas")


def loop_under(kernel, arch: str, which: str, tool: str | None) -> LoopUnder:
    """Assemble under `which` and measure the consumer (tensor) loop with cuobjdump `tool`."""
    from sass import sass_text

    a = assemble_under(kernel, arch, which)
    total, r2ur = None, 0
    if tool:
        found = [h for h in analyse_sass(sass_text(a.cubin, tool)) if h.function == kernel.entry]
        if found and found[0].consumer is not None:
            total = found[0].consumer.total
            r2ur = Counter(i.family for i in found[0].consumer.hot)["R2UR"]
    codes = tuple(sorted({n.code for n in perf_notes(a.log)}))
    return LoopUnder(total, a.resources.registers, a.resources.spill_bytes, codes, r2ur)


def assemblers(ptxas_paths: list[str]) -> list[str]:
    """The assemblers to compare: each given ptxas, then nvJitLink when it loads."""
    from ptxgen.runtime.assemble import available_assemblers

    out = list(ptxas_paths)
    if isinstance(available_assemblers()["nvjitlink"], tuple):
        out.append(NVJITLINK)
    return out


def side_by_side(rows: list[tuple[str, object]], arch: str, which: list[str], tool: str | None) -> list[str]:
    """One line per (label, Kernel): each assembler's `loop regs spill notes` cell."""
    names = [f"[{k}]" for k in range(len(which))]
    lines = ["", "consumer loop SASS per k-tile under each assembler (loop, registers, spill bytes, C75xx notes):"]
    lines += [f"  {n} {version_of(w)}" for n, w in zip(names, which)]
    lines.append(f"{'kernel':40s} " + " ".join(f"{n:>22s}" for n in names))
    for label, kernel in rows:
        cells = []
        for w in which:
            try:
                cells.append(loop_under(kernel, arch, w, tool).cell())
            except Exception as e:  # an assembler that rejects the PTX: say so in its cell
                cells.append(f"{type(e).__name__}")
        lines.append(f"{label:40s} " + " ".join(f"{c:>22s}" for c in cells))
    return lines
