"""`ptxgen run`: compile, execute on the GPU or the CPU simulator, and compare with numpy."""
from __future__ import annotations

import argparse

from .check import compare, random_epilogue_operands, random_operands, random_scale, reference, unwritten
from .cli import build
from .cli_report import bank_summary, describe, resources_line


def cmd_run(args: argparse.Namespace) -> int:
    from .runtime.driver import gpu_available, gpu_unavailable_reason
    from .simulate import covered, run_simulation, sample_ctas

    k = build(args, (256, 256, 128))
    print("\n".join(describe(k)))
    print(resources_line(k))
    a, b = random_operands(k.gemm, seed=args.seed)
    c0, bias = random_epilogue_operands(k.gemm, seed=args.seed + 1)
    scale = random_scale(k.gemm, seed=args.seed + 2)
    ref = reference(a, b, k.gemm.epilogue, c0, bias, scale)
    if gpu_available() and not args.sim:
        c = k(a, b, c=None if c0 is None else c0.copy(), bias=bias, scale=scale)
        result = compare(c, ref, k.gemm)
        print("executed   on the GPU, every CTA")
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
    print("\n".join(bank_summary(k, res.smem_wavefronts)))
    return 0 if result.ok and not strays else 1

