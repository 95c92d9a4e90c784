"""Helpers for the simulator tests: PTX boilerplate and reference rounding written from first principles.

Nothing here imports the simulator's internals; expected values are computed independently.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ptxgen import sim

HEADER = ".version 7.8\n.target sm_80\n.address_size 64\n"


def line_of(ptx: str, marker: str) -> int:
    """1-based line number of the only line containing `marker`."""
    hits = [i + 1 for i, line in enumerate(ptx.split("\n")) if marker in line]
    assert len(hits) == 1, f"marker {marker!r} found on lines {hits}"
    return hits[0]


def kernel(body: str, params: str = ".param .u64 pOut", name: str = "k",
           regs: str = "", shared: str = "", directives: str = "") -> str:
    """A module with one entry; common registers are declared for convenience."""
    return (HEADER + shared + f"\n.visible .entry {name}({params}){directives}\n{{\n"
            "    .reg .pred %p<8>;\n    .reg .b16 %h<16>;\n    .reg .b32 %r<64>;\n"
            "    .reg .b64 %rd<32>;\n    .reg .f32 %f<32>;\n" + regs + body + "\n}\n")


_SIZE = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "b32": 4, "u32": 4, "s32": 4,
         "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}


def elementwise(body: str, in_types: list[str], out_type: str, inputs: list[np.ndarray],
                out_dtype, regs: str = "") -> np.ndarray:
    """Thread i loads element i of each input into %a<j> (typed like in_types[j]), runs `body`,
    and stores %d (typed out_type) to element i of the result."""
    n = len(inputs[0])
    params = ", ".join([".param .u64 pOut"] + [f".param .u64 pIn{j}" for j in range(len(in_types))])
    decls = "".join(f"    .reg .{t} %a{j};\n" for j, t in enumerate(in_types)) + f"    .reg .{out_type} %d;\n"
    lines = ["    mov.u32 %r0, %tid.x;"]
    for j, t in enumerate(in_types):
        lines += [f"    ld.param.u64 %rd{2 * j + 2}, [pIn{j}];",
                  f"    mul.wide.u32 %rd{2 * j + 3}, %r0, {_SIZE[t]};",
                  f"    add.u64 %rd{2 * j + 2}, %rd{2 * j + 2}, %rd{2 * j + 3};",
                  f"    ld.global.{t} %a{j}, [%rd{2 * j + 2}];"]
    lines.append(body)
    lines += ["    ld.param.u64 %rd0, [pOut];", f"    mul.wide.u32 %rd1, %r0, {_SIZE[out_type]};",
              "    add.u64 %rd0, %rd0, %rd1;", f"    st.global.{out_type} [%rd0], %d;", "    ret;"]
    ptx = kernel("\n".join(lines), params=params, regs=decls + regs)
    out = np.zeros(n, dtype=out_dtype)
    sim.launch(ptx, "k", block=(n,), args=[out] + [np.ascontiguousarray(a) for a in inputs])
    return out


# ------------------------------------------------------------------ reference rounding
FORMATS = {  # stored mantissa bits, smallest normal exponent, largest exponent
    "f16": (10, -14, 15),
    "bf16": (7, -126, 127),
    "f32": (23, -126, 127),
    "tf32": (10, -126, 127),
}


def round_to(x: Fraction, fmt: str, ties_away: bool = False) -> float:
    """Exact value x rounded to format `fmt` (nearest, ties to even or away); returns a Python float
    (+-inf on overflow). Subnormals included."""
    mant, emin, emax = FORMATS[fmt]
    if x == 0:
        return 0.0
    ax = abs(x)
    e = ax.numerator.bit_length() - ax.denominator.bit_length()
    while Fraction(2) ** e > ax:
        e -= 1
    while Fraction(2) ** (e + 1) <= ax:
        e += 1
    quantum = Fraction(2) ** (max(e, emin) - mant)
    scaled = ax / quantum
    lower = math.floor(scaled)
    rest = scaled - lower
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and (ties_away or lower % 2 == 1)):
        lower += 1
    result = lower * quantum
    if result >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, x)
    return math.copysign(float(result), x)


def f32_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def f16_bits(x: float) -> int:
    """Bits of a value exactly representable in f16 (or +-inf)."""
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


def bf16_bits(x: float) -> int:
    """Bits of a value exactly representable in bf16 (or +-inf): the top half of its f32 bits."""
    bits = f32_bits(x)
    assert bits & 0xFFFF == 0, "value is not a bf16"
    return bits >> 16


def from_f32_bits(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def f16_value(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def bf16_value(bits: int) -> float:
    return from_f32_bits(bits << 16)
