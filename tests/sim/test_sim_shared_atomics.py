"""atom / red on shared memory: every operation and type on .shared (and generic addresses in the
shared window), lanes on one address serialised, shared atom.add.f32 keeping subnormals, a
histogram, cas locks and flags, races between atomics and plain accesses (with fixed twins), and
.shared::cluster atomics into another CTA's shared memory. Expected values come from numpy or a
sequential replay written here, never from the simulator."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxgen import sim
from sim_util import kernel, line_of
from test_sim_atomics import replay   # the sequential reference the global atomics use

PARAMS = ".param .u64 pOut, .param .u64 pMem, .param .u64 pB, .param .u64 pC"
REG = {"b32": "%r", "u32": "%r", "s32": "%r", "f32": "%f", "b64": "%rd", "u64": "%rd", "s64": "%rd",
       "f64": "%fd", "f16": "%hx", "bf16": "%hx", "f16x2": "%r", "bf16x2": "%r"}
DT = {"b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32, "b64": np.uint64,
      "u64": np.uint64, "s64": np.int64, "f64": np.float64, "f16": np.uint16, "bf16": np.uint16,
      "f16x2": np.uint32, "bf16x2": np.uint32}
MEM = {"f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}     # ld/st type of a half type
SLOTS_MAX = 8


def shared_atomic_kernel(instr: str, typ: str, slots: int, generic: bool) -> str:
    """Threads < slots copy mem[] into shared buf[]; after bar.sync thread t applies `instr` to
    buf[t % slots] with b[t] (and c[t]) and stores the old value (atom) to out[t]; after another
    bar.sync buf[] is copied back to mem[]. `instr` uses {d} {a} {b} {c} placeholders."""
    size = np.dtype(DT[typ]).itemsize
    r = REG[typ]
    addr = "[%rd12]" if generic else "[%r4]"
    text = instr.format(d=f"{r}20", a=addr, b=f"{r}21", c=f"{r}22")
    mov = "b" + typ[1:] if typ[0] != "f" else typ
    mov = MEM.get(typ, mov)
    typ = MEM.get(typ, typ)
    return kernel(f"""
    mov.u32 %r1, %tid.x;
    rem.u32 %r2, %r1, {slots};
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pMem];
    ld.param.u64 %rd3, [pB];
    ld.param.u64 %rd4, [pC];
    mul.wide.u32 %rd6, %r1, {size};
    add.u64 %rd8, %rd3, %rd6;
    add.u64 %rd9, %rd4, %rd6;
    ld.global.{typ} {r}21, [%rd8];
    ld.global.{typ} {r}22, [%rd9];
    mov.u32 %r3, buf;
    mul.lo.u32 %r5, %r1, {size};
    add.u32 %r6, %r3, %r5;
    add.u64 %rd10, %rd2, %rd6;
    setp.lt.u32 %p1, %r1, {slots};
    @%p1 ld.global.{typ} {r}23, [%rd10];
    @%p1 st.shared.{typ} [%r6], {r}23;
    bar.sync 0;
    mul.lo.u32 %r7, %r2, {size};
    add.u32 %r4, %r3, %r7;
    cvt.u64.u32 %rd11, %r4;
    cvta.shared.u64 %rd12, %rd11;
    mov.{mov} {r}20, 0;
    {text}        // ATOM
    bar.sync 0;
    @%p1 ld.shared.{typ} {r}23, [%r6];
    @%p1 st.global.{typ} [%rd10], {r}23;
    add.u64 %rd13, %rd1, %rd6;
    st.global.{typ} [%rd13], {r}20;
    ret;""", params=PARAMS, regs="    .reg .f64 %fd<32>;\n    .reg .b16 %hx<32>;\n",
                  shared=f".shared .align 8 .b8 buf[{SLOTS_MAX * 8}];\n")


def run_shared_atomic(instr: str, typ: str, mem, b, c=None, slots: int = 1, generic: bool = False):
    dt = DT[typ]
    mem = np.array(mem, dtype=dt)
    b = np.array(b, dtype=dt)
    c = np.zeros_like(b) if c is None else np.array(c, dtype=dt)
    out = np.zeros_like(b)
    ptx = shared_atomic_kernel(instr, typ, slots, generic)
    if typ.startswith("bf"):
        ptx = ptx.replace(".target sm_80", ".target sm_90")       # bf16 atomics need sm_90
    sim.launch(ptx, "k", block=(len(b),), args=[out, mem, b, c])
    return out, mem


def wrap(typ):
    bits = np.dtype(DT[typ]).itemsize * 8
    signed = typ[0] == "s"
    def fix(v):
        v %= 2 ** bits
        return v - 2 ** bits if signed and v >= 2 ** (bits - 1) else v
    return fix


INTEGER_OPS = [
    ("add", "u32", lambda m, x, y: m + x), ("add", "s32", lambda m, x, y: m + x),
    ("add", "u64", lambda m, x, y: m + x),
    ("max", "u32", lambda m, x, y: max(m, x)), ("max", "s32", lambda m, x, y: max(m, x)),
    ("min", "u32", lambda m, x, y: min(m, x)), ("min", "s32", lambda m, x, y: min(m, x)),
    ("max", "s64", lambda m, x, y: max(m, x)), ("min", "u64", lambda m, x, y: min(m, x)),
    ("max", "u64", lambda m, x, y: max(m, x)), ("min", "s64", lambda m, x, y: min(m, x)),
    ("and", "b32", lambda m, x, y: m & x), ("or", "b64", lambda m, x, y: m | x),
    ("xor", "b32", lambda m, x, y: m ^ x), ("and", "b64", lambda m, x, y: m & x),
    ("inc", "u32", lambda m, x, y: 0 if m >= x else m + 1),
    ("dec", "u32", lambda m, x, y: x if m == 0 or m > x else m - 1),
    ("exch", "b32", lambda m, x, y: x), ("exch", "b64", lambda m, x, y: x),
    ("cas", "b32", lambda m, x, y: y if m == x else m), ("cas", "b64", lambda m, x, y: y if m == x else m),
]


@pytest.mark.parametrize("op,typ,fn", INTEGER_OPS)
@pytest.mark.parametrize("form", ["atom.shared", "atom.shared::cta.relaxed.cta", "atom.acq_rel.cluster.shared",
                                  "atom (generic)"])
def test_shared_atom_integer_operations_replay_in_thread_order(op, typ, fn, form):
    """Every lane's old value and the final words equal a sequential replay in thread order."""
    rng = np.random.default_rng(len(op) * 7 + len(typ) + len(form))
    dt = DT[typ]
    info = np.iinfo(dt)
    slots, n = 3, 48
    if op in ("inc", "dec"):
        b = rng.integers(0, 6, n).astype(dt)
        mem0 = [3, 9, 0]
    elif op == "cas":            # small values so that some compares succeed
        b = rng.integers(0, 3, n).astype(dt)
        mem0 = [0, 1, 2]
    else:
        b = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        mem0 = [int(v) for v in rng.integers(info.min, info.max, slots, dtype=dt, endpoint=True)]
    c = rng.integers(0, 3, n).astype(dt)
    generic = form == "atom (generic)"
    prefix = "atom" if generic else form
    instr = f"{prefix}.{op}.{typ} {{d}}, {{a}}, {{b}}" + (", {c};" if op == "cas" else ";")
    out, mem = run_shared_atomic(instr, typ, mem0, b, c, slots=slots, generic=generic)
    fix = wrap(typ)
    old, final = replay(mem0, [int(v) for v in b], [int(v) for v in c], slots, lambda m, x, y: fix(fn(m, x, y)))
    assert [int(v) for v in out] == old and [int(v) for v in mem] == final


