"""atom / red .add.noftz.{f16,f16x2,bf16,bf16x2} on shared and global memory: each lane's sum rounded
once to the 16-bit format in thread order, subnormals kept, .noftz required, bf16 only on sm_90.
References are computed here with numpy / ml_dtypes from exactly representable sums."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel
from test_sim_shared_atomics import PARAMS, replay, run_shared_atomic


def half_add_reference(typ: str):
    """Round the exact sum of two 16-bit values once (inputs chosen so float64 / float32 hold the
    sum exactly): f16 by numpy's float64 -> float16 cast, bf16 by ml_dtypes' float32 -> bfloat16."""
    if typ.startswith("bf"):
        def one(m, x):
            s = np.array([m, x], np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
            return int(np.float32(s[0] + s[1]).astype(ml_dtypes.bfloat16).view(np.uint16))
    else:
        def one(m, x):
            s = np.array([m, x], np.uint16).view(np.float16).astype(np.float64)
            return int(np.float16(s[0] + s[1]).view(np.uint16))
    if not typ.endswith("x2"):
        return lambda m, x, y: one(m, x)
    return lambda m, x, y: one(m & 0xFFFF, x & 0xFFFF) | (one(m >> 16, x >> 16) << 16)


def half_bits(typ: str, values: np.ndarray) -> np.ndarray:
    dt = ml_dtypes.bfloat16 if typ.startswith("bf") else np.float16
    bits = values.astype(dt).view(np.uint16)
    return bits.view(np.uint32) if typ.endswith("x2") else bits


def half_operands(typ: str, n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    """n random b operands (bits) and two starting words; bf16 values small multiples of 2^-5 (sums
    exact in float32), f16 values multiples of 2^-24 (subnormal sums, exact in float64)."""
    rng = np.random.default_rng(seed)
    lanes = 2 if typ.endswith("x2") else 1
    if typ.startswith("bf"):
        vals = rng.choice([-1, 1], n * lanes) * rng.integers(1, 256, n * lanes) / 32.0
    else:
        vals = rng.choice([-1, 1], n * lanes) * rng.integers(1, 64, n * lanes) * 2.0 ** -24
    start = half_bits(typ, np.array([0.5, -0.25] * lanes) if typ.startswith("bf") else
                      np.array([3.0, -5.0] * lanes) * 2.0 ** -24)
    return half_bits(typ, vals), [int(v) for v in start]


@pytest.mark.parametrize("typ", ["f16", "f16x2", "bf16", "bf16x2"])
@pytest.mark.parametrize("generic", [False, True])
def test_shared_atom_add_noftz_half_types_round_once_and_keep_subnormals(typ, generic):
    """atom.add.noftz.{f16,f16x2,bf16,bf16x2}: each lane's sum rounded once to the 16-bit format in
    thread order; f16 subnormals (2^-24 steps) are neither flushed as inputs nor as results."""
    b, mem0 = half_operands(typ, 40, len(typ) + generic)
    instr = f"atom{'' if generic else '.shared'}.add.noftz.{typ} {{d}}, {{a}}, {{b}};"
    out, mem = run_shared_atomic(instr, typ, mem0, b, slots=2, generic=generic)
    old, final = replay(mem0, [int(v) for v in b], [0] * 40, 2, half_add_reference(typ))
    assert [int(v) for v in out] == old and [int(v) for v in mem] == final
    if typ == "f16":
        assert any(0 < v < 0x0400 for v in old)          # subnormal values were seen, not flushed


GLOBAL_HALF = """
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pMem];
    ld.param.u64 %rd3, [pB];
    mul.wide.u32 %rd4, %r1, 4;
    mul.wide.u32 %rd5, %r2, 4;
    add.u64 %rd6, %rd3, %rd4;
    ld.global.b32 %r3, [%rd6];
    add.u64 %rd7, %rd2, %rd5;
    atom.global.add.noftz.{typ} %r4, [%rd7], %r3;
    add.u64 %rd8, %rd1, %rd4;
    st.global.b32 [%rd8], %r4;
    ret;"""


@pytest.mark.parametrize("typ", ["f16x2", "bf16x2"])
def test_global_atom_add_noftz_x2_types(typ):
    b, mem0 = half_operands(typ, 32, 5)
    ptx = kernel(GLOBAL_HALF.format(typ=typ), params=PARAMS).replace(".target sm_80", ".target sm_90")
    mem = np.array(mem0, np.uint32)
    out = np.zeros(32, np.uint32)
    sim.launch(ptx, "k", block=(32,), args=[out, mem, b, b])
    old, final = replay(mem0, [int(v) for v in b], [0] * 32, 2, half_add_reference(typ))
    assert out.tolist() == old and mem.tolist() == final


def test_half_atomics_need_noftz_and_bf16_needs_sm90():
    for text, words in [("atom.shared.add.f16x2 %r1, [flag], %r2;", ".noftz"),
                        ("atom.shared.max.noftz.f16x2 %r1, [flag], %r2;", ".noftz"),
                        ("atom.shared.add.noftz.bf16x2 %r1, [flag], %r2;", "sm_90")]:
        ptx = kernel(f"    {text}   // BAD\n    ret;", shared=".shared .align 4 .b32 flag;\n")
        with pytest.raises(sim.HazardError) as err:
            sim.launch(ptx, "k", block=(1,), args=[np.zeros(1, np.uint32)])
        assert err.value.kind == "unsupported" and words in err.value.detail
