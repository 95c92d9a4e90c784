"""PTX that Triton wrote for sm_90a, run on ptxgen.sim and checked against float64 numpy.

The corpus (tests/sim/hopper_corpus, see its README) is test data: CI needs no Triton. An entry
that needs a Hopper feature the simulator does not model yet (harness.SUPPORTED) is a strict
xfail that must fail on an unsupported-instruction error at a line using that feature; as soon
as the simulator runs it, the xfail turns into a failure and the marker must go.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from ptxgen.sim import HazardError


def _load_harness():
    """hopper_corpus/harness.py under a name no other test module can shadow."""
    path = Path(__file__).resolve().parent / "hopper_corpus" / "harness.py"
    spec = importlib.util.spec_from_file_location("hopper_corpus_harness", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module     # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


harness = _load_harness()

ENTRIES = harness.load_entries()


def _param(entry: harness.Entry):
    missing = entry.missing
    if not missing:
        return pytest.param(entry, id=entry.name)
    return pytest.param(entry, id=entry.name, marks=pytest.mark.xfail(
        strict=True, raises=(HazardError, harness.SimFeatureMissing),
        reason=f"ptxgen.sim does not model {', '.join(missing)} yet"))


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_corpus_entry_matches_numpy(entry: harness.Entry):
    missing = entry.missing
    try:
        result = harness.run_entry(entry)
    except HazardError as err:
        used = set().union(*(harness.feature_lines(entry.ptx, f) for f in missing)) if missing else set()
        if err.kind == "unsupported" and err.line in used:
            raise       # the expected failure: the simulator lacks a feature the entry needs
        raise AssertionError(f"{entry.name} failed for a reason other than its missing features "
                             f"{missing}: {err}") from err
    except harness.SimFeatureMissing as err:
        if "tma" in missing:
            raise       # expected: no sim.TensorMap yet, and the entry needs TMA
        raise AssertionError(f"{entry.name} needs no TMA but asked for a tensor map: {err}") from err
    assert result.ok, f"{entry.name}: {result}"


def test_corpus_is_complete_and_consistent():
    """Every .ptx has its .json, each entry's `needs` is what its PTX uses, and the corpus is small."""
    here = harness.HERE
    assert sorted(p.stem for p in here.glob("*.ptx")) == [e.name for e in ENTRIES]
    assert len(ENTRIES) >= 10
    for e in ENTRIES:
        assert e.meta["needs"] == harness.features_of(e.ptx), (
            f"{e.name}: json needs {e.meta['needs']} but its PTX uses {harness.features_of(e.ptx)}; after "
            "changing FEATURE_OPCODES run `PYTHONPATH=$PWD python tests/sim/hopper_corpus/harness.py`")
        reqntid = re.search(r"\.reqntid\s+(\d+)", e.ptx)   # warp-specialised: partitions' warps added
        threads = int(reqntid.group(1)) if reqntid else 32 * e.meta["num_warps"]
        assert e.meta["triton_version"] and e.meta["block"] == [threads, 1, 1]
        assert threads >= 32 * e.meta["num_warps"]
        assert f".entry {e.meta['entry']}(" in e.ptx and ".target sm_90a" in e.ptx
    assert sum(p.stat().st_size for p in here.iterdir() if p.is_file()) < 2 << 20
    names = {e.name for e in ENTRIES}
    assert {"wgmma", "tma", "mbarrier"} <= set().union(*(e.meta["needs"] for e in ENTRIES))
    assert any(n.startswith("dot_ptr_") for n in names) and any(n.startswith("dot_tma_") for n in names)
    gluon = [e for e in ENTRIES if e.name.startswith("gluon_")]
    assert all(e.meta["tile"] and "setmaxnreg" in e.ptx for e in gluon)


def test_descriptor_params_follow_the_map_shape_stride_layout():
    """A tensor-descriptor argument is the 128-byte map (align 64), then rank u32 shapes, then
    rank u64 strides: what the harness builds its arguments from."""
    for e in ENTRIES:
        params = e.meta["params"]
        for i, p in enumerate(params):
            if p["role"].startswith("tensormap:"):
                assert (p["type"], p["align"], p["bytes"]) == ("b8", 64, 128), e.name
                rank = len(e.meta["tensor_descriptors"][p["role"].split(":")[1]]["block_size"])
                types = [q["type"] for q in params[i + 1:i + 1 + 2 * rank]]
                assert types == ["u32"] * rank + ["u64"] * rank, (e.name, types)


def test_problem_shapes_do_not_divide_the_tiles():
    for e in ENTRIES:   # a Gluon entry's tile comes from its descriptors: the json's `tile`
        c, p = {**e.meta["constexprs"], **e.meta.get("tile", {})}, e.meta["problem"]
        for size, block in (("M", "BLOCK_M"), ("N", "BLOCK_N"), ("K", "BLOCK_K")):
            if block in c:
                assert p[size] % c[block] != 0, (e.name, size)