@pytest.mark.parametrize("op,typ", [("add", "u32"), ("max", "s32"), ("add", "f32"), ("add", "f64")])
def test_red_shared_updates_memory_without_a_destination(op, typ):
    rng = np.random.default_rng(3)
    dt = DT[typ]
    b = (rng.integers(-50, 50, 64) if typ[0] != "u" else rng.integers(1, 50, 64)).astype(dt)
    if typ[0] == "f":
        b = (b + 0.25).astype(dt)
    mem0 = np.array([7, -3, 11], dtype=dt) if typ[0] != "u" else np.array([7, 3, 11], dtype=dt)
    _, mem = run_shared_atomic(f"red.shared.{op}.{typ} {{a}}, {{b}};", typ, mem0, b, slots=3)
    fn = (lambda m, x, y: dt(m + x)) if op == "add" else (lambda m, x, y: max(m, x))
    _, final = replay([dt(v) for v in mem0], list(b), [0] * 64, 3, fn)
    assert mem.tolist() == [v.item() if hasattr(v, "item") else v for v in final]


def test_shared_atom_add_f32_keeps_subnormals_where_global_flushes():
    """PTX ISA: atom.add.f32 flushes subnormal inputs and results on global memory only."""
    tiny = np.float32(2.0 ** -140)
    b = np.array([tiny] * 16 + [1.5e-39] * 16, dtype=np.float32)
    out, mem = run_shared_atomic("atom.shared.add.f32 {d}, {a}, {b};", "f32", [0.0], b)
    ref = np.float32(0)
    olds = []
    for v in b:
        olds.append(ref)
        ref = np.float32(ref + v)
    assert out.tolist() == [float(v) for v in olds] and float(mem[0]) == float(ref)
    assert out[1] == tiny and mem[0] > 16 * tiny             # nothing flushed to zero


