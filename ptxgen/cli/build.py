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
from ..schedule.schedule import Schedule

#: CUTLASS-style letters: "t" stores a matrix row-major, "n" column-major; first A, then B.
LAYOUT_LETTERS = {f"{a}{b}": ({"t": "row", "n": "col"}[a], {"t": "row", "n": "col"}[b]) for a in "nt" for b in "nt"}

#: The argparse names of the schedule flags: when none is given, the cost model chooses the schedule.
SCHEDULE_FLAGS = ("block", "warps", "stages", "instruction", "smem_layout", "raster", "group_m",
                  "no_frag_double_buffer", "epilogue_via", "split_k", "split_k_mode", "stream_k", "sms", "swap_ab",
                  "consumers", "warp_specialized", "persistent", "cluster", "swizzle")
#: The Hopper schedule flags (argparse name -> flag as typed), which only --instruction wgmma takes.
HOPPER_FLAGS = {"consumers": "--consumers", "warp_specialized": "--warp-specialized/--no-warp-specialized",
                "persistent": "--persistent/--no-persistent", "cluster": "--cluster", "swizzle": "--swizzle"}


class UsageError(Exception):
    """Flags that contradict each other or ask for something impossible (exit status 2)."""


#: Schedule field -> the argparse name of the flag that sets it (None there: not typed).
FIELD_ARGS = {"block": "block", "warps": "warps", "stages": "stages", "instruction": "instruction",
              "smem_layout": "smem_layout", "raster": "raster", "group_m": "group_m",
              "frag_double_buffer": "no_frag_double_buffer", "epilogue_via_smem": "epilogue_via",
              "split_k": "split_k", "split_k_mode": "split_k_mode", "decomposition": "stream_k", "sms": "sms",
              **{name: name for name in HOPPER_FLAGS}}


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
    if args.sms is not None and args.stream_k is None and not has_persistent_grid(args.instruction):
        raise UsageError(f"--sms {args.sms} has no effect without --stream-k: add --stream-k, or drop --sms")


def has_persistent_grid(instruction: str | None) -> bool:
    """Whether the instruction's target walks tiles on a persistent grid of its own (its options
    have `persistent`), which --sms sizes without --stream-k."""
    options = options_class(instruction)
    return options is not None and "persistent" in {f.name for f in dataclasses.fields(options)}


def layouts(args: argparse.Namespace) -> tuple[str, str]:
    """(A layout, B layout) from --layout and --a-layout/--b-layout, which must agree."""
    if args.layout is None:
        return args.a_layout or "row", args.b_layout or "col"
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


def hopper_fields(args: argparse.Namespace) -> dict:
    """The Schedule's Hopper fields the flags give (None ones left out, so its defaults apply);
    a UsageError when they are given without --instruction wgmma, which alone reads them."""
    given = {name: getattr(args, name) for name in HOPPER_FLAGS if getattr(args, name) is not None}
    if given and args.instruction != "wgmma":
        flags = ", ".join(HOPPER_FLAGS[name] for name in given)
        raise UsageError(f"{flags} only apply to --instruction wgmma (--arch sm_90a), not --instruction "
                         f"{args.instruction or 'm16n8k16 (the default)'}: add --instruction wgmma --arch sm_90a, "
                         f"or drop {flags}")
    return {name: tuple(v) if name == "cluster" else v for name, v in given.items()}


def build(args: argparse.Namespace, default_shape: tuple[int, int, int]) -> Kernel:
    """The kernel the flags describe. A ScheduleError about a schedule field the user did not type
    (a default) carries `typed_flags`, so the CLI blames what was typed (`flags.schedule_error_text`)."""
    refuse_flags_without_effect(args)
    gemm = problem(args, default_shape)
    hopper = hopper_fields(args)
    try:
        return _build(args, gemm, hopper)
    except ScheduleError as e:
        e.layout_letters = args.layout
        field = e.field.split(".")[1] if e.field.startswith("schedule.") else None
        typed = typed_schedule_flags(args)
        if field in FIELD_ARGS and getattr(args, FIELD_ARGS[field], None) is None and typed:
            e.typed_flags = typed
        raise


def _build(args: argparse.Namespace, gemm: Gemm, hopper: dict) -> Kernel:
    if all(getattr(args, flag) is None for flag in SCHEDULE_FLAGS):
        return compile_kernel(gemm, None, arch=args.arch)
    # warps and smem_layout left None take the instruction's defaults (Schedule.__post_init__)
    sched = Schedule(block=tuple(args.block or (128, 128, 32)), warps=tuple(args.warps) if args.warps else None,
                     stages=3 if args.stages is None else args.stages, instruction=args.instruction or "m16n8k16",
                     smem_layout=args.smem_layout, raster=args.raster or "row",
                     group_m=8 if args.group_m is None else args.group_m,
                     frag_double_buffer=not args.no_frag_double_buffer,
                     epilogue_via_smem={"auto": None, "smem": True, "registers": False}[args.epilogue_via or "auto"],
                     split_k=1 if args.split_k is None else args.split_k, split_k_mode=args.split_k_mode or "workspace",
                     decomposition={None: "tiles", "hybrid": "stream-k", "pure": "stream-k-pure"}[args.stream_k],
                     sms=args.sms, swap_ab=bool(args.swap_ab), **hopper)
    return compile_kernel(gemm, sched, arch=args.arch)
