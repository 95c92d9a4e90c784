"""The problem and schedule the command line's flags describe, and the kernel they build (shared by
`emit`, `info`, `run` and `tune`)."""
from __future__ import annotations

import argparse
import dataclasses

from .. import compile as compile_kernel
from ..errors import ScheduleError
from ..kernel import Kernel
from ..schedule.problem import INTEGER_DTYPES, Gemm
from ..schedule.rules import options_class
from ..targets.registry import backend_for_instruction, default_backend
from ..schedule.schedule import Schedule

#: CUTLASS-style letters: "t" stores a matrix row-major, "n" column-major; first A, then B.
LAYOUT_LETTERS = {f"{a}{b}": ({"t": "row", "n": "col"}[a], {"t": "row", "n": "col"}[b]) for a in "nt" for b in "nt"}

#: The argparse names of the schedule flags: when none is given, the cost model chooses the schedule.
SCHEDULE_FLAGS = ("block", "warps", "stages", "instruction", "smem_layout", "raster", "group_m",
                  "no_frag_double_buffer", "epilogue_via", "split_k", "split_k_mode", "stream_k", "sms", "swap_ab",
                  "consumers", "warp_specialized", "persistent", "cluster", "swizzle", "cta_group", "tile_scheduler")
#: The Hopper schedule flags (argparse name -> flag as typed), which only --instruction wgmma takes
#: (--cluster: tcgen05 too).
HOPPER_FLAGS = {"consumers": "--consumers", "warp_specialized": "--warp-specialized/--no-warp-specialized",
                "persistent": "--persistent/--no-persistent", "cluster": "--cluster", "swizzle": "--swizzle"}
#: The Blackwell schedule flags, which only --instruction tcgen05 takes (--cluster: wgmma too).
BLACKWELL_FLAGS = {"cta_group": "--cta-group", "tile_scheduler": "--tile-scheduler", "cluster": "--cluster"}
#: Every target's own schedule flags: each sets the field of that name in the options of the
#: instruction's target (`Schedule(..., cta_group=2)`), and only an instruction whose options have
#: the field takes it (`target_fields`).
TARGET_FLAGS = {**HOPPER_FLAGS, **BLACKWELL_FLAGS}
#: The instructions that have target flags, in the order a refusal names them.
TARGET_INSTRUCTIONS = ("wgmma", "tcgen05")


class UsageError(Exception):
    """Flags that contradict each other or ask for something impossible (exit status 2)."""


#: Schedule field -> the argparse name of the flag that sets it (None there: not typed).
FIELD_ARGS = {"block": "block", "warps": "warps", "stages": "stages", "instruction": "instruction",
              "smem_layout": "smem_layout", "raster": "raster", "group_m": "group_m",
              "frag_double_buffer": "no_frag_double_buffer", "epilogue_via_smem": "epilogue_via",
              "split_k": "split_k", "split_k_mode": "split_k_mode", "decomposition": "stream_k", "sms": "sms",
              **{name: name for name in TARGET_FLAGS}}


#: Schedule flags given as a --x / --no-x pair (argparse.BooleanOptionalAction).
BOOLEAN_PAIRS = ("warp_specialized", "persistent")


def typed_schedule_flags(args: argparse.Namespace) -> str:
    """The schedule flags the user typed, as typed (`--block 512x512x64 --stages 2`)."""
    words = []
    for name in SCHEDULE_FLAGS:
        value = getattr(args, name, None)
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool) and name in BOOLEAN_PAIRS:  # --x / --no-x
            words.append(flag if value else f"--no-{flag[2:]}")
        elif value is True:
            words.append(flag)
        elif isinstance(value, (tuple, list)):
            words.append(f"{flag} {'x'.join(map(str, value))}")
        else:
            words.append(f"{flag} {value}")
    return " ".join(words)


def refuse_flags_without_effect(args: argparse.Namespace) -> None:
    """Flags that would be silently ignored in the combination given are refused, naming what
    gives them their effect."""
    split_k = args.split_k or 1
    if args.split_k_mode is not None and split_k < 2:
        raise UsageError(f"--split-k-mode {args.split_k_mode} has no effect without --split-k 2 or more: "
                         f"add --split-k 2, or drop --split-k-mode")
    if args.group_m is not None and args.raster != "grouped":
        raise UsageError(f"--group-m {args.group_m} has no effect without --raster grouped: add --raster grouped, "
                         "or drop --group-m")
    if args.sms is not None and args.stream_k is None and not has_persistent_grid(instruction_of(args)):
        raise UsageError(f"--sms {args.sms} has no effect without --stream-k: add --stream-k, or drop --sms")


def instruction_of(args: argparse.Namespace) -> str:
    """--instruction, else the one the arch's own pipeline lowers (wgmma for sm_90a, tcgen05 for
    sm_100a; mma.sync m16n8k16 elsewhere): --block with --arch sm_100a means a tcgen05 schedule."""
    if args.instruction is not None:
        return args.instruction
    return default_backend(getattr(args, "arch", None) or "sm_80").instructions[0]


def has_persistent_grid(instruction: str | None) -> bool:
    """Whether the instruction's target walks tiles on a persistent grid of its own, which --sms
    sizes without --stream-k: its options have `persistent` (wgmma) or `tile_scheduler` (tcgen05,
    always persistent)."""
    return bool(option_fields(instruction) & {"persistent", "tile_scheduler"})


def option_fields(instruction: str | None) -> set[str]:
    """The names of the fields of the instruction's target options (empty: it has none)."""
    options = options_class(instruction)
    return {f.name for f in dataclasses.fields(options)} if options is not None else set()