# ------------------------------------------------------------------ histogram
HISTOGRAM = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pMem];
    ld.param.u64 %rd3, [pB];
    mov.u32 %r3, bins;
    shl.b32 %r4, %r1, 2;
    add.u32 %r5, %r3, %r4;
    setp.lt.u32 %p1, %r1, {nbins};
    mov.u32 %r6, 0;
    @%p1 st.shared.u32 [%r5], %r6;                  // ZERO
    bar.sync 0;                                     // AFTER_ZERO
    mul.wide.u32 %rd4, %r1, 4;
    add.u64 %rd5, %rd3, %rd4;
    ld.global.u32 %r7, [%rd5];
    shl.b32 %r8, %r7, 2;
    add.u32 %r9, %r3, %r8;
    cvt.u64.u32 %rd8, %r9;
    cvta.shared.u64 %rd9, %rd8;
    {atom}                                          // HIST
    add.u64 %rd6, %rd2, %rd4;
    st.global.u32 [%rd6], %r10;
    bar.sync 0;                                     // AFTER_HIST
    @%p1 ld.shared.u32 %r11, [%r5];                 // READ
    add.u64 %rd7, %rd1, %rd4;
    @%p1 st.global.u32 [%rd7], %r11;
    ret;"""
HIST_FORMS = {"shared": "atom.shared.add.u32 %r10, [%r9], 1;",
              "shared::cta": "atom.relaxed.cta.shared::cta.add.u32 %r10, [%r9], 1;",
              "generic": "atom.add.u32 %r10, [%rd9], 1;",
              "inc": "atom.shared.inc.u32 %r10, [%r9], -1;"}


def histogram_kernel(nbins: int, form: str, body: str = HISTOGRAM) -> str:
    return kernel(body.format(nbins=nbins, atom=HIST_FORMS[form]), params=PARAMS,
                  shared=f".shared .align 4 .b8 bins[{nbins * 4}];\n")


@settings(max_examples=12, deadline=None)
@given(nbins=st.integers(1, 32), warps=st.integers(1, 8), seed=st.integers(0, 2 ** 16),
       form=st.sampled_from(sorted(HIST_FORMS)))
def test_shared_histogram_from_all_threads_matches_numpy(nbins, warps, seed, form):
    n = max(32 * warps, nbins)
    values = np.random.default_rng(seed).integers(0, nbins, n).astype(np.uint32)
    counts = np.full(n, 0xDEADBEEF, dtype=np.uint32)
    olds = np.full(n, 0xDEADBEEF, dtype=np.uint32)
    sim.launch(histogram_kernel(nbins, form), "k", block=(n,), args=[counts, olds, values, values])
    want = np.bincount(values, minlength=nbins)
    assert counts[:nbins].tolist() == want.tolist()
    for v in range(nbins):                # each thread of a bin saw a distinct count before its own
        assert sorted(olds[values == v].tolist()) == list(range(int(want[v])))


def test_planted_plain_store_racing_with_the_atomics_and_its_fixed_twin():
    """Thread 0..nbins-1 zero the bins; without the bar.sync the atom.add of another thread races."""
    values = np.arange(64, dtype=np.uint32) % 4
    args = lambda: [np.zeros(64, np.uint32), np.zeros(64, np.uint32), values, values]  # noqa: E731
    ptx = histogram_kernel(4, "shared", HISTOGRAM.replace("    bar.sync 0;                                     // AFTER_ZERO\n", ""))
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=args())
    assert e.value.kind == "race" and e.value.line == line_of(ptx, "// HIST")
    assert "atom" in e.value.detail
    fixed = args()
    sim.launch(histogram_kernel(4, "shared"), "k", block=(64,), args=fixed)
    assert fixed[0][:4].tolist() == [16, 16, 16, 16]


def test_planted_plain_load_racing_with_the_atomics_and_its_fixed_twin():
    """Reading the bins with no bar.sync after other threads' atomics is a race: the atomics and
    the plain load are not ordered."""
    values = np.arange(64, dtype=np.uint32) % 4
    ptx = histogram_kernel(4, "shared", HISTOGRAM.replace("    bar.sync 0;                                     // AFTER_HIST\n", ""))
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=[np.zeros(64, np.uint32), np.zeros(64, np.uint32), values, values])
    assert e.value.kind == "race" and e.value.line == line_of(ptx, "// READ")
    assert "atom/red" in e.value.detail


def test_planted_plain_store_after_atomics_in_the_same_epoch_races():
    """A plain st.shared by thread 0 onto a bin other threads updated atomically since the last
    bar.sync is a race; storing atomically (atom.exch) instead is not."""
    body = HISTOGRAM.replace("    bar.sync 0;                                     // AFTER_HIST\n",
                             "    @%p1 {store}                             // RESET\n    bar.sync 0;\n")
    values = np.arange(64, dtype=np.uint32) % 4
    ptx = histogram_kernel(4, "shared", body.replace("{store}", "st.shared.u32 [%r5], %r6;"))
    with pytest.raises(sim.HazardError) as e:
        sim.launch(ptx, "k", block=(64,), args=[np.zeros(64, np.uint32), np.zeros(64, np.uint32), values, values])
    assert e.value.kind == "race" and e.value.line == line_of(ptx, "// RESET")
    counts = np.full(64, 9, np.uint32)
    sim.launch(histogram_kernel(4, "shared", body.replace("{store}", "atom.shared.exch.b32 %r12, [%r5], %r6;")),
               "k", block=(64,), args=[counts, np.zeros(64, np.uint32), values, values])
    assert counts[:4].tolist() == [0, 0, 0, 0]


MIXED = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pOut];
    setp.eq.u32 %p3, %r1, 0;
    mov.u32 %r2, 0;
    @%p3 st.shared.u32 [cnt], %r2;
    bar.sync 0;
    mov.u64 %rd2, cnt;
    cvta.shared.u64 %rd3, %rd2;
    and.b32 %r3, %r1, 1;
    setp.eq.u32 %p1, %r3, 0;
    selp.b64 %rd4, %rd3, %rd1, %p1;
    add.u32 %r4, %r1, 1;
    atom.add.u32 %r5, [%rd4], %r4;                    // MIXED
    setp.gt.u32 %p2, %r1, 1000;
    @%p2 atom.shared.add.u32 %r6, [cnt], 1;           // no thread executes it
    bar.sync 0;
    ld.shared.u32 %r7, [cnt];
    @%p3 st.global.u32 [%rd1+4], %r7;
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6+8], %r5;
    ret;"""


