"""`ptxgen emit | info | run | tune`: the problem and schedule as flags, every flag with a default.

The CLI never shows a traceback: every failure a user can cause gets its own one-line message with
the fix (`main`), flags are named as typed (`flags.flag_text`), and anything unexpected is one
line asking for a report (PTXGEN_DEBUG=1 shows the traceback).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

from ..version import __version__
from .build import (BLACKWELL_FLAGS, HOPPER_FLAGS, LAYOUT_LETTERS, SCHEDULE_FLAGS,  # noqa: F401
                    TARGET_FLAGS, UsageError, build, hopper_fields, layouts, problem, target_fields)
from .flags import Parser, block_scale, dims, epilogue, flag_text, join_negative_values, non_negative, positive, schedule_error_text
from .run import cmd_run
from .wrap import WIDTH, WrappingWriter
from .tune import cmd_tune
from .report import bank_summary, describe, instruction_mix, resources_line, stream_k_summary  # noqa: F401
from ..errors import AssembleError, LoweringNotBuilt, ScheduleError
from ..schedule.grouping import GROUPINGS
from ..schedule.problem import INPUT_DTYPES, LAYOUTS, OUTPUT_DTYPES
from ..schedule.schedule import INSTRUCTIONS, RASTERS, SMEM_LAYOUTS
from ..schedule.targets import TARGETS
from ..targets.sm100.options import TILE_SCHEDULERS

#: Set to 1 to see the traceback of an unexpected error (a bug to report).
DEBUG_ENV = "PTXGEN_DEBUG"
_resources = resources_line  # the name tests and older scripts use


def _parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    p = common.add_argument_group("problem")
    p.add_argument("--shape", default=None, type=lambda t: dims(t, 3, "shape"),
                   help="MxNxK (default 4096x4096x4096 for emit and info; 256x256x128 for run)")
    p.add_argument("--dtype", default="f16", choices=INPUT_DTYPES,
                   help="input dtype (default f16; e4m3/e5m2 are fp8, which only the sm_90a wgmma path takes)")
    p.add_argument("--out", "--out-dtype", dest="out_dtype", default=None, choices=OUTPUT_DTYPES,
                   help="output dtype (default f32; s32 for s8/u8 inputs)")
    p.add_argument("--batch", default=1, type=int, help="independent GEMMs in one launch (default 1)")
    p.add_argument("--groups", default=1, type=positive("--groups"),
                   help="grouped GEMM (mixture-of-experts): G products with one weight each (default 1); "
                        "needs --grouping")
    p.add_argument("--grouping", default=None, choices=GROUPINGS,
                   help="how the --groups split the problem: contiguous (A's rows; --shape's M = M_total, offs "
                        "of cumulative row ends), masked (M = max_m rows per group, masked_m valid rows) or "
                        "k-contiguous (K; --shape's K = K_total, offs of cumulative ends along K, C (G, M, N): "
                        "weight gradients; A column-major, B row-major by default); `run` draws random sizes, "
                        "empty groups included (default none: not grouped)")
    p.add_argument("--acc", default="f32", choices=("f32", "f16"), help="accumulator dtype (default f32)")
    p.add_argument("--fast-accum", action="store_true", default=False,
                   help="fp8 on sm_90a's wgmma only: accumulate every k-tile in the wgmma itself (faster, less "
                        "accurate at large K) instead of promoting each 128 of K into a separate f32 accumulator "
                        "(the default)")
    p.add_argument("--block-scale", default=None, type=block_scale, metavar="1x128,128x128[,ue8m0]",
                   help="block-scaled fp8 (DeepSeek-V3 style; e4m3/e5m2 on sm_90a's wgmma): one scale per 1x128 "
                        "block of A and per 128x128 block of B, f32 or ue8m0 (power-of-two); on sm_100a's tcgen05 "
                        "MXFP8/MXFP4 1x32,32x1,ue8m0 and NVFP4 (--dtype e2m1) 1x16,16x1,ue4m3; run draws random "
                        "never-zero scales (default: none, no block scaling)")
    p.add_argument("--epilogue", default=None, type=epilogue,
                   help="fused epilogue as comma-separated fields, e.g. bias=col,act=relu,alpha=1,beta=0: "
                        "bias=col|row adds a vector, scale=col|row multiplies by an f32 vector (with --dtype s8 "
                        "--out s8: quantised output), act=relu|gelu|silu; every field needs its value "
                        "(default none: C = A @ B)")
    p.add_argument("--bias-dtype", default="f32", choices=("f32", "f16", "bf16"),
                   help="dtype of the --epilogue bias vector: f32 for any output, or the f16/bf16 output's "
                        "(default f32)")
    p.add_argument("--align", default=None, type=int,
                   help="byte alignment of pointers and leading dims: 16, 8, 4, 2, or 1 for s8/u8 (default: inferred)")
    p.add_argument("--layout", default=None, choices=tuple(LAYOUT_LETTERS),
                   help="A and B storage as BLAS letters, t = row-major, n = column-major (default tn); "
                        "cannot contradict --a-layout/--b-layout")
    p.add_argument("--a-layout", default=None, choices=LAYOUTS, help="A storage (default row, col for --grouping k-contiguous, or from --layout)")
    p.add_argument("--b-layout", default=None, choices=LAYOUTS, help="B storage (default col, row for --grouping k-contiguous, or from --layout)")
    s = common.add_argument_group(
        "schedule", "Without any of these flags (--arch aside) the cost model chooses the schedule for the "
                    "shape and arch (`info` says why); with any of them, the others take the defaults shown.")
    s.add_argument("--block", default=None, type=lambda t: dims(t, 3, "block"),
                   help="BMxBNxBK (default: chosen; 128x128x32 with other schedule flags)")
    s.add_argument("--warps", default=None, type=lambda t: dims(t, 2, "warps"),
                   help="WMxWN (default: chosen; 2x2 with other schedule flags, 2x4 for wmma, whose f16 "
                        "fragments hold each element twice)")
    s.add_argument("--stages", default=None, type=int,
                   help="pipeline stages (default: chosen; 3 with other schedule flags)")
    s.add_argument("--instruction", default=None, choices=tuple(INSTRUCTIONS),
                   help="mma.sync m16n8k16, wmma m16n16k16, wgmma (--arch sm_90a: TMA, mbarrier ring, "
                        "warp-specialised persistent kernel) or tcgen05 (--arch sm_100a); default: the arch's own "
                        "(wgmma on sm_90a, tcgen05 on sm_100a, else m16n8k16)")
    s.add_argument("--smem-layout", default=None, choices=SMEM_LAYOUTS,
                   help="shared-memory tile layout (default swizzle; pad for wmma, which cannot read a swizzled tile)")
    s.add_argument("--raster", default=None, choices=RASTERS,
                   help="CTA order over output tiles (default: chosen; row with other schedule flags)")
    s.add_argument("--group-m", default=None, type=int, help="m-tiles per group for --raster grouped (default 8)")
    s.add_argument("--no-frag-double-buffer", action="store_true", default=None,
                   help="load fragments just in time (default: double-buffer them)")
    s.add_argument("--epilogue-via", choices=("auto", "smem", "registers"), default=None,
                   help="stage C through shared memory for 16-byte stores, or store from registers (default auto)")
    s.add_argument("--split-k", type=int, default=None,
                   help="CTAs sharing each output tile along K (default: chosen; 1 with other schedule flags)")
    s.add_argument("--split-k-mode", choices=("workspace", "atomic"), default=None,
                   help="how split-K partial sums meet (default workspace: deterministic)")
    s.add_argument("--stream-k", nargs="?", const="hybrid", default=None, choices=("hybrid", "pure"),
                   help="persistent Stream-K grid: 'hybrid' (the default when given: whole-tile waves, "
                        "then a Stream-K wave) or 'pure' (every tile shared as MAC iterations) "
                        "(default: chosen; not given with other schedule flags: one CTA per tile)")
    s.add_argument("--sms", type=int, default=None,
                   help="persistent CTAs for --stream-k (default: the GPU's SM count, or the arch's)")
    s.add_argument("--swap-ab", action="store_true", default=None,
                   help="decode (small M): compute C^T = B^T A^T so N fills the MMA's M side, C stored "
                        "transposed (default: chosen for M <= 64)")
    h = common.add_argument_group(
        "hopper", "Only with --instruction wgmma (--arch sm_90a), --cluster with tcgen05 too; left out, the "
                  "Schedule's defaults apply (warp-specialised, persistent).")
    h.add_argument("--consumers", default=None, type=int, choices=(1, 2),
                   help="consumer warpgroups, each owning BM/consumers rows (default 2 when BM is a multiple "
                        "of 128, else 1)")
    h.add_argument("--warp-specialized", action=argparse.BooleanOptionalAction, default=None,
                   help="a producer warpgroup issues the TMA copies while the consumers multiply (default "
                        "on; off: the consumers issue them, one tile per CTA)")
    h.add_argument("--persistent", action=argparse.BooleanOptionalAction, default=None,
                   help="one CTA per SM walks the output tiles (default on; needs --warp-specialized)")
    h.add_argument("--cluster", default=None, type=lambda t: dims(t, 2, "cluster"),
                   help="CMxCN CTAs per thread-block cluster, for wgmma and tcgen05 (default 1x1, and 2x1 with "
                        "--cta-group 2: the pair is the cluster; larger ones with TMA multicast of the shared "
                        "operand, on wgmma's warp-specialised persistent kernel)")
    h.add_argument("--swizzle", default=None, type=int, choices=(128, 64, 32),
                   help="TMA box and wgmma descriptor swizzle in bytes (default: the widest the tiles allow)")
    bw = common.add_argument_group(
        "blackwell", "Only with --instruction tcgen05 (--arch sm_100a), with --cluster above; left out, the "
                     "Schedule's defaults apply (one CTA per MMA, static persistent walk).")
    bw.add_argument("--cta-group", default=None, type=int, choices=(1, 2),
                    help="CTAs sharing one tcgen05.mma: 1, or 2 for a CTA pair whose leader issues the MMA over "
                         "both CTAs' halves (--block's BM is then the pair's M; default 1)")
    bw.add_argument("--tile-scheduler", default=None, choices=TILE_SCHEDULERS,
                    help="how the persistent CTAs get their output tiles: static (min(tiles, SMs) CTAs, each "
                         "walking every grid-th tile) or clc (one CTA per tile, a running CTA takes the next by "
                         "cluster launch control's try_cancel; single-CTA clusters only) (default static)")
    s.add_argument("--arch", default="sm_80", choices=tuple(TARGETS), help="target architecture (default sm_80)")
    common.add_argument("--wide", action="store_true",
                        help=f"print report lines whole (default: wrapped at {WIDTH} characters; PTXGEN_WIDE=1 too)")

    top = Parser(prog="ptxgen", description="Lower GEMM schedules straight to tensor-core PTX.")
    top.add_argument("--version", action="version", version=f"ptxgen {__version__}",
                     help="print the version and exit")
    sub = top.add_subparsers(dest="command", required=True)
    e = sub.add_parser("emit", parents=[common], help="write the PTX")
    e.add_argument("-o", "--output", default="-", help="file to write (default stdout)")
    sub.add_parser("info", parents=[common], help="schedule summary, launch geometry, occupancy, registers and spills")
    r = sub.add_parser("run", parents=[common], help="compile, execute (GPU or CPU simulator), compare with numpy")
    r.add_argument("--sim", action="store_true", help="use the CPU simulator even when a GPU is present "
                                                      "(default: the GPU if there is one)")
    r.add_argument("--all-ctas", action="store_true",
                   help="simulate every CTA, not a sample, on large grids (default: a sample of "
                        "corner and interior tiles when the grid has more than 16 CTAs)")
    r.add_argument("--seed", default=0, type=non_negative("--seed"), help="random seed of the operands (default 0)")
    r.add_argument("--trace", metavar="JSON", default=None,
                   help="write the simulated CTAs' per-warp timeline as Chrome trace-event JSON (open it in "
                        "ui.perfetto.dev); implies --sim (default: none written)")
    r.add_argument("--trace-png", metavar="PNG", default=None,
                   help="draw the first traced CTA's (or cluster's) timeline as a Gantt chart (needs matplotlib: "
                        "pip install -e \".[plot]\"); implies --sim (default: none drawn)")
    r.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="simulator progress bar on stderr (default auto: when stderr is a terminal)")
    r.add_argument("--workers", default=1, type=positive("--workers"),
                   help="spread the simulated CTAs over N local processes (default 1: this process); "
                        "the result is bit-identical")
    r.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="spread the simulated CTAs over a Ray cluster (needs pip install -e \".[cluster]\"): "
                        "ADDRESS of `ray start --head` (host:6379, or auto), or none for a local instance "
                        "(default: no Ray)")
    t = sub.add_parser("tune", parents=[common],
                       help="rank the legal schedules by the cost model, measure the best on the GPU, cache the winner")
    t.add_argument("--top", default=8, type=positive("--top"),
                   help="candidates measured, best predicted first (default 8)")
    t.add_argument("--repeats", default=20, type=positive("--repeats"),
                   help="timed launches per candidate; the median is kept (default 20)")
    t.add_argument("--warmup", default=3, type=non_negative("--warmup"),
                   help="untimed launches before timing each candidate (default 3)")
    t.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="measure on the GPUs of a Ray cluster, one candidate per GPU at a time (needs pip install "
                        "-e \".[cluster]\"): ADDRESS of `ray start --head` (host:6379, or auto), or none for a "
                        "local instance (default: this machine's GPU)")
    t.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress bar on stderr while measuring (default auto: when stderr is a terminal)")
    t.add_argument("--no-save", action="store_true", help="do not write the winner to the tuning cache")
    return top


_build = build


def writable_output(path: str) -> None:
    """Refuse an -o path whose folder is missing or not writable before compiling, with the fix."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"-o {path}: the folder {folder} does not exist: create it (mkdir -p {folder}) or "
                         "write somewhere else")
    if os.path.isdir(path):
        raise UsageError(f"-o {path} is a folder: name a file in it, e.g. -o {os.path.join(path, 'kernel.ptx')}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"-o {path}: the folder {folder} is not writable: write somewhere else, e.g. "
                         f"-o {os.path.join(os.path.expanduser('~'), os.path.basename(path))}")


