"""The Python half of the stand-in driver: modules, functions and launches on `ptxgen.sim`.

simcuda.c calls these through ctypes callbacks (same process, the GIL taken by ctypes). Each
callback returns a CUresult; nothing may raise through C, so every failure becomes a status, and
the reason is kept in `StandIn.last_error` (and printed to stderr) because a CUresult alone would
hide which rule was broken.
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from .cubin import Cubin, CubinError, KernelParam, parse_cubin
from .jit_log import jit_info_log
from .launch_maps import LaunchRefused, check_cluster, tensor_map_argument
from .models import FIRST_DRIVER_WITH_ABI8, PTX_ISA_OF_DRIVER, DeviceModel
from .occupancy import OccupancyRefused, active_clusters, ctas_per_sm
from .registry import source_of

#: PTX texts this process has JIT-compiled (the driver's compute cache is per machine; per process here).
_JIT_COMPILED: set[bytes] = set()

# CUresult codes used here
SUCCESS, INVALID_VALUE, INVALID_IMAGE, NO_BINARY_FOR_GPU, INVALID_PTX = 0, 1, 200, 209, 218
UNSUPPORTED_PTX_VERSION, INVALID_HANDLE, NOT_FOUND, ILLEGAL_ADDRESS = 222, 400, 500, 700
LAUNCH_OUT_OF_RESOURCES, LAUNCH_FAILED, NOT_SUPPORTED, UNKNOWN = 701, 719, 801, 999
COOPERATIVE_LAUNCH_TOO_LARGE, INVALID_CLUSTER_SIZE = 720, 912
DEFAULT_DYNAMIC_SMEM = 48 * 1024
_POINTER_TYPES = ("u64", "b64", "s64")

LOAD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_uint64))
UNLOAD_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)
GETFN_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64))
FATTR_GET_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_int))
FATTR_SET_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_int, ctypes.c_int)
LAUNCH_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32,
                             ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint32), ctypes.c_int)
OCC_BLOCKS_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64,
                                 ctypes.POINTER(ctypes.c_int))
OCC_CLUSTERS_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32,
                                   ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_int))


class Refused(Exception):
    """A driver rule was broken: the CUresult to return and why."""

    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status


@dataclass(frozen=True)
class LaunchRecord:
    """What one launch asked for (`StandIn.launch_log`): tests assert on the attributes a launch
    carried, e.g. that Stream-K went out cooperative."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    cooperative: bool


@dataclass
class SimModule:
    ptx: str
    source: str                      # "cubin" or "ptx"
    kernels: dict[str, list[KernelParam]]
    info: Cubin | None = None


@dataclass
class SimFunction:
    module: int
    name: str
    params: list[KernelParam]
    static_smem: int = 0
    registers: int = 0
    max_threads: int = 0
    max_dynamic_smem: int = DEFAULT_DYNAMIC_SMEM  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    binary_version: int = 0
    non_portable_cluster: int = 0  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    required_cluster: tuple[int, int, int] = (0, 0, 0)  # the entry's .reqnctapercluster (0: none)
    cluster_must_be_set: int = 0     # .explicitcluster or .reqnctapercluster


def _arch_number(arch: str) -> tuple[int, bool]:
    m = re.fullmatch(r"sm_(\d+)([af]?)", arch)
    if not m:
        raise Refused(INVALID_IMAGE, f"target {arch!r} is not an SM architecture")
    return int(m.group(1)), bool(m.group(2))


def _runs_on(target: str, cc: tuple[int, int]) -> bool:
    """SASS for `target` runs on a cc device: same major, minor <= the device's; 'a' exactly."""
    num, specific = _arch_number(target)
    major, minor = divmod(num, 10)
    if specific:
        return (major, minor) == cc
    return major == cc[0] and minor <= cc[1]