def test_one_generic_atom_split_between_shared_and_global_memory():
    """Even threads' generic addresses are in the shared window, odd threads' in global memory:
    each half accumulates in its own memory, old values per lane in thread order."""
    out = np.zeros(2 + 64, np.uint32)
    out[0] = 100
    sim.launch(kernel(MIXED, shared=".shared .align 4 .b32 cnt;\n"), "k", block=(64,), args=[out])
    t = np.arange(64)
    assert int(out[0]) == 100 + int((t[1::2] + 1).sum()) and int(out[1]) == int((t[0::2] + 1).sum())
    olds = out[2:]
    assert olds[0::2].tolist() == np.concatenate(([0], np.cumsum(t[0::2] + 1)[:-1])).tolist()
    assert olds[1::2].tolist() == (100 + np.concatenate(([0], np.cumsum(t[1::2] + 1)[:-1]))).tolist()


# ------------------------------------------------------------------ locks and flags
LOCK = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pMem];
    setp.eq.u32 %p3, %r1, 0;
    mov.u32 %r2, 0;
    @%p3 st.shared.u32 [lock], %r2;
    bar.sync 0;
    mov.u32 %r10, 0;                                  // done
$L_retry:
    atom.acquire.cta.shared.cas.b32 %r11, [lock], 0, 1;     // TAKE
    setp.ne.u32 %p1, %r11, 0;
    @%p1 bra $L_next;
    ld.global.u32 %r12, [%rd1];                       // critical section: a plain increment
    mul.wide.u32 %rd3, %r12, 4;
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
    add.u32 %r12, %r12, 1;
    st.global.u32 [%rd1], %r12;
    {unlock}                                          // UNLOCK
    mov.u32 %r10, 1;
