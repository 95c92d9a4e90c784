"""Every verifier rule rejects with ScheduleError naming field, value, rule and fix."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError
from ptxgen.schedule.verify import verify

G = Gemm(1024, 1024, 1024)
S = Schedule(block=(128, 128, 32))

# (label, gemm, schedule, arch, field named in the error); a lambda builds the object inside the
# test, since a field that is wrong on its own already raises when the object is built.
INVALID = [
    ("arch", G, S, "sm_70", "arch"),
    ("m zero", lambda: Gemm(0, 1024, 1024), S, "sm_80", "gemm.m"),
    ("m too big", lambda: Gemm(2**31, 1024, 1024), S, "sm_80", "gemm.m"),
    ("dtype", lambda: Gemm(1024, 1024, 1024, dtype="f32"), S, "sm_80", "gemm.dtype"),
    ("out dtype", lambda: Gemm(1024, 1024, 1024, out_dtype="f8"), S, "sm_80", "gemm.out_dtype"),
    ("a layout", lambda: Gemm(1024, 1024, 1024, a_layout="diag"), S, "sm_80", "gemm.a_layout"),
    ("b layout", lambda: Gemm(1024, 1024, 1024, b_layout="diag"), S, "sm_80", "gemm.b_layout"),
    ("block arity", G, lambda: Schedule(block=(128, 128)), "sm_80", "schedule.block"),
    ("block zero", G, lambda: Schedule(block=(0, 128, 32)), "sm_80", "schedule.block.BM"),
    ("warps arity", G, lambda: Schedule(block=(128, 128, 32), warps=(2, 2, 1)), "sm_80", "schedule.warps"),
    ("instruction", G, lambda: Schedule(block=(128, 128, 32), instruction="m16n8k8"), "sm_80", "schedule.instruction"),
    ("stages zero", G, lambda: Schedule(block=(128, 128, 32), stages=0), "sm_80", "schedule.stages"),
    ("smem layout", G, lambda: Schedule(block=(128, 128, 32), smem_layout="xor"), "sm_80", "schedule.smem_layout"),
    ("raster", G, lambda: Schedule(block=(128, 128, 32), raster="col"), "sm_80", "schedule.raster"),
    ("group", G, lambda: Schedule(block=(128, 128, 32), raster="grouped", group_m=0), "sm_80", "schedule.group_m"),
    ("threads > 1024", G, lambda: Schedule(block=(512, 512, 32), warps=(8, 8)), "sm_80", "schedule.warps"),
    ("block / warps", G, lambda: Schedule(block=(128, 128, 32), warps=(3, 2)), "sm_80", "schedule.warps"),
    ("warp tile / mma", lambda: Gemm(1040, 1024, 1024), lambda: Schedule(block=(40, 128, 32), warps=(1, 2)), "sm_80",
     "schedule.block"),
    ("BK / k", G, lambda: Schedule(block=(128, 128, 24)), "sm_80", "schedule.block.BK"),
    ("chunks / threads", G, lambda: Schedule(block=(64, 64, 32), warps=(4, 4)), "sm_80", "schedule.block"),
    ("non-uniform copy map", lambda: Gemm(1024, 960, 1024, b_layout="row"), lambda: Schedule(block=(128, 96, 32)), "sm_80",
     "schedule.block"),
    ("swizzle needs 2^n", lambda: Gemm(960, 960, 1024, b_layout="row"), lambda: Schedule(block=(96, 96, 32), warps=(2, 3)),
     "sm_80", "schedule.smem_layout"),
    ("shared memory", G, lambda: Schedule(block=(128, 128, 64), stages=8), "sm_80", "schedule.stages"),
    ("shared memory sm_86", G, lambda: Schedule(block=(128, 128, 64), stages=4), "sm_86", "schedule.stages"),
    ("registers", G, lambda: Schedule(block=(128, 128, 32), warps=(1, 1)), "sm_80", "schedule.warps"),
    ("registers per thread at 512 threads", G, lambda: Schedule(block=(256, 256, 32), warps=(4, 4)), "sm_80",
     "schedule.warps"),
    ("align value", lambda: Gemm(1024, 1024, 1024, align=3), S, "sm_80", "gemm.align"),
    ("align too big", lambda: Gemm(1024, 1024, 1024, align=32), S, "sm_80", "gemm.align"),
    ("lda narrow", lambda: Gemm(1024, 1024, 1024, lda=512), S, "sm_80", "gemm.lda"),
    ("lda breaks align", lambda: Gemm(1024, 1024, 1024, lda=1028, align=16), S, "sm_80", "gemm.lda"),
    ("ldc breaks align", lambda: Gemm(1024, 1024, 1024, ldc=1026, align=16), S, "sm_80", "gemm.ldc"),
    ("dense K=7 is not 16-byte aligned", lambda: Gemm(64, 64, 7, align=16), S, "sm_80", "gemm.lda"),
    ("2-byte copy map not uniform", lambda: Gemm(64, 96, 7, b_layout="row"), lambda: Schedule(block=(64, 96, 32)), "sm_80",
     "schedule.block"),
    ("grid y", lambda: Gemm(128 * 65536, 128, 32), S, "sm_80", "schedule.raster"),
    ("grid x, grouped", lambda: Gemm(2**30, 2**30, 64), lambda: Schedule(block=(128, 128, 32), raster="grouped"), "sm_80",
     "schedule.block"),
    ("alpha underflows to 0", lambda: Gemm(64, 64, 64, epilogue=Epilogue(alpha=1e-50)), S, "sm_80", "epilogue.alpha"),
    ("alpha overflows", lambda: Gemm(64, 64, 64, epilogue=Epilogue(alpha=1e39)), S, "sm_80", "epilogue.alpha"),
    ("beta is an f32 subnormal", lambda: Gemm(64, 64, 64, epilogue=Epilogue(beta=-1e-40)), S, "sm_80", "epilogue.beta"),
    ("alpha NaN", lambda: Gemm(64, 64, 64, epilogue=Epilogue(alpha=float("nan"))), S, "sm_80", "epilogue.alpha"),
    ("beta inf", lambda: Gemm(64, 64, 64, epilogue=Epilogue(beta=float("-inf"))), S, "sm_80", "epilogue.beta"),
]


@pytest.mark.parametrize("label,gemm,sched,arch,field", INVALID, ids=[c[0] for c in INVALID])
def test_each_rule_rejects_with_a_fix(label, gemm, sched, arch, field):
    with pytest.raises(ScheduleError) as info:
        verify(_built(gemm), _built(sched), arch)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.field == field, str(err)
    assert str(err).startswith(f"{field}=")
    assert err.rule and err.fix and err.fix in str(err)
    with pytest.raises(ScheduleError):  # compile runs the same verifier
        ptxgen.compile(_built(gemm), _built(sched), arch)


def _built(obj):
    return obj() if callable(obj) else obj


#: The rules of INVALID that one field breaks on its own: they raise when the object is built.
AT_CONSTRUCTION = ("m zero", "dtype", "out dtype", "a layout", "b layout", "block arity", "block zero",
                   "warps arity", "instruction", "stages zero", "smem layout", "raster", "group", "align value",
                   "align too big")


@pytest.mark.parametrize("label", AT_CONSTRUCTION)
def test_a_field_wrong_on_its_own_raises_when_built(label):
    _, gemm, sched, _, field = next(c for c in INVALID if c[0] == label)
    with pytest.raises(ScheduleError) as info:
        _built(gemm), _built(sched)
    assert info.value.field == field, str(info.value)


def test_warp_tile_message_says_how_to_fix():
    with pytest.raises(ScheduleError, match=r"warp tile 40x64 is not a multiple of the mma shape 16x8 "
                                            r"\(mma\.sync m16n8k16\): use block=\(32, 128, 32\); generally, "
                                            r"make BM/WM a multiple of 16"):
        verify(Gemm(1040, 1024, 1024), Schedule(block=(40, 128, 32), warps=(1, 2)))


def test_pad_layout_accepts_what_swizzle_cannot():
    verify(Gemm(960, 960, 1024, b_layout="row"), Schedule(block=(96, 96, 32), warps=(2, 3), smem_layout="pad"))


def test_any_shape_is_valid_and_alignment_is_inferred():
    for m, n, k in [(1, 4096, 4096), (7, 7, 7), (129, 100, 17), (1000, 1024, 1000)]:
        verify(Gemm(m, n, k), S)
    assert Gemm(64, 64, 7).alignment() == 2 and Gemm(64, 64, 100).alignment() == 8
    assert Gemm(64, 64, 64).alignment() == 16 and Gemm(64, 64, 64, align=4).alignment() == 4


def test_default_and_big_smem_schedules_are_valid():
    verify(G, S)
    verify(G, Schedule(block=(128, 128, 64), stages=4), "sm_90")  # 128 KB: dynamic shared memory


#: Published limits (CUDA C Programming Guide, per compute capability), not ptxgen's tables.
SMEM_PER_BLOCK = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024}


@st.composite
def mostly_legal(draw):
    """A (Gemm, Schedule, arch) built from the rules' own grain: warp tiles of whole mma tiles,
    blocks of whole warp tiles, BK of whole k-steps, so most draws compile and the rest probe
    the resource limits (shared memory, registers) and the copy map."""
    dtype = draw(st.sampled_from(["f16", "bf16", "tf32"]), label="dtype")
    out = "f32" if dtype == "tf32" else draw(st.sampled_from(["f32", dtype]), label="out")
    wm, wn = draw(st.sampled_from([(1, 1), (1, 2), (2, 1), (2, 2), (2, 4), (4, 2)]), label="warps")
    tm = draw(st.sampled_from([16, 32, 64]), label="warp tile M")
    tn = draw(st.sampled_from([8, 16, 32, 64]), label="warp tile N")
    k_step = 8 if dtype == "tf32" else 16
    bk = k_step * draw(st.sampled_from([2, 4]), label="BK / k-step")
    gemm = Gemm(draw(st.sampled_from([256, 512, 777]), label="M"), draw(st.sampled_from([256, 512, 640]), label="N"),
                draw(st.sampled_from([64, 128, 200]), label="K"), dtype=dtype, out_dtype=out,
                a_layout=draw(st.sampled_from(["row", "col"]), label="a_layout"),
                b_layout=draw(st.sampled_from(["row", "col"]), label="b_layout"))
    sched = Schedule(block=(wm * tm, wn * tn, bk), warps=(wm, wn), stages=draw(st.integers(1, 5), label="stages"),
                     smem_layout=draw(st.sampled_from(["swizzle", "pad", "plain"]), label="smem"),
                     raster=draw(st.sampled_from(["row", "grouped"]), label="raster"),
                     frag_double_buffer=draw(st.booleans(), label="dbuf"))
    return gemm, sched, draw(st.sampled_from(sorted(SMEM_PER_BLOCK)), label="arch")


@settings(max_examples=60, deadline=None)
@given(mostly_legal())
def test_any_schedule_compiles_or_raises_schedule_error(case):
    """Every kernel that compiles keeps the limits the verifier promises."""
    gemm, sched, arch = case
    try:
        k = ptxgen.compile(gemm, sched, arch)
    except ScheduleError:
        return
    bm, bn, bk = sched.block
    assert k.entry in k.ptx
    assert k.block[0] * k.block[1] * k.block[2] == 32 * sched.warps[0] * sched.warps[1] <= 1024
    assert k.smem_bytes <= SMEM_PER_BLOCK[arch]
    elem = 4 if gemm.dtype == "tf32" else 2
    assert k.smem_bytes >= sched.stages * (bm + bn) * bk * elem  # every stage of both tiles is held
    assert k.grid[1] <= 65535 and k.grid[2] <= 65535 and k.grid[0] <= 2**31 - 1
    tiles = -(-gemm.m // bm) * -(-gemm.n // bn)
    assert k.grid[0] * k.grid[1] * k.grid[2] == tiles  # one CTA per output tile (no split-K here)
    assert f".maxntid {k.block[0]}" in k.ptx or f".reqntid {k.block[0]}" in k.ptx


def test_the_property_strategy_mostly_compiles():
    """At least half of the property test's draws pass the verifier (they are not all rejections)."""
    seen = {"ok": 0, "all": 0}

    @settings(max_examples=100, deadline=None, database=None)
    @given(mostly_legal())
    def count(case):
        seen["all"] += 1
        try:
            verify(*case)
            seen["ok"] += 1
        except ScheduleError:
            pass

    count()
    assert seen["ok"] >= seen["all"] / 2, seen



