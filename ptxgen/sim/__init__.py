"""ptxgen.sim: a CPU simulator of PTX text, the independent judge of the code generator.

    from ptxgen import sim
    res = sim.launch(ptx_text, "entry", grid=(gx, gy, gz), block=(bx, by, bz), args=[...],
                     dynamic_smem=0, ctas=None, cluster=None)
    res.instructions       # thread-instructions executed
    res.smem_wavefronts    # {ptx line: (wavefronts, ideal)} for shared-memory bank conflicts

Array arguments act as device buffers (written in place); each gets a fake global address
(SimResult.global_addresses) in the middle of its own 1 TiB region, so an out-of-bounds access is
reported against the argument it strayed from and can never land in another argument's array;
a store into a read-only (numpy `writeable=False`) argument is reported too. The threads of a CTA
run as thread groups vectorised with numpy: all in lock step until a branch divides them, then
each group with its own program counter until they reconverge (warps.py). CTAs run one after
another unless the program synchronises between CTAs (atomics, .relaxed/.acquire/.release/.volatile
accesses, fences): then they run interleaved, so spin-waits make progress (scheduler.py), and
global accesses between CTAs are checked against a happens-before model (sync.py). Hazards (races,
pending cp.async reads, out-of-bounds or misaligned accesses, warp instructions reached by part of
a warp, unsupported instructions, deadlock) raise HazardError naming the PTX
line; errors.HAZARD_KINDS lists them. Like ptxas, it rejects a module that does not start with
`.version`, `.target` and `.address_size 64` in that order (header.py). This package imports nothing else from ptxgen on purpose.

Hopper: mbarriers (ops_mbarrier.py), TMA tile copies and bulk copies (ops_bulk.py) with their
phase/transaction semantics and hazards in async_proxy.py. A `sim.TensorMap(array, box, swizzle=...,
oob_fill=...)` argument fills a `.param .align 64 .b8 name[128]` parameter (tensormap.py).
Thread block clusters (`cluster=(x, y, z)`, cluster.py): a cluster's CTAs start together and reach
each other's shared memory (mapa, .shared::cluster, remote mbarrier arrive, TMA multicast),
ordered by barrier.cluster.

Blackwell (`.target sm_100a`): tensor memory and its allocator (tmem.py), tcgen05.mma from sm100
descriptors (tcgen05_desc.py, tcgen05_mma.py; block scaling in tcgen05_scaled.py, .ws in
tcgen05_ws.py), tcgen05.ld/st data paths (tcgen05_layouts.py), tcgen05.cp (tcgen05_cp.py),
tcgen05.shift (tcgen05_shift.py), commit/wait/fence (ops_tcgen05.py): an MMA is computed at issue and stays in flight until a wait sees its commit's mbarrier phase.

Timeline: `launch(..., trace="run.json", trace_ctas=[...])` writes what the traced CTAs' warps did
as Chrome trace-event JSON for Perfetto (trace.py; trace_png.py draws it).
"""
from .errors import HazardError
from .machine import SimResult, launch
from .tensormap import TensorMap

__all__ = ["launch", "HazardError", "SimResult", "TensorMap"]