$L_next:
    setp.eq.u32 %p2, %r10, 0;
    @%p2 bra $L_retry;
    ret;"""


@pytest.mark.parametrize("threads", [1, 32, 96])
def test_cas_spin_lock_serialises_a_plain_critical_section(threads):
    """Threads take a shared cas lock one at a time and bump a plain global counter under it: the
    counter ends at the thread count and the log is a permutation of the threads."""
    ptx = kernel(LOCK.format(unlock="atom.release.cta.shared.exch.b32 %r13, [lock], 0;"), params=PARAMS,
                 shared=".shared .align 4 .b32 lock;\n")
    counter = np.zeros(1, np.uint32)
    log = np.full(threads, 0xFFFFFFFF, np.uint32)
    sim.launch(ptx, "k", block=(threads,), args=[counter, log, log, log])
    assert int(counter[0]) == threads and sorted(log.tolist()) == list(range(threads))


def test_planted_lock_never_released_is_reported_and_red_release_is_a_fix():
    """Without the unlock every other thread spins forever: the simulator must report it, not hang."""
    bad = kernel(LOCK.format(unlock=""), params=PARAMS, shared=".shared .align 4 .b32 lock;\n")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(bad, "k", block=(8,), args=[np.zeros(1, np.uint32)] + [np.zeros(8, np.uint32)] * 3)
    assert e.value.kind == "deadlock"
    good = kernel(LOCK.format(unlock="red.release.cta.shared.and.b32 [lock], 0;"), params=PARAMS,
                  shared=".shared .align 4 .b32 lock;\n")
    counter = np.zeros(1, np.uint32)
    sim.launch(good, "k", block=(8,), args=[counter] + [np.zeros(8, np.uint32)] * 3)
    assert int(counter[0]) == 8


FLAG = """
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [pOut];
    setp.eq.u32 %p3, %r1, 0;
    mov.u32 %r2, 0;
    @%p3 st.shared.u32 [flag], %r2;
    bar.sync 0;
    add.u32 %r3, %r1, 1;
    atom.shared.cas.b32 %r4, [flag], 0, %r3;          // CLAIM
    bar.sync 0;
    ld.shared.u32 %r5, [flag];
    mul.wide.u32 %rd2, %r1, 8;
    add.u64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r4, %r5};
    ret;"""


def test_cas_flag_is_claimed_by_exactly_one_thread():
    out = np.full((64, 2), 0xDEAD, np.uint32)
    sim.launch(kernel(FLAG, shared=".shared .align 4 .b32 flag;\n"), "k", block=(64,), args=[out])
    old, final = out[:, 0], out[:, 1]
    winners = np.flatnonzero(old == 0)
    assert len(winners) == 1 and (final == winners[0] + 1).all()
    assert (old[old != 0] == winners[0] + 1).all()      # the losers saw the winner's claim


@pytest.mark.parametrize("text", ["atom.shared.add.b32 %r1, [flag], 1;", "red.shared.cas.b32 [flag], 1, 2;",
                                  "red.acquire.cta.shared.add.u32 [flag], 1;",
                                  "atom.shared.global.add.u32 %r1, [flag], 1;"])
def test_invalid_shared_atomic_forms_are_unsupported(text):
    ptx = kernel(f"    {text}   // BAD\n    ret;", shared=".shared .align 4 .b32 flag;\n")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(1,), args=[np.zeros(1, np.uint32)])
    assert (err.value.kind, err.value.line) == ("unsupported", line_of(ptx, "// BAD"))


# ------------------------------------------------------------------ clusters
CLUSTER_HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"
CLUSTER_REGS = "    .reg .pred %p<8>;\n    .reg .b32 %r<64>;\n    .reg .b64 %rd<16>;\n"
REMOTE_SUM = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r3, total;
    or.b32 %r4, %r0, %r1;
    setp.eq.u32 %p1, %r4, 0;
    mov.u32 %r5, 0;
    @%p1 st.shared.u32 [%r3], %r5;                         // ZERO
    barrier.cluster.arrive.release.aligned;                // ARRIVE1
    barrier.cluster.wait.acquire.aligned;                  // WAIT1
    mapa.shared::cluster.u32 %r6, %r3, 0;
    mad.lo.u32 %r7, %r1, 1000, %r0;
    {atom}                                                 // REMOTE
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    @%p1 ld.shared.u32 %r9, [%r3];
    mov.u32 %r10, %ctaid.x;
    mul.wide.u32 %rd2, %r10, 4;
    add.u64 %rd3, %rd1, %rd2;
    @%p1 st.global.u32 [%rd3], %r9;
    ret;"""
