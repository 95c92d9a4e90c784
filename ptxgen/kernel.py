"""`Kernel`: the result of `ptxgen.compile`, keeping every stage's output for inspection (`stages`).

Kernel parameters, in order (documented in the README):
    A, B, C            .u64  global pointers
    M, N, K            .u32  problem sizes
    lda, ldb, ldc      .u32  leading dimensions, in elements
    batch_stride_a/b/c .u64  only when batch > 1: element strides between batches (0 broadcasts)
    batch_stride_b     .u64  contiguous grouped GEMMs: element stride between the groups' B
    batch_stride_a/b/c .u64  masked grouped GEMMs: element strides between the groups' matrices
    bias               .u64  only when the epilogue adds a bias (`gemm.bias_dtype` elements)
    scale              .u64  only when the epilogue multiplies by a scale vector (f32 elements)
    scale_a, scale_b   .u64  then sa_row_stride, sa_k_stride, sb_k_stride, sb_n_stride (.u32): only
                             block-scaled fp8 (sm_90a; Gemm.block_scale)
    workspace, counters .u64 only with workspace split-K or Stream-K: `workspace_elements` f32 and
                             `counter_count` u32 (counters zero before the first launch and left
                             at zero; the workspace needs no zeroing and keeps stale partials)
    offs / masked_m    .u64  grouped GEMMs, last: G int32 cumulative row ends / valid row counts
Launch: `grid`, `block` (threads), and `smem_bytes` of dynamic shared memory.
A swap-AB kernel (`Schedule.swap_ab`) takes the parameters of its swapped problem (`lowered_gemm`):
A is the caller's B, B the caller's A, M and N exchanged, lda and ldb exchanged (`arguments` does it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .schedule.problem import Gemm
from .schedule.schedule import Schedule
from .targets.base import Backend
from .targets.registry import backend_for
from .targets.sm80.backend import PARAM_NAMES as SM80_PARAM_NAMES

if TYPE_CHECKING:
    from .ir import Function
    from .regalloc.allocate import Allocation
    from .regalloc.smem import SmemPlan
    from .runtime.assemble import Assembled, Resources
    from .tune.choose import Choice

#: Parameter names in kernel order of the pointer kernels (the sm_80 backend's).
PARAM_NAMES = SM80_PARAM_NAMES


@dataclass
class Kernel:
    gemm: Gemm
    schedule: Schedule
    arch: str
    ptx: str
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    function: "Function"  # the lowered IR over virtual registers
    allocation: "Allocation"  # virtual -> physical registers, peak live per class
    smem_plan: "SmemPlan"  # offsets of the shared buffers
    #: Every compile stage's output by stage name, in order (`compile.STAGES`): verify (Target),
    #: plan_shared (SmemPlan), lower (Function), allocate (Allocation), launch, render (PTX text).
    stages: dict[str, Any] = field(default_factory=dict, repr=False)
    _assembled: "Assembled | None" = field(default=None, repr=False)
    #: Why this schedule, when `compile` chose it (no schedule given): the predicted time, waves,
    #: occupancy limiter and runners-up (`Choice.lines()`); None for a schedule the caller gave.
    choice: "Choice | None" = field(default=None, repr=False)
    #: `compile(gemm, schedule)` for this kernel's arch (`compile` gives it): the simulator's warm-up
    #: runs time small twins of this kernel (`simulate.simulator_pace`) without importing the
    #: compiler; None for a Kernel built by hand (estimates then use a constant pace).
    recompile: "Callable[[Gemm, Schedule], Kernel] | None" = field(default=None, repr=False, compare=False)
    #: The problem the PTX computes when it is not `gemm`: under `Schedule.swap_ab`, (N, M, K) with
    #: A and B exchanged (schedule/swap_ab.py); None means `gemm` itself.
    lowered_gemm: Gemm | None = field(default=None, repr=False)

    @property
    def problem(self) -> Gemm:
        """The problem the kernel's grid, tiles and scratch are sized for: `gemm`, or the swapped
        problem of a swap-AB kernel (the caller still passes A, B and C of `gemm`)."""
        return self.lowered_gemm if self.lowered_gemm is not None else self.gemm

    def kernel_operands(self, views: tuple, operands: list) -> tuple[tuple, list]:
        """A's, B's and C's views and operands in the order the kernel takes them: a swap-AB
        kernel's A is the caller's B transposed (the same bytes: `transposed_view`), its B the A."""
        if self.lowered_gemm is None:
            return views, operands
        from .runtime.operands import transposed_view

        va, vb, *rest = views
        return (transposed_view(vb), transposed_view(va), *rest), [operands[1], operands[0], *operands[2:]]

    @property
    def backend(self) -> Backend:
        """The target backend that lowered this kernel (`targets.registry`)."""
        return backend_for(self.arch, self.schedule.instruction)

    # -- assembly ---------------------------------------------------------------------------
    def assemble(self) -> "Assembled":
        """Assemble the PTX to a cubin in-process (once; cached on the kernel)."""
        if self._assembled is None:
            from .runtime.assemble import assemble

            self._assembled = assemble(self.ptx, self.arch, self.entry)
        return self._assembled

    @property
    def cubin(self) -> bytes:
        return self.assemble().cubin

    @property
    def resources(self) -> "Resources":
        """Registers/thread, spill bytes, shared bytes and stack, from the assembler's log, and
        (`binary`) which binary the last GPU launch ran: this cubin, one re-assembled for the
        device, or the driver's PTX JIT ('' before a launch)."""
        res = self.assemble().resources
        runs = self.__dict__.get("_runs", "")
        return dataclasses.replace(res, binary=runs) if runs else res

    @property
    def peak_live(self) -> dict[str, int]:
        """Peak simultaneously-live virtual registers per class, from ptxgen's own allocator."""
        return dict(self.allocation.peak)

    @property
    def workspace_elements(self) -> int:
        """f32 elements of split-K / Stream-K workspace the kernel needs (0 when it needs none).

        It needs no zeroing: each launch writes a partial before any CTA reads it, and leaves the
        partials there (only the counters are left at zero)."""
        return self.scratch_sizes(self.grid)[0]

    @property
    def counter_count(self) -> int:
        """u32 arrival counters (split-K) or flags (Stream-K) the kernel needs: zero before the first
        launch; every launch leaves them at zero again, so they can be reused."""
        return self.scratch_sizes(self.grid)[1]

    def scratch_sizes(self, grid: tuple[int, int, int]) -> tuple[int, int]:
        """(f32 workspace elements, u32 counters) for a launch over `grid` (Stream-K's grid may
        follow the device's SM count rather than `self.grid`)."""
        from .schedule.geometry import split_k_workspace
        from .schedule.streamk import stream_k_workspace

        if self.schedule.stream_k:
            return stream_k_workspace(self.problem, self.schedule, grid[0])
        return split_k_workspace(self.problem, self.schedule)

    def launch_grid(self, sm_count: int | None, cluster_slots: int | None = None) -> tuple[int, int, int]:
        """The grid to launch on a device with `sm_count` SMs: Stream-K and the persistent sm_90a
        grid with `sms=None` fill the device; every other kernel launches `self.grid`. A cluster
        kernel's `cluster_slots` (CTAs in the whole clusters the device runs at once, from
        cuOccupancyMaxActiveClusters) replaces `sm_count` where given; without it the grid is
        floor(SMs / cluster size) clusters, as `self.grid` is at compile time."""
        from .schedule.geometry import grid_for

        if self.grid_follows_device and sm_count:
            return grid_for(self.problem, self.schedule, cluster_slots or sm_count)
        return self.grid

    @property
    def grid_follows_device(self) -> bool:
        """Stream-K and the persistent sm_90a grid with `sms=None` size their grid at launch from the
        device (`launch_grid`); every other kernel launches `self.grid`."""
        return bool(self.backend.fills_device(self.schedule) and self.schedule.sms is None)

    @property
    def needs_co_residency(self) -> bool:
        """Stream-K: the owner of a split tile spins on flags other CTAs set, so every CTA of the grid
        must be resident at once; the runtime launches it cooperatively (runtime/launch_config.py)."""
        return bool(self.schedule.stream_k)

    @property
    def grid_source(self) -> str:
        """What sized the grid: the compile-time plan (the target's SMs; `sms` when given) until a
        GPU launch sized it from the device (its SM count, or cuOccupancyMaxActiveClusters for a
        cluster grid); `ptxgen info` prints it."""
        launched = self.__dict__.get("_grid_source")
        if launched:
            return launched
        s = self.schedule
        if not self.grid_follows_device:
            return f"grid {self.grid}" + (f" from sms={s.sms}" if s.sms is not None and self.backend.fills_device(s)
                                          else "")
        size = self.cluster_dims[0] * self.cluster_dims[1] * self.cluster_dims[2]
        rule = f"floor(SMs / {size}) clusters of {size}" if size > 1 else "one CTA per SM"
        return (f"grid {self.grid} planned at compile time as {rule} for the target's SMs; a GPU launch sizes it "
                f"from the device" + (" (cuOccupancyMaxActiveClusters)" if size > 1 else ""))

    @property
    def cluster_dims(self) -> tuple[int, int, int]:
        """Thread-block cluster dimensions of the launch: (CM*CN, 1, 1) for an sm_90a schedule with
        a cluster (consecutive CTAs of the 1-D persistent grid, as the entry's .reqnctapercluster
        says: targets/sm90/cluster.py), else (1, 1, 1)."""
        return self.backend.cluster_dims(self.schedule)

    @property
    def zeroes_c_first(self) -> bool:
        """Atomic split-K accumulates into C, so C is zeroed before the launch."""
        return self.schedule.split_k > 1 and self.schedule.split_k_mode == "atomic"

    @property
    def tensor_maps(self) -> tuple:
        """The CUtensorMaps an sm_90a kernel takes by value, in parameter order (tmapA, tmapB):
        each a `TensorMapSpec` (operand, box, swizzle; 3-D with the batch outermost for a batched
        GEMM); () for kernels that take pointers."""
        return self.backend.tensor_maps(self.problem, self.schedule)

    @property
    def walks_tiles(self) -> bool:
        """Whether each CTA walks output tiles x, x + gridDim.x, ... (a persistent grid of whole tiles)."""
        return self.backend.walks_tiles(self.schedule)

    # -- what the runtime and the simulator ask (runtime.launch.LaunchSpec) ------------------
    def check_params(self, decls: list) -> list:
        """The entry's declared parameters, checked against what a launch passes."""
        return self.backend.check_params(self, decls)

    def check_operand(self, view: Any) -> None:
        """Refuse an operand view this kernel cannot read (e.g. a batch stride TMA cannot describe)."""
        self.backend.check_operand(self, view)

    def tensor_map_args(self, views: tuple, ptrs: list[int]) -> list[bytes]:
        """The CUtensorMaps to pass by value for A, B (and C) at device pointers `ptrs`; [] for
        kernels that take pointers."""
        views, ptrs = self.kernel_operands(views, ptrs)
        return self.backend.tensor_map_args(self, views, ptrs)

    def arguments(self, views: tuple, operands: list, maps: list) -> list:
        """The leading kernel arguments for A's, B's and C's views at `operands` (pointers or the
        simulator's buffers), with `maps` the tensor maps where the kernel takes them."""
        views, operands = self.kernel_operands(views, operands)
        return self.backend.arguments(self.problem, views, operands, maps)

    def scalar_args(self) -> list[int]:
        g = self.problem
        return [g.m, g.n, g.k, *g.leading_dims()]

    # -- execution --------------------------------------------------------------------------
    def simulate(self, a: Any, b: Any, c: Any = None, bias: Any = None, scale: Any = None,
                 ctas: list[tuple[int, int, int]] | None = None, progress: Any = None,
                 workers: int | str = 1, ray_address: str | None = None, trace=None, trace_ctas=None,
                 offs: Any = None, masked_m: Any = None, scale_a: Any = None, scale_b: Any = None):
        """Run on ptxgen's CPU simulator and return C.

        Grouped GEMMs (`Gemm(groups=G, grouping=...)`, schedule/grouping.py) take `offs` (contiguous:
        G int32 cumulative row ends; k-contiguous: G int32 cumulative ends along K, C (G, M, N)) or
        `masked_m` (masked: G int32 valid row counts); the kernel reads it on the device, so new
        sizes need no recompiling. Rows outside the groups are left as they were (a new C:
        poisoned); a k-contiguous kernel writes every group's C.

        A new C is poisoned (NaN for floats, `check.poisoned`), so elements no simulated CTA wrote
        show. A given `c` is updated in place (and read when the epilogue's beta != 0). `bias` and
        `scale` are the epilogue's vectors (length N for "col", M for "row"), exactly when it has them.
        `progress`: a bar on stderr (CTAs done, elapsed, ETA) for runs over two seconds: None (the
        default) when stderr is a terminal, True always, False never; or a function called as
        fn(ctas_done, ctas_total) after each CTA.
        `workers`: 1 (default) runs here; N spreads the CTAs over N local processes; "ray" over a Ray
        cluster (`pip install -e ".[cluster]"`) at `ray_address` (which alone implies Ray; None: the
        instance this process joined with ray.init, else a new local one; "auto": `ray start`'s).
        C is bit-identical to a serial run: CTAs that wait on each other (split-K's splits of a
        tile, Stream-K's chains) run in one task; what cannot be reproduced is refused
        (`ptxgen.scaleout.simulate`).

        `scale_a`, `scale_b`: a block-scaled kernel's scales (Gemm.block_scale), exactly when it has
        them: (M, ceil(K/128)) and (ceil(K/128), ceil(N/128)), row- or column-major (ptxgen.runtime.
        block_scales: DeepGEMM's M-contiguous sa storage is passed as `sa_storage.T`).

        `trace="run.json"`: write the simulated CTAs' per-warp timeline as Chrome trace-event JSON
        (open it in Perfetto; `ptxgen.sim.trace_png.draw` pictures it), of the CTAs in `trace_ctas`
        (default: every simulated CTA); needs workers=1.
        """
        from .simulate import simulate_kernel

        return simulate_kernel(self, a, b, c=c, bias=bias, scale=scale, ctas=ctas, progress=progress,
                               workers=workers, ray_address=ray_address, trace=trace, trace_ctas=trace_ctas,
                               offs=offs, masked_m=masked_m, scale_a=scale_a, scale_b=scale_b)

    def __call__(self, a: Any, b: Any, c: Any = None, bias: Any = None, scale: Any = None, stream: Any = None,
                 offs: Any = None, masked_m: Any = None, scale_a: Any = None, scale_b: Any = None):
        """Run on the GPU through the CUDA driver API and return C (written into `c` if given);
        grouped GEMMs take `offs` / `masked_m` as `simulate` does (a device array stays there: the
        kernel reads it, so it may be filled by an earlier kernel on the same stream); block-scaled
        ones `scale_a`, `scale_b` as `simulate`'s."""
        from .runtime.launch import launch_kernel

        return launch_kernel(self, a, b, c=c, bias=bias, scale=scale, stream=stream, offs=offs,
                             masked_m=masked_m, scale_a=scale_a, scale_b=scale_b)

    run = __call__