def test_grid_x_limit_names_limit_and_fixes():
    g = Gemm(2**30, 2**30, 64)
    with pytest.raises(ScheduleError, match=r"grid's x is 70368744177664 CTAs .*CUDA's x limit of 2\^31-1 = "
                                            r"2147483647: split the problem across several launches of "
                                            r"n=32640 columns each"):  # no block tile is big enough
        verify(g, Schedule(block=(128, 128, 32), raster="grouped"))
    # a grouped grid whose row raster fits is pointed at raster='row'; the row raster is within x
    g = Gemm(128 * 65535, 2**30, 64)
    with pytest.raises(ScheduleError, match=r": use raster='row'; generally, split the problem"):
        verify(g, Schedule(block=(128, 128, 32), raster="grouped"))
    verify(g, Schedule(block=(128, 128, 32)))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_alpha_and_beta_reach_the_kernel_as_f32_or_are_refused(data):
    """Any float: either it is 0 or an f32 normal after rounding, and the PTX holds that f32 exactly,
    or the verifier names the field and the f32 range (never an OverflowError, never a silent 0)."""
    name = data.draw(st.sampled_from(["alpha", "beta"]), label="field")
    v = data.draw(st.one_of(st.floats(), st.floats(min_value=-1e-36, max_value=1e-36),
                            st.floats(min_value=1e37, max_value=1e40)), label="value")
    g = Gemm(64, 64, 64, epilogue=Epilogue(**{name: v}))
    with np.errstate(over="ignore", under="ignore"):
        f = np.float32(v)
    try:
        k = ptxgen.compile(g, Schedule(block=(64, 64, 32)))
    except ScheduleError as e:
        assert e.field == f"epilogue.{name}"
        assert not np.isfinite(v) or (v != 0 and not (np.isfinite(f) and abs(f) >= np.finfo(np.float32).tiny))
        assert "finite" in str(e) if not np.isfinite(v) else "3.4028235e+38" in str(e)
        return
    assert v == 0 or (np.isfinite(f) and abs(f) >= np.finfo(np.float32).tiny)
    if (name == "alpha" and v != 1.0) or (name == "beta" and v != 0.0):
        assert "0f%08X" % f.view(np.uint32) in k.ptx