REMOTE_FORMS = {
    "shared::cluster": "atom.shared::cluster.add.u32 %r8, [%r6], %r7;",
    "red": "red.relaxed.cluster.shared::cluster.add.u32 [%r6], %r7;",
    "generic": "cvt.u64.u32 %rd4, %r3;\n    cvta.shared.u64 %rd5, %rd4;\n    mapa.u64 %rd6, %rd5, 0;\n"
               "    atom.add.u32 %r8, [%rd6], %r7;",
}


def cluster_module(body: str) -> str:
    return (CLUSTER_HEADER + ".shared .align 4 .b32 total;\n.visible .entry k(.param .u64 pOut)\n{\n"
            + CLUSTER_REGS + body + "\n}\n")


@pytest.mark.parametrize("form", sorted(REMOTE_FORMS))
@pytest.mark.parametrize("size", [2, 4])
def test_cluster_ctas_add_atomically_into_rank_0s_shared_memory(form, size):
    """Every thread of every CTA of a cluster adds rank*1000 + tid into rank 0's counter in the same
    cluster-barrier phase: serialised, not a race; rank 0 reads the sum after the barrier."""
    nt, ctas = 64, 2 * size
    out = np.full(ctas, 0xDEAD, np.uint32)
    sim.launch(cluster_module(REMOTE_SUM.format(atom=REMOTE_FORMS[form])), "k", grid=(ctas,), block=(nt,),
               args=[out], cluster=(size,))
    want = sum(r * 1000 + t for r in range(size) for t in range(nt))
    assert out[0::size].tolist() == [want, want] and (out.reshape(2, size)[:, 1:] == 0xDEAD).all()


