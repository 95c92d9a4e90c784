"""The schedule: how a GEMM is tiled onto CTAs, warps and mma instructions, and pipelined."""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass, fields
from typing import Any

from . import field_checks as check
from .rules import TargetOptions, options_class, options_owning, registered_instructions, rules_for, target_fields
from .scalars import normalise
from .swizzle import TMA_MODES

#: Instruction shapes (m, n, k) by name: mma.sync m16n8k16, or the opaque-fragment wmma m16n16k16
#: (IREE's LLVMGPUMatmulTensorCore path, kept for ablation).
#: "wgmma" is Hopper's warpgroup m64nNk(32 bytes) (sm_90a only; N = BN, so its entry holds the
#: fixed M and the f16 K: `problem.instruction_shape` gives the real shape).
#: "tcgen05" is Blackwell's single-thread tcgen05.mma (sm_100a only): M = BM (64 or 128), N = BN.
INSTRUCTIONS = {"m16n8k16": (16, 8, 16), "wmma": (16, 16, 16), "wgmma": (64, 0, 16), "tcgen05": (128, 0, 16)}
SMEM_LAYOUTS = ("swizzle", "pad", "plain")
RASTERS = ("row", "grouped")
SPLIT_K_MODES = ("workspace", "atomic")
#: How output tiles and their K loops are shared among CTAs (see `Schedule.decomposition`).
DECOMPOSITIONS = ("tiles", "stream-k", "stream-k-pure")
#: What `warps=None` and `smem_layout=None` become, per instruction (the CLI's defaults too): the
#: layout each instruction reads fastest, and a warp grid that fits a 128x128 tile's registers.
DEFAULT_WARPS = {"m16n8k16": (2, 2), "wmma": (2, 4), "wgmma": (4, 1),  # wgmma: (4 * consumers, 1)
                 "tcgen05": (4, 1)}  # tcgen05: the four epilogue warps, one per TMEM lane quarter
DEFAULT_SMEM_LAYOUT = {"m16n8k16": "swizzle", "wmma": "pad", "wgmma": "swizzle", "tcgen05": "swizzle"}
#: TMA / wgmma-descriptor swizzle widths in bytes, widest first (the swizzled `TMA_MODES`;
#: docs/ptx_facts/tma.md "Swizzle modes").
SWIZZLE_WIDTHS = tuple(mode.width for mode in reversed(TMA_MODES) if mode.bits)
#: CUTLASS's warp-specialised register split (docs/ptx_facts/warp_specialisation.md §9g): the
#: producer keeps 40; consumers take what the CTA's registers at launch leave (`targets/sm90/plan.py`).
DEFAULT_PRODUCER_REGS = 40


