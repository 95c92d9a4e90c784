"""Assemble PTX to a cubin in-process (nvJitLink), or with `ptxas` on PATH as a fallback.

Why in-process: no toolkit install is needed (`pip install nvidia-nvjitlink`), and the cubin
can be loaded with `cuModuleLoadData` without the driver's PTX JIT, whose version is tied to
the driver. `PTXGEN_ASSEMBLER=nvjitlink|ptxas` forces one backend.

Why PTX with `setmaxnreg` goes to ptxas first: nvJitLink compiles relocatable code, where ptxas
drops setmaxnreg (C7504); `ptxas` compiles the whole program and keeps it. Without ptxas the
nvJitLink cubin is assembled (its report says the split was dropped) and a GPU launch has the
driver's JIT compile the PTX whole-program instead (`modules.kernel_binary`).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import AssembleError
from . import cache
from .assemble_setmaxnreg import KEPT, setmaxnreg_status, uses_setmaxnreg
from .simdriver import registry
from .ptxlog import Resources, parse_errors, parse_resources

__all__ = ["Assembled", "Resources", "AssemblerNotFound", "assemble", "assembler_version",
           "available_assemblers", "repro_command"]

_ARCH = re.compile(r"^sm_(\d{2,3})([af]?)$")


class AssemblerNotFound(RuntimeError):
    """Neither nvJitLink nor ptxas can be used (or the forced one cannot)."""


@dataclass(frozen=True)
class Assembled:
    cubin: bytes
    log: str
    resources: Resources
    arch: str
    assembler: str  # e.g. "nvJitLink 13.5" or "ptxas 13.0"
    #: ptxas compiled the whole program (False: nvJitLink's relocatable code)
    whole_program: bool = False
    #: "" (no setmaxnreg), "setmaxnreg kept", or "setmaxnreg ignored: C75xx, why"
    setmaxnreg: str = ""

    @property
    def split_dropped(self) -> bool:
        """The PTX asks for a setmaxnreg register split and this cubin does not have it."""
        return bool(self.setmaxnreg) and self.setmaxnreg != KEPT

    def describe(self) -> str:
        """Which assembler, how it compiled, and whether setmaxnreg survived, for reports."""
        how = "whole-program" if self.whole_program else "relocatable"
        return f"{self.assembler} ({how}" + (f"; {self.setmaxnreg})" if self.setmaxnreg else ")")


class _Failed(Exception):
    """A backend rejected the PTX: carries its log."""

    def __init__(self, log: str, detail: str = "", src: str = ""):
        super().__init__(detail or log)
        self.log, self.detail, self.src = log, detail, src  # src: a temp input path in the log


# -- backends -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _nvjitlink_probe() -> tuple[str, str] | str:
    """(display version, cache id) if nvJitLink loads, else the reason it does not."""
    try:
        from cuda.bindings import nvjitlink

        major, minor = nvjitlink.version()
    except Exception as e:  # ImportError, missing shared library, symbol errors
        return f"{type(e).__name__}: {e}"
    ident = f"nvJitLink {major}.{minor}"
    try:
        from importlib.metadata import version

        ident += f" (nvidia-nvjitlink {version('nvidia-nvjitlink')})"
    except Exception:
        pass
    return f"nvJitLink {major}.{minor}", ident


@functools.lru_cache(maxsize=None)
def _ptxas_probe(path: str | None) -> tuple[str, str] | str:
    if path is None:
        return "ptxas is not on PATH"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{path} --version failed: {e}"
    m = re.search(r"release\s+(\d+)\.(\d+)", out.stdout)
    if out.returncode != 0 or not m:
        return f"{path} --version gave no release number: {out.stdout.strip()[:200]}"
    full = re.search(r"\bV(\d+\.\d+\.\d+)", out.stdout)
    return f"ptxas {m.group(1)}.{m.group(2)}", f"ptxas {full.group(1) if full else m.group(0)}"


def _ptxas_path() -> str | None:
    return shutil.which("ptxas")


def available_assemblers() -> dict[str, tuple[str, str] | str]:
    """Backend name -> (version, cache id) when usable, else the reason it is not."""
    return {"nvjitlink": _nvjitlink_probe(), "ptxas": _ptxas_probe(_ptxas_path())}


def _select(backend: str | None = None, whole_program: bool = False) -> tuple[str, str, str]:
    """(backend, display version, cache id), honouring `backend`, else PTXGEN_ASSEMBLER; with
    neither, `whole_program` (PTX that uses setmaxnreg) puts ptxas before nvJitLink."""
    forced = backend or os.environ.get("PTXGEN_ASSEMBLER", "").strip().lower()
    if forced not in ("", "auto", "nvjitlink", "ptxas"):
        raise AssemblerNotFound(f"PTXGEN_ASSEMBLER={forced!r} is not one of 'nvjitlink', 'ptxas', "
                                f"'auto'")
    order = [forced] if forced in ("nvjitlink", "ptxas") else \
        ["ptxas", "nvjitlink"] if whole_program else ["nvjitlink", "ptxas"]
    reasons = []
    for name in order:
        probe = _nvjitlink_probe() if name == "nvjitlink" else _ptxas_probe(_ptxas_path())
        if isinstance(probe, tuple):
            return name, probe[0], probe[1]
        reasons.append(f"{name}: {probe}")
    what = f"the assembler forced by PTXGEN_ASSEMBLER={forced}" if len(order) == 1 else \
        "no PTX assembler"
    raise AssemblerNotFound(
        f"{what} is available ({'; '.join(reasons)}). Fix: `pip install nvidia-nvjitlink` "
        f"(in-process, preferred) or install the CUDA toolkit and put `ptxas` on PATH"
        + ("; or unset PTXGEN_ASSEMBLER" if len(order) == 1 else ""))


def assembler_version() -> str:
    """The assembler `assemble` would use now, e.g. "nvJitLink 13.5" or "ptxas 13.0"."""
    return _select()[1]


def _run_nvjitlink(ptx: str, arch: str) -> tuple[bytes, str]:
    from cuda.bindings import nvjitlink

    def _log(h: int, size_fn, get_fn) -> str:
        try:
            n = size_fn(h)
            buf = bytearray(n)
            if n:
                get_fn(h, buf)
            return bytes(buf).rstrip(b"\0").decode("utf-8", errors="replace")
        except Exception:
            return ""

    data = ptx.encode()
    opts = [f"-arch={arch}", "-verbose"]
    try:
        h = nvjitlink.create(len(opts), opts)
    except nvjitlink.nvJitLinkError as e:
        raise _Failed("", f"nvJitLink rejected options {opts}: {e}") from None
    try:
        try:
            nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "ptxgen.ptx")
            nvjitlink.complete(h)
        except nvjitlink.nvJitLinkError as e:
            err = _log(h, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            info = _log(h, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
            raise _Failed("\n".join(x for x in (err, info) if x.strip()), str(e)) from None
        info = _log(h, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        n = nvjitlink.get_linked_cubin_size(h)
        cubin = bytearray(n)
        nvjitlink.get_linked_cubin(h, cubin)
        return bytes(cubin), info
    finally:
        nvjitlink.destroy(h)


def _run_ptxas(ptx: str, arch: str) -> tuple[bytes, str]:
    exe = _ptxas_path()
    if exe is None:
        raise AssemblerNotFound("ptxas disappeared from PATH")
    with tempfile.TemporaryDirectory(prefix="ptxgen-ptxas-") as d:
        src, out = Path(d) / "in.ptx", Path(d) / "out.cubin"
        src.write_text(ptx)
        try:
            proc = subprocess.run([exe, f"-arch={arch}", "-v", "-o", str(out), str(src)],
                                  capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            raise _Failed(str(e), "ptxas timed out after 600 s") from None
        log = (proc.stdout + proc.stderr).strip() + "\n"
        if proc.returncode != 0 or not out.exists():
            raise _Failed(log, f"ptxas exited with status {proc.returncode}", src=str(src))
        return out.read_bytes(), log


# -- errors -------------------------------------------------------------------------------------
def repro_command(ptx: str, arch: str) -> str:
    """Write the PTX to a stable, hash-named file and return a ptxas command reproducing it."""
    return _repro(ptx, arch)[0]


def _repro(ptx: str, arch: str) -> tuple[str, str | None]:
    """(command, path of the written PTX file or None)."""
    name = hashlib.sha256(ptx.encode()).hexdigest()[:16] + ".ptx"
    for base in (cache.default_dir() / "failed", Path(tempfile.gettempdir()) / "ptxgen-failed"):
        try:
            base.mkdir(parents=True, exist_ok=True)
            path = base / name
            if not path.exists() or path.read_text() != ptx:
                tmp = path.with_suffix(f".{os.getpid()}.part")
                tmp.write_text(ptx)
                os.replace(tmp, path)
            return f"ptxas -arch={arch} -v -o /dev/null {shlex.quote(str(path))}", str(path)
        except OSError:
            continue
    return (f"ptxas -arch={arch} -v -o /dev/null <write the PTX to a file: no writable directory>",
            None)


#: An assembler's refusal of a `.version` newer than it knows (ptxas and nvJitLink word it alike).
_NEWER_ISA = re.compile(r"Unsupported \.version ([\d.]+); current version is '([\d.]+)'")


def _error(ptx: str, arch: str, entry: str, backend: str, failed: _Failed) -> AssembleError:
    command, path = _repro(ptx, arch)
    log = failed.log
    if failed.src and path:  # point the log at the file that survives, not the deleted temp
        log = log.replace(failed.src, path)
    line_nos, first = parse_errors(log)
    src = ptx.splitlines()
    lines = [(n, src[n - 1]) for n in line_nos if 1 <= n <= len(src)]
    msg = f"{backend} could not assemble entry {entry!r} for {arch}"
    if first:
        msg += f": {first}"
    elif failed.detail:
        msg += f": {failed.detail}"
    newer = _NEWER_ISA.search(log or "")
    if newer:
        msg += (f". Fix: the PTX declares ISA {newer.group(1)} and {backend} takes {newer.group(2)} at most: "
                f"install a newer assembler (pip install -U nvidia-nvjitlink, or a newer ptxas first on PATH "
                f"with PTXGEN_ASSEMBLER=ptxas), or, if the kernel uses nothing newer than ISA {newer.group(2)}, "
                f"declare `.version {newer.group(2)}`")
    return AssembleError(msg, log=log or failed.detail, lines=lines, command=command)


# -- public -------------------------------------------------------------------------------------
def check_arch(arch: str) -> str:
    if not isinstance(arch, str) or not _ARCH.match(arch):
        raise ValueError(f"arch={arch!r} is not an SM architecture name: use e.g. 'sm_80', "
                         f"'sm_86', 'sm_89', 'sm_90' or 'sm_90a'")
    return arch


def assemble(ptx: str, arch: str, entry: str, backend: str | None = None) -> Assembled:
    """Assemble `ptx` for `arch`; returns the cubin, the verbose log and `entry`'s resources.

    Raises AssembleError (with log, offending lines and a repro command) when the PTX is
    rejected, and AssemblerNotFound when no assembler can be used. Results are cached on disk.
    `backend` ("nvjitlink" or "ptxas") overrides PTXGEN_ASSEMBLER, e.g. to write a cubin format
    an older driver reads. With neither, PTX using setmaxnreg prefers whole-program ptxas, and
    falls back to nvJitLink (with a warning) when that ptxas rejects it (e.g. one too old for
    the PTX's .version).
    """
    check_arch(arch)
    prefer_whole = uses_setmaxnreg(ptx)
    name, display, ident = _select(backend, whole_program=prefer_whole)
    auto = (backend or os.environ.get("PTXGEN_ASSEMBLER", "")).strip().lower() in ("", "auto")
    try:
        return _assemble_with(ptx, arch, entry, name, display, ident)
    except AssembleError as e:
        nv = _nvjitlink_probe()
        if not (auto and prefer_whole and name == "ptxas" and isinstance(nv, tuple)):
            raise
        first = str(e).splitlines()[0]
        warnings.warn(f"{first}; assembling with {nv[0]} instead, whose relocatable code drops "
                      f"setmaxnreg (C7504): a GPU launch has the driver's JIT compile the PTX "
                      f"whole-program. Fix: a ptxas as new as the PTX's .version on PATH",
                      RuntimeWarning, stacklevel=2)
        return _assemble_with(ptx, arch, entry, "nvjitlink", nv[0], nv[1])


def _assemble_with(ptx: str, arch: str, entry: str, backend: str, display: str, ident: str) -> Assembled:
    """`assemble` with one backend: from the disk cache, else by running it (then cached)."""
    whole = backend == "ptxas"  # _run_ptxas never passes -c; nvJitLink always compiles with it
    key = cache.make_key(ptx, arch, entry, ident)
    hit = cache.load(key)
    if hit is not None:
        cubin, log = hit
        registry.remember(cubin, ptx)
        return Assembled(cubin, log, parse_resources(log, entry), arch, display, whole,
                         setmaxnreg_status(ptx, log))
    try:
        cubin, log = (_run_nvjitlink if backend == "nvjitlink" else _run_ptxas)(ptx, arch)
    except _Failed as f:
        raise _error(ptx, arch, entry, display, f) from None
    resources = parse_resources(log, entry)  # before caching: never cache an unusable entry
    cache.store(key, cubin, log)
    registry.remember(cubin, ptx)  # the simulator-backed driver runs a cubin from its PTX
    return Assembled(cubin, log, resources, arch, display, whole, setmaxnreg_status(ptx, log))
