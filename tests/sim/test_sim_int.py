"""Integer ALU, setp/selp and mov, against Python big-integer arithmetic (PTX ISA semantics)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import sim
from sim_util import elementwise, kernel

N = 32
DTYPES = {"u32": np.uint32, "s32": np.int32, "u64": np.uint64, "s64": np.int64}
BITS = {"u32": 32, "s32": 32, "u64": 64, "s64": 64}


def wrap(value: int, typ: str) -> int:
    bits = BITS[typ]
    value &= (1 << bits) - 1
    if typ.startswith("s") and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def values(typ: str):
    bits = BITS[typ]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if typ.startswith("s") else (0, (1 << bits) - 1)
    edge = st.sampled_from([lo, hi, 0, 1, -1 if lo < 0 else 2, lo + 1, hi - 1])
    return st.lists(st.one_of(st.integers(lo, hi), edge), min_size=N, max_size=N)


def arr(xs, typ):
    return np.array(xs, dtype=DTYPES[typ])


FAST = settings(max_examples=12, deadline=None)


@pytest.mark.parametrize("typ", ["u32", "s32", "u64", "s64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul.lo", "min", "max"])
@FAST
@given(data=st.data())
def test_binary_ops_match_python_ints(typ, op, data):
    a = data.draw(values(typ))
    b = data.draw(values(typ))
    out = elementwise(f"    {op}.{typ} %d, %a0, %a1;", [typ, typ], typ, [arr(a, typ), arr(b, typ)], DTYPES[typ])
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul.lo": lambda x, y: x * y,
          "min": min, "max": max}[op]
    assert [int(v) for v in out] == [wrap(fn(x, y), typ) for x, y in zip(a, b)]


@pytest.mark.parametrize("typ", ["u32", "s32", "u64", "s64"])
@FAST
@given(data=st.data())
def test_mul_hi_and_mad(typ, data):
    a, b, c = (data.draw(values(typ)) for _ in range(3))
    bits = BITS[typ]
    hi = elementwise(f"    mul.hi.{typ} %d, %a0, %a1;", [typ, typ], typ, [arr(a, typ), arr(b, typ)], DTYPES[typ])
    assert [int(v) for v in hi] == [wrap((x * y) >> bits, typ) for x, y in zip(a, b)]
    mad = elementwise(f"    mad.lo.{typ} %d, %a0, %a1, %a2;", [typ] * 3, typ,
                      [arr(a, typ), arr(b, typ), arr(c, typ)], DTYPES[typ])
    assert [int(v) for v in mad] == [wrap(x * y + z, typ) for x, y, z in zip(a, b, c)]


@pytest.mark.parametrize("typ,wide", [("u32", "u64"), ("s32", "s64")])
@FAST
@given(data=st.data())
def test_wide_multiply(typ, wide, data):
    a, b = data.draw(values(typ)), data.draw(values(typ))
    c = data.draw(values(wide))
    out = elementwise(f"    mul.wide.{typ} %d, %a0, %a1;", [typ, typ], wide, [arr(a, typ), arr(b, typ)], DTYPES[wide])
    assert [int(v) for v in out] == [x * y for x, y in zip(a, b)]
    out = elementwise(f"    mad.wide.{typ} %d, %a0, %a1, %a2;", [typ, typ, wide], wide,
                      [arr(a, typ), arr(b, typ), arr(c, wide)], DTYPES[wide])
    assert [int(v) for v in out] == [wrap(x * y + z, wide) for x, y, z in zip(a, b, c)]


@pytest.mark.parametrize("typ", ["b32", "b64"])
@FAST
@given(data=st.data())
def test_bitwise_and_shifts(typ, data):
    bits = int(typ[1:])
    utyp = f"u{bits}"
    a, b = data.draw(values(utyp)), data.draw(values(utyp))
    shifts = data.draw(st.lists(st.integers(0, bits + 40), min_size=N, max_size=N))
    mask = (1 << bits) - 1
    for op, fn in (("and", lambda x, y: x & y), ("or", lambda x, y: x | y), ("xor", lambda x, y: x ^ y)):
        out = elementwise(f"    {op}.{typ} %d, %a0, %a1;", [utyp, utyp], utyp, [arr(a, utyp), arr(b, utyp)], DTYPES[utyp])
        assert [int(v) for v in out] == [fn(x, y) for x, y in zip(a, b)], op
    out = elementwise(f"    not.{typ} %d, %a0;", [utyp], utyp, [arr(a, utyp)], DTYPES[utyp])
    assert [int(v) for v in out] == [~x & mask for x in a]
    sh = np.array(shifts, dtype=np.uint32)
    out = elementwise(f"    shl.{typ} %d, %a0, %a1;", [utyp, "u32"], utyp, [arr(a, utyp), sh], DTYPES[utyp])
    assert [int(v) for v in out] == [(x << min(s, bits)) & mask for x, s in zip(a, shifts)]
    out = elementwise(f"    shr.u{bits} %d, %a0, %a1;", [utyp, "u32"], utyp, [arr(a, utyp), sh], DTYPES[utyp])
    assert [int(v) for v in out] == [x >> min(s, bits) for x, s in zip(a, shifts)]
    styp = f"s{bits}"
    signed = [wrap(x, styp) for x in a]
    out = elementwise(f"    shr.{styp} %d, %a0, %a1;", [styp, "u32"], styp, [arr(signed, styp), sh], DTYPES[styp])
    assert [int(v) for v in out] == [x >> min(s, bits - 1) for x, s in zip(signed, shifts)]


@FAST
@given(a=values("s32"))
def test_neg_and_abs(a):
    out = elementwise("    neg.s32 %d, %a0;", ["s32"], "s32", [arr(a, "s32")], np.int32)
    assert [int(v) for v in out] == [wrap(-x, "s32") for x in a]
    out = elementwise("    abs.s32 %d, %a0;", ["s32"], "s32", [arr(a, "s32")], np.int32)
    assert [int(v) for v in out] == [wrap(abs(x), "s32") for x in a]


CMP = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
       "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
       "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y, "hi": lambda x, y: x > y, "hs": lambda x, y: x >= y}


@pytest.mark.parametrize("typ", ["u32", "s32", "u64", "s64"])
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_setp_selp_all_comparisons(typ, data):
    a = data.draw(values(typ))
    b = [x if i % 3 == 0 else y for i, (x, y) in enumerate(zip(a, data.draw(values(typ))))]  # some equal
    ops = [c for c in CMP if typ.startswith("u") or c not in ("lo", "ls", "hi", "hs")]
    for cmp in ops:
        body = f"    setp.{cmp}.{typ} %p1, %a0, %a1;\n    selp.u32 %d, 7, 3, %p1;"
        out = elementwise(body, [typ, typ], "u32", [arr(a, typ), arr(b, typ)], np.uint32)
        assert [int(v) for v in out] == [7 if CMP[cmp](x, y) else 3 for x, y in zip(a, b)], cmp


def test_setp_float_ordered_and_unordered_with_nan():
    a = np.array([1.0, np.nan, 2.0, np.nan, -0.0] + [0.0] * 27, dtype=np.float32)
    b = np.array([1.0, 1.0, np.nan, np.nan, 0.0] + [1.0] * 27, dtype=np.float32)
    expect = {
        "eq": [True, False, False, False, True], "ne": [False, False, False, False, False],
        "neu": [False, True, True, True, False], "lt": [False, False, False, False, False],
        "ltu": [False, True, True, True, False], "num": [True, False, False, False, True],
        "nan": [False, True, True, True, False], "ge": [True, False, False, False, True],
    }
    for cmp, want in expect.items():
        out = elementwise(f"    setp.{cmp}.f32 %p1, %a0, %a1;\n    selp.u32 %d, 1, 0, %p1;",
                          ["f32", "f32"], "u32", [a, b], np.uint32)
        assert [bool(v) for v in out[:5]] == want, cmp


def test_setp_writes_complement_and_combines():
    a = np.arange(N, dtype=np.int32) - 16
    b = np.zeros(N, dtype=np.int32)
    body = ("    setp.lt.s32 %p1|%p2, %a0, %a1;\n"          # p2 = !(a < 0)
            "    setp.gt.and.s32 %p3, %a0, -4, %p1;\n"       # -4 < a < 0
            "    selp.u32 %r1, 1, 0, %p2;\n    selp.u32 %r2, 2, 0, %p3;\n    or.b32 %d, %r1, %r2;")
    out = elementwise(body, ["s32", "s32"], "u32", [a, b], np.uint32)
    assert [int(v) for v in out] == [(0 if x < 0 else 1) | (2 if -4 < x < 0 else 0) for x in a]


def test_mov_pack_order_low_part_first():
    ptx = kernel("""
    mov.u16 %h1, 0xBEEF;
    mov.u16 %h2, 0x1234;
    mov.b32 %r5, {%h1, %h2};
    mov.u32 %r1, 0x11111111;
    mov.u32 %r2, 0x22222222;
    mov.b64 %rd9, {%r1, %r2};
    mov.b64 {%r6, %r7}, %rd9;
    mov.f32 %f1, 0d4000000000000000;
    mov.b32 %r8, %f1;
    mov.u32 %r9, 010;
    mov.u32 %r10, -1;
    ld.param.u64 %rd1, [pOut];
    st.global.u32 [%rd1], %r5;
    st.global.u64 [%rd1+8], %rd9;
    st.global.v2.u32 [%rd1+16], {%r6, %r7};
    st.global.v2.u32 [%rd1+24], {%r8, %r9};
    st.global.u32 [%rd1+32], %r10;
    ret;""")
    out = np.zeros(9, dtype=np.uint32)
    sim.launch(ptx, "k", block=(1,), args=[out])
    assert int(out[0]) == 0x1234BEEF
    assert int(out[2]) | (int(out[3]) << 32) == 0x22222222_11111111
    assert (int(out[4]), int(out[5])) == (0x11111111, 0x22222222)
    assert int(out[6]) == 0x40000000          # 2.0 as f32
    assert int(out[7]) == 8                   # octal literal
    assert int(out[8]) == 0xFFFFFFFF


@settings(max_examples=10, deadline=None)
@given(a=values("s32"), b=values("u64"))
def test_cvt_between_integer_widths(a, b):
    sa = arr(a, "s32")
    out = elementwise("    cvt.s64.s32 %d, %a0;", ["s32"], "s64", [sa], np.int64)
    assert [int(v) for v in out] == a
    out = elementwise("    cvt.u64.u32 %d, %a0;", ["u32"], "u64", [sa.view(np.uint32)], np.uint64)
    assert [int(v) for v in out] == [x & 0xFFFFFFFF for x in a]
    out = elementwise("    cvt.u32.u64 %d, %a0;", ["u64"], "u32", [arr(b, "u64")], np.uint32)
    assert [int(v) for v in out] == [x & 0xFFFFFFFF for x in b]
    out = elementwise("    cvt.s32.s8 %d, %a0;", ["s32"], "s32", [sa], np.int32)
    assert [int(v) for v in out] == [wrap(x & 0xFF, "s32") - (256 if x & 0x80 else 0) for x in a]
    out = elementwise("    cvt.u64.s32 %d, %a0;", ["s32"], "u64", [sa], np.uint64)
    assert [int(v) for v in out] == [x & 0xFFFFFFFFFFFFFFFF for x in a]


def test_illegal_types_are_rejected_as_unsupported():
    for body in ("add.b32 %r1, %r2, %r3;", "shl.u32 %r1, %r2, 1;", "and.u32 %r1, %r2, %r3;",
                 "add.u32 %rd1, %r2, %r3;", "setp.lo.s32 %p1, %r1, %r2;", "add.sat.s32 %r1, %r2, %r3;"):
        ptx = kernel(body + "\n    ret;")
        with pytest.raises(sim.HazardError) as err:
            sim.launch(ptx, "k", block=(1,), args=[np.zeros(1, np.uint32)])
        assert err.value.kind == "unsupported", body


@pytest.mark.parametrize("typ", ["u32", "s32", "u64", "s64"])
@FAST
@given(data=st.data())
def test_div_rem_truncate_toward_zero(typ, data):
    a = data.draw(values(typ))
    b = [y if y != 0 else 3 for y in data.draw(values(typ))]
    b[0] = 0                                   # x/0: quotient all ones, remainder x (as GPUs do)
    q = elementwise(f"    div.{typ} %d, %a0, %a1;", [typ, typ], typ, [arr(a, typ), arr(b, typ)], DTYPES[typ])
    r = elementwise(f"    rem.{typ} %d, %a0, %a1;", [typ, typ], typ, [arr(a, typ), arr(b, typ)], DTYPES[typ])
    for i, (x, y) in enumerate(zip(a, b)):
        if y == 0:
            assert (int(q[i]), int(r[i])) == (wrap(-1, typ), x)
            continue
        quotient = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        assert int(q[i]) == wrap(quotient, typ), (x, y)
        assert int(r[i]) == wrap(x - quotient * y, typ), (x, y)