@dataclass(frozen=True, repr=False)
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
    is "swizzle" and `frag_double_buffer` does not apply (wgmma reads shared memory itself).

    A target's own fields live in its options object, `options` (sm_90a's: `consumers`,
    `warp_specialized`, `producer_regs`, `consumer_regs`, `persistent`, `cluster`, `multicast`,
    `swizzle`, documented in targets/sm90/options.py), registered through `rules.py`. They are
    written and read flat, by name: `Schedule(block=(128, 128, 64), instruction="wgmma",
    consumers=2)` builds the options, `s.consumers` reads them (None where the schedule's target
    has no such field), `dataclasses.replace(s, consumers=1)` replaces one, and `repr`, equality,
    hashing and the tuning cache see them as fields. None picks the target's default, so
    `Schedule(block=(128, 128, 64), instruction="wgmma", stages=4)` is a complete schedule.
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
    #: The target's own fields (an options object registered through rules.py), or None.
    options: TargetOptions | None = None
    #: Decode (small M): compute C^T = B^T A^T so the large N fills the instruction's M side, the
    #: epilogue storing each element transposed into the caller's row-major C (schedule/swap_ab.py:
    #: the rules, and the swapped problem every backend lowers). Direct stores only, so None
    #: `epilogue_via_smem` becomes False.
    swap_ab: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The fields above by position or name, and a target's own fields by name (into `options`)."""
        names = [f.name for f in fields(Schedule)]
        if len(args) > len(names):
            raise TypeError(f"Schedule() takes at most {len(names)} positional arguments ({len(args)} given)")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"Schedule() got multiple values for argument {name!r}")
            kwargs[name] = value
        for f in fields(Schedule):
            if f.name in kwargs:
                value = kwargs.pop(f.name)
            elif f.default is not MISSING:
                value = f.default
            else:
                raise TypeError(f"Schedule() missing 1 required argument: {f.name!r}")
            object.__setattr__(self, f.name, value)
        object.__setattr__(self, "options", self._with_target_fields(kwargs))
        self.__post_init__()

    def _with_target_fields(self, given: dict[str, Any]) -> TargetOptions | None:
        """`options` with the target fields given by name set: in the options of the schedule's
        own target, or (a field of another target's, for its verifier to refuse) in that one's."""
        options = self.options
        if not given:
            return options
        for name in given:
            if options_owning(name) is None:
                raise TypeError(f"Schedule() got an unexpected keyword argument {name!r}")
        own = options_class(self.instruction)
        if options is not None:
            cls: Any = type(options)
        elif own is not None:
            own_fields = {f.name for f in fields(own)}  # a field two targets share (cluster) is either's
            foreign = next((n for n in given if n not in own_fields), None)
            if foreign is not None:
                raise TypeError(f"Schedule() got {foreign}={given[foreign]!r}, a field of another target than "
                                f"instruction {self.instruction!r} lowers ({own.__name__} has no {foreign}): drop "
                                f"{foreign}, or use the instruction it belongs to")
            cls = own
        elif all(v is None for v in given.values()):
            return None  # Schedule(b, consumers=None) == Schedule(b)
        else:
            owners = {options_owning(n) for n in given}
            if len(owners) > 1:
                raise TypeError(f"Schedule() got fields of different targets ({', '.join(sorted(given))}): "
                                "give the fields of one target, the one whose instruction the schedule names")
            cls = owners.pop()
        for name in given:
            if name not in {f.name for f in fields(cls)}:
                raise TypeError(f"Schedule() got {name}={given[name]!r}, a field of another target than its "
                                f"options ({cls.__name__}): drop {name}, or set the instruction it belongs to")
        return dataclasses.replace(options if options is not None else cls(), **given)

    def __post_init__(self) -> None:
        tuples = ("block", "warps")
        normalise(self, tuple(f.name for f in fields(self) if f.name not in tuples + ("options",)), tuples)
        check.int_tuple("schedule.block", self.block, ("BM", "BN", "BK"), (128, 128, 32))
        check.choice("schedule.instruction", self.instruction, known_instructions())
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
        if self.swap_ab is True and self.epilogue_via_smem is None:
            object.__setattr__(self, "epilogue_via_smem", False)  # the transposed store is direct
        check_schedule(self)

    def __getattr__(self, name: str) -> Any:
        """A target field, read flat: the options' value, or None where the options lack it."""
        if name.startswith("__") or options_owning(name) is None:  # dunders: pickle and copy probe them
            raise AttributeError(f"'Schedule' object has no attribute {name!r}")
        options = self.__dict__.get("options")
        return getattr(options, name, None)

    def __repr__(self) -> str:
        return "Schedule(" + ", ".join(f"{n}={v!r}" for n, (v, _) in flat_fields(self).items()
                                       if n != "swap_ab" or v is not False) + ")"

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
        """Warpgroups besides the warp grid: 1 for a warp-specialised wgmma schedule (the TMA producer)."""
        return self.options.producer_warpgroups if self.options is not None else 0

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


def flat_fields(s: Schedule) -> dict[str, tuple[Any, Any]]:
    """name -> (value, default) of every field as the API spells it: the shared fields, then every
    registered target's own fields (flat, default None); the options object itself only when it
    is not one a target registered (a wrong value, for the verifier to name)."""
    out = {f.name: (getattr(s, f.name), f.default) for f in fields(s) if f.name != "options"}
    out.update({name: (getattr(s, name), None) for name in target_fields()})
    registered = {options_owning(name) for name in target_fields()}
    if s.options is not None and type(s.options) not in registered:
        out["options"] = (s.options, None)
    return out


def known_instructions() -> tuple[str, ...]:
    """The instruction names a schedule may give: the built ones, and any a registered target adds."""
    return tuple(dict.fromkeys((*INSTRUCTIONS, *registered_instructions())))


def check_schedule(s: Schedule) -> None:
    """Each field every target reads, on its own (on construction, and again by the verifier);
    the fields only one target reads are checked by that target (their options' `verify_types`:
    targets/sm90/options.py for wgmma's), and rules across fields are the verifier's."""
    check.int_tuple("schedule.block", s.block, ("BM", "BN", "BK"), (128, 128, 32))
    check.int_tuple("schedule.warps", s.warps, ("WM", "WN"), (2, 2))
    check.choice("schedule.instruction", s.instruction, known_instructions())
    for f in ("stages", "group_m", "split_k"):
        check.integer(f"schedule.{f}", getattr(s, f), example={"stages": 3, "group_m": 8, "split_k": 2}[f])
    check.choice("schedule.smem_layout", s.smem_layout, SMEM_LAYOUTS)
    check.choice("schedule.raster", s.raster, RASTERS)
    check.boolean("schedule.frag_double_buffer", s.frag_double_buffer)
    check.choice("schedule.split_k_mode", s.split_k_mode, SPLIT_K_MODES)
    check.boolean("schedule.epilogue_via_smem", s.epilogue_via_smem, optional=True)
    check.choice("schedule.decomposition", s.decomposition, DECOMPOSITIONS)
    check.integer("schedule.sms", s.sms, optional=True, example=108)
    check.boolean("schedule.swap_ab", s.swap_ab)
