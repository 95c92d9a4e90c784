"""launch(): bind arguments, lay out memory and run the requested CTAs (scheduler.py)."""
from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import (ops_alu, ops_async, ops_atomic, ops_bits, ops_ctrl, ops_cvt, ops_float, ops_math, ops_mem,
               ops_sm90_misc, ops_tcgen05, ops_warp, ops_wgmma, ops_wmma, scheduler)
from . import cluster as clusters, ops_bulk, ops_mbarrier, ops_shfl
from . import ops_brx, ops_clc
from .memory import GlobalMemory, SharedMemory
from .parse import parse_module
from .program import SMEM_LIMIT, Program, build_program
from .ptxtypes import SIGNED, STORAGE_DTYPE, TYPE_BITS, UNSIGNED
from .state import CtaState
from .tensormap import MAP_BYTES, TensorMap
from .sync import CtaSync, SyncModel

RESIDENT_BUDGET = 2 << 30     # bytes of simulator state for CTAs alive at once (interleaved runs)
MIN_RESIDENT = 132            # one CTA per SM on an H100
REGISTRY = {**ops_alu.OPS, **ops_float.OPS, **ops_cvt.OPS, **ops_math.OPS, **ops_bits.OPS, **ops_mem.OPS,
            **ops_atomic.OPS, **ops_async.OPS, **ops_ctrl.OPS, **ops_warp.OPS, **ops_wmma.OPS,
            **ops_wgmma.OPS, **ops_sm90_misc.OPS}
REGISTRY.update({**ops_mbarrier.OPS, **ops_bulk.OPS, **ops_shfl.OPS})   # after ops_async/ops_atomic: wraps "cp", "fence"
REGISTRY.update(ops_brx.OPS)    # sm_100a-era indirect branch (Triton's warp-specialised dispatch)
REGISTRY.update(ops_clc.OPS)    # cluster launch control; mov.b128 for its responses
REGISTRY["mov"] = ops_clc.wrap_mov(REGISTRY["mov"])
REGISTRY.update(clusters.OPS)   # after ops_ctrl: "barrier.cluster" here, other barriers there
REGISTRY.update(ops_tcgen05.OPS)
REGISTRY["mbarrier"] = ops_tcgen05.wrap_mbarrier(REGISTRY["mbarrier"])   # waits retire tcgen05.mma


@dataclass
class SimResult:
    """What a launch did.

    instructions: thread-instructions executed, i.e. for every instruction issued, the number of
    threads of its CTA that had not exited (predicated-off threads count, as on hardware).
    smem_wavefronts: {ptx line: (wavefronts, ideal)} summed over all warp-level shared accesses.
    """
    instructions: int = 0
    smem_wavefronts: dict[int, tuple[int, int]] = field(default_factory=dict)
    ctas: int = 0
    global_addresses: dict[str, int] = field(default_factory=dict)


#: Environment variables the compilers of some instructions read (ops_wgmma.FP8_ACCUM_ENV,
#: ops_tcgen05.STRICT_FENCES_ENV): their values are part of a compiled program's cache key, so
#: setting one between two launches of the same text takes effect.
COMPILE_ENV = ("PTXGEN_SIM_FP8_ACCUM", "PTXGEN_SIM_TCGEN05_FENCES")


def compile_options() -> tuple[str, ...]:
    return tuple(os.environ.get(name, "") for name in COMPILE_ENV)


def compile_entry(ptx_text: str, entry: str) -> Program:
    """Parse and compile once per (text, entry, COMPILE_ENV's values); tests and benchmarks
    re-launch the same PTX."""
    return _compile_entry(ptx_text, entry, compile_options())


@functools.lru_cache(maxsize=64)
def _compile_entry(ptx_text: str, entry: str, options: tuple[str, ...]) -> Program:
    return build_program(parse_module(ptx_text), entry, REGISTRY)


compile_entry.cache_clear = _compile_entry.cache_clear  # type: ignore[attr-defined]  # callers drop the cache


