"""Load PTX through the CUDA driver's own JIT (`cuModuleLoadDataEx`), keeping its logs.

Why this route exists beside nvJitLink: the driver compiles a PTX module as a whole program, as it
does for PTX embedded in a fatbin, so ptxas keeps `setmaxnreg` there, where nvJitLink's relocatable
code drops it (C7504). (`cuLinkAddData` of PTX would link, i.e. compile relocatable code, like
nvJitLink.) Why the log buffers: a JIT failure otherwise surfaces as a bare CUresult
(CUDA_ERROR_INVALID_PTX) with no line and no reason; with CU_JIT_ERROR_LOG_BUFFER the driver
writes ptxas's messages, and with CU_JIT_LOG_VERBOSE its info log says what it kept or ignored.
"""
from __future__ import annotations

from typing import Any

from ..errors import AssembleError
from . import driver as drv
from .ptxlog import parse_errors

__all__ = ["DriverJitError", "jit_load", "LOG_BYTES", "registers_of"]

#: bytes of each log buffer handed to the driver (its messages are truncated beyond)
LOG_BYTES = 64 * 1024


class DriverJitError(AssembleError):
    """The driver's PTX JIT rejected the PTX: the message names the kernel and quotes its log."""


def _text(buf: bytearray) -> str:
    return bytes(buf).split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()


def jit_load(ptx: str, entry: str, arch: str) -> tuple[Any, str]:
    """(module handle, the JIT's verbose info log) for `ptx`; DriverJitError with the error log
    and the offending lines when the driver refuses it."""
    from .assemble import repro_command

    opt = drv._driver().CUjit_option
    info, err = bytearray(LOG_BYTES), bytearray(LOG_BYTES)
    options = [opt.CU_JIT_INFO_LOG_BUFFER, opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
               opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
               opt.CU_JIT_LOG_VERBOSE]
    values = [info, LOG_BYTES, err, LOG_BYTES, 1]  # the buffers stay alive across the call
    try:
        handle = drv._call("cuModuleLoadDataEx", ptx.encode() + b"\0", len(options), options, values)
    except drv.DriverError as e:
        log = "\n".join(x for x in (_text(err), _text(info)) if x)
        line_nos, first = parse_errors(log)
        src = ptx.splitlines()
        lines = [(n, src[n - 1]) for n in line_nos if 1 <= n <= len(src)]
        reason = first or (log.splitlines()[0] if log else str(e))
        raise DriverJitError(
            f"the CUDA driver's PTX JIT could not compile kernel {entry!r} for {arch} ({e.name}): "
            f"{reason}. Fix: check the PTX with the command below; if ptxas accepts it, the "
            f"driver's JIT is older than the PTX needs: update the driver",
            log=log or str(e), lines=lines, command=repro_command(ptx, arch)) from None
    return handle, _text(info)


def registers_of(function: Any) -> int:
    """Registers per thread the driver compiled `function` with (cuFuncGetAttribute NUM_REGS)."""
    attr = drv._driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS
    return int(drv._call("cuFuncGetAttribute", attr, function))
