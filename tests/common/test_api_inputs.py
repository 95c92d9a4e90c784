"""Python API inputs: numpy scalars are accepted and become Python values; every Gemm, Epilogue and
Schedule field of the wrong type is refused by name (never taken as truthy, never a failure from
deep inside); compile/verify name swapped arguments."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxgen
from ptxgen import Epilogue, Gemm, Schedule, ScheduleError, ScheduleTypeError
from ptxgen.targets.sm90.options import HOPPER_FIELDS

#: A valid problem and schedule that set every int field (split-K over K=64's two k-tiles).
GEMM = dict(m=64, n=64, k=64, lda=72, ldb=72, ldc=72, align=16, batch=2)
SCHED = dict(block=(64, 64, 32), warps=(2, 2), stages=2, group_m=4, split_k=2, sms=8, raster="grouped")
EPI = dict(alpha=2.0, beta=0.5)
NUMPY_INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.intc, np.intp]
NUMPY_FLOATS = [np.float16, np.float32, np.float64, np.longdouble]


def build(gemm: dict, sched: dict, epi: dict) -> tuple[Gemm, Schedule]:
    return Gemm(**gemm, epilogue=Epilogue(**epi)), Schedule(**sched)


def test_the_base_case_is_valid():
    ptxgen.verify(*build(GEMM, SCHED, EPI))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_numpy_scalars_are_accepted_as_python_values(data):
    """Any numpy integer type in any int field (tuple elements too), numpy floats for alpha/beta and
    numpy bools for the bool fields give the same (equal, equally hashed) objects as Python values."""
    gemm = {f: data.draw(st.sampled_from([int, *NUMPY_INTS]), label=f"type of {f}")(v) for f, v in GEMM.items()}
    sched = dict(SCHED)
    for f in ("stages", "group_m", "split_k", "sms"):
        sched[f] = data.draw(st.sampled_from([int, *NUMPY_INTS]), label=f"type of {f}")(SCHED[f])
    for f in ("block", "warps"):
        kind = data.draw(st.sampled_from(["tuple", "list", "array"]), label=f"container of {f}")
        if kind == "array":  # one integer dtype (mixed ones may promote to float64, rightly refused)
            sched[f] = np.array(SCHED[f], dtype=data.draw(st.sampled_from(NUMPY_INTS), label=f"dtype of {f}"))
        else:
            elems = [data.draw(st.sampled_from([int, *NUMPY_INTS]), label=f"type of {f}[{i}]")(v)
                     for i, v in enumerate(SCHED[f])]
            sched[f] = tuple(elems) if kind == "tuple" else elems
    sched["frag_double_buffer"] = data.draw(st.sampled_from([np.bool_(False), np.bool_(True)]), label="dbuf")
    sched["epilogue_via_smem"] = data.draw(st.sampled_from([None, np.bool_(False), np.bool_(True)]), label="via")
    epi = {f: data.draw(st.sampled_from([float, *NUMPY_FLOATS]), label=f"type of {f}")(v) for f, v in EPI.items()}
    g, s = build(gemm, sched, epi)
    want_sched = dict(SCHED, frag_double_buffer=bool(sched["frag_double_buffer"]),
                      epilogue_via_smem=None if sched["epilogue_via_smem"] is None else bool(sched["epilogue_via_smem"]))
    want_g, want_s = build(GEMM, want_sched, EPI)
    assert (g, s) == (want_g, want_s) and hash((g, s)) == hash((want_g, want_s))
    for obj in (g, s, g.epilogue):
        for name, v in vars(obj).items():
            assert not isinstance(v, np.generic), (name, type(v))
    assert all(type(v) is int for v in (*s.block, *s.warps, g.m, g.lda))
    try:
        ptxgen.verify(g, s)
    except ScheduleError as e:  # the Python-valued twin must fail the same way
        with pytest.raises(ScheduleError, match=str(e).split(":")[0]):
            ptxgen.verify(want_g, want_s)
    else:
        ptxgen.verify(want_g, want_s)


def test_numpy_scalars_of_the_issue_compile():
    k = ptxgen.compile(Gemm(np.int64(64), 64, 64, lda=np.int64(72), epilogue=Epilogue(alpha=np.float32(2))),
                       Schedule(block=(64, 64, 32)))
    assert k.gemm.lda == 72 and k.gemm.epilogue.alpha == 2.0
    assert k.ptx == ptxgen.compile(Gemm(64, 64, 64, lda=72, epilogue=Epilogue(alpha=2.0)), Schedule(block=(64, 64, 32))).ptx


BAD_INT = ["64", 64.0, 64.5, True, False, [64], b"64", complex(64, 0)]
BAD_BOOL = ["no", "False", 0, 1, 1.0, [True]]
BAD_CHOICE = [1, 1.5, True, b"row", ["row"], np.float16]
BAD_NUMBER = ["2", [1.0], True, b"1", complex(1, 0)]
BAD_TUPLE = ["64x64x32", 64, {64, 32}]
#: (where, field) -> wrong values; None is wrong where the field is not optional.
FIELDS = {
    **{("gemm", f): BAD_INT + [None] for f in ("m", "n", "k", "batch")},
    **{("gemm", f): BAD_INT for f in ("lda", "ldb", "ldc", "align")},
    **{("gemm", f): [v for v in BAD_CHOICE if v is not np.float16] + [None]  # a numpy dtype is a dtype
       for f in ("dtype", "out_dtype", "acc_dtype")},
    **{("gemm", f): BAD_CHOICE + [None] for f in ("a_layout", "b_layout")},
    ("gemm", "epilogue"): ["relu", {"alpha": 2.0}, 1],
    **{("epilogue", f): BAD_NUMBER + [None] for f in ("alpha", "beta")},
    **{("epilogue", f): BAD_CHOICE for f in ("bias", "scale", "activation")},
    ("schedule", "block"): BAD_TUPLE + [None], ("schedule", "warps"): BAD_TUPLE,
    **{("schedule", f"block.{i}"): BAD_INT + [None] for i in range(3)},
    **{("schedule", f"warps.{i}"): BAD_INT + [None] for i in range(2)},
    **{("schedule", f): BAD_INT + [None] for f in ("stages", "group_m", "split_k")},
    ("schedule", "sms"): BAD_INT,
    ("schedule", "smem_layout"): BAD_CHOICE,  # None picks the instruction's layout
    **{("schedule", f): BAD_CHOICE + [None] for f in ("instruction", "raster", "split_k_mode", "decomposition")},
    ("schedule", "frag_double_buffer"): BAD_BOOL + [None], ("schedule", "epilogue_via_smem"): BAD_BOOL,
    # the Hopper (wgmma) fields: type-checked on every schedule, before any rule about where they apply
    **{("schedule", f): BAD_INT for f in ("consumers", "producer_regs", "consumer_regs", "swizzle")},
    **{("schedule", f): BAD_BOOL for f in ("warp_specialized", "persistent", "multicast")},
    ("schedule", "cluster"): BAD_TUPLE,
}


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_field_of_the_wrong_type_is_named(data):
    where, field = data.draw(st.sampled_from(sorted(FIELDS)), label="field")
    bad = data.draw(st.sampled_from(FIELDS[(where, field)]), label="value")
    gemm, sched, epi = dict(GEMM), dict(SCHED), dict(EPI)
    name = field
    if field[:-2] in ("block", "warps"):  # one element of the tuple, named BM/BN/BK or WM/WN
        base, i = field.split(".")
        elems = list(sched[base])
        elems[int(i)] = bad
        sched[base] = tuple(elems)
        name = f"{base}.{(('BM', 'BN', 'BK') if base == 'block' else ('WM', 'WN'))[int(i)]}"
    elif (where, field) != ("gemm", "epilogue"):
        {"gemm": gemm, "schedule": sched, "epilogue": epi}[where][field] = bad
    hopper = where == "schedule" and field in HOPPER_FIELDS

    def check(err: ScheduleError) -> None:
        assert isinstance(err, TypeError) and isinstance(err, ScheduleError)
        assert err.field == f"{where}.{name}", str(err)
        assert str(err).startswith(f"{where}.{name}={bad!r}: must be ")
        assert f"not {type(bad).__name__}" in err.rule and err.fix

    if not hopper:  # a field every target reads raises on the line that builds the object
        with pytest.raises(ScheduleTypeError) as info:
            Gemm(**gemm, epilogue=bad) if (where, field) == ("gemm", "epilogue") else build(gemm, sched, epi)
        check(info.value)
        return
    g, s = build(gemm, sched, epi)  # wgmma's own fields: its target checks them (verify, compile)
    for call in (ptxgen.verify, ptxgen.compile):
        with pytest.raises(ScheduleTypeError) as info:
            call(g, s)
        check(info.value)


def test_frag_double_buffer_no_is_refused_not_true():
    with pytest.raises(ScheduleTypeError, match=r"schedule\.frag_double_buffer='no': must be True or False, not str"):
        Schedule(block=(64, 64, 32), frag_double_buffer="no")


@pytest.mark.parametrize("field", ["lda", "ldb", "ldc"])
def test_leading_dimension_zero_is_not_dense(field):
    with pytest.raises(ScheduleError, match=rf"gemm\.{field}=0: must be a positive integer \(None, not 0, means "
                                            r"dense\): .*or None for a dense matrix"):
        Gemm(64, 64, 64, **{field: 0})


def test_string_leading_dimension_is_a_clear_type_error():
    with pytest.raises(TypeError, match=r"gemm\.lda='72': must be an int or None, not str: write lda=72"):
        Gemm(64, 64, 64, lda="72")


@pytest.mark.parametrize("call", [ptxgen.compile, ptxgen.verify])
def test_swapped_or_wrong_arguments_are_named(call):
    g, s = Gemm(64, 64, 64), Schedule(block=(64, 64, 32))
    name = call.__name__
    with pytest.raises(TypeError, match=rf"^{name}\(gemm, schedule, arch\): the first argument must be a "
                                        rf"ptxgen\.Gemm, got Schedule; did you swap them\?"):
        call(s, g)
    with pytest.raises(TypeError, match=r"the second argument must be a ptxgen\.Schedule, got tuple$"):
        call(g, (64, 64, 32))
    with pytest.raises(TypeError, match=r"arch must be a string, one of sm_80, .*got int"):
        call(g, s, 80)


@pytest.mark.parametrize("build_it,field,fix", [
    (lambda: Gemm(-1, 64, 64), "gemm.m", "give m a value >= 1"),
    (lambda: Gemm(256.0, 64, 64), "gemm.m", "write m=256"),
    (lambda: Gemm(64, 64, 64, dtype=16), "gemm.dtype", "write dtype='f16'"),
    (lambda: Gemm(64, 64, 64, dtype="float32"), "gemm.dtype", "write dtype='tf32'"),
    (lambda: Schedule(block=(128, 128)), "schedule.block", "write e.g. block=(128, 128, 32)"),
    (lambda: Schedule(block=(96, 64)), "schedule.block", "write e.g. block=(96, 64, 32)"),
    (lambda: Schedule(block=(128.0, 64, 32)), "schedule.block.BM", "block=(128, 64, 32)"),
    (lambda: Epilogue(activation="tanh"), "epilogue.activation", "set epilogue.activation to one of them"),
    (lambda: Epilogue(bias="both"), "epilogue.bias", "set epilogue.bias to one of them"),
    (lambda: Epilogue(scale=1.0), "epilogue.scale", "set epilogue.scale to one of them"),
    (lambda: Epilogue(alpha="2"), "epilogue.alpha", "write alpha=2.0"),
])
def test_bad_fields_raise_when_built_with_a_fix_for_the_value(build_it, field, fix):
    """The issue's cases: each raises on construction, naming the field, and the fix suits the value."""
    with pytest.raises(ScheduleError) as info:
        build_it()
    assert info.value.field == field and fix in info.value.fix, str(info.value)


