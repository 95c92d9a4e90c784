"""atom / red on global memory: every operation and type, lanes on one address applied in thread
order (expected values replayed sequentially in numpy), f32 flushing, qualifiers, and hazards."""
from __future__ import annotations

import numpy as np
import pytest

from ptxgen import sim
from sim_util import kernel, line_of

PARAMS = ".param .u64 pOut, .param .u64 pMem, .param .u64 pB, .param .u64 pC"
REG = {"b32": "%r", "u32": "%r", "s32": "%r", "f32": "%f", "b64": "%rd", "u64": "%rd", "s64": "%rd",
       "f64": "%fd"}
DT = {"b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32, "b64": np.uint64,
      "u64": np.uint64, "s64": np.int64, "f64": np.float64}


def atomic_kernel(instr: str, typ: str, slots: int) -> str:
    """Thread t applies `instr` to mem[t % slots] with operands b[t] (and c[t]) and stores the
    returned old value (atom) to out[t]. `instr` uses {d} {a} {b} {c} placeholders."""
    size = np.dtype(DT[typ]).itemsize
    r = REG[typ]
    text = instr.format(d=f"{r}20", a="[%rd5]", b=f"{r}21", c=f"{r}22")
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, {slots};
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pMem];
    ld.param.u64 %rd3, [pB];
    ld.param.u64 %rd4, [pC];
    mul.wide.u32 %rd6, %r1, {size};
    mul.wide.u32 %rd7, %r2, {size};
    add.u64 %rd5, %rd2, %rd7;
    add.u64 %rd8, %rd3, %rd6;
    add.u64 %rd9, %rd4, %rd6;
    ld.global.{typ} {r}21, [%rd8];
    ld.global.{typ} {r}22, [%rd9];
    mov.{'b' + typ[1:] if typ[0] != 'f' else typ} {r}20, 0;
    {text}        // ATOM
    add.u64 %rd10, %rd1, %rd6;
    st.global.{typ} [%rd10], {r}20;
    ret;""", params=PARAMS, regs="    .reg .f64 %fd<32>;\n")


def run_atomic(instr: str, typ: str, mem, b, c=None, slots: int = 1):
    dt = DT[typ]
    mem = np.array(mem, dtype=dt)
    b = np.array(b, dtype=dt)
    c = np.zeros_like(b) if c is None else np.array(c, dtype=dt)
    out = np.zeros_like(b)
    sim.launch(atomic_kernel(instr, typ, slots), "k", block=(len(b),), args=[out, mem, b, c])
    return out, mem


def replay(mem, b, c, slots, fn):
    """Sequential reference: thread order, each thread sees the value left by the previous one."""
    mem = list(mem)
    old = []
    for t in range(len(b)):
        s = t % slots
        old.append(mem[s])
        mem[s] = fn(mem[s], b[t], c[t])
    return old, mem


@pytest.mark.parametrize("slots", [1, 3, 64])
def test_atom_add_u32_on_shared_and_distinct_addresses(slots):
    b = np.arange(1, 65, dtype=np.uint32) * 7
    mem0 = np.full(slots, 0xFFFFFF00, dtype=np.uint32)            # wraps past 2^32
    out, mem = run_atomic("atom.global.add.u32 {d}, {a}, {b};", "u32", mem0, b, slots=slots)
    old, final = replay(mem0.tolist(), b.tolist(), [0] * 64, slots, lambda m, x, y: (m + x) % 2 ** 32)
    assert out.tolist() == old and mem.tolist() == final


def f32_ftz_add(m, x):
    """atom.add.f32 on global memory: round to nearest even, flush subnormal inputs and results."""
    def ftz(v):
        v = np.float32(v)
        return np.float32(np.copysign(0.0, v)) if 0 < abs(v) < 2.0 ** -126 else v
    return ftz(np.float32(ftz(m)) + np.float32(ftz(x)))


def test_atom_add_f32_rounds_in_thread_order_and_flushes_subnormals():
    b = np.array([1e8, 1.0, -1e8, 2.0 ** -140, 0.5, 3.0, 1.5e-39, 7.0] * 4, dtype=np.float32)
    out, mem = run_atomic("atom.global.add.f32 {d}, {a}, {b};", "f32", [0.25], b)
    old, final = replay([np.float32(0.25)], b.tolist(), [0] * 32, 1, lambda m, x, y: f32_ftz_add(m, x))
    assert out.tolist() == [float(v) for v in old] and float(mem[0]) == float(final[0])
    assert out[4] == 0 and out.view(np.uint32)[4] == 0          # 0 + 2^-140 was flushed to +0
    # a subnormal already in memory is flushed too
    out, mem = run_atomic("red.global.add.f32 {a}, {b};", "f32", [1e-39], np.zeros(1, np.float32))
    assert mem.view(np.uint32)[0] == 0


def test_red_add_f64_s32_u64_and_ordering_qualifiers():
    b = np.array([0.1, 1e16, -1e16, 0.3] * 8)
    _, mem = run_atomic("red.relaxed.gpu.global.add.f64 {a}, {b};", "f64", [0.0], b)
    _, final = replay([0.0], b.tolist(), [0] * 32, 1, lambda m, x, y: m + x)
    assert float(mem[0]) == final[0]
    b = np.arange(-16, 16, dtype=np.int32)
    _, mem = run_atomic("red.release.gpu.global.add.s32 {a}, {b};", "s32", [5, 6], b, slots=2)
    assert mem.tolist() == [5 + int(b[0::2].sum()), 6 + int(b[1::2].sum())]
    b = np.full(32, 2 ** 40, dtype=np.uint64)
    out, mem = run_atomic("atom.global.sys.add.u64 {d}, {a}, {b};", "u64", [3], b)
    assert int(mem[0]) == 3 + 32 * 2 ** 40 and out.tolist() == [3 + t * 2 ** 40 for t in range(32)]


def test_atom_exch_hands_values_down_the_lanes():
    b = np.arange(100, 132, dtype=np.uint32)
    out, mem = run_atomic("atom.global.exch.b32 {d}, {a}, {b};", "b32", [7], b)
    assert out.tolist() == [7] + list(range(100, 131)) and int(mem[0]) == 131


def test_atom_cas_applies_in_thread_order():
    t = np.arange(32, dtype=np.uint32)
    out, mem = run_atomic("atom.acq_rel.gpu.global.cas.b32 {d}, {a}, {b}, {c};", "b32", [0], t, t + 1)
    assert out.tolist() == t.tolist() and int(mem[0]) == 32          # a chain: every swap succeeds
    out, mem = run_atomic("atom.global.cas.b32 {d}, {a}, {b}, {c};", "b32", [0], np.zeros(32), t + 100)
    assert out.tolist() == [0] + [100] * 31 and int(mem[0]) == 100   # only thread 0 swaps
    out, mem = run_atomic("atom.global.cas.b64 {d}, {a}, {b}, {c};", "b64", [2 ** 40], [2 ** 40] * 4, [9] * 4)
    assert out.tolist() == [2 ** 40, 9, 9, 9] and int(mem[0]) == 9


@pytest.mark.parametrize("op,typ,fn", [
    ("max", "u32", max), ("max", "s32", max), ("min", "u32", min), ("min", "s32", min),
    ("max", "s64", max), ("min", "u64", min),
    ("and", "b32", lambda m, x: m & x), ("or", "b32", lambda m, x: m | x), ("xor", "b64", lambda m, x: m ^ x),
    ("inc", "u32", lambda m, x: 0 if m >= x else m + 1), ("dec", "u32", lambda m, x: x if m == 0 or m > x else m - 1),
])
def test_atom_integer_and_bit_operations(op, typ, fn):
    rng = np.random.default_rng(len(op) * 7 + len(typ))
    dt = DT[typ]
    info = np.iinfo(dt)
    if op in ("inc", "dec"):
        b = rng.integers(0, 6, 48).astype(dt)
        mem0 = [3, 9]
    else:
        b = rng.integers(info.min, info.max, 48, dtype=dt, endpoint=True)
        mem0 = [int(v) for v in rng.integers(info.min, info.max, 2, dtype=dt, endpoint=True)]
    out, mem = run_atomic(f"atom.global.{op}.{typ} {{d}}, {{a}}, {{b}};", typ, mem0, b, slots=2)
    old, final = replay(mem0, [int(v) for v in b], [0] * 48, 2, lambda m, x, y: fn(m, x))
    assert [int(v) for v in out] == old and [int(v) for v in mem] == final


def test_atomics_of_different_ctas_on_one_counter_are_not_races():
    ptx = kernel("""
    ld.param.u64 %rd1, [pOut];
    red.global.add.u32 [%rd1], 1;
    atom.global.max.s32 %r1, [%rd1+4], -5;
    ret;""")
    out = np.array([0, 0x80000000], dtype=np.uint32)
    sim.launch(ptx, "k", grid=(5,), block=(64,), args=[out])
    assert out.tolist() == [5 * 64, 0xFFFFFFFB]


def test_plain_store_then_atomic_from_another_cta_is_a_race():
    ptx = kernel("""
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 st.global.u32 [%rd1], %r1;
    @!%p1 red.global.add.u32 [%rd1], 1;   // RED
    ret;""")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", grid=(2,), block=(1,), args=[np.zeros(1, np.uint32)])
    assert (err.value.kind, err.value.line) == ("race", line_of(ptx, "// RED"))


def test_split_k_reduction_with_red_add_f32():
    """Four CTAs each add their k-slice of a dot product into out; integer-valued data keeps every
    partial sum exact, so the result does not depend on the interleaving."""
    ptx = kernel("""
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pA];
    mov.f32 %f1, 0f00000000;
    mov.u32 %r3, 0;
