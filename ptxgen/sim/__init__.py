"""ptxgen.sim: a CPU simulator of PTX text, the independent judge of the code generator.

    from ptxgen import sim
    res = sim.launch(ptx_text, "entry", grid=(gx, gy, gz), block=(bx, by, bz), args=[...],
                     dynamic_smem=0, ctas=None)
    res.instructions       # thread-instructions executed
    res.smem_wavefronts    # {ptx line: (wavefronts, ideal)} for shared-memory bank conflicts

Array arguments act as device buffers (written in place); each gets a fake 256-byte aligned
global address (SimResult.global_addresses). Threads of a CTA run in lock step, vectorised with
numpy; hazards (races, pending cp.async reads, out-of-bounds or misaligned accesses, divergent
branches, unsupported instructions) raise HazardError naming the PTX line. This package imports
nothing else from ptxgen on purpose.
"""
from .errors import HazardError
from .machine import SimResult, launch

__all__ = ["launch", "HazardError", "SimResult"]
