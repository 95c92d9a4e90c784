"""The problem and schedule the command line's flags describe, and the kernel they build (shared by
`emit`, `info`, `run` and `tune`)."""
from __future__ import annotations

import argparse

from .. import compile as compile_kernel
from ..kernel import Kernel
from ..schedule.problem import INTEGER_DTYPES, Gemm
from ..schedule.schedule import Schedule

#: CUTLASS-style letters: "t" stores a matrix row-major, "n" column-major; first A, then B.
LAYOUT_LETTERS = {f"{a}{b}": ({"t": "row", "n": "col"}[a], {"t": "row", "n": "col"}[b]) for a in "nt" for b in "nt"}

#: The argparse names of the schedule flags: when none is given, the cost model chooses the schedule.
SCHEDULE_FLAGS = ("block", "warps", "stages", "instruction", "smem_layout", "raster", "group_m",
                  "no_frag_double_buffer", "epilogue_via", "split_k", "split_k_mode", "stream_k", "sms",
                  "consumers", "warp_specialized", "persistent", "cluster", "swizzle")
#: The Hopper schedule flags (argparse name -> flag as typed), which only --instruction wgmma takes.
HOPPER_FLAGS = {"consumers": "--consumers", "warp_specialized": "--warp-specialized/--no-warp-specialized",
                "persistent": "--persistent/--no-persistent", "cluster": "--cluster", "swizzle": "--swizzle"}


class UsageError(Exception):
    """Flags that contradict each other or ask for something impossible (exit status 2)."""


def layouts(args: argparse.Namespace) -> tuple[str, str]:
    """(A layout, B layout) from --layout and --a-layout/--b-layout, which must agree."""
    if args.layout is None:
        return args.a_layout or "row", args.b_layout or "col"
    a, b = LAYOUT_LETTERS[args.layout]
    for name, given, implied in (("--a-layout", args.a_layout, a), ("--b-layout", args.b_layout, b)):
        if given is not None and given != implied:
            raise UsageError(f"--layout {args.layout} stores {name[2].upper()} {implied}-major, but {name} {given} "
                             f"says {given}-major: give --layout or {name}, not both")
    return a, b


def problem(args: argparse.Namespace, default_shape: tuple[int, int, int]) -> Gemm:
    """The Gemm the problem flags describe."""
    m, n, k = args.shape or default_shape
    a_layout, b_layout = layouts(args)
    out_dtype = args.out_dtype or ("s32" if args.dtype in INTEGER_DTYPES else "f32")
    return Gemm(m, n, k, dtype=args.dtype, out_dtype=out_dtype, a_layout=a_layout, b_layout=b_layout,
                align=args.align, acc_dtype=args.acc, epilogue=args.epilogue, batch=args.batch,
                bias_dtype=args.bias_dtype)


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
    gemm = problem(args, default_shape)
    hopper = hopper_fields(args)
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
                     sms=args.sms, **hopper)
    return compile_kernel(gemm, sched, arch=args.arch)
