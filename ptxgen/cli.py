"""`ptxgen emit | info | run`: the problem and schedule as flags, every flag with a default."""
from __future__ import annotations

import argparse
import sys
from collections import Counter

from .check import compare, random_epilogue_operands, random_operands, random_scale, reference, unwritten
from .compile import compile as compile_kernel, describe_epilogue
from .errors import AssembleError, ScheduleError
from .kernel import Kernel
from .schedule.geometry import OperandTile, fragment_buffering, operand_tiles, register_estimate, staging_layout
from .schedule.problem import INPUT_DTYPES, INTEGER_DTYPES, LAYOUTS, OUTPUT_DTYPES, Epilogue, Gemm, instruction_name
from .schedule.schedule import INSTRUCTIONS, RASTERS, SMEM_LAYOUTS, Schedule
from .schedule.targets import TARGETS
from .schedule.streamk import stream_k_plan


#: CUTLASS-style letters: "t" stores a matrix row-major, "n" column-major; first A, then B.
LAYOUT_LETTERS = {f"{a}{b}": ({"t": "row", "n": "col"}[a], {"t": "row", "n": "col"}[b]) for a in "nt" for b in "nt"}


def _dims(text: str, count: int, what: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    if len(parts) != count or not all(p.isdigit() for p in parts):
        example = "x".join(["128", "128", "32"][:count]) if count != 3 or what != "shape" else "4096x4096x4096"
        raise argparse.ArgumentTypeError(f"{what} must be {count} positive integers joined by 'x', e.g. {example}")
    return tuple(int(p) for p in parts)


def _epilogue(text: str) -> Epilogue:
    fields: dict = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        key = {"act": "activation"}.get(key.strip(), key.strip())
        if key in ("alpha", "beta"):
            try:
                fields[key] = float(value)
            except ValueError:
                raise argparse.ArgumentTypeError(f"epilogue {key} must be a number, got {value!r}") from None
        elif key in ("bias", "scale", "activation"):
            fields[key] = value.strip() or None
        else:
            raise argparse.ArgumentTypeError(f"unknown epilogue field {key!r}: use bias=, scale=, act=, alpha=, beta=")
    return Epilogue(**fields)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    p = common.add_argument_group("problem")
    p.add_argument("--shape", default=None, type=lambda t: _dims(t, 3, "shape"),
                   help="MxNxK (default 4096x4096x4096; 256x256x128 for run)")
    p.add_argument("--dtype", default="f16", choices=INPUT_DTYPES, help="input dtype (default f16)")
    p.add_argument("--out", "--out-dtype", dest="out_dtype", default=None, choices=OUTPUT_DTYPES,
                   help="output dtype (default f32; s32 for s8/u8 inputs)")
    p.add_argument("--batch", default=1, type=int, help="independent GEMMs in one launch (default 1)")
    p.add_argument("--acc", default="f32", choices=("f32", "f16"), help="accumulator dtype (default f32)")
    p.add_argument("--epilogue", default=None, type=_epilogue,
                   help="fused epilogue, e.g. bias=col,act=relu,alpha=1,beta=0 (act: relu, gelu, silu); "
                        "scale=col/row multiplies by an f32 vector (with --dtype s8 --out s8: quantised output)")
    p.add_argument("--align", default=None, type=int,
                   help="byte alignment of pointers and leading dims: 16, 8, 4 or 2 (default: inferred)")
    p.add_argument("--layout", default=None, choices=tuple(LAYOUT_LETTERS),
                   help="A and B storage as BLAS letters, t = row-major, n = column-major (default tn)")
    p.add_argument("--a-layout", default="row", choices=LAYOUTS, help="A storage (default row)")
    p.add_argument("--b-layout", default="col", choices=LAYOUTS, help="B storage (default col)")
    s = common.add_argument_group("schedule")
    s.add_argument("--block", default=(128, 128, 32), type=lambda t: _dims(t, 3, "block"), help="BMxBNxBK")
    s.add_argument("--warps", default=None, type=lambda t: _dims(t, 2, "warps"),
                   help="WMxWN (default 2x2; 2x4 for wmma, whose f16 fragments hold each element twice)")
    s.add_argument("--stages", default=3, type=int, help="pipeline stages (default 3)")
    s.add_argument("--instruction", default="m16n8k16", choices=tuple(INSTRUCTIONS),
                   help="mma.sync m16n8k16 (default) or wmma m16n16k16")
    s.add_argument("--smem-layout", default=None, choices=SMEM_LAYOUTS,
                   help="default swizzle; pad for wmma, which cannot read a swizzled tile")
    s.add_argument("--raster", default="row", choices=RASTERS)
    s.add_argument("--group-m", default=8, type=int, help="m-tiles per group for --raster grouped")
    s.add_argument("--no-frag-double-buffer", action="store_true", help="load fragments just in time")
    s.add_argument("--epilogue-via", choices=("auto", "smem", "registers"), default="auto",
                   help="stage C through shared memory for 16-byte stores, or store from registers")
    s.add_argument("--split-k", type=int, default=1, help="CTAs sharing each output tile along K")
    s.add_argument("--split-k-mode", choices=("workspace", "atomic"), default="workspace")
    s.add_argument("--stream-k", nargs="?", const="hybrid", default=None, choices=("hybrid", "pure"),
                   help="persistent Stream-K grid: 'hybrid' (the default when given: whole-tile waves, "
                        "then a Stream-K wave) or 'pure' (every tile shared as MAC iterations)")
    s.add_argument("--sms", type=int, default=None,
                   help="persistent CTAs for --stream-k (default: the GPU's SM count, or the arch's)")
    s.add_argument("--arch", default="sm_80", choices=tuple(TARGETS))

    top = argparse.ArgumentParser(prog="ptxgen", description="Lower GEMM schedules straight to tensor-core PTX.")
    sub = top.add_subparsers(dest="command", required=True)
    e = sub.add_parser("emit", parents=[common], help="write the PTX")
    e.add_argument("-o", "--output", default="-", help="file to write (default stdout)")
    sub.add_parser("info", parents=[common], help="schedule summary, launch geometry, registers and spills")
    r = sub.add_parser("run", parents=[common], help="compile, execute (GPU or CPU simulator), compare with numpy")
    r.add_argument("--sim", action="store_true", help="use the CPU simulator even when a GPU is present")
    r.add_argument("--all-ctas", action="store_true", help="simulate every CTA, not a sample, on large grids")
    r.add_argument("--seed", default=0, type=int)
    return top


def _build(args: argparse.Namespace, default_shape: tuple[int, int, int]) -> Kernel:
    m, n, k = args.shape or default_shape
    a_layout, b_layout = LAYOUT_LETTERS[args.layout] if args.layout else (args.a_layout, args.b_layout)
    out_dtype = args.out_dtype or ("s32" if args.dtype in INTEGER_DTYPES else "f32")
    gemm = Gemm(m, n, k, dtype=args.dtype, out_dtype=out_dtype, a_layout=a_layout, b_layout=b_layout,
                align=args.align, acc_dtype=args.acc, epilogue=args.epilogue, batch=args.batch)
    wmma = args.instruction == "wmma"
    sched = Schedule(block=tuple(args.block), warps=tuple(args.warps or ((2, 4) if wmma else (2, 2))),
                     stages=args.stages, instruction=args.instruction,
                     smem_layout=args.smem_layout or ("pad" if wmma else "swizzle"), raster=args.raster,
                     group_m=args.group_m,
                     frag_double_buffer=not args.no_frag_double_buffer,
                     epilogue_via_smem={"auto": None, "smem": True, "registers": False}[args.epilogue_via],
                     split_k=args.split_k, split_k_mode=args.split_k_mode,
                     decomposition={None: "tiles", "hybrid": "stream-k", "pure": "stream-k-pure"}[args.stream_k],
                     sms=args.sms)
    return compile_kernel(gemm, sched, arch=args.arch)


def instruction_mix(k: Kernel) -> Counter:
    """Count of each instruction family in the kernel text (all copies, whole kernel)."""
    mix: Counter = Counter()
    for line in k.ptx.splitlines():
        op = line.strip().split(" ")[0]
        if op.startswith("@"):
            op = line.strip().split(" ")[1]
        for family in ("cp.async.cg", "ldmatrix", "mma.sync", "bar.sync", "st.global"):
            if op.startswith(family):
                mix[family] += 1
    return mix


def _fragment_source(tile: OperandTile, s: Schedule) -> str:
    """How mma fragments leave shared memory (scalar loads where ldmatrix cannot transpose)."""
    if s.instruction == "wmma":
        return "wmma.load"
    if not tile.scalar_fragments:
        return "ldmatrix"
    dim = "M" if tile.name == "A" else "N"
    how = "ld.shared.b32" if tile.elem_bytes == 4 else "ld.shared.u8 + prmt"
    return f"scalar {how} ({dim}-contiguous {8 * tile.elem_bytes}-bit elements)"


def describe(k: Kernel) -> list[str]:
    g, s = k.gemm, k.schedule
    a, b = operand_tiles(g, s)
    est = register_estimate(g, s)
    st = staging_layout(g, s)
    live = ", ".join(f"{c} {n}" for c, n in k.peak_live.items() if n)
    return [
        f"kernel     {k.entry} ({k.arch})",
        f"problem    {f'{g.batch} x ' if g.batch > 1 else ''}C[{g.m}x{g.n}] {g.out_dtype} = A[{g.m}x{g.k}] {g.dtype} {g.a_layout}-major "
        f"@ B[{g.k}x{g.n}] {g.dtype} {g.b_layout}-major, {g.accumulator} accumulation",
        f"schedule   block {s.bm}x{s.bn}x{s.bk}, warps {s.warps[0]}x{s.warps[1]} (warp tile "
        f"{s.warp_tile[0]}x{s.warp_tile[1]}), {instruction_name(g, s.instruction)}, stages {s.stages}, smem {s.smem_layout}, "
        f"raster {s.raster}, fragment double buffer {fragment_buffering(g, s)}",
        f"launch     grid {k.grid} x block {k.block} = {s.threads} threads/CTA, "
        f"{k.smem_bytes} B dynamic shared memory",
        f"copies     A {a.copies_per_thread} + B {b.copies_per_thread} x {a.copy_bytes} B per thread per k-tile"
        + ("" if a.copy_bytes == 16 else f" (align {g.alignment()}: {16 // a.copy_bytes}x the copy "
                                         "instructions of 16-byte copies)"),
        f"fragments  A {_fragment_source(a, s)}, B {_fragment_source(b, s)}",
        f"epilogue   {describe_epilogue(g)}; "
        + (f"staged through shared memory ({st.chunk_elems * g.out_bytes} B stores)" if st else
           "stored from registers")
        + (f"; split-K {s.split_k} ({s.split_k_mode})" if s.split_k > 1 else ""),
        *([stream_k_summary(k)] if s.stream_k else []),
        f"registers  estimate {est['total']}/thread ({est['accumulators']} accumulators); "
        f"ptxgen peak live: {live}",
    ]


def stream_k_summary(k: Kernel) -> str:
    p = stream_k_plan(k.gemm, k.schedule, k.grid[0])
    units = [p.units(c) for c in range(p.ctas)]
    split = sum(1 for c in range(p.ctas) for u in units[c] if u.tile >= p.dp_tiles and not u.whole)
    busiest = max(sum(u.k_count for u in us) for us in units)
    return (f"stream-k   {k.schedule.decomposition}: {p.tiles} tiles x {p.iters_per_tile} k-tiles over "
            f"{p.ctas} CTAs: {p.dp_tiles} whole tiles in data-parallel waves, {p.sk_tiles} tiles as "
            f"{p.sk_iters} Stream-K iterations ({split} partial units); busiest CTA runs {busiest} k-tiles"
            + ("" if k.schedule.sms else " (GPU launches use the device's SM count)"))


def _resources(k: Kernel) -> str:
    r = k.resources
    asm = k.assemble().assembler
    line = (f"assembled  {asm}: {r.registers} registers/thread, {r.spill_store_bytes} B spill stores, "
            f"{r.spill_load_bytes} B spill loads, {r.stack_bytes} B stack, {r.shared_bytes} B static shared")
    if r.spill_bytes:  # correct, but every spill is a local-memory round trip inside the k-loop
        line += ("\nwarning    the assembler spilled registers to local memory, which slows the k-loop: use "
                 "more warps (a smaller warp tile), a smaller block k, or frag_double_buffer=False")
    return line


def _bank_summary(k: Kernel, wavefronts: dict[int, tuple[int, int]]) -> list[str]:
    lines = k.ptx.splitlines()
    by_kind: dict[str, list[int]] = {}
    for line_no, (w, ideal) in wavefronts.items():
        text = lines[line_no - 1].strip().lstrip("@!%p0123456789 ")
        parts = text.split(" ")[0].split(".")
        kind = ".".join(parts[:2])  # ldmatrix.sync, cp.async, st.shared, ld.shared, wmma.load ...
        kind = {"ldmatrix.sync": "ldmatrix"}.get(kind, kind)
        tot = by_kind.setdefault(kind, [0, 0])
        tot[0] += w
        tot[1] += ideal
    out = []
    for kind, (w, ideal) in sorted(by_kind.items()):
        extra = w - ideal
        out.append(f"  {kind:<12} {w} wavefronts, ideal {ideal}: "
                   + ("conflict-free" if extra == 0 else f"{extra} extra ({w / ideal:.2f}x)"))
    return out or ["  no shared-memory accesses"]


def cmd_run(args: argparse.Namespace) -> int:
    from .runtime.driver import gpu_available, gpu_unavailable_reason
    from .simulate import covered, run_simulation, sample_ctas

    k = _build(args, (256, 256, 128))
    print("\n".join(describe(k)))
    print(_resources(k))
    a, b = random_operands(k.gemm, seed=args.seed)
    c0, bias = random_epilogue_operands(k.gemm, seed=args.seed + 1)
    scale = random_scale(k.gemm, seed=args.seed + 2)
    ref = reference(a, b, k.gemm.epilogue, c0, bias, scale)
    if gpu_available() and not args.sim:
        c = k(a, b, c=None if c0 is None else c0.copy(), bias=bias, scale=scale)
        result = compare(c, ref, k.gemm)
        from .runtime import simdriver

        where = "through the simulator-backed driver (PTXGEN_DRIVER=sim)" if simdriver.active() else "on the GPU"
        print(f"executed   {where}, every CTA; runs {k.resources.binary}")
        print(result)
        return 0 if result.ok else 1
    why = "requested with --sim" if args.sim else f"no GPU: {gpu_unavailable_reason()}"
    why = why if len(why) <= 90 else why[:87] + "..."
    ctas = None if args.all_ctas else sample_ctas(k)
    c, res = run_simulation(k, a, b, ctas=ctas, c=None if c0 is None else c0.copy(), bias=bias, scale=scale)
    mask = covered(k, ctas)
    total = k.grid[0] * k.grid[1] * k.grid[2]
    scope = "every CTA" if ctas is None else f"{len(ctas)} of {total} CTAs {ctas}"
    print(f"executed   on the CPU simulator ({why}): {scope}, {res.instructions} thread-instructions")
    # Elements outside the simulated tiles must keep their value: the poison, or C's own (beta != 0).
    kept = unwritten(c) if c0 is None else (c == c0)
    strays = int((~mask & ~kept).sum())
    result = compare(c[mask], ref[mask], k.gemm)
    print(result)
    if strays:
        print(f"FAIL: {strays} elements outside the simulated CTAs' tiles were written")
    print("shared-memory bank conflicts:")
    print("\n".join(_bank_summary(k, res.smem_wavefronts)))
    return 0 if result.ok and not strays else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "emit":
            k = _build(args, (4096, 4096, 4096))
            if args.output == "-":
                sys.stdout.write(k.ptx)
            else:
                with open(args.output, "w") as f:
                    f.write(k.ptx)
                print(f"wrote {len(k.ptx.splitlines())} lines of PTX for {k.entry} to {args.output}", file=sys.stderr)
            return 0
        if args.command == "info":
            k = _build(args, (4096, 4096, 4096))
            print("\n".join(describe(k)))
            print(_resources(k))
            return 0
        return cmd_run(args)
    except ScheduleError as e:
        print(f"ptxgen: invalid schedule: {e}", file=sys.stderr)
        return 2
    except AssembleError as e:
        print(f"ptxgen: assembly failed: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, TypeError) as e:
        print(f"ptxgen: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