def layouts(args: argparse.Namespace) -> tuple[str, str]:
    """(A layout, B layout) from --layout and --a-layout/--b-layout, which must agree. The defaults
    are row-major A and column-major B, except for --grouping k-contiguous, whose only layouts are
    column-major A and row-major B (schedule/grouping.py)."""
    if args.layout is None:
        k_grouped = getattr(args, "grouping", None) == "k-contiguous"
        return args.a_layout or ("col" if k_grouped else "row"), args.b_layout or ("row" if k_grouped else "col")
    a, b = LAYOUT_LETTERS[args.layout]
    for name, given, implied in (("--a-layout", args.a_layout, a), ("--b-layout", args.b_layout, b)):
        if given is not None and given != implied:
            raise UsageError(f"--layout {args.layout} stores {name[2].upper()} {implied}-major, but {name} {given} "
                             f"says {given}-major: drop {name} (--layout sets both), or give --a-layout and --b-layout "
                             "without --layout")
    return a, b


def problem(args: argparse.Namespace, default_shape: tuple[int, int, int]) -> Gemm:
    """The Gemm the problem flags describe."""
    m, n, k = args.shape or default_shape
    a_layout, b_layout = layouts(args)
    out_dtype = args.out_dtype or ("s32" if args.dtype in INTEGER_DTYPES else "f32")
    return Gemm(m, n, k, dtype=args.dtype, out_dtype=out_dtype, a_layout=a_layout, b_layout=b_layout,
                align=args.align, acc_dtype=args.acc, epilogue=args.epilogue, batch=args.batch,
                bias_dtype=args.bias_dtype, fast_accum=args.fast_accum, groups=getattr(args, "groups", 1),
                grouping=getattr(args, "grouping", None), block_scale=getattr(args, "block_scale", None))


def _instruction_text(instruction: str, parenthesised: bool = False) -> str:
    """`--instruction wgmma --arch sm_90a`, or `--instruction wgmma (--arch sm_90a)`: the
    instruction with the arch its target lowers for."""
    arch = f"--arch {backend_for_instruction(instruction).archs[0]}"
    return f"--instruction {instruction} " + (f"({arch})" if parenthesised else arch)


def target_fields(args: argparse.Namespace) -> dict:
    """The Schedule's target fields the flags give (None ones left out, so its defaults apply); a
    UsageError naming the instruction that takes them when the instruction given does not."""
    given = {name: getattr(args, name) for name in TARGET_FLAGS if getattr(args, name, None) is not None}
    instruction = instruction_of(args)
    refused = [name for name in given if name not in option_fields(instruction)]
    if not refused:
        return {name: tuple(v) if name == "cluster" else v for name, v in given.items()}
    flags = ", ".join(TARGET_FLAGS[name] for name in refused)
    takers = [i for i in TARGET_INSTRUCTIONS if set(refused) <= option_fields(i)]
    if not takers:  # the flags of two targets at once
        owners = "; ".join(f"{TARGET_FLAGS[name]} only with " + " or ".join(
            _instruction_text(i) for i in TARGET_INSTRUCTIONS if name in option_fields(i)) for name in refused)
        raise UsageError(f"{flags} belong to different instructions ({owners}): keep the flags of one "
                         "instruction and add it")
    verb = "applies" if len(refused) == 1 else "apply"
    raise UsageError(f"{flags} only {verb} to {' or '.join(_instruction_text(i, True) for i in takers)}, not "
                     f"--instruction {instruction}{'' if args.instruction else f' (the default for --arch {args.arch})'}: add "
                     f"{' or '.join(_instruction_text(i) for i in takers)}, or drop {flags}")


#: The name older scripts use for `target_fields`.
hopper_fields = target_fields


def build(args: argparse.Namespace, default_shape: tuple[int, int, int]) -> Kernel:
    """The kernel the flags describe. A ScheduleError about a schedule field the user did not type
    (a default) carries `typed_flags`, so the CLI blames what was typed (`flags.schedule_error_text`)."""
    refuse_flags_without_effect(args)
    gemm = problem(args, default_shape)
    options = target_fields(args)
    try:
        return _build(args, gemm, options)
    except ScheduleError as e:
        e.layout_letters = args.layout
        field = e.field.split(".")[1] if e.field.startswith("schedule.") else None
        typed = typed_schedule_flags(args)
        if field in FIELD_ARGS and getattr(args, FIELD_ARGS[field], None) is None and typed:
            e.typed_flags = typed
        raise


def _build(args: argparse.Namespace, gemm: Gemm, options: dict) -> Kernel:
    if all(getattr(args, flag) is None for flag in SCHEDULE_FLAGS):
        return compile_kernel(gemm, None, arch=args.arch)
    # warps and smem_layout left None take the instruction's defaults (Schedule.__post_init__)
    sched = Schedule(block=tuple(args.block or (128, 128, 32)), warps=tuple(args.warps) if args.warps else None,
                     stages=3 if args.stages is None else args.stages, instruction=instruction_of(args),
                     smem_layout=args.smem_layout, raster=args.raster or "row",
                     group_m=8 if args.group_m is None else args.group_m,
                     frag_double_buffer=not args.no_frag_double_buffer,
                     epilogue_via_smem={"auto": None, "smem": True, "registers": False}[args.epilogue_via or "auto"],
                     split_k=1 if args.split_k is None else args.split_k, split_k_mode=args.split_k_mode or "workspace",
                     decomposition={None: "tiles", "hybrid": "stream-k", "pure": "stream-k-pure"}[args.stream_k],
                     sms=args.sms, swap_ab=bool(args.swap_ab), **options)
    return compile_kernel(gemm, sched, arch=args.arch)