def _baseline() -> harness.Entry:
    return next(e for e in ENTRIES if e.name == "vadd_f32")


def test_harness_catches_a_wrong_result():
    """The harness must be able to fail: the baseline with add turned into sub is caught."""
    e = _baseline()
    assert "add.f32" in e.ptx
    wrong = harness.Entry(e.name, e.ptx.replace("add.f32", "sub.f32"), e.meta)
    assert not harness.run_entry(wrong).ok


def test_harness_catches_unwritten_output():
    """Output is NaN-poisoned: a grid one CTA short leaves elements unwritten, and that fails."""
    e = _baseline()
    short = dict(e.meta, grid=[e.meta["grid"][0] - 1, 1, 1])
    result = harness.run_entry(harness.Entry(e.name, e.ptx, short))
    assert not result.ok and result.unwritten > 0


def test_inputs_are_never_zero():
    rng = np.random.default_rng(0)
    for dtype in ("float16", "bfloat16", "float8_e4m3fn", "float32"):
        assert np.all(harness.never_zero(rng, (4096,), dtype).astype(np.float64) != 0)


def test_tensor_map_arg_names_the_missing_api():
    """Until the simulator has sim.TensorMap the descriptor argument says so (the TMA entries'
    xfail reason); once it exists the argument is a TensorMap of the array."""
    from ptxgen import sim
    a = np.zeros((8, 8), np.float16)
    if getattr(sim, "TensorMap", None) is None:
        with pytest.raises(harness.SimFeatureMissing, match="TensorMap"):
            harness.tensor_map_arg(a, [8, 8], "none")
    else:
        assert isinstance(harness.tensor_map_arg(a, [8, 8], "none"), sim.TensorMap)


def test_launch_arguments_follow_the_parameter_roles(monkeypatch):
    """For every entry (TMA ones too, with a stand-in TensorMap) the harness builds one argument
    per PTX parameter: descriptor maps over the right array with Triton's box and swizzle, then
    that array's shape and element strides; pointers are the operands, scalars the sizes."""
    from ptxgen import sim

    class FakeMap:
        def __init__(self, array, box, *, swizzle):
            self.array, self.box, self.swizzle = array, box, swizzle
    monkeypatch.setattr(sim, "TensorMap", FakeMap, raising=False)
    for e in ENTRIES:
        case = harness.build_case(e)
        params, descs, p = e.meta["params"], e.meta["tensor_descriptors"], e.meta["problem"]
        assert len(case.args) == len(params), e.name
        for i, (param, arg) in enumerate(zip(params, case.args)):
            role = param["role"].split(":")
            if role[0] == "tensormap":
                d = descs[role[1]]
                assert (list(arg.box), arg.swizzle) == (d["block_size"], d["swizzle"]), e.name
                rank = arg.array.ndim
                assert case.args[i + 1:i + 1 + rank] == list(arg.array.shape)
                assert case.args[i + 1 + rank:i + 1 + 2 * rank] == [s // arg.array.itemsize
                                                                    for s in arg.array.strides]
                assert arg.array.dtype.itemsize == d["elem_size"], e.name
            elif role[0] == "pointer":
                assert isinstance(arg, np.ndarray)
            elif role[0] == "scalar":
                assert arg == {**p, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1,
                               "stride_am": p.get("K"), "stride_bk": p.get("N"),
                               "stride_cm": p.get("N")}[role[1]], (e.name, role)
        assert np.isnan(case.out.astype(np.float64)).all(), "the output starts poisoned"
        assert case.ref.shape == case.out.shape


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.name.startswith("gluon_")], ids=lambda e: e.name)
def test_gluon_consumer_that_skips_its_ready_wait_is_caught(entry: harness.Entry):
    """The Gluon entries pass because the simulator orders TMA and wgmma through the mbarriers,
    not by luck: without the consumers' retry branch on the `ready` mbarrier (the first wait loop
    in the PTX), their wgmma reads shared memory a TMA copy has not completed into."""
    loop = "@!complete bra.uni waitLoop;"
    assert entry.ptx.count(loop) == 2      # the consumers' wait on `ready`, the producer's on `empty`
    first = entry.ptx.index(loop)
    assert "wgmma.mma_async" in entry.ptx[first:entry.ptx.index(loop, first + 1)]   # the consumers' loop
    bad = harness.Entry(entry.name, entry.ptx.replace(loop, "", 1), entry.meta)
    with pytest.raises(HazardError) as err:
        harness.run_entry(bad)
    assert err.value.kind == "async-pending" and "wgmma" in err.value.detail