@dataclass
class StandIn:
    model: DeviceModel
    driver_version: int
    translate: object  # simcuda_translate from the C library
    set_reason: object = None  # simcuda_set_reason: why the calling thread's last call failed
    set_jit_info: object = None  # simcuda_set_jit_info: the PTX JIT's info log for this load
    jit_verbose: object = None   # simcuda_jit_verbose: CU_JIT_LOG_VERBOSE of this load
    modules: dict[int, SimModule] = field(default_factory=dict)
    functions: dict[int, SimFunction] = field(default_factory=dict)
    last_error: str = ""
    launches: int = 0
    launch_log: list[LaunchRecord] = field(default_factory=list)  # every launch that ran, in order
    load_attempts: dict = field(default_factory=lambda: {"cubin": 0, "ptx": 0})  # for tests
    _next: int = 0x1000
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _new_id(self) -> int:
        with self._lock:
            self._next += 0x10
            return self._next

    def _fail(self, status: int, why: str) -> int:
        self.last_error = why
        if self.set_reason is not None:
            self.set_reason(why.encode(errors="replace"))
        print(f"[ptxgen sim driver] {why}", file=sys.stderr)
        return status

    def _guard(self, body) -> int:
        try:
            body()
            return SUCCESS
        except Refused as r:
            return self._fail(r.status, str(r))
        except Exception as e:  # never raise through C
            return self._fail(UNKNOWN, f"internal error in the stand-in driver: {type(e).__name__}: {e}")

    # -- modules
    def load(self, image: int, length: int, is_elf: int, out) -> int:
        def body() -> None:
            data = ctypes.string_at(image, length)
            self.load_attempts["cubin" if is_elf else "ptx"] += 1
            mod = self._load_cubin(data) if is_elf else self._load_ptx(data)
            ident = self._new_id()
            self.modules[ident] = mod
            out[0] = ident
        return self._guard(body)

    def _load_cubin(self, data: bytes) -> SimModule:
        try:
            info = parse_cubin(data)
        except CubinError as e:
            raise Refused(INVALID_IMAGE, f"cuModuleLoadData: not a usable NVIDIA cubin ({e})") from None
        if info.abi_version >= 8 and self.driver_version < FIRST_DRIVER_WITH_ABI8:
            raise Refused(INVALID_IMAGE, f"cuModuleLoadData: the cubin uses CUDA 13's ELF format (ABI "
                                         f"version {info.abi_version}), which a driver of version "
                                         f"{self.driver_version} cannot read")
        if not _runs_on(info.arch, self.model.cc):
            raise Refused(NO_BINARY_FOR_GPU, f"cuModuleLoadData: a cubin for {info.arch} cannot run on "
                                             f"{self.model.name} (sm_{self.model.cc[0]}{self.model.cc[1]})")
        ptx = source_of(data)
        if ptx is None:
            raise Refused(INVALID_IMAGE, "cuModuleLoadData: the stand-in runs cubins on ptxgen's PTX "
                                         "simulator, so it needs the PTX they came from, and this cubin "
                                         "was not assembled by ptxgen in this process")
        kernels = {name: k.params for name, k in info.kernels.items()}
        return SimModule(ptx, "cubin", kernels, info)

    def _load_ptx(self, data: bytes) -> SimModule:
        from ptxgen.sim.parse import parse_module  # the simulator's own PTX reader

        text = data.decode("utf-8", errors="replace")
        try:
            module = parse_module(text)
        except Exception as e:
            raise Refused(INVALID_PTX, f"cuModuleLoadDataEx: the PTX JIT rejected the PTX: {e}") from None
        version = tuple(int(x) for x in (module.version or "0.0").split("."))
        isa = PTX_ISA_OF_DRIVER[self.driver_version]
        if version > isa:
            raise Refused(UNSUPPORTED_PTX_VERSION, f"cuModuleLoadDataEx: PTX .version {module.version} is "
                                                   f"newer than driver {self.driver_version} supports "
                                                   f"({isa[0]}.{isa[1]})")
        target = (module.target or "").split(",")[0].strip()
        if target:
            num, specific = _arch_number(target)
            dev = self.model.cc[0] * 10 + self.model.cc[1]
            if num > dev or (specific and num != dev):
                raise Refused(INVALID_PTX, f"cuModuleLoadDataEx: PTX for .target {target} cannot be "
                                           f"compiled for sm_{dev}")
        kernels = {}
        for entry in _entries(text):
            kernels[entry] = _ptx_params(text, entry)
        if self.set_jit_info is not None:
            verbose = bool(self.jit_verbose()) if self.jit_verbose is not None else False
            arch = target or f"sm_{self.model.cc[0]}{self.model.cc[1]}"
            # a text the process JIT-compiled before comes from the driver's cache with an empty
            # log (a lent H200, driver 580: bench/results/2026-11-26-ablation-sm90-3eb197e)
            cached = hashlib.sha256(text.encode()).digest() in _JIT_COMPILED
            _JIT_COMPILED.add(hashlib.sha256(text.encode()).digest())
            log = "" if cached else jit_info_log(text, list(kernels), arch, verbose)
            self.set_jit_info(log.encode(errors="replace"))
        return SimModule(text, "ptx", kernels)

    def unload(self, ident: int) -> int:
        if self.modules.pop(ident, None) is None:
            return self._fail(INVALID_HANDLE, f"cuModuleUnload: {ident:#x} is not a loaded module")
        for f in [f for f, fn in self.functions.items() if fn.module == ident]:
            del self.functions[f]
        return SUCCESS

    def get_function(self, module: int, name: bytes, out) -> int:
        def body() -> None:
            mod = self.modules.get(module)
            if mod is None:
                raise Refused(INVALID_HANDLE, f"cuModuleGetFunction: {module:#x} is not a loaded module")
            entry = name.decode()
            if entry not in mod.kernels:
                raise Refused(NOT_FOUND, f"cuModuleGetFunction: the module has no kernel {entry!r} "
                                         f"(it has {sorted(mod.kernels)})")
            from ptxgen.sim.machine import compile_entry

            k = mod.info.kernels[entry] if mod.info else None
            arch = mod.info.arch if mod.info else f"sm_{self.model.cc[0]}{self.model.cc[1]}"
            # static shared memory as the PTX declares it: an sm_90 cubin's .nv.shared section
            # also holds the 1 KB the system reserves per block, which is not the kernel's
            program = compile_entry(mod.ptx, entry)
            static = program.shared_static
            perf = program.entry.perf
            req = tuple(perf.get("reqnctapercluster", ()))
            fn = SimFunction(module, entry, mod.kernels[entry], static, k.registers if k else 0,
                             k.max_threads if k else 0, max(DEFAULT_DYNAMIC_SMEM - static, 0),
                             binary_version=_arch_number(arch)[0],  # 48 KB in all without opt-in
                             required_cluster=(req + (1,) * (3 - len(req))) if req else (0, 0, 0),
                             cluster_must_be_set=int(bool(req) or "explicitcluster" in perf))
            ident = self._new_id()
            self.functions[ident] = fn
            out[0] = ident
        return self._guard(body)

    def _function(self, ident: int, call: str) -> SimFunction:
        fn = self.functions.get(ident)
        if fn is None:
            raise Refused(INVALID_HANDLE, f"{call}: {ident:#x} is not a function of a loaded module")
        return fn

    # -- function attributes
    def get_attribute(self, ident: int, attr: int, out) -> int:
        def body() -> None:
            fn = self._function(ident, "cuFuncGetAttribute")
            regs_limit = 1024 if not fn.registers else \
                min(1024, self.model.regs_per_block // fn.registers // 32 * 32)
            values = {0: fn.max_threads or regs_limit, 1: fn.static_smem, 2: 0, 3: 0, 4: fn.registers,
                      5: fn.binary_version, 6: fn.binary_version, 7: 0, 8: fn.max_dynamic_smem, 9: -1,
                      # the entry's cluster directives: must-be-set, required width/height/depth
                      10: fn.cluster_must_be_set, 11: fn.required_cluster[0], 12: fn.required_cluster[1],
                      13: fn.required_cluster[2], 14: fn.non_portable_cluster}
            if attr not in values:
                raise Refused(INVALID_VALUE, f"cuFuncGetAttribute: attribute {attr} is not simulated")
            out[0] = values[attr]
        return self._guard(body)

    def set_attribute(self, ident: int, attr: int, value: int) -> int:
        def body() -> None:
            fn = self._function(ident, "cuFuncSetAttribute")
            if attr == 8:  # MAX_DYNAMIC_SHARED_SIZE_BYTES: the opt-in
                limit = self.model.smem_per_block_optin - fn.static_smem
                if not 0 <= value <= limit:
                    raise Refused(INVALID_VALUE, f"cuFuncSetAttribute: {fn.name} asked for {value} B of "
                                                 f"dynamic shared memory; {self.model.name} allows at most "
                                                 f"{limit} B beside its {fn.static_smem} B static")
                fn.max_dynamic_smem = value
            elif attr == 9:  # PREFERRED_SHARED_MEMORY_CARVEOUT: a hint
                if not -1 <= value <= 100:
                    raise Refused(INVALID_VALUE, f"cuFuncSetAttribute: carveout {value} is not -1..100")
            elif attr == 14:  # NON_PORTABLE_CLUSTER_SIZE_ALLOWED: clusters of up to 16 CTAs
                if value not in (0, 1) or not self.model.cluster_launch:
                    raise Refused(INVALID_VALUE, f"cuFuncSetAttribute: non-portable cluster size {value} "
                                                 f"on {self.model.name}")
                fn.non_portable_cluster = value
            else:
                raise Refused(INVALID_VALUE, f"cuFuncSetAttribute: attribute {attr} is not settable here")
        return self._guard(body)

    # -- occupancy (occupancy.py has the model's rules)
    def _ctas_per_sm(self, fn: SimFunction, threads: int, smem: int) -> int:
        return ctas_per_sm(self.model, threads, fn.registers, fn.static_smem + smem)

    def occupancy_blocks(self, ident: int, threads: int, smem: int, out) -> int:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor."""
        def body() -> None:
            fn = self._function(ident, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
            try:
                out[0] = self._ctas_per_sm(fn, threads, smem)
            except OccupancyRefused as e:
                raise Refused(e.status, f"cuOccupancyMaxActiveBlocksPerMultiprocessor: {e}") from None
        return self._guard(body)

    def occupancy_clusters(self, ident: int, dims, smem: int, cluster, out) -> int:
        """cuOccupancyMaxActiveClusters: the cluster is the config's, or the entry's required one
        (.reqnctapercluster); both given must agree, and one must be (the driver's rules)."""
        def body() -> None:
            call = "cuOccupancyMaxActiveClusters"
            fn = self._function(ident, call)
            given = tuple(int(cluster[i]) for i in range(3))
            required = fn.required_cluster
            if required != (0, 0, 0) and given not in ((0, 0, 0), required):
                raise Refused(INVALID_CLUSTER_SIZE, f"{call}: the config's cluster {given} is not the "
                                                    f"{required} that {fn.name} requires")
            if required == (0, 0, 0) and given == (0, 0, 0):
                raise Refused(INVALID_CLUSTER_SIZE, f"{call}: {fn.name} requires no cluster size, so the "
                                                    f"config must give one (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)")
            chosen = given if given != (0, 0, 0) else required
            block = tuple(int(dims[i]) for i in range(3, 6))
            try:
                size = chosen[0] * chosen[1] * chosen[2]
                limit = 16 if fn.non_portable_cluster else 8
                if size > limit:
                    raise OccupancyRefused(INVALID_CLUSTER_SIZE, f"cluster {chosen} has {size} CTAs; the limit "
                                                                 f"is {limit}")
                per_sm = self._ctas_per_sm(fn, block[0] * block[1] * block[2], smem)
                out[0] = active_clusters(self.model, chosen, per_sm)
            except OccupancyRefused as e:
                raise Refused(e.status, f"{call}: {e}") from None
        return self._guard(body)

    def _check_cooperative(self, fn: SimFunction, grid, block, smem: int) -> None:
        """A cooperative grid must fit on the device at once (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)."""
        per_sm = self._ctas_per_sm(fn, block[0] * block[1] * block[2], smem)
        ctas, fits = grid[0] * grid[1] * grid[2], per_sm * self.model.sms
        if ctas > fits:
            raise Refused(COOPERATIVE_LAUNCH_TOO_LARGE,
                          f"cuLaunchKernelEx: a cooperative launch of {ctas} CTAs, but {self.model.name} holds "
                          f"at most {fits} of {fn.name} at once ({per_sm} per SM x {self.model.sms} SMs)")

    # -- launch
    def launch(self, ident: int, dims, smem: int, params, cluster, cooperative: int = 0) -> int:
        def body() -> None:
            fn = self._function(ident, "cuLaunchKernel")
            grid, block = tuple(dims[i] for i in range(3)), tuple(dims[i] for i in range(3, 6))
            clusters = tuple(int(cluster[i]) for i in range(3))
            self._check_shape(fn, grid, block, smem, clusters)
            if cooperative:
                self._check_cooperative(fn, grid, block, smem)
            mod = self.modules[fn.module]
            args = self._arguments(fn, mod.ptx, params)
            self._run(fn, mod.ptx, grid, block, smem, args, clusters)
            self.launch_log.append(LaunchRecord(fn.name, grid, block, clusters, bool(cooperative)))
        return self._guard(body)

    def _check_shape(self, fn: SimFunction, grid, block, smem: int, cluster) -> None:
        if min(grid) < 1 or min(block) < 1 or grid[1] > 65535 or grid[2] > 65535 or grid[0] >= 2**31:
            raise Refused(INVALID_VALUE, f"cuLaunchKernel: grid {grid} is outside the device's limits")
        threads = block[0] * block[1] * block[2]
        if threads > 1024 or block[2] > 64:
            raise Refused(INVALID_VALUE, f"cuLaunchKernel: block {block} has {threads} threads (limit 1024)")
        if fn.max_threads and threads > fn.max_threads:
            raise Refused(INVALID_VALUE, f"cuLaunchKernel: {fn.name} allows {fn.max_threads} threads per "
                                         f"block (.maxntid/.reqntid), the launch has {threads}")
        if fn.registers and fn.registers * ((threads + 31) // 32 * 32) > self.model.regs_per_block:
            raise Refused(LAUNCH_OUT_OF_RESOURCES, f"cuLaunchKernel: {threads} threads x {fn.registers} "
                                                   f"registers exceed {self.model.regs_per_block}")
        if smem > fn.max_dynamic_smem:
            hint = " (above 48 KB a kernel must opt in with cuFuncSetAttribute(" \
                   "MAX_DYNAMIC_SHARED_SIZE_BYTES))" if smem > DEFAULT_DYNAMIC_SMEM else ""
            raise Refused(INVALID_VALUE, f"cuLaunchKernel: {smem} B of dynamic shared memory but {fn.name} "
                                         f"allows {fn.max_dynamic_smem} B{hint}")
        try:
            check_cluster(cluster, grid, self.model.cluster_launch, bool(fn.non_portable_cluster), self.model.name)
        except LaunchRefused as e:
            raise Refused(e.status, str(e)) from None

    def _arguments(self, fn: SimFunction, ptx: str, params) -> list:
        """kernelParams decoded with the sizes the binary records, then typed by the PTX."""
        from ptxgen.sim.machine import compile_entry

        program = compile_entry(ptx, fn.name)
        if len(program.params) != len(fn.params):
            raise Refused(INVALID_IMAGE, f"{fn.name}: the cubin records {len(fn.params)} parameters but "
                                         f"its PTX declares {len(program.params)}")
        if fn.params and not params:
            raise Refused(INVALID_VALUE, f"cuLaunchKernel: {fn.name} takes {len(fn.params)} parameters "
                                         f"but kernelParams is NULL")
        args: list = []
        roots: dict = {}  # allocation base -> its array, shared by the launch's tensor maps
        for i, (decl, rec) in enumerate(zip(program.params, fn.params)):
            if decl.size != rec.size:
                raise Refused(INVALID_IMAGE, f"{fn.name}: parameter {i} is {rec.size} B in the cubin but "
                                             f"{decl.size} B in its PTX")
            if not params[i]:
                raise Refused(INVALID_VALUE, f"cuLaunchKernel: kernelParams[{i}] of {fn.name} is NULL")
            raw = ctypes.string_at(params[i], rec.size)
            args.append(self._argument(decl, raw, roots))
        return args

    def _argument(self, decl, raw: bytes, roots: dict):
        if decl.count is not None:  # .b8 name[N]: a tensor map the stand-in encoded, or bytes as given
            try:
                tmap = tensor_map_argument(raw, self.translate, roots)
            except LaunchRefused as e:
                raise Refused(e.status, f"cuLaunchKernel: parameter {decl.name}: {e}") from None
            return raw if tmap is None else tmap
        if decl.type in ("f32", "f64"):
            return float(np.frombuffer(raw, np.float32 if decl.type == "f32" else np.float64)[0])
        value = int.from_bytes(raw, "little", signed=decl.type.startswith("s"))
        if decl.type in _POINTER_TYPES and value:
            host, base, size = ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_uint64()
            if self.translate(ctypes.c_uint64(value), ctypes.byref(host), ctypes.byref(base),
                              ctypes.byref(size)) == SUCCESS:
                # the kernel sees the allocation from this pointer to its end
                n = base.value + size.value - value
                return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(host.value))
        return value  # a scalar, or an address no allocation holds: any access to it faults

    def _run(self, fn: SimFunction, ptx: str, grid, block, smem: int, args: list, cluster) -> None:
        from ptxgen import sim

        extra = {}
        if cluster != (1, 1, 1):   # the driver already checked the size against the function's opt-in
            extra = {"cluster": cluster, "non_portable_cluster": bool(fn.non_portable_cluster)}
        try:
            sim.launch(ptx, fn.name, grid=grid, block=block, args=args, dynamic_smem=smem, **extra)
        except sim.HazardError as e:
            kind = getattr(e, "kind", "")
            status = ILLEGAL_ADDRESS if kind in ("out-of-bounds", "misaligned") else LAUNCH_FAILED
            raise Refused(status, f"launch of {fn.name} failed on the simulator: {e}") from None
        except (ValueError, TypeError) as e:
            raise Refused(LAUNCH_FAILED, f"launch of {fn.name} refused by the simulator: {e}") from None
        self.launches += 1

    def callbacks(self) -> tuple:
        """ctypes callbacks for simcuda_set_callbacks (keep them alive as long as the library)."""
        return (LOAD_CB(self.load), UNLOAD_CB(self.unload), GETFN_CB(self.get_function),
                FATTR_GET_CB(self.get_attribute), FATTR_SET_CB(self.set_attribute), LAUNCH_CB(self.launch))

    def occupancy_callbacks(self) -> tuple:
        """ctypes callbacks for simcuda_set_occupancy_callbacks."""
        return OCC_BLOCKS_CB(self.occupancy_blocks), OCC_CLUSTERS_CB(self.occupancy_clusters)


def _entries(ptx: str) -> list[str]:
    from ptxgen.runtime.params import _strip_comments

    return re.findall(r"\.entry\s+([\w$%.]+)", _strip_comments(ptx))


def _ptx_params(ptx: str, entry: str) -> list[KernelParam]:
    """What a PTX JIT would record: each parameter's size and offset from the declarations."""
    from ptxgen.sim.machine import compile_entry

    program = compile_entry(ptx, entry)
    return [KernelParam(i, off, p.size) for i, (p, off) in enumerate(zip(program.params, program.param_offsets))]
