"""The schedule: how a GEMM is tiled onto CTAs, warps and mma instructions, and pipelined."""
from __future__ import annotations

from dataclasses import dataclass, fields

from . import field_checks as check
from .rules import rules_for
from .scalars import normalise
from .swizzle import TMA_MODES

#: Instruction shapes (m, n, k) by name: mma.sync m16n8k16, or the opaque-fragment wmma m16n16k16
#: (IREE's LLVMGPUMatmulTensorCore path, kept for ablation).
#: "wgmma" is Hopper's warpgroup m64nNk(32 bytes) (sm_90a only; N = BN, so its entry holds the
#: fixed M and the f16 K: `problem.instruction_shape` gives the real shape).
INSTRUCTIONS = {"m16n8k16": (16, 8, 16), "wmma": (16, 16, 16), "wgmma": (64, 0, 16)}
SMEM_LAYOUTS = ("swizzle", "pad", "plain")
RASTERS = ("row", "grouped")
SPLIT_K_MODES = ("workspace", "atomic")
#: How output tiles and their K loops are shared among CTAs (see `Schedule.decomposition`).
DECOMPOSITIONS = ("tiles", "stream-k", "stream-k-pure")
#: What `warps=None` and `smem_layout=None` become, per instruction (the CLI's defaults too): the
#: layout each instruction reads fastest, and a warp grid that fits a 128x128 tile's registers.
DEFAULT_WARPS = {"m16n8k16": (2, 2), "wmma": (2, 4), "wgmma": (4, 1)}  # wgmma: (4 * consumers, 1)
DEFAULT_SMEM_LAYOUT = {"m16n8k16": "swizzle", "wmma": "pad", "wgmma": "swizzle"}
#: The fields only wgmma schedules use (None on every other schedule; see `Schedule`).
HOPPER_FIELDS = ("consumers", "warp_specialized", "producer_regs", "consumer_regs", "persistent", "cluster",
                 "multicast", "swizzle")
