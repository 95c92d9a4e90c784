"""The one compile -> simulate -> compare path of the correctness tests.

Every correctness test judges a kernel the same way, so a weaker oracle cannot creep into one
file: random never-zero operands (`check.random_operands`, plus the epilogue's C, bias and scale),
an output poisoned before the run (`check.poisoned`; 8-bit outputs run once per poison value, as
no byte value is unwritable), the run on ptxgen's simulator, and every element compared with the
float64 reference (`check.compare` against `check.reference`). Tests that plant a bug use the same
path with `run(...)` and assert the comparison fails.
"""
from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass
from typing import Callable

import numpy as np

import ptxgen
from ptxgen import Gemm, Kernel, Schedule
from ptxgen.check import (BYTE_POISON, Comparison, compare, magnitude, poisoned, random_epilogue_operands,
                          random_operands, random_scale, reference, unwritten)
from ptxgen.schedule.problem import QUANTIZED_DTYPES
from ptxgen.simulate import covered


@dataclass(frozen=True)
class Operands:
    """What a kernel reads: A and B in the gemm's layouts, and the epilogue's C, bias and scale
    (None where the epilogue has none)."""
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray | None = None
    bias: np.ndarray | None = None
    scale: np.ndarray | None = None


def operands(g: Gemm, seed: int = 0) -> Operands:
    """Random never-zero operands for `g`: A and B from `seed`, C and bias from seed + 1, the scale
    from seed + 2 (the seeds `check.random_epilogue_operands` and `check.random_scale` default to
    for seed 0)."""
    a, b = random_operands(g, seed)
    c, bias = random_epilogue_operands(g, seed + 1)
    return Operands(a, b, c, bias, random_scale(g, seed + 2))


@dataclass(frozen=True)
class Checked:
    """One judged run: the kernel, what it read, the C it wrote, the reference and the verdict."""
    kernel: Kernel
    ops: Operands
    out: np.ndarray
    ref: np.ndarray
    result: Comparison

    @property
    def ok(self) -> bool:
        return self.result.ok

    def explain(self) -> str:
        k = self.kernel
        return f"{self.result}\n  gemm: {k.gemm}\n  schedule: {k.schedule}\n  arch: {k.arch}"


def judge(g: Gemm, out: np.ndarray, ops: Operands, mask: np.ndarray | None = None,
          bound: bool = True) -> tuple[np.ndarray, Comparison]:
    """(reference, comparison) of `out` with the float64 reference, element by element.

    `bound`: each element's error bound is gamma(K) times the size of its terms (`check.magnitude`,
    the worst case of a K-long sum), else the statistical one from the reference's RMS
    (`check.accumulation_error`). `mask`: only those elements (the tiles sampled CTAs own)."""
    ref = reference(ops.a, ops.b, g.epilogue, ops.c, ops.bias, ops.scale)
    size = (magnitude(ops.a, ops.b, g.epilogue, ops.c, ops.bias, ops.scale)
            if bound and g.out_dtype not in QUANTIZED_DTYPES else None)
    if mask is None:
        return ref, compare(out, ref, g, bound=size)
    return ref, compare(np.asarray(out)[mask], ref[mask], g, bound=None if size is None else size[mask])


def fresh_output(g: Gemm, ops: Operands, variant: int = 0) -> np.ndarray:
    """C for one run: poisoned (`variant` picks the 8-bit poison), with the gemm's ldc, holding
    the epilogue's C where beta != 0 (a copy: the operand itself is not written)."""
    lead = (g.batch,) if g.batch > 1 else ()
    out = poisoned(lead + (g.m, g.leading_dims()[2]), g.out_dtype, variant)[..., :g.n]
    if ops.c is not None:
        out[...] = ops.c
    return out


def run(subject: Kernel | Gemm, schedule: Schedule | None = None, arch: str = "sm_80", *, seed: int = 0,
        ops: Operands | None = None, ctas: list[tuple[int, int, int]] | None = None, workers: int | str = 1,
        bound: bool = True, every_byte_poison: bool = True, ptx: str | None = None,
        simulate: Callable | None = None, out: np.ndarray | None = None) -> Checked:
    """Compile (when given a Gemm), simulate and compare; the verdict, not asserted (see `check`).

    `ctas`: simulate only those CTAs (a sample of a large grid); their tiles are compared, and a
    write outside them fails at once (AssertionError) even here. `ptx`: run this text instead of the kernel's (a
    planted bug). `simulate`: a stand-in for Kernel.simulate with its signature (a test's wrapper).
    `out`: the poisoned C to write (a view into a larger poisoned allocation whose rest the test
    checks); it gets the epilogue's C, and runs once. 8-bit outputs run once per poison value
    unless `every_byte_poison` is False."""
    kernel = subject if isinstance(subject, Kernel) else ptxgen.compile(subject, schedule, arch=arch)
    if ptx is not None:
        kernel = dataclasses.replace(kernel, ptx=ptx)
    g = kernel.gemm
    ops = ops or operands(g, seed)
    # Stream-K CTAs share tiles and wait for each other: `ctas` can only order the whole grid
    # (simulate runs them all), so every element is compared.
    sampled = ctas is not None and not kernel.schedule.stream_k
    mask = covered(kernel, ctas).reshape((g.batch, g.m, g.n) if g.batch > 1 else (g.m, g.n)) if sampled else None
    byte_poisons = g.out_dtype in BYTE_POISON and every_byte_poison and out is None
    variants = len(BYTE_POISON[g.out_dtype]) if byte_poisons else 1
    checked = None
    for variant in range(variants):
        c = fresh_output(g, ops, variant) if out is None else out
        if out is not None and ops.c is not None:
            c[...] = ops.c
        (simulate or kernel.simulate)(ops.a, ops.b, c=c, bias=ops.bias, scale=ops.scale, ctas=ctas,
                                      workers=workers)
        if mask is not None and ops.c is None and g.out_dtype not in BYTE_POISON:
            stray = ~unwritten(c) & ~mask
            if stray.any():
                raise AssertionError(f"a sampled CTA wrote {int(stray.sum())} elements outside its tiles, first at "
                                     f"{np.argwhere(stray)[0].tolist()}: {kernel.gemm}, {kernel.schedule}")
        ref, result = judge(g, c, ops, mask, bound)
        checked = Checked(kernel, ops, c, ref, result)
        if not result.ok:
            break
    assert checked is not None
    return checked


def check(subject: Kernel | Gemm, schedule: Schedule | None = None, arch: str = "sm_80", **options) -> Checked:
    """`run`, and fail the test with the comparison, the gemm, the schedule and the arch unless
    every compared element is right."""
    checked = run(subject, schedule, arch, **options)
    assert checked.ok, checked.explain()
    return checked


def default_sigint() -> None:
    """For `subprocess.Popen(preexec_fn=...)`: the child's Ctrl-C at its default, as a terminal's
    foreground job has it. A shell script's background job (`.ci/run &`) ignores SIGINT, and Python
    keeps an ignored SIGINT it inherits, so a test that interrupts its child would wait for a run
    that never hears the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
