"""The schedule: how a GEMM is tiled onto CTAs, warps and mma instructions, and pipelined."""
from __future__ import annotations

from dataclasses import dataclass, fields

from .scalars import normalise

#: Instruction shapes (m, n, k) by name: mma.sync m16n8k16, or the opaque-fragment wmma m16n16k16
#: (IREE's LLVMGPUMatmulTensorCore path, kept for ablation).
INSTRUCTIONS = {"m16n8k16": (16, 8, 16), "wmma": (16, 16, 16)}
SMEM_LAYOUTS = ("swizzle", "pad", "plain")
RASTERS = ("row", "grouped")
SPLIT_K_MODES = ("workspace", "atomic")
#: How output tiles and their K loops are shared among CTAs (see `Schedule.decomposition`).
DECOMPOSITIONS = ("tiles", "stream-k", "stream-k-pure")
#: What `warps=None` and `smem_layout=None` become, per instruction (the CLI's defaults too): the
#: layout each instruction reads fastest, and a warp grid that fits a 128x128 tile's registers.
DEFAULT_WARPS = {"m16n8k16": (2, 2), "wmma": (2, 4)}
DEFAULT_SMEM_LAYOUT = {"m16n8k16": "swizzle", "wmma": "pad"}


@dataclass(frozen=True)
class Schedule:
    """Block tile (BM, BN, BK), warp grid (WM, WN) and pipeline choices.

    * `warps`: the warp grid (WM, WN); None (default) picks (2, 2) for mma.sync and (2, 4) for wmma,
      whose opaque fragments take about twice the registers (a 128x128 tile needs 8 warps).
    * `stages`: 1 = one buffer, no overlap; 2 = double buffering; >=3 = multistage cp.async pipeline.
    * `smem_layout`: "swizzle" (XOR on 16-byte chunks), "pad" (+16 B per row) or "plain"; None
      (default) picks the best the instruction reads: "swizzle" for mma.sync (ldmatrix), "pad" for
      wmma (wmma.load reads plain strided rows). The chosen value is what the Schedule holds,
      prints and compares (Schedule(b) == Schedule(b, smem_layout="swizzle")); note that
      dataclasses.replace(s, instruction="wmma") keeps s's layout, which wmma then refuses.
    * `raster`: CTA launch order, "row" or "grouped" (groups of `group_m` CTA rows share B tiles in L2).
    * `frag_double_buffer`: load the fragments of k-step s+1 while the mma.sync of step s run; in a
      pipelined loop of 2-4 mma k-steps per k-tile this crosses k-tiles too (the next k-tile's
      first fragments load, after its barrier, under this k-tile's last mma, as in CUTLASS).
    * `split_k`: split K across this many CTAs per output tile. `split_k_mode="workspace"` (the
      default, deterministic) writes f32 partial tiles to a workspace; the last CTA of a tile to
      finish adds them in split order and runs the epilogue once. `"atomic"` adds partials into a
      zeroed f32 C with red.global.add.f32 (order-dependent rounding; epilogue at most alpha and a
      scale vector, both linear).
    * `epilogue_via_smem`: stage the C tile through shared memory (reusing the A/B stage bytes) so
      global stores are 16-byte and coalesced; False stores straight from the fragment registers;
      None (default) stages whenever the operands allow 16-byte stores (not atomic split-K).
    * `decomposition`: "tiles" (default) launches one CTA per output tile (times `split_k`).
      "stream-k" (Osama et al., PPoPP 2023) launches a persistent grid of `sms` CTAs: whole tiles
      go round in data-parallel waves, and the last one to two waves' worth of tiles are shared
      out as MAC-loop iterations, evenly, so every CTA does the same work (the "two-tile" hybrid).
      "stream-k-pure" shares every tile's iterations that way. Tiles split between CTAs are
      fixed up in K order through a workspace with flags, so results are deterministic.
    * `sms`: persistent CTAs for Stream-K; None uses the device's SM count on the GPU and the
      target's flagship count (`Target.sms`) in the simulator.
    """

    block: tuple[int, int, int]
    warps: tuple[int, int] | None = None
    instruction: str = "m16n8k16"
    stages: int = 3
    smem_layout: str | None = None
    raster: str = "row"
    group_m: int = 8
    frag_double_buffer: bool = True
    split_k: int = 1
    split_k_mode: str = "workspace"
    epilogue_via_smem: bool | None = None
    decomposition: str = "tiles"
    sms: int | None = None

    def __post_init__(self) -> None:
        normalise(self, tuple(f.name for f in fields(self) if f.name not in ("block", "warps")), ("block", "warps"))
        known = "wmma" if self.instruction == "wmma" else "m16n8k16"  # any other name: verify names it
        if self.warps is None:
            object.__setattr__(self, "warps", DEFAULT_WARPS[known])
        if self.smem_layout is None:
            object.__setattr__(self, "smem_layout", DEFAULT_SMEM_LAYOUT[known])

    @property
    def bm(self) -> int:
        return self.block[0]

    @property
    def bn(self) -> int:
        return self.block[1]

    @property
    def bk(self) -> int:
        return self.block[2]

    @property
    def num_warps(self) -> int:
        return self.warps[0] * self.warps[1]

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    @property
    def warp_tile(self) -> tuple[int, int]:
        return self.bm // self.warps[0], self.bn // self.warps[1]

    @property
    def stream_k(self) -> bool:
        return self.decomposition in ("stream-k", "stream-k-pure")

    @property
    def mma_shape(self) -> tuple[int, int, int]:
        """The shape the instruction name stands for; the k mma.sync issues follows the dtype
        (`problem.instruction_shape`: k8 for tf32, k32 for int8)."""
        return INSTRUCTIONS[self.instruction]
