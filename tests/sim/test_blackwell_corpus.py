"""PTX that Triton and Gluon wrote for sm_100a, run on ptxgen.sim against float64 numpy (issue 20).

The corpus (tests/sim/blackwell_corpus, see its README) is test data: CI needs no Triton. An entry
that needs a feature the simulator does not model yet (harness.SUPPORTED) is a strict xfail that
must fail on an unsupported-instruction error at a line using that feature: when the simulator
learns the feature, add it to SUPPORTED, and the entries it completes must pass.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptxgen.sim import HazardError


def _load_harness():
    """blackwell_corpus/harness.py under a name no other test module can shadow."""
    name = "blackwell_corpus_harness"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parent / "blackwell_corpus" / "harness.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
ENTRIES = harness.load_entries()


def _param(entry):
    missing = entry.missing
    if not missing:
        return pytest.param(entry, id=entry.name)
    return pytest.param(entry, id=entry.name, marks=pytest.mark.xfail(
        strict=True, raises=(HazardError, harness.SimFeatureMissing), reason=f"needs {', '.join(missing)}: issue 20"))


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_corpus_entry_matches_numpy(entry):
    """Each entry matches numpy, or, where its json says `expect_hazard`, the simulator reports that
    race in the PTX Triton wrote (its kind at its line)."""
    missing, expected = entry.missing, entry.meta.get("expect_hazard")
    try:
        result = harness.run_entry(entry)
    except HazardError as err:
        used = set().union(*(harness.feature_lines(entry.ptx, f) for f in missing)) if missing else set()
        if err.kind == "unsupported" and err.line in used:
            raise       # the expected failure: the simulator lacks a feature the entry needs
        if expected and (err.kind, err.line) == (expected["kind"], expected["line"]):
            return      # the race the json records, found
        raise AssertionError(f"{entry.name} failed for a reason other than its missing features "
                             f"{missing}: {err}") from err
    except harness.SimFeatureMissing as err:
        if "tma-fp4-padded" in missing:
            raise       # expected: sim.TensorMap lacks the padded fp4 data type the entry's map needs
        raise AssertionError(f"{entry.name} does not need a padded fp4 map but asked for one: {err}") from err
    assert not expected, f"{entry.name}: the simulator did not report {expected['kind']} at line {expected['line']}"
    assert result.ok, f"{entry.name}: {result}"


def test_corpus_is_complete_and_consistent():
    """Every .ptx has its .json, `needs` is what the PTX uses, the corpus covers what issue 20
    asks for, and it stays small."""
    here = harness.HERE
    assert sorted(p.stem for p in here.glob("*.ptx")) == [e.name for e in ENTRIES]
    for e in ENTRIES:
        assert e.meta["needs"] == harness.entry_features(e), (
            f"{e.name}: json needs {e.meta['needs']} but it uses {harness.entry_features(e)}; after "
            "changing FEATURE_OPCODES run `PYTHONPATH=$PWD python tests/sim/blackwell_corpus/harness.py`")
        reqntid = re.search(r"\.reqntid\s+(\d+)", e.ptx)
        threads = int(reqntid.group(1)) if reqntid else 32 * e.meta["num_warps"]
        assert e.meta["triton_version"] == "3.9.0" and e.meta["block"] == [threads, 1, 1]
        assert f".entry {e.meta['entry']}(" in e.ptx and ".target sm_100a" in e.ptx
    assert sum(p.stat().st_size for p in here.iterdir() if p.is_file()) < 2 << 20
    text = "\n".join(e.ptx for e in ENTRIES)
    for spelling in ("tcgen05.mma.cta_group::1.kind::f16", "tcgen05.mma.cta_group::1.kind::f8f6f4",
                     "kind::mxf8f6f4.block_scale", "kind::mxf4.block_scale", "tcgen05.mma.cta_group::2",
                     "clusterlaunchcontrol.try_cancel", ".branchtargets", "brx.idx", "tcgen05.ld.", "tcgen05.st.",
                     "cp.async.bulk.tensor.2d.cta_group::2", "kind::mxf4nvf4.block_scale.block16",
                     "tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale", "tcgen05.cp.cta_group::2"):
        assert spelling in text, spelling


def test_problem_shapes_do_not_divide_the_masked_tiles():
    for e in ENTRIES:
        c, p = {**e.meta["constexprs"], **e.meta.get("tile", {})}, e.meta["problem"]
        dims = ("M", "N") if e.meta["arrays"]["kind"].startswith("scaled_matmul") else ("M", "N", "K")
        for size in dims:
            block = "BLOCK_" + size
            if block in c:
                assert p[size] % c[block] != 0, (e.name, size)


def _scaled(fmt: str):
    return next(e for e in ENTRIES if e.meta["arrays"].get("format") == fmt)


@pytest.mark.parametrize("fmt,dtype", [("e4m3", ml_dtypes.float8_e4m3fn), ("e2m1", ml_dtypes.float4_e2m1fn)])
def test_scaled_reference_agrees_with_ml_dtypes(fmt, dtype):
    """The block-scaled reference (lowprec decode, low nibble first, 2^(s-127) per 32 of K) computed
    again from the raw launch bytes with ml_dtypes: the harness feeds the kernel what it checks."""
    e = _scaled(fmt)
    arrays, out_name, ref, sizes = harness.build_operands(e.meta, np.random.default_rng(0))
    a, b = arrays["a_ptr"], arrays["b_ptr"]
    if fmt == "e2m1":
        a = np.stack([a & 0xF, a >> 4], axis=-1).reshape(a.shape[0], -1)              # k = 2j (low), 2j+1
        b = np.stack([b & 0xF, b >> 4], axis=1).reshape(-1, b.shape[1])
    decode = lambda codes: codes.astype(np.uint8).view(dtype).astype(np.float64)  # noqa: E731
    sa = np.exp2(np.repeat(arrays["a_scale_ptr"].astype(np.float64) - 127, 32, axis=1))
    sb = np.exp2(np.repeat(arrays["b_scale_ptr"].astype(np.float64) - 127, 32, axis=1)).T
    np.testing.assert_array_equal((decode(a) * sa) @ (decode(b) * sb), ref)
    assert np.all(decode(a) != 0) and np.isnan(arrays[out_name]).all()
    assert sizes["stride_am"] == (sizes["K"] // 2 if fmt == "e2m1" else sizes["K"])


def test_launch_arguments_follow_the_parameter_roles(monkeypatch):
    """One argument per PTX parameter for every entry (descriptors with a stand-in TensorMap)."""
    from ptxgen import sim

    class FakeMap:
        def __init__(self, array, box, *, swizzle, data_type=None):
            self.array, self.box, self.swizzle, self.data_type = array, box, swizzle, data_type
    monkeypatch.setattr(sim, "TensorMap", FakeMap, raising=False)
    for e in ENTRIES:
        case = harness.build_case(e)
        assert len(case.args) == len(e.meta["params"]), e.name
        for param, arg in zip(e.meta["params"], case.args):
            if param["role"].startswith("tensormap:"):
                d = e.meta["tensor_descriptors"][param["role"].split(":")[1]]
                assert (list(arg.box), arg.swizzle) == (d["block_size"], d["swizzle"]), e.name
                assert (arg.data_type == "16U4_ALIGN16B") == bool(d.get("fp4_padded")), e.name
        assert case.ref.shape == case.out.shape


def _entry(prefix: str):
    return next(e for e in ENTRIES if e.name.startswith(prefix))


def _needing(entry, test):
    """`test` marked like `entry`: a strict xfail while the simulator lacks what the entry needs."""
    missing = entry.missing
    return pytest.mark.xfail(strict=True, raises=HazardError, reason=f"needs {', '.join(missing)}: issue 20")(test) \
        if missing else test


@(lambda f: _needing(_entry("dot_scaled_e2m1"), f))
def test_fp4_nibble_order_is_what_the_kernel_reads(monkeypatch):
    """The mxfp4 entry passes with the lower K index in bits 3:0 (sm100_formats.md §2). Swapping the
    order in both operands permutes K alike in A and B and leaves the product unchanged, so only A's
    bytes are swapped here: that must fail, so the order is checked by the PTX Triton wrote."""
    entry = _entry("dot_scaled_e2m1")
    assert harness.run_entry(entry).ok
    calls = []

    def swap_first(codes):           # build_operands packs A first, then B
        calls.append(codes.shape)
        if len(calls) == 1:
            codes = codes.reshape(*codes.shape[:-1], -1, 2)[..., ::-1].reshape(codes.shape)
        return harness.lowprec.pack_fp4(codes)
    monkeypatch.setattr(harness, "pack_k_pairs", swap_first)
    assert not harness.run_entry(entry).ok and len(calls) == 2


@(lambda f: _needing(_entry("gluon_clc"), f))
def test_clc_entry_takes_over_the_tiles_of_cancelled_ctas(monkeypatch):
    """The CLC entry runs its CTAs one after another here, so CTA (0, 0, 0) cancels every other
    CTA (they never launch) and computes their tiles: the result is right only if the cancelled
    tiles were handed out."""
    from ptxgen.sim import ops_clc
    queues = []
    original = ops_clc.LaunchQueue.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        queues.append(self)
    monkeypatch.setattr(ops_clc.LaunchQueue, "__init__", record)
    entry = _entry("gluon_clc")
    assert harness.run_entry(entry).ok
    tiles = entry.meta["grid"][0]
    assert [q.cancels for q in queues] == [tiles - 1] and tiles > 1


def _store_after_arrive(ptx: str) -> str:
    """The 2-CTA TMEM-A entry with each CTA's `tcgen05.st` of its A rows (and its wait::st) moved from
    before the cluster barrier to after its `mbarrier.arrive.expect_tx` on the lead CTA's barrier:
    the lead's wait on that barrier no longer orders the peer's store before the pair MMA reading
    it (the first version of the entry was written so, and passed)."""
    lines = ptx.splitlines()
    first = next(i for i, s in enumerate(lines) if s.strip().startswith("ld.shared.v4.b32") and "%r49" in s)
    last = next(i for i, s in enumerate(lines) if i > first and s.strip() == "tcgen05.wait::st.sync.aligned;")
    block = lines[first:last + 1]
    rest = lines[:first] + lines[last + 1:]
    arrive = next(i for i, s in enumerate(rest) if "mbarrier.arrive.expect_tx.shared::cluster.b64" in s)
    sync = next(i for i in range(arrive, len(rest)) if rest[i].strip().startswith("bar.sync"))
    return "\n".join(rest[:sync + 1] + block + rest[sync + 1:]) + "\n"


@(lambda f: _needing(_entry("gluon_2cta_ts"), f))
def test_peer_store_after_arriving_on_the_lead_barrier_is_a_race():
    """Planted bug: a CTA stores its A rows to tensor memory after arriving on the barrier the lead
    CTA waits on before the pair MMA. Nothing orders the peer's store before the MMA that reads it,
    which the simulator reports (docs/ptx_facts/tcgen05.md §12i); the entry as written passes."""
    import dataclasses
    entry = _entry("gluon_2cta_ts")
    racy = dataclasses.replace(entry, ptx=_store_after_arrive(entry.ptx))
    assert racy.ptx != entry.ptx and racy.ptx.count("tcgen05.st.") == entry.ptx.count("tcgen05.st.")
    with pytest.raises(HazardError, match=r"race|async-pending") as err:
        harness.run_entry(racy)
    print(err.value)
