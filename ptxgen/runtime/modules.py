"""Loaded modules and functions: a bounded per-context cache, the binary each kernel runs.

Why bounded: a process that compiles many kernels (a tuner, the property tests) would otherwise
keep every module loaded for its whole life; the oldest unpinned modules are unloaded instead.
Why remember a PTX-JIT fallback under the cubin's key: a cubin the driver refused once (e.g.
CUDA 13's ELF format on an older driver) is refused every time, so the load is not retried on
every launch. Why choose the binary by `cuDriverGetVersion`: a cubin from an assembler newer than
the driver cannot load; ptxas of a version the driver reads, or else the driver's JIT, can.
Why a kernel using `setmaxnreg` skips nvJitLink's cubin: nvJitLink compiles relocatable code,
which drops the register split (C7504); whole-program ptxas, or else the driver's JIT
(`driver_jit`), keeps it.
"""
from __future__ import annotations

import functools
import os
import re
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import AssembleError
from . import driver as drv
from .assemble_setmaxnreg import jit_cached_status, setmaxnreg_status
from .driver_jit import jit_load, registers_of

if TYPE_CHECKING:
    from .spec import LaunchSpec
    from .assemble import Assembled

__all__ = ["Module", "Function", "load_function", "kernel_binary", "MODULE_CACHE_LIMIT", "pin",
           "ptx_binary", "describe_run"]

_DEFAULT_SMEM = 48 * 1024
#: loaded modules kept per context; the least recently used unpinned ones are unloaded
MODULE_CACHE_LIMIT = 64


@dataclass
class Module:
    handle: Any
    source: str  # "cubin" or "ptx-jit"
    functions: dict = field(default_factory=dict)  # name -> Function
    why_jit: str = ""  # for "ptx-jit": why the cubin was not used
    jit_log: str = ""  # for "ptx-jit": the driver JIT's verbose info log
    pins: int = 0  # prepared launches holding it: never unloaded while pinned
    unloaded: bool = False


@dataclass
class Function:
    """A kernel handle plus the dynamic shared memory it was opted in to."""

    handle: Any
    name: str
    module: Module
    smem_optin: int = _DEFAULT_SMEM

    def ensure_smem(self, ctx: drv.Context, nbytes: int) -> None:
        """Opt in to `nbytes` of dynamic shared memory (needed above 48 KiB, per handle)."""
        if nbytes > ctx.max_smem_optin:
            raise ValueError(f"kernel {self.name} needs {nbytes} B of dynamic shared memory but "
                             f"{ctx.name} allows at most {ctx.max_smem_optin} B per block: use "
                             f"fewer stages or a smaller block tile")
        if nbytes > _DEFAULT_SMEM and nbytes > self.smem_optin:
            attr = drv._driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            drv._call("cuFuncSetAttribute", self.handle, attr, int(nbytes))
            self.smem_optin = int(nbytes)


# -- the cache ------------------------------------------------------------------------------------
def _get(ctx: drv.Context, key: tuple) -> Module | None:
    mod = ctx.modules.pop(key, None)
    if mod is not None:
        ctx.modules[key] = mod  # most recently used last
    return mod


def _put(ctx: drv.Context, key: tuple, mod: Module) -> None:
    ctx.modules[key] = mod
    _evict(ctx)


def _evict(ctx: drv.Context) -> None:
    """Unload least recently used unpinned modules until at most MODULE_CACHE_LIMIT remain."""
    while len({id(m) for m in ctx.modules.values()}) > MODULE_CACHE_LIMIT:
        victim = next((m for m in ctx.modules.values() if not m.pins), None)
        if victim is None:
            return  # everything is pinned by a prepared launch
        for key in [k for k, m in ctx.modules.items() if m is victim]:
            del ctx.modules[key]
        victim.unloaded = True
        ctx.make_current()
        drv._call("cuModuleUnload", victim.handle)


def pin(owner: object, fn: Function) -> None:
    """Keep fn's module loaded while `owner` (a prepared launch) is alive."""
    mod = fn.module
    mod.pins += 1

    def unpin() -> None:
        mod.pins -= 1
    weakref.finalize(owner, unpin)


def _load_module(ctx: drv.Context, cubin: bytes | None, ptx: str | None, why_jit: str = "",
                 entry: str = "") -> Module:
    """Load (once per context) a cubin; on failure fall back to the driver's PTX JIT and
    remember that for this cubin."""
    if cubin is not None:
        key = ("cubin", cubin)
        mod = _get(ctx, key)
        if mod is not None:
            return mod
        try:
            mod = Module(drv._call("cuModuleLoadData", cubin), "cubin")
            _put(ctx, key, mod)
            return mod
        except drv.DriverError as e:
            if ptx is None:
                raise
            drv.warn_once(f"jit:{e.name}", f"loading the assembled cubin failed ({e}); falling "
                                           f"back to the driver's PTX JIT")
            why_jit = f"the driver refused the cubin ({e.name})"
    assert ptx is not None
    mod = _get(ctx, ("ptx", ptx))
    if mod is None:
        handle, log = jit_load(ptx, entry, ctx.arch)
        mod = Module(handle, "ptx-jit", why_jit=why_jit or "no cubin was given", jit_log=log)
        _put(ctx, ("ptx", ptx), mod)
    if cubin is not None:
        _put(ctx, ("cubin", cubin), mod)  # the refused cubin is not tried again
    return mod