#: TMA / wgmma-descriptor swizzle widths in bytes, widest first (the swizzled `TMA_MODES`;
#: docs/ptx_facts/tma.md "Swizzle modes").
SWIZZLE_WIDTHS = tuple(mode.width for mode in reversed(TMA_MODES) if mode.bits)
#: CUTLASS's warp-specialised register split (docs/ptx_facts/warp_specialisation.md §9g): the
#: producer keeps 40; consumers take what the CTA's registers at launch leave (`targets/sm90/plan.py`).
DEFAULT_PRODUCER_REGS = 40


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

    Hopper (`instruction="wgmma"`, arch "sm_90a"): TMA loads into swizzled shared memory on a
    full/empty mbarrier ring of `stages`, wgmma from shared-memory descriptors. `block` is the CTA
    tile (BM a multiple of 64 per consumer warpgroup, BN a legal wgmma N, BK*element bytes a
    multiple of the swizzle width); `raster`/`group_m` order the tiles a persistent CTA walks;
    `split_k`/`decomposition`/`sms` as above; `epilogue_via_smem` True stages C through shared
    memory for a TMA store, False stores from the accumulators (None: TMA when C's rows are
    16-byte aligned). `warps` is derived ((4 * consumers, 1): the consumer warps), `smem_layout`
    is "swizzle" and `frag_double_buffer` does not apply (wgmma reads shared memory itself). The
    fields below are for wgmma only (None elsewhere); None picks the sm_90a default shown, so
    `Schedule(block=(128, 128, 64), instruction="wgmma", stages=4)` is a complete schedule:

    * `consumers`: consumer warpgroups (1 or 2), splitting BM: each owns BM/consumers rows (a
      multiple of 64). Default 2 when BM is a multiple of 128, else 1.
    * `warp_specialized`: a producer warpgroup (one elected thread) issues the TMA copies while
      the consumers only wait, multiply and release stages (default True); False: the consumers
      issue the copies themselves, ahead by `stages - 1` k-tiles.
    * `producer_regs` / `consumer_regs`: `setmaxnreg.dec` / `.inc` register counts (warp
      specialised only): multiples of 8 in 24..256. Default 40 for the producer and the most the
      CTA's registers leave each consumer (232 with two consumers, 256 with one).
    * `persistent`: one CTA per SM walks the output tiles (default True); False: one CTA per tile.
    * `cluster`: (CM, CN) CTAs per thread-block cluster, CM * CN <= 8 (default (1, 1)).
    * `multicast`: the CTAs of a cluster that share an operand tile load it once with TMA
      multicast (B along CM, A along CN); default True when the cluster has more than one CTA.
    * `swizzle`: 128, 64 or 32 bytes, the TMA box and wgmma descriptor swizzle; None (default)
      takes the widest the operand tiles' contiguous extents allow (`hopper.hopper_plan`).
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
    # -- Hopper only (instruction="wgmma", arch="sm_90a"): see above; None elsewhere ------------
    consumers: int | None = None
    warp_specialized: bool | None = None
    producer_regs: int | None = None
    consumer_regs: int | None = None
    persistent: bool | None = None
    cluster: tuple[int, int] | None = None
    multicast: bool | None = None
    swizzle: int | None = None

    def __post_init__(self) -> None:
        tuples = ("block", "warps", "cluster")
        normalise(self, tuple(f.name for f in fields(self) if f.name not in tuples), tuples)
        check.int_tuple("schedule.block", self.block, ("BM", "BN", "BK"), (128, 128, 32))
        check.choice("schedule.instruction", self.instruction, tuple(INSTRUCTIONS))
        rules = rules_for(self.instruction)
        if rules is not None:  # the target's own fields (e.g. wgmma's consumers, cluster)
            rules.fill_defaults(self)
        elif isinstance(self.instruction, str) and self.instruction in INSTRUCTIONS:
            raise RuntimeError(f"no target backend has registered instruction {self.instruction!r} yet: import "
                               "ptxgen (ptxgen.targets.registry registers them) before building a Schedule")
        known = (self.instruction if isinstance(self.instruction, str) and self.instruction in DEFAULT_SMEM_LAYOUT
                 else "m16n8k16")  # any other value: the verifier names it
        if self.warps is None:
            object.__setattr__(self, "warps", DEFAULT_WARPS[known])
        if self.smem_layout is None:
            object.__setattr__(self, "smem_layout", DEFAULT_SMEM_LAYOUT[known])
        check_schedule(self)

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
    def hopper(self) -> bool:
        """Whether this is a Hopper (wgmma) schedule, which the sm_90a pipeline lowers."""
        return self.instruction == "wgmma"

    @property
    def producer_warpgroups(self) -> int:
        """1 for a warp-specialised wgmma schedule (the TMA producer), else 0."""
        return 1 if self.warp_specialized else 0  # None on every other schedule

    @property
    def num_warps(self) -> int:
        """All warps of the CTA: the warp grid, plus a wgmma schedule's producer warpgroup."""
        return self.warps[0] * self.warps[1] + 4 * self.producer_warpgroups

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


def check_schedule(s: Schedule) -> None:
    """Each field every target reads, on its own (on construction, and again by the verifier);
    the fields only one target reads are checked by that target (`verify_types.verify_hopper_types`
    for wgmma's), and rules across fields are the verifier's."""
    check.int_tuple("schedule.block", s.block, ("BM", "BN", "BK"), (128, 128, 32))
    check.int_tuple("schedule.warps", s.warps, ("WM", "WN"), (2, 2))
    check.choice("schedule.instruction", s.instruction, tuple(INSTRUCTIONS))
    for f in ("stages", "group_m", "split_k"):
        check.integer(f"schedule.{f}", getattr(s, f), example={"stages": 3, "group_m": 8, "split_k": 2}[f])
    check.choice("schedule.smem_layout", s.smem_layout, SMEM_LAYOUTS)
    check.choice("schedule.raster", s.raster, RASTERS)
    check.boolean("schedule.frag_double_buffer", s.frag_double_buffer)
    check.choice("schedule.split_k_mode", s.split_k_mode, SPLIT_K_MODES)
    check.boolean("schedule.epilogue_via_smem", s.epilogue_via_smem, optional=True)
    check.choice("schedule.decomposition", s.decomposition, DECOMPOSITIONS)
    check.integer("schedule.sms", s.sms, optional=True, example=108)