def cmd_emit(args: argparse.Namespace) -> int:
    if args.output != "-":
        writable_output(args.output)
    k = build(args, (4096, 4096, 4096))
    if args.output == "-":
        sys.stdout.write(k.ptx)
    else:
        with open(args.output, "w") as f:
            f.write(k.ptx)
        print(f"wrote {len(k.ptx.splitlines())} lines of PTX for {k.entry} to {args.output}", file=sys.stderr)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from .report import occupancy_lines

    k = build(args, (4096, 4096, 4096))
    print("\n".join(describe(k)))
    print(resources_line(k))
    print("\n".join(occupancy_lines(k)))
    return 0


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one `ptxgen: warning:` line with flag names, not Python's file:line form."""
    print(f"ptxgen: warning: {flag_text(str(message))}", file=sys.stderr)


def _fail(message: str, status: int) -> int:
    print(f"ptxgen: {message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    from ..runtime.assemble import AssemblerNotFound
    from ..scaleout import WorkerLost
    from ..sim.errors import HazardError
    from ..scaleout.simulate import OverlappingWrites

    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            args = _parser().parse_args(join_negative_values(sys.argv[1:] if argv is None else list(argv)))
            if args.command == "emit":
                return cmd_emit(args)
            if not (args.wide or os.environ.get("PTXGEN_WIDE") == "1"):
                sys.stdout = WrappingWriter(sys.stdout)
            if args.command == "info":
                return cmd_info(args)
            if args.command == "tune":
                return cmd_tune(args)
            return cmd_run(args)
    except KeyboardInterrupt:
        return _fail("interrupted (Ctrl-C); nothing was checked", 130)
    except UsageError as e:
        return _fail(str(e), 2)
    except LoweringNotBuilt as e:  # a legal schedule ptxgen cannot lower yet (sm_90a)
        return _fail("not built yet: " + schedule_error_text(e).split(": ", 1)[1], 2)
    except ScheduleError as e:  # "invalid problem: ..." or "invalid schedule: ..."
        return _fail(schedule_error_text(e), 2)
    except AssembleError as e:
        return _fail(f"assembly failed: {e}", 1)
    except AssemblerNotFound as e:
        forced = os.environ.get("PTXGEN_ASSEMBLER")
        hint = (f"\nPTXGEN_ASSEMBLER={forced!r} in the environment picks the assembler: set it to nvjitlink, "
                "ptxas or auto, or unset it" if forced else "")
        return _fail(f"cannot assemble: {e}{hint}", 2)
    except MemoryError:
        return _fail("out of host memory: the operands, C and the reference do not fit. Fix: a smaller "
                     "--shape (or --batch); the simulator samples tiles, but C is allocated whole", 1)
    except (HazardError, OverlappingWrites) as e:
        hint = ("\n--trace run.json (or --trace-png run.png) shows what every warp did up to the stop and "
                "names each waiting warp's last events" if getattr(e, "kind", "") == "deadlock"
                and getattr(args, "trace", None) is None else "")
        return _fail(f"the simulator stopped the kernel: {e}\nThis is a bug in the generated code: please "
                     f"report it as a ptxgen issue, with the command line{hint}", 1)
    except ImportError as e:  # an optional extra (Ray) that is not installed: the message names it
        return _fail(str(e), 2)
    except WorkerLost as e:
        return _fail(str(e), 1)
    except BrokenPipeError:  # the reader of stdout stopped early (`ptxgen emit | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 141                             # what a shell reports for a writer stopped by SIGPIPE
    except (OSError, ValueError, TypeError) as e:
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        return _fail(flag_text(str(e)), 2)
    except Exception as e:  # anything else is a bug: one line, and the traceback on request
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        return _fail(f"internal error: {type(e).__name__}: {e}\nThis is a bug: please report it as a "
                     f"ptxgen issue, with the command line (run with {DEBUG_ENV}=1 for the traceback)", 3)
    finally:
        if isinstance(sys.stdout, WrappingWriter):
            sys.stdout.flush()
            sys.stdout = sys.stdout.out


if __name__ == "__main__":
    sys.exit(main())