def test_planted_remote_atomic_racing_with_the_owners_plain_store_and_its_fixed_twin():
    """Rank 0 zeroes the counter with a plain store; the other CTAs' remote atomics race with it
    unless barrier.cluster orders them (a bar.sync orders rank 0's own threads only)."""
    body = REMOTE_SUM.format(atom=REMOTE_FORMS["shared::cluster"])
    bad = (body.replace("    barrier.cluster.arrive.release.aligned;                // ARRIVE1\n", "    bar.sync 0;\n")
           .replace("    barrier.cluster.wait.acquire.aligned;                  // WAIT1\n", ""))
    with pytest.raises(sim.HazardError) as e:
        sim.launch(cluster_module(bad), "k", grid=(2,), block=(32,), args=[np.zeros(2, np.uint32)], cluster=(2,))
    assert e.value.kind == "race" and "barrier.cluster" in e.value.detail
    out = np.zeros(2, np.uint32)
    sim.launch(cluster_module(body), "k", grid=(2,), block=(32,), args=[out], cluster=(2,))
    assert int(out[0]) == sum(r * 1000 + t for r in range(2) for t in range(32))


def test_cluster_scope_on_global_atomics_is_refused_clearly():
    ptx = kernel("    ld.param.u64 %rd1, [pOut];\n    atom.global.cluster.add.u32 %r1, [%rd1], 1;   // BAD\n    ret;")
    with pytest.raises(sim.HazardError) as err:
        sim.launch(ptx, "k", block=(1,), args=[np.zeros(1, np.uint32)])
    assert err.value.kind == "unsupported" and "shared" in err.value.detail


REMOTE_FLAG = """
    ld.param.u64 %rd1, [pOut];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r3, total;
    setp.eq.u32 %p1, %r0, 0;
    mov.u32 %r5, 0;
    @%p1 st.shared.u32 [%r3], %r5;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra $L_waiter;
    @%p1 atom.release.cluster.shared.exch.b32 %r6, [%r3], 77;   // SET
    bra $L_done;
$L_waiter:
    mapa.shared::cluster.u32 %r7, %r3, 0;
$L_spin:
    atom.acquire.cluster.shared::cluster.or.b32 %r8, [%r7], 0;
    setp.eq.u32 %p3, %r8, 0;
    @%p3 bra $L_spin;
    mov.u32 %r10, %ctaid.x;
    mul.wide.u32 %rd2, %r10, 4;
    add.u64 %rd3, %rd1, %rd2;
    @%p1 st.global.u32 [%rd3], %r8;
$L_done:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    ret;"""


def test_cluster_ctas_spin_on_a_remote_atomic_flag_until_rank_0_sets_it():
    """Ranks 1..3 poll rank 0's flag with atom.acquire.cluster.shared::cluster.or; rank 0 sets it
    with an atomic exch: atomics of several CTAs in one cluster-barrier phase never race."""
    out = np.zeros(4, np.uint32)
    sim.launch(cluster_module(REMOTE_FLAG), "k", grid=(4,), block=(32,), args=[out], cluster=(4,))
    assert out.tolist() == [0, 77, 77, 77]
    never = REMOTE_FLAG.replace("    @%p1 atom.release.cluster.shared.exch.b32 %r6, [%r3], 77;   // SET\n", "")
    with pytest.raises(sim.HazardError) as e:
        sim.launch(cluster_module(never), "k", grid=(4,), block=(32,), args=[out], cluster=(4,))
    assert e.value.kind == "deadlock"