def load_function(cubin: bytes | None, entry: str, ptx: str | None = None,
                  smem_bytes: int = 0, why_jit: str = "") -> Function:
    """The CUfunction for `entry`, loading its module if needed and opting in to `smem_bytes`."""
    ctx = drv.context()
    mod = _load_module(ctx, cubin, ptx, why_jit, entry)
    fn = mod.functions.get(entry)
    if fn is None:
        fn = Function(drv._call("cuModuleGetFunction", mod.handle, entry.encode()), entry, mod)
        mod.functions[entry] = fn
    fn.ensure_smem(ctx, smem_bytes)
    return fn


# -- which binary ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _driver_version(ordinal: int, context_key: int) -> int:
    """cuDriverGetVersion, asked once per context (the driver cannot change under a context)."""
    return int(drv._call("cuDriverGetVersion"))


def _cuda_major(assembler: str) -> int | None:
    """13 for "nvJitLink 13.5" or "ptxas 13.0"; the CUDA release whose cubin format it writes."""
    m = re.search(r"(\d+)\.\d+", assembler)
    return int(m.group(1)) if m else None


def _readable(assembler: str, version: int) -> bool:
    major = _cuda_major(assembler)
    return major is None or version >= major * 1000


def kernel_binary(kernel: "LaunchSpec", ctx: drv.Context) -> tuple[bytes | None, str, str]:
    """(cubin or None, what runs, why not a cubin) for this device and driver (`ptx_binary`)."""
    from ..schedule.targets import native_arch
    from .assemble import assemble

    asm = kernel.assemble() if drv.binary_compatible(kernel.arch, ctx.arch) else None
    if asm is None:
        own = native_arch(ctx.cc)
        fix = (f"Compile with arch='{own}' (where its lowering builds the problem) to avoid this" if own
               else "ptxgen has no target of this GPU's own, so this is how its kernels run here")
        drv.warn_once(f"arch:{kernel.arch}:{ctx.arch}",
                      f"kernel compiled for {kernel.arch} cannot run natively on {ctx.name} "
                      f"({ctx.arch}); assembling its PTX for {ctx.arch}. {fix}")
        asm = assemble(kernel.ptx, ctx.arch, kernel.entry)
    return _choose(kernel.ptx, kernel.entry, asm, ctx)


def ptx_binary(ptx: str, arch: str, entry: str, ctx: drv.Context) -> tuple[bytes | None, str, str]:
    """`kernel_binary` for bare PTX (`launch_ptx`): assembled for `arch`, then chosen alike."""
    from .assemble import assemble

    return _choose(ptx, entry, assemble(ptx, arch, entry), ctx)


def _choose(ptx: str, entry: str, asm: "Assembled", ctx: drv.Context) -> tuple[bytes | None, str, str]:
    """The assembled cubin when the driver reads its format and it kept any setmaxnreg split; else
    one from ptxas (whole-program; or of a version the driver reads) unless
    PTXGEN_ASSEMBLER=nvjitlink; else None: the driver's PTX JIT compiles the PTX.
    """
    from .assemble import assemble, available_assemblers

    version = _driver_version(ctx.ordinal, ctx.key)
    forced = os.environ.get("PTXGEN_ASSEMBLER", "").strip().lower()
    ptxas = available_assemblers().get("ptxas")
    ptxas_ok = forced != "nvjitlink" and isinstance(ptxas, tuple) and _readable(ptxas[0], version)
    relocatable = "C7504" in asm.setmaxnreg  # only whole-program compilation keeps the split
    if relocatable and forced == "nvjitlink":
        drv.warn_once(f"c7504:{entry}", f"PTXGEN_ASSEMBLER=nvjitlink: kernel {entry} runs without its "
                      f"setmaxnreg register split (nvJitLink compiles relocatable code, C7504); unset "
                      f"PTXGEN_ASSEMBLER to have ptxas or the driver's JIT compile it whole-program")
    elif relocatable:
        why = "no ptxas is usable"
        if ptxas_ok:
            try:
                whole = assemble(ptx, asm.arch, entry, backend="ptxas")
                return whole.cubin, f"cubin for {whole.arch} from {whole.describe()}", ""
            except AssembleError as e:  # e.g. a ptxas older than the PTX: the driver's JIT may do
                why = f"{ptxas[0]} rejected the PTX ({str(e).splitlines()[0]})"
        return None, "", f"{asm.assembler}'s relocatable code drops setmaxnreg (C7504) and {why}"
    if _readable(asm.assembler, version):
        return asm.cubin, f"cubin for {asm.arch} from {asm.describe()}", ""
    if ptxas_ok:
        older = assemble(ptx, asm.arch, entry, backend="ptxas")
        return older.cubin, f"cubin for {older.arch} from {older.describe()}", ""
    why = (f"driver {version // 1000}.{version % 1000 // 10} cannot read cubins from {asm.assembler}"
           f" (CUDA {_cuda_major(asm.assembler)} format)")
    drv.warn_once(f"driver:{version}:{asm.assembler}", f"{why}; using the driver's PTX JIT instead. "
                  f"Update the driver, or put a ptxas no newer than the driver on PATH")
    return None, "", why


def describe_run(fn: Function, runs: str, ptx: str) -> str:
    """What `k.resources.binary` reports after a launch: the cubin's description, or for the
    driver's JIT why it ran, that it compiled whole-program, the fate of any setmaxnreg (from its
    info log) and the register count it chose (cuFuncGetAttribute)."""
    mod = fn.module
    if mod.source == "cubin":
        return runs
    parts = ["whole-program"]
    status = setmaxnreg_status(ptx, mod.jit_log) if mod.jit_log else jit_cached_status(ptx)
    if status:
        parts.append(status)
    regs = registers_of(fn.handle)
    if regs > 0:
        parts.append(f"{regs} registers")
    return f"PTX JIT by the driver ({mod.why_jit}; {', '.join(parts)})"