def launch(ptx_text: str, entry: str, grid=(1, 1, 1), block=(1, 1, 1), args=(),
           dynamic_smem: int = 0, ctas=None, on_cta_done: Callable[[int], None] | None = None,
           cluster=None, non_portable_cluster: bool = False, trace=None, trace_ctas=None,
           _tracer=None) -> SimResult:
    """Run `entry` of `ptx_text` over `grid` x `block` threads on the given arguments.

    Array arguments are device buffers written in place; see the package docstring.
    `on_cta_done(n)` is called each time a CTA finishes, n counting the finished ones (progress).
    `cluster=(x, y, z)` launches thread block clusters (cluster.py): the CTAs of a cluster run
    together and share their shared memory; `ctas=` then runs the whole cluster of each listed CTA.
    More than 8 CTAs per cluster (up to 16) needs `non_portable_cluster=True`.
    `trace="run.json"` writes a Chrome trace-event timeline (Perfetto) of the CTAs in `trace_ctas`
    (default: every CTA run), also when a hazard stops the run (trace.py).
    """
    if trace_ctas is not None and trace is None:
        raise ValueError("trace_ctas= selects the CTAs of a trace: pass trace=\"run.json\" too")
    if trace is not None and _tracer is None:
        from .trace import launch_traced
        return launch_traced(launch, ptx_text, entry, trace, trace_ctas, grid=grid, block=block, args=args,
                             dynamic_smem=dynamic_smem, ctas=ctas, on_cta_done=on_cta_done, cluster=cluster,
                             non_portable_cluster=non_portable_cluster)
    program = compile_entry(ptx_text, entry) if _tracer is None else _tracer.program
    grid, block = _dims(grid, "grid"), _dims(block, "block")
    _check_block(program, block)
    smem_size = _shared_size(program, dynamic_smem)
    cdims, explicit = clusters.cluster_shape(program.entry.perf, grid, cluster, non_portable_cluster)
    csize = cdims[0] * cdims[1] * cdims[2]
    names = clusters.cluster_order(_cta_list(grid, ctas), grid, cdims)
    model = SyncModel(names, logging=program.releases and len(names) > 1)
    gmem, param_bytes, addresses = _bind_args(program, args, track=len(names) > 1)
    nthreads = block[0] * block[1] * block[2]
    n = (nthreads + 31) // 32 * 32
    result = SimResult(global_addresses=addresses)
    stats: dict[int, list[int]] = {}

    running: dict[int, clusters.Cluster] = {}
    queue = ops_clc.LaunchQueue(names, csize) if ops_clc.uses_clc(program.entry) else None

    def make(slot: int, smem: SharedMemory) -> CtaState:
        cta = _new_cta(program, grid, block, names[slot], n, nthreads, smem, gmem, param_bytes, stats,
                       CtaSync(model, slot, n), cdims, explicit)
        key = slot // csize
        group = running.get(key)
        if group is None:
            group = running[key] = clusters.Cluster(cdims, [None] * csize)
        clusters.join(group, slot % csize, cta)
        if queue is not None:
            queue.start(slot)
            cta.launch_queue = queue
        if _tracer is not None:
            _tracer.attach(cta)
        if slot % csize == csize - 1:
            del running[key]                 # fully started: its members hold it from now on
        return cta
    if program.communicates or csize > 1:
        scratch = np.zeros(smem_size, dtype=np.int32)

        def start(slot: int, smem: SharedMemory | None) -> CtaState:
            if smem is None:
                smem = SharedMemory(smem_size, scratch)
            else:
                smem.reset()
            return make(slot, smem)
        window = resident_window(smem_size, n, len(program.slot_bits), len(names))
        window = max(csize, window // csize * csize)     # whole clusters are resident together
        result.instructions += scheduler.run_interleaved(program, start, len(names), window,
                                                         subset=ctas is not None, on_done=on_cta_done,
                                                         group=csize, skip=queue and queue.cancelled)
    else:
        smem = SharedMemory(smem_size)
        for slot in range(len(names)):
            if queue is not None and queue.cancelled(slot):     # taken over through try_cancel
                continue
            smem.reset()
            result.instructions += scheduler.run_sequential(program, make(slot, smem))
            if on_cta_done is not None:
                on_cta_done(slot + 1)
    result.ctas = len(names)
    result.smem_wavefronts = {line: (v[0], v[1]) for line, v in sorted(stats.items())}
    return result


def resident_window(smem_size: int, n: int, nregs: int, count: int) -> int:
    """How many interleaved CTAs may be alive at once: all of them if their state fits
    RESIDENT_BUDGET bytes, else as many as fit, but never fewer than MIN_RESIDENT (a persistent grid
    of one CTA per SM must run whole)."""
    per_cta = smem_size * 19 + n * nregs * 8 + 4096   # shared bytes + race state, registers
    return max(1, min(count, max(MIN_RESIDENT, RESIDENT_BUDGET // per_cta)))


def _dims(value, what: str) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"{what} must be 1 to 3 positive integers, got {value!r}")
    return dims + (1,) * (3 - len(dims))


def _check_block(program: Program, block) -> None:
    nthreads = block[0] * block[1] * block[2]
    if nthreads > 1024:
        raise ValueError(f"block {block} has {nthreads} threads; the limit is 1024")
    perf = program.entry.perf
    if "reqntid" in perf:
        want = perf["reqntid"] + (1,) * (3 - len(perf["reqntid"]))
        if tuple(want) != tuple(block):
            raise ValueError(f".reqntid {perf['reqntid']} requires block {tuple(want)}, got {tuple(block)}")
    if "maxntid" in perf:
        limit = int(np.prod(perf["maxntid"]))
        if nthreads > limit:
            raise ValueError(f".maxntid {perf['maxntid']} allows {limit} threads, block has {nthreads}")


def _shared_size(program: Program, dynamic_smem: int) -> int:
    if dynamic_smem < 0:
        raise ValueError("dynamic_smem must be >= 0")
    start = program.dynamic_offset if program.dynamic_offset is not None else program.shared_static
    total = start + int(dynamic_smem) if program.dynamic_offset is not None else program.shared_static
    if total > SMEM_LIMIT:
        raise ValueError(f"{total} bytes of shared memory exceed the {SMEM_LIMIT}-byte per-block limit")
    return total


def _bind_args(program: Program, args, track: bool):
    params = program.params
    args = list(args)
    if len(args) != len(params):
        raise ValueError(f"entry {program.entry.name} takes {len(params)} arguments "
                         f"({', '.join(p.name for p in params)}), got {len(args)}")
    buffers = [(p.name, a) for p, a in zip(params, args) if isinstance(a, np.ndarray) and p.count is None]
    for p, a in zip(params, args):    # a tensor map's array is device memory too (one buffer per allocation)
        if isinstance(a, TensorMap) and not any(a.root is b for _, b in buffers):
            buffers.append((f"{p.name} (tensor map array)", a.root))
    for p, a in zip(params, args):
        if isinstance(a, np.ndarray) and p.count is None and (p.type not in ("u64", "b64", "s64")):
            raise TypeError(f"parameter {p.name} is .{p.type}; only .u64/.b64 parameters take an array")
    gmem = GlobalMemory(buffers, track)
    address_of = {name: gmem.base_of(i) for i, (name, _) in enumerate(buffers)}
    raw = np.zeros(max(program.param_size, 1), dtype=np.uint8)
    for p, offset, a in zip(params, program.param_offsets, args):
        if isinstance(a, TensorMap):
            if p.count is None or p.size != MAP_BYTES or p.align < 64:
                raise TypeError(f"parameter {p.name} takes a TensorMap only if declared "
                                f"`.param .align 64 .b8 {p.name}[128]`")
            root = next(i for i, (_, b) in enumerate(buffers) if b is a.root)
            raw[offset:offset + p.size] = a.encode(gmem.base_of(root))
            continue
        raw[offset:offset + p.size] = _encode_param(p, a, address_of.get(p.name))
    return gmem, raw, address_of


def _encode_param(p, value, address: int | None) -> np.ndarray:
    if p.count is not None:
        data = np.frombuffer(bytes(value), dtype=np.uint8) if isinstance(value, (bytes, bytearray)) else (
            np.ascontiguousarray(value).reshape(-1).view(np.uint8) if isinstance(value, np.ndarray) else None)
        if data is None or data.size != p.size:
            raise TypeError(f"parameter {p.name} is a {p.size}-byte array; pass bytes or an array of that size")
        return data
    bits = TYPE_BITS[p.type]
    if address is not None:
        value = address
    if p.type in ("f32", "f64"):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"parameter {p.name} is .{p.type}; got {type(value).__name__}")
        return np.array([value], dtype=np.float32 if bits == 32 else np.float64).view(np.uint8)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"parameter {p.name} is .{p.type}; expected an int"
                        + (" or a numpy array" if p.type in ("u64", "b64", "s64") else "")
                        + f", got {type(value).__name__}")
    value = int(value)
    lo = -(1 << (bits - 1)) if p.type in SIGNED else (0 if p.type in UNSIGNED else -(1 << (bits - 1)))
    hi = (1 << (bits - 1)) - 1 if p.type in SIGNED else (1 << bits) - 1
    if not lo <= value <= hi:
        raise ValueError(f"parameter {p.name} (.{p.type}) cannot hold {value}")
    return np.array([value & ((1 << bits) - 1)], dtype=STORAGE_DTYPE[bits]).view(np.uint8)


def _cta_list(grid, ctas):
    if ctas is None:
        return [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    out, seen = [], set()
    for c in ctas:
        xyz = tuple(int(v) for v in c) + (0,) * (3 - len(tuple(c)))
        if len(xyz) != 3 or any(not 0 <= v < g for v, g in zip(xyz, grid)):
            raise ValueError(f"CTA index {c!r} is outside grid {grid}")
        if xyz in seen:
            raise ValueError(f"CTA {xyz} is listed twice in ctas")
        seen.add(xyz)
        out.append(xyz)
    return out


def _new_cta(program, grid, block, xyz, n, nthreads, smem, gmem, param_bytes, stats, sync, cdims,
             explicit) -> CtaState:
    zeros = {bits: np.zeros(n, dtype=STORAGE_DTYPE[bits]) for bits in set(program.slot_bits)}
    regs = [zeros[bits] for bits in program.slot_bits]
    tids = np.arange(n, dtype=np.int64)
    linear = np.minimum(tids, max(nthreads - 1, 0))
    special = {
        "%tid.x": linear % block[0], "%tid.y": (linear // block[0]) % block[1],
        "%tid.z": linear // (block[0] * block[1]),
        "%laneid": tids % 32, "%warpid": tids // 32, "%nwarpid": np.full(n, n // 32),
    }
    for i, axis in enumerate("xyz"):
        special[f"%ntid.{axis}"] = np.full(n, block[i])
        special[f"%ctaid.{axis}"] = np.full(n, xyz[i])
        special[f"%nctaid.{axis}"] = np.full(n, grid[i])
    # without a cluster launch every CTA is a cluster of one (PTX ISA: implicit 1x1x1 clusters)
    special.update(clusters.special_registers(xyz, grid, cdims, explicit, n))
    for name, slot in program.special_slots.items():
        regs[slot] = special[name].astype(bool if program.slot_bits[slot] == 1 else np.uint32)
    active = tids < nthreads
    cta_index = xyz[0] + grid[0] * (xyz[1] + grid[1] * xyz[2])
    cta = CtaState(R=regs, n=n, nthreads=nthreads, active=active, n_active=nthreads, tids=tids,
                   cta_index=cta_index, cta_xyz=xyz, smem=smem, gmem=gmem, param_bytes=param_bytes,
                   commit_count=np.zeros(n, dtype=np.int64), smem_stats=stats, sync=sync)
    cta.mask_all = None if nthreads == n else active
    return cta