$L_k:
    mad.lo.u32 %r4, %r2, 8, %r3;
    mad.lo.u32 %r5, %r4, 32, %r1;
    mul.wide.u32 %rd3, %r5, 4;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    add.f32 %f1, %f1, %f2;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, 8;
    @%p1 bra $L_k;
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd6, %rd1, %rd5;
    red.global.add.f32 [%rd6], %f1;
    ret;""", params=".param .u64 pOut, .param .u64 pA")
    A = np.random.default_rng(5).integers(-50, 50, (32, 32)).astype(np.float32)
    out = np.full(32, 0.5, dtype=np.float32)
    sim.launch(ptx, "k", grid=(4,), block=(32,), args=[out, A])
    assert out.tolist() == (A.sum(axis=0) + 0.5).tolist()


@pytest.mark.parametrize("text,kind,marker", [
    ("atom.global.add.u32 %r1, [%rd1+2], 1;", "misaligned", "atom.global"),
    ("atom.global.add.u32 %r1, [%rd1+64], 1;", "out-of-bounds", "atom.global"),
    ("atom.shared.add.u32 %r1, [buf+16], 1;", "out-of-bounds", "atom.shared"),
    ("mov.u32 %r2, buf;\n    cvta.shared.u64 %rd2, %r2;\n    atom.add.u32 %r1, [%rd2+2], 1;", "misaligned",
     "atom.add"),
])
def test_atomic_hazards(text, kind, marker):
    ptx = kernel(f"    ld.param.u64 %rd1, [pOut];\n    {text}\n    ret;", shared=".shared .align 4 .b8 buf[16];")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(1,), args=[np.zeros(4, np.uint32)])
    assert (err.value.kind, err.value.line) == (kind, line_of(ptx, marker))


@pytest.mark.parametrize("text", ["atom.global.add.b32 %r1, [%rd1], 1;", "atom.global.inc.s32 %r1, [%rd1], 1;",
                                  "red.global.exch.b32 [%rd1], 1;", "atom.global.add.u32 %rd1, [%rd1], 1;",
                                  "atom.global.add.u32 %r1, [%rd1];", "atom.global.cluster.add.u32 %r1, [%rd1], 1;"])
def test_invalid_atomic_forms_are_unsupported(text):
    ptx = kernel(f"    {text}   // BAD\n    ret;")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(1,), args=[np.zeros(4, np.uint32)])
    assert (err.value.kind, err.value.line) == ("unsupported", line_of(ptx, "// BAD"))