@pytest.mark.parametrize("alpha", ["1e39", "1e-50"])
def test_cli_refuses_alpha_outside_f32_without_a_traceback(alpha, capsys):
    from ptxgen.cli.app import main

    assert main(["emit", "--shape", "64x64x64", "--block", "64x64x32", "--epilogue", f"alpha={alpha}"]) == 2
    err = capsys.readouterr().err
    # The CLI names the flag the user typed, not the Python field.
    assert "--epilogue alpha=" in err and "epilogue.alpha" not in err and "f32" in err and "Traceback" not in err


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_accepted_launch_grid_is_within_cudas_limits(data):
    """Any problem size, raster and decomposition: verify refuses it or its grid fits CUDA's
    x <= 2^31-1, y, z <= 65535."""
    from ptxgen.schedule.geometry import grid_for

    size = st.one_of(st.integers(1, 2**16), st.integers(2**24, 2**31 - 1))  # small, or near the limits
    g = Gemm(data.draw(size, label="M"), data.draw(size, label="N"),
             data.draw(st.integers(1, 4096), label="K"), batch=data.draw(st.integers(1, 4), label="batch"))
    decomposition = data.draw(st.sampled_from(["tiles", "stream-k", "stream-k-pure"]), label="decomposition")
    s = Schedule(block=data.draw(st.sampled_from([(16, 8, 32), (64, 64, 32), (128, 256, 32)]), label="block"),
                 warps=(1, 1) if data.draw(st.booleans(), label="one warp") else (2, 2),
                 raster=data.draw(st.sampled_from(["row", "grouped"]), label="raster"), decomposition=decomposition,
                 split_k=1 if decomposition != "tiles" else data.draw(st.integers(1, 3), label="split_k"))
    try:
        verify(g, s)
    except ScheduleError:
        return
    x, y, z = grid_for(g, s)
    assert x <= 2**31 - 1 and y <= 65535 and z <= 65535