def test_numpy_and_ml_dtypes_dtypes_and_names_are_accepted():
    import ml_dtypes

    for given, name in [(np.float16, "f16"), ("float16", "f16"), (np.dtype("float16"), "f16"),
                        (ml_dtypes.bfloat16, "bf16"), ("bfloat16", "bf16"), (np.int8, "s8"), (np.uint8, "u8"),
                        (ml_dtypes.float8_e4m3fn, "e4m3"), (ml_dtypes.float8_e5m2, "e5m2")]:
        assert Gemm(64, 64, 64, dtype=given).dtype == name
    g = Gemm(64, 64, 64, dtype=np.float16, out_dtype=np.float32, acc_dtype="float32", bias_dtype=np.float32)
    assert g == Gemm(64, 64, 64, dtype="f16", out_dtype="f32")
    assert Gemm(64, 64, 64, dtype="s8", out_dtype=np.int32).out_dtype == "s32"


def test_documented_exceptions_are_exported():
    for name in ("ScheduleError", "ScheduleTypeError", "LoweringNotBuilt", "AssembleError", "DriverError",
                 "AssemblerNotFound", "HazardError", "OverlappingWrites", "WorkerLost"):
        exc = getattr(ptxgen, name)
        assert isinstance(exc, type) and issubclass(exc, Exception) and name in ptxgen.__all__
    assert issubclass(ptxgen.LoweringNotBuilt, ptxgen.ScheduleError)


def test_an_arch_string_as_the_schedule_suggests_arch():
    with pytest.raises(TypeError, match=r"to name the arch, write compile\(gemm, arch='sm_80'\)"):
        ptxgen.compile(Gemm(64, 64, 64), "sm_80")
